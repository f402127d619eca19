//! The write-ahead log of LearnedStore: a logical log of puts and deletes, each with an LSN,
//! written through lidb-lsm's record log (framing, checksums, torn-tail classifier) over its
//! `Storage` trait. Format: docs/format/btree-wal.md.
//!
//! - `record.rs`: the payload of one record (op, LSN, key, value);
//! - `files.rs`: log file names and `WALSTATE`, the clean-close record;
//! - `group.rs`: group commit (leader/follower), log switches at an LSN;
//! - `read.rs`: reading the logs of a directory at recovery.
//!
//! The store (`crate::store`) owns the policy: when to switch, checkpoint and delete logs, and
//! what recovery does with each tail.

pub mod files;
pub mod group;
pub mod read;
pub mod record;

use std::sync::{Mutex, MutexGuard};

use crate::error::Error;

/// Locks `m`, going on after a panic of another holder (a failed test assertion must not hide
/// the state; the data under our mutexes stays consistent between statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An error of lidb-lsm's log or storage, with its `Corruption` kept as this crate's (so a
/// caller matching `Error::Corruption` sees damage to a log, whichever layer found it).
pub(crate) fn from_log_error(e: lidb_storage::Error) -> Error {
    match e {
        lidb_storage::Error::Corruption { file, detail } => Error::Corruption { file, detail },
        other => Error::Log(other),
    }
}
