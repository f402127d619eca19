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
//! Gets, puts and deletes go through the learned leaf path (`learned/`: a mapping table of the
//! leaves and a model over it, the tree walk as fallback) unless `LearnedOptions::enabled` is
//! false; the table and model are saved with every checkpoint and loaded at open. Until the
//! log's replay at open is done, writes walk the tree.
//!
//! Threads: every method takes `&self` and may be called from any thread at once. With the
//! learned path on, two background threads retrain it; `close` and drop stop them first.
//!
//! The tree's file is opened before the store takes `LOCK`. Opening a tree only reads (the
//! provider has nothing dirty to write back until the replay), so a second process that opens
//! the same directory fails at the lock before it changes a byte.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use lidb_index::Family;
use lidb_storage::Storage;
use lidb_storage::fs::FsStorage;

use crate::btree::{BTree, Options, Stats};
use crate::error::{Error, Result};
use crate::learned::{Learned, LearnedSource, LearnedStats, Trainers};
use crate::row_cache::{RowCache, RowCacheStats};
use crate::store::{BTreeStore, CheckpointInfo, CheckpointTarget, WalOptions, WalRecovery};

/// The page file's name in the engine's directory.
pub const PAGE_FILE_NAME: &str = "btree.pages";

/// How an engine runs: the tree's options, the log's, the learned leaf path's, and the row
/// cache's size.
#[derive(Debug, Clone, Default)]
pub struct LearnedStoreOptions {
    pub tree: Options,
    pub wal: WalOptions,
    pub learned: LearnedOptions,
    /// Bytes of the row cache (`row_cache.rs`: records gets found, beside the buffer pool);
    /// 0 (the default) turns it off. [`LearnedStore::resize_row_cache`] changes it.
    pub row_cache_bytes: u64,
}

/// The learned leaf path (the paper's section IV): a model over the leaves' boundary keys that
/// predicts a slot of the leaf mapping table, with the tree walk as the fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedOptions {
    /// Use the learned path (`learnedstore`); off, every lookup walks the tree (`btree`).
    pub enabled: bool,
    /// Family of the model over the boundary keys (any lidb-index family; the default,
    /// RadixSpline, is the authors' code's).
    pub family: Family,
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
            family: Family::Rs,
            error_bound: 32,
            tolerance: 1.0,
        }
    }
}

impl LearnedOptions {
    /// The model as `FAMILY/B` (e.g. `rs/32`), the form [`LearnedOptions::parse_model`] reads.
    pub fn model_name(&self) -> String {
        format!("{}/{}", self.family.name(), self.error_bound)
    }

    /// Parses a model `FAMILY/B` (a lidb-index family name and an error bound of at least 2
    /// slots) or `FAMILY` alone (the default bound), as `--leaf-model` and the bench's engine
    /// names take it.
    pub fn parse_model(spec: &str) -> std::result::Result<(Family, u64), String> {
        let (family, bound) = match spec.split_once('/') {
            Some((f, b)) => {
                let b: u64 = b.trim().parse().map_err(|_| {
                    format!("\"{spec}\": the error bound after '/' is not a whole number")
                })?;
                (f, b)
            }
            None => (spec, LearnedOptions::default().error_bound),
        };
        if bound < 2 {
            return Err(format!("\"{spec}\": the error bound is at least 2 slots"));
        }
        let family = Family::from_name(family.trim()).map_err(|e| e.to_string())?;
        Ok((family, bound))
    }
}

/// The tree as the log's checkpoint target. Once the learned path is set (after the log's
/// replay at open), gets and writes go through it; before, and with it off, they walk the tree.
/// Gets look in the row cache first (when it has a capacity) and fill it; every write applied
/// invalidates its key there.
#[derive(Debug)]
pub struct TreeTarget {
    tree: BTree,
    learned: OnceLock<Arc<Learned>>,
    rows: RowCache,
}

impl TreeTarget {
    /// The tree as a target with the learned path off (every get and write walks the tree):
    /// what a [`BTreeStore`] over a tree on any device (the fuzz target's memory device) takes.
    pub fn new(tree: BTree) -> TreeTarget {
        TreeTarget {
            tree,
            learned: OnceLock::new(),
            rows: RowCache::new(0),
        }
    }

    pub fn tree(&self) -> &BTree {
        &self.tree
    }
}

impl CheckpointTarget for TreeTarget {
    fn apply_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let done = match self.learned.get() {
            Some(l) => l.put(key, value),
            None => self.tree.put(key, value),
        };
        // After the tree's write, failed or not (see row_cache.rs for the order).
        self.rows.invalidate(key);
        done
    }

    fn apply_delete(&self, key: &[u8]) -> Result<bool> {
        let done = match self.learned.get() {
            Some(l) => l.delete(key),
            None => self.tree.delete(key),
        };
        self.rows.invalidate(key);
        done
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let stamp = match self.rows.get(key) {
            Ok(value) => return Ok(Some(value)),
            Err(stamp) => stamp,
        };
        let found = match self.learned.get() {
            Some(l) => l.get(key)?,
            None => self.tree.get(key)?,
        };
        if let (Some(stamp), Some(value)) = (stamp, &found) {
            self.rows.fill(key, value, stamp);
        }
        Ok(found)
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
        self.tree.tree().check_sizes(key, value)
    }
}

/// An open engine: the tree under its log, with the learned leaf path (`learned/`) in front of
/// the tree walk unless `LearnedOptions::enabled` is false.
#[derive(Debug)]
pub struct LearnedStore {
    // Declared first: the trainers stop before the store drops.
    trainers: Trainers,
    store: BTreeStore<TreeTarget>,
    dir: PathBuf,
    learned_source: LearnedSource,
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
        let target = TreeTarget::new(tree);
        let store = BTreeStore::open(storage, dir, target, opts.wal.clone())?;
        // After the log's replay: the cache starts empty either way.
        store.target().rows.set_capacity(opts.row_cache_bytes);
        if !opts.learned.enabled {
            return Ok(LearnedStore {
                trainers: Trainers::default(),
                store,
                dir: dir.to_path_buf(),
                learned_source: LearnedSource::Disabled,
            });
        }
        let tree = store.target().tree.shared_tree();
        let blob = store.loaded_checkpoint().extra.clone();
        let (learned, learned_source) = Learned::open(tree, &opts.learned, &blob)?;
        let hook = learned.clone();
        store.set_checkpoint_extra(Box::new(move || hook.encode()));
        let trainers = Trainers::start(&learned).map_err(|source| Error::Io {
            file: "learned-path threads".into(),
            source,
        })?;
        let _ = store.target().learned.set(learned);
        Ok(LearnedStore {
            trainers,
            store,
            dir: dir.to_path_buf(),
            learned_source,
        })
    }

    fn learned(&self) -> Option<&Arc<Learned>> {
        self.store.target().learned.get()
    }

    /// The learned path's counters (zeros but `smos` when it is off).
    pub fn learned_stats(&self) -> LearnedStats {
        match self.learned() {
            Some(l) => l.stats(),
            None => LearnedStats {
                smos: self.tree().tree().smo_count(),
                ..LearnedStats::default()
            },
        }
    }

    /// Where the learned path's table came from at open (the blob, or the tree and why).
    pub fn learned_source(&self) -> &LearnedSource {
        &self.learned_source
    }

    /// The value of `key` if it can be had with no device read (`Some(answer)`): a resident
    /// leaf through the table, or a walk over resident nodes only. `None`: a read would be
    /// needed, and nothing was read.
    pub fn get_if_in_memory(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        let rows = &self.store.target().rows;
        let stamp = match rows.get(key) {
            Ok(value) => return Ok(Some(Some(value))),
            Err(stamp) => stamp,
        };
        let found = match self.learned() {
            Some(l) => l.get_if_in_memory(key)?,
            None => self.tree().tree().get_resident(key)?,
        };
        if let (Some(stamp), Some(Some(value))) = (stamp, &found) {
            rows.fill(key, value, stamp);
        }
        Ok(found)
    }

    /// The row cache's counters and size.
    pub fn row_cache_stats(&self) -> RowCacheStats {
        self.store.target().rows.stats()
    }

    /// Makes the row cache hold at most `bytes` (0 turns it off and empties it).
    pub fn resize_row_cache(&self, bytes: u64) {
        self.store.target().rows.set_capacity(bytes);
    }

    /// A simulation (the paper's section III): from now on each inner node a tree walk passes
    /// costs, with `probability`, a real read of its page from the device (counted in the
    /// device's reads), as if it had been evicted; 0 turns it off. The learned path's lookups
    /// skip inner nodes, so they pay it only when they fall back.
    pub fn simulate_inner_miss(&self, probability: f64) {
        self.tree().tree().set_inner_miss_probability(probability);
    }

    /// Rebuilds the mapping table and model from the tree now and publishes them (the
    /// background thread does this on its own when mispredictions pass the tolerance).
    pub fn retrain_learned(&self) -> Result<()> {
        match self.learned() {
            Some(l) => l.retrain_table(),
            None => Ok(()),
        }
    }

    /// Refits the in-leaf models of resident leaves written since the last refit now; returns
    /// how many (the background thread does this on its own).
    pub fn refit_changed_leaves(&self) -> Result<u64> {
        match self.learned() {
            Some(l) => l.refit_changed_leaves(),
            None => Ok(0),
        }
    }

    /// Test hook: publishes a table whose model windows are off by `shift` slots.
    #[doc(hidden)]
    pub fn publish_shifted_model_for_test(&self, shift: i64) -> Result<()> {
        match self.learned() {
            Some(l) => l.publish_shifted_for_test(shift),
            None => Ok(()),
        }
    }

    /// Test hook: publishes a table whose page ids are rotated by `by` slots.
    #[doc(hidden)]
    pub fn publish_rotated_pids_for_test(&self, by: usize) -> Result<()> {
        match self.learned() {
            Some(l) => l.publish_rotated_pids_for_test(by),
            None => Ok(()),
        }
    }

    /// Test hook: the learned path's probes skip the leaf's fence check (a broken protocol).
    #[doc(hidden)]
    pub fn set_skip_fence_check_for_test(&self, on: bool) {
        self.tree()
            .tree()
            .sabotage
            .skip_fence_check
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Test hook: with `true`, splits are no longer patched into the learned path's mapping
    /// table (each waits for the full rebuild, as before the patches existed); `false` again
    /// turns them back on. For the test that shows what the patches do.
    #[doc(hidden)]
    pub fn set_skip_patches_for_test(&self, on: bool) {
        if let Some(l) = self.learned() {
            l.set_skip_patches_for_test(on);
        }
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

    /// The store under this engine (its checkpoint blob hook, its loaded checkpoint).
    pub fn store(&self) -> &BTreeStore<TreeTarget> {
        &self.store
    }

    /// Closes cleanly: checkpoints when the options say so, syncs the log and records its
    /// length, so a shorter log at the next open is damage.
    pub fn close(self) -> Result<()> {
        self.trainers.stop();
        self.store.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_specs_parse_and_print_back() {
        assert_eq!(LearnedOptions::parse_model("pgm/64"), Ok((Family::Pgm, 64)));
        assert_eq!(LearnedOptions::parse_model("rs"), Ok((Family::Rs, 32)));
        let o = LearnedOptions {
            family: Family::Plr,
            error_bound: 16,
            ..LearnedOptions::default()
        };
        assert_eq!(
            LearnedOptions::parse_model(&o.model_name()),
            Ok((Family::Plr, 16))
        );
        for bad in ["rs/1", "rs/x", "nope/32", "rs/", "/32"] {
            let e = LearnedOptions::parse_model(bad);
            assert!(e.is_err(), "{bad} parsed as {e:?}");
        }
    }
}
