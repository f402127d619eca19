//! The served shard, in process: gets, writes and range reads by u64 key on the same index and
//! the same durable log the fine-wire connections use, for a second front end in the same
//! process (`lidb serve --engine finedex --fine-listen`: RESP, see `resp_shard.rs`).
//!
//! Threads: any thread, any number at once (the calls take `&self`, as connection threads do).
//!
//! Invariants: a write goes through [`Shared::apply_write`], the one write path of the server,
//! so a write here and a fine-wire write of the same key are serialised by the same stripe lock
//! and logged once; a key outside the shard's range is refused before anything is read or
//! written ([`WireError::OutsideShard`]).

use lidb_fine::{BinAnswer, BinOp, FineIndex, TrainedRegion};

use super::{Server, Shared};
use crate::error::WireError;

impl Shared {
    /// Applies a write (`op` is not Search) by key or, with `at`, at a bin address: through
    /// the durable log when the server has one (stripe lock, log, then index), else straight
    /// to the index. Syncs the barrier when the write published a newer layout.
    pub(crate) fn apply_write(
        &self,
        at: Option<(&TrainedRegion, u64)>,
        key: u64,
        op: BinOp,
    ) -> Result<BinAnswer, WireError> {
        let answer = match &self.durable {
            Some(d) => d.write(&self.index, at, key, op)?,
            None => match at {
                Some((r, pos)) => self.index.at_bin(r, pos, key, op),
                None => BinAnswer {
                    value: by_key(&self.index, key, op),
                    at_address: false,
                },
            },
        };
        self.sync_if_newer();
        Ok(answer)
    }

    fn check_shard(&self, key: u64) -> Result<(), WireError> {
        if (self.cfg.shard_lo..=self.cfg.shard_hi).contains(&key) {
            Ok(())
        } else {
            Err(WireError::OutsideShard {
                key,
                lo: self.cfg.shard_lo,
                hi: self.cfg.shard_hi,
            })
        }
    }
}

/// A by-key op on the index alone (no log).
pub(super) fn by_key(ix: &FineIndex, key: u64, op: BinOp) -> Option<u64> {
    match op {
        BinOp::Insert(v) => ix.insert(key, v),
        BinOp::Update(v) => ix.update(key, v),
        BinOp::Remove => ix.remove(key),
        _ => ix.get(key),
    }
}

impl Server {
    /// The shard's key range, both ends inclusive.
    pub fn shard(&self) -> (u64, u64) {
        (self.shared.cfg.shard_lo, self.shared.cfg.shard_hi)
    }

    /// The value of `key`.
    pub fn get(&self, key: u64) -> Result<Option<u64>, WireError> {
        self.shared.check_shard(key)?;
        Ok(self.shared.index.get(key))
    }

    /// Sets `key` to `value` (logged first on a durable server); returns the old value.
    pub fn insert(&self, key: u64, value: u64) -> Result<Option<u64>, WireError> {
        self.shared.check_shard(key)?;
        Ok(self
            .shared
            .apply_write(None, key, BinOp::Insert(value))?
            .value)
    }

    /// Removes `key` (logged first on a durable server); returns the old value.
    pub fn remove(&self, key: u64) -> Result<Option<u64>, WireError> {
        self.shared.check_shard(key)?;
        Ok(self.shared.apply_write(None, key, BinOp::Remove)?.value)
    }

    /// Up to `limit` entries with keys in `[lo, hi]` (cut to the shard's range), in key order.
    pub fn range(&self, lo: u64, hi: u64, limit: usize) -> Vec<(u64, u64)> {
        let (lo, hi) = (
            lo.max(self.shared.cfg.shard_lo),
            hi.min(self.shared.cfg.shard_hi),
        );
        if lo > hi || limit == 0 {
            return Vec::new();
        }
        self.shared.index.range(lo, hi, limit)
    }

    /// Writes what the durable log holds in memory to its file (nothing for an in-memory
    /// server).
    pub fn flush(&self) -> Result<(), WireError> {
        match &self.shared.durable {
            Some(d) => d.flush(),
            None => Ok(()),
        }
    }

    /// Checkpoints the durable store (a new checkpoint and an empty log); nothing in memory.
    pub fn checkpoint(&self) -> Result<(), WireError> {
        match &self.shared.durable {
            Some(d) => d.checkpoint(),
            None => Ok(()),
        }
    }

    /// Whether writes are logged (`start_durable`).
    pub fn is_durable(&self) -> bool {
        self.shared.durable.is_some()
    }
}
