//! What the durability layer needs of the tree under it: apply logged writes, serve reads, and
//! write checkpoints that carry an LSN and an opaque blob. The B+-tree implements it; tests use
//! `crate::testing::MemTarget`.

use crate::error::Result;

/// The checkpoint a target loaded at open (or wrote last).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Every write with an LSN at or below this one is in the checkpoint; 0: none is.
    pub lsn: u64,
    /// The caller's blob saved with it (the learned path's mapping table); empty if none.
    pub extra: Vec<u8>,
}

/// The tree under a [`crate::store::BTreeStore`].
///
/// Threads: every method takes `&self` and may be called from any thread at once; the store
/// calls `apply_*` for one key from one thread at a time, in LSN order, and `checkpoint` from
/// one thread at a time, while other keys are written and read.
///
/// Contract:
/// 1. `apply_put` and `apply_delete` change the tree in memory; they need not be durable. An
///    error from one stops the store's writes (the log already holds the write).
/// 2. `checkpoint(lsn, extra)` returns once a checkpoint is durable that holds every write
///    applied before the call, and for each key either its value at the call or a later one
///    applied during it; with `lsn` and `extra` stored atomically with it. A crash during it
///    leaves the previous checkpoint. `lsn` never decreases from one call to the next.
/// 3. `checkpoint_info` returns the LSN and blob of the checkpoint the target opened with
///    (`lsn` 0 and an empty blob for a new tree), or of the last one it wrote.
/// 4. `check_put` refuses a key or value the tree cannot hold, before the write is logged.
pub trait CheckpointTarget: Send + Sync {
    /// Sets `key` to `value` in memory.
    fn apply_put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Removes `key` in memory; returns whether it was present.
    fn apply_delete(&self, key: &[u8]) -> Result<bool>;
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Entries with `start <= key < end` (`None`: no upper bound) in key order, at most `limit`.
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Writes a durable checkpoint carrying `lsn` and `extra` (contract 2).
    fn checkpoint(&self, lsn: u64, extra: &[u8]) -> Result<()>;
    /// The LSN and blob of the checkpoint loaded at open or written last (contract 3).
    fn checkpoint_info(&self) -> CheckpointInfo;
    /// Refuses a write the tree cannot hold (`Error::TooLarge`), before it is logged.
    fn check_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (key, value);
        Ok(())
    }
}
