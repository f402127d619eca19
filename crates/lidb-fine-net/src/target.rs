//! What one bench thread drives: point ops and range reads by u64 key, with the round trips they
//! took counted, over fine-wire ([`Client`]) or over RESP behind twemproxy
//! ([`crate::twemproxy::RespClient`]), so every deployment runs the same workload code
//! (`bench::drive`).
//!
//! Threads: a target belongs to the one thread that drives it (`&mut self`).

use crate::client::Client;
use crate::error::WireError;

/// A connection (or set of connections) the bench sends its ops through.
pub(crate) trait Target {
    fn get(&mut self, key: u64) -> Result<Option<u64>, WireError>;
    /// Sets an existing `key` to `value`; true when the answer is right: the old value is
    /// `value` where the protocol returns the old value (fine-wire; the bench rewrites each
    /// record with its own value), the write acknowledged where it returns none (RESP SET).
    fn update_ok(&mut self, key: u64, value: u64) -> Result<bool, WireError>;
    /// Inserts `key`; true when the answer is right (no old value or `value` itself, or the
    /// write acknowledged).
    fn insert_ok(&mut self, key: u64, value: u64) -> Result<bool, WireError>;
    fn range(&mut self, lo: u64, hi: u64, limit: u32) -> Result<Vec<(u64, u64)>, WireError>;
    /// Request/reply exchanges so far.
    fn round_trips(&self) -> u64;
}

impl Target for Client {
    fn get(&mut self, key: u64) -> Result<Option<u64>, WireError> {
        Client::get(self, key)
    }
    fn update_ok(&mut self, key: u64, value: u64) -> Result<bool, WireError> {
        Ok(self.update(key, value)? == Some(value))
    }
    fn insert_ok(&mut self, key: u64, value: u64) -> Result<bool, WireError> {
        Ok(self.insert(key, value)?.is_none_or(|v| v == value))
    }
    fn range(&mut self, lo: u64, hi: u64, limit: u32) -> Result<Vec<(u64, u64)>, WireError> {
        Client::range(self, lo, hi, limit)
    }
    fn round_trips(&self) -> u64 {
        self.stats().round_trips
    }
}
