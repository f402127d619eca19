//! The durable engine users open: the B+-tree ([`BTree`]) under the logical write-ahead log
//! ([`BTreeStore`]), in one directory:
//!
//! ```text
//! DIR/btree.pages     the shadow-slot page file (docs/format/btree-pagefile.md)
//! DIR/wal-NNNNNN.log  the logical write-ahead log (docs/format/btree-wal.md)
//! DIR/WALSTATE        the clean-close record of the log
//! DIR/LOCK            held while the engine is open (by the store)
//! ```
//!
//! Open: the tree loads its newest checkpoint (a consistent tree with the LSN it covers), then
//! the store replays every logged write after that LSN onto it. A write is acknowledged once it
//! is logged (synced with `sync`) and applied to the tree. A checkpoint switches the log, writes
//! the tree's checkpoint at the switch LSN, then removes the old logs.
//!
//! Threads: every method takes `&self` and may be called from any thread at once.
//!
//! The tree's file is opened before the store takes `LOCK`. Opening a tree only reads (the
//! provider has nothing dirty to write back until the replay), so a second process that opens
//! the same directory fails at the lock before it changes a byte.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_lsm::storage::Storage;
use lidb_lsm::storage::fs::FsStorage;

use crate::btree::{BTree, Options, Stats};
use crate::error::{Error, Result};
use crate::store::{BTreeStore, CheckpointInfo, CheckpointTarget, WalOptions, WalRecovery};

/// The page file's name in the engine's directory.
pub const PAGE_FILE_NAME: &str = "btree.pages";

/// How an engine runs: the tree's options, the log's, and the learned leaf path's.
#[derive(Debug, Clone, Default)]
pub struct LearnedStoreOptions {
    pub tree: Options,
    pub wal: WalOptions,
    pub learned: LearnedOptions,
}

/// The learned leaf path (the paper's section IV): a model over the leaves' boundary keys that
/// predicts a slot of the leaf mapping table, with the tree walk as the fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedOptions {
    /// Use the learned path (`learnedstore`); off, every lookup walks the tree (`btree`).
    pub enabled: bool,
    /// Error bound of the model over the boundary keys, in mapping-table slots (swept 16..128
    /// in the experiments; the authors' code uses RadixSpline with such a bound).
    pub error_bound: u64,
    /// Retrain when mispredictions / (splits + merges) exceeds this (the authors' code: 1).
    pub tolerance: f64,
}

impl Default for LearnedOptions {
    fn default() -> Self {
        LearnedOptions {
            enabled: true,
            error_bound: 32,
            tolerance: 1.0,
        }
    }
}

/// The tree as the log's checkpoint target.
#[derive(Debug)]
pub struct TreeTarget {
    tree: BTree,
}

impl TreeTarget {
    pub fn tree(&self) -> &BTree {
        &self.tree
    }
}

impl CheckpointTarget for TreeTarget {
    fn apply_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.tree.put(key, value)
    }

    fn apply_delete(&self, key: &[u8]) -> Result<bool> {
        self.tree.delete(key)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key)
    }

    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.tree.scan(start, end, limit)
    }

    fn checkpoint(&self, lsn: u64, extra: &[u8]) -> Result<()> {
        self.tree.checkpoint(lsn, extra).map(|_| ())
    }

    fn checkpoint_info(&self) -> CheckpointInfo {
        let info = self.tree.checkpoint_info();
        CheckpointInfo {
            lsn: info.lsn,
            extra: info.extra,
        }
    }

    fn check_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let (max_key, max_value) = self.tree.tree().limits();
        if key.len() > max_key {
            return Err(Error::TooLarge(format!(
                "key of {} bytes; the limit is {max_key} (page size / 16, at most 1024)",
                key.len()
            )));
        }
        if value.len() > max_value {
            return Err(Error::TooLarge(format!(
                "value of {} bytes; the limit is {max_value} (a quarter page)",
                value.len()
            )));
        }
        Ok(())
    }
}

/// An open engine: the tree under its log. (The learned leaf path is not built yet: every
/// lookup walks the tree.)
#[derive(Debug)]
pub struct LearnedStore {
    store: BTreeStore<TreeTarget>,
    dir: PathBuf,
}

impl LearnedStore {
    /// Opens the engine in `dir`, creating the directory and an empty tree if it has none.
    /// Errors name the file: a damaged page file or log is `Corruption` (see
    /// [`BTreeStore::open`] for what the log's recovery modes allow).
    pub fn open(dir: &Path, opts: &LearnedStoreOptions) -> Result<LearnedStore> {
        Self::open_with_storage(Arc::new(FsStorage), dir, opts)
    }

    /// [`LearnedStore::open`] with the log on `storage` (tests inject faults there); the page file is
    /// always a real file in `dir`.
    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        opts: &LearnedStoreOptions,
    ) -> Result<LearnedStore> {
        std::fs::create_dir_all(dir).map_err(crate::error::io_err(dir))?;
        let path = dir.join(PAGE_FILE_NAME);
        let tree = if path.exists() {
            BTree::open(&path, &opts.tree)?
        } else {
            BTree::create(&path, &opts.tree)?
        };
        let store = BTreeStore::open(storage, dir, TreeTarget { tree }, opts.wal.clone())?;
        Ok(LearnedStore {
            store,
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.get(key)
    }

    /// Sets `key` to `value`; returns once logged (synced with `sync`) and applied.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.store.put(key, value)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.store.delete(key)
    }

    /// Entries with `start <= key < end` (`None`: no upper bound) in key order, at most `limit`.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.scan(start, end, limit)
    }

    /// Makes every acknowledged write durable (a log sync).
    pub fn flush(&self) -> Result<()> {
        self.store.flush()
    }

    /// Writes a checkpoint of the tree and removes the logs it covers.
    pub fn checkpoint(&self) -> Result<()> {
        self.store.checkpoint()
    }

    /// The tree under the log (statistics, the learned path's entry points).
    pub fn tree(&self) -> &BTree {
        self.store.target().tree()
    }

    /// The tree's counters (pool, device I/O, file slots).
    pub fn stats(&self) -> Stats {
        self.tree().stats()
    }

    /// What the open found: the checkpoint LSN, the log records replayed, a torn tail cut.
    pub fn recovery_report(&self) -> &WalRecovery {
        self.store.recovery_report()
    }

    /// Placeholder until the learned path lands (the learned-path branch replaces it): the
    /// memory-only read of `key`, `Some(answer)` when it needs no device read. Until then it
    /// always answers `None` ("would have to read") and reads nothing, which is true of every
    /// key, if never the best answer.
    pub fn get_if_in_memory(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        let _ = key;
        Ok(None)
    }

    /// Placeholder until the learned path lands (the learned-path branch replaces it): the
    /// paper's simulated inner-node miss. Not built yet, so it refuses rather than run an
    /// experiment that silently simulates nothing.
    pub fn simulate_inner_miss(&self, probability: f64) -> Result<()> {
        Err(Error::InvalidOption(format!(
            "the simulated inner-node miss (probability {probability}) is not built yet \
             (it comes with the learned path)"
        )))
    }

    /// The store under this engine (its checkpoint blob hook, its loaded checkpoint).
    pub fn store(&self) -> &BTreeStore<TreeTarget> {
        &self.store
    }

    /// Closes cleanly: checkpoints when the options say so, syncs the log and records its
    /// length, so a shorter log at the next open is damage.
    pub fn close(self) -> Result<()> {
        self.store.close()
    }
}
