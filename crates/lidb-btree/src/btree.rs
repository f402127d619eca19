//! The public handle: options, create/open over a file or any [`PageDevice`], the map
//! operations, checkpoints, statistics, the learned path's entry points, and the provider
//! thread (LeanStore's page provider: keeps a share of the frames cooling and a few free).
//!
//! Any number of threads may share a `BTree` (`&self` everywhere); `checkpoint` calls are
//! serialised and make writers wait while they run. Dropping the handle (or `close`) stops the
//! provider; it does not checkpoint: what was written since the last checkpoint is lost unless
//! the caller's log replays it (the WAL layer on top does).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::buffer::{Cooler, PoolStats};
use crate::device::{FileDevice, IoCounters, MemDevice, PageDevice, check_page_size};
use crate::error::{Error, Result};
use crate::pagefile::{CheckpointInfo, PageFile};
use crate::tree::{LeafGuard, LeafProbe, LeafRef, Tree};

/// Options of a tree.
#[derive(Debug, Clone)]
pub struct Options {
    /// Page size in bytes: a power of two in 4096..=65536. Default 4096.
    pub page_size: usize,
    /// Bytes of the buffer pool (frames = pool bytes / page size, at least 16). Default 64 MiB.
    pub pool_bytes: u64,
    /// Share of the frames the provider keeps cooling (0.01..=0.5). Default 0.1.
    pub cooling_share: f64,
    /// Open the data file with O_DIRECT (default true); false uses the page cache.
    pub direct_io: bool,
    /// Run the provider thread (default true); without it, cooling and eviction happen only
    /// inline, when a thread finds no free frame.
    pub provider_thread: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 4096,
            pool_bytes: 64 << 20,
            cooling_share: 0.1,
            direct_io: true,
            provider_thread: true,
        }
    }
}

impl Options {
    fn check(&self) -> Result<usize> {
        check_page_size(self.page_size)?;
        if !(0.01..=0.5).contains(&self.cooling_share) {
            return Err(Error::InvalidOption(format!(
                "cooling share {} must be in 0.01..=0.5",
                self.cooling_share
            )));
        }
        Ok((self.pool_bytes / self.page_size as u64) as usize)
    }
}

/// Statistics of a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub pool: PoolStats,
    pub io: IoCounters,
    /// Slots of the data file, and how many the current table or last checkpoint use.
    pub file_slots: u64,
    pub file_slots_used: u64,
    /// Page ids handed out so far.
    pub pids_issued: u64,
}

/// The B+-tree engine.
#[derive(Debug)]
pub struct BTree {
    tree: Arc<Tree>,
    stop: Arc<AtomicBool>,
    provider: Mutex<Option<JoinHandle<()>>>,
    background_error: Arc<Mutex<Option<String>>>,
}

impl BTree {
    /// Creates a new tree in file `path` (which must not exist).
    pub fn create(path: &Path, opts: &Options) -> Result<BTree> {
        opts.check()?;
        if path.exists() {
            return Err(Error::InvalidOption(format!(
                "{} exists; open it instead",
                path.display()
            )));
        }
        let dev = FileDevice::open(path, opts.page_size, opts.direct_io, true)?;
        Self::with_device(Arc::new(dev), opts)
    }

    /// Opens the tree in file `path` at its newest valid checkpoint.
    pub fn open(path: &Path, opts: &Options) -> Result<BTree> {
        opts.check()?;
        let dev = FileDevice::open(path, opts.page_size, opts.direct_io, false)?;
        if dev.slot_count() == 0 {
            return Err(Error::Corruption {
                file: path.to_path_buf(),
                detail: "the file is empty (no checkpoint)".into(),
            });
        }
        Self::with_device(Arc::new(dev), opts)
    }

    /// A tree in memory (tests, benchmarks without I/O).
    pub fn in_memory(opts: &Options) -> Result<BTree> {
        Self::with_device(Arc::new(MemDevice::volatile(opts.page_size)?), opts)
    }

    /// Opens the tree on `dev`, or creates one (with a first, empty checkpoint) if the device
    /// is empty.
    pub fn with_device(dev: Arc<dyn PageDevice>, opts: &Options) -> Result<BTree> {
        let frames = opts.check()?;
        if dev.page_size() != opts.page_size {
            return Err(Error::InvalidOption(format!(
                "device page size {} differs from the option {}",
                dev.page_size(),
                opts.page_size
            )));
        }
        let (file, info) = PageFile::open(dev)?;
        let file = Arc::new(file);
        let tree = Arc::new(Tree::new(file, frames, opts.cooling_share, info.as_ref())?);
        if info.is_none() {
            tree.checkpoint(0, &[])?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let background_error = Arc::new(Mutex::new(None));
        let provider = if opts.provider_thread {
            let (t, s, e) = (tree.clone(), stop.clone(), background_error.clone());
            Some(
                std::thread::Builder::new()
                    .name("lidb-btree-provider".into())
                    .spawn(move || provide(&t, &s, &e))
                    .map_err(|source| Error::Io {
                        file: "provider thread".into(),
                        source,
                    })?,
            )
        } else {
            None
        };
        Ok(BTree {
            tree,
            stop,
            provider: Mutex::new(provider),
            background_error,
        })
    }

    /// The tree (for crate-internal tests and the layers built on it).
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The tree, shared (the learned path's threads hold it).
    pub(crate) fn shared_tree(&self) -> Arc<Tree> {
        self.tree.clone()
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key)
    }

    /// Inserts or updates `key`. Keys up to page size / 16 (at most 1024) bytes, values up to a
    /// quarter page; larger is [`Error::TooLarge`].
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.tree.put(key, value)
    }

    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.tree.delete(key)
    }

    /// Up to `limit` pairs with `start <= key < end`, in key order.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.tree.scan(start, end, limit)
    }

    /// Loads sorted pairs into the empty tree (see `Tree::bulk_load`).
    pub fn bulk_load(
        &self,
        pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
        fill: f64,
    ) -> Result<u64> {
        self.tree.bulk_load(pairs, fill)
    }

    /// Makes the current state durable with the caller's log position `lsn` and opaque `extra`
    /// blob (the learned model); returns when it is on stable storage.
    pub fn checkpoint(&self, lsn: u64, extra: &[u8]) -> Result<CheckpointInfo> {
        if let Some(e) = self.background_error.lock().ok().and_then(|g| g.clone()) {
            return Err(Error::Closed(format!("the provider thread failed: {e}")));
        }
        self.tree.checkpoint(lsn, extra)
    }

    /// Sizes the buffer pool to `bytes` (whole pages, at least 16, at most the pool it opened
    /// with; see `Pool::set_usable`); returns the bytes usable now.
    pub fn resize_pool(&self, bytes: u64) -> Result<u64> {
        let page = self.tree.pool.page_size() as u64;
        let frames = usize::try_from(bytes / page.max(1)).unwrap_or(usize::MAX);
        let usable = self.tree.pool.set_usable(frames, &*self.tree)?;
        Ok(usable as u64 * page)
    }

    /// The checkpoint loaded at open (or the last one committed since): its LSN and blob.
    pub fn checkpoint_info(&self) -> CheckpointInfo {
        self.tree.pool.file().last_checkpoint()
    }

    pub fn stats(&self) -> Stats {
        let file = self.tree.pool.file();
        let (file_slots, file_slots_used) = file.slot_usage();
        Stats {
            pool: self.tree.pool.stats(),
            io: file.device().counters(),
            file_slots,
            file_slots_used,
            pids_issued: self.tree.pids_issued(),
        }
    }

    /// Every leaf's (upper fence, page id) in key order, from the leaves' parents.
    pub fn leaf_parents(&self) -> Result<Vec<LeafRef>> {
        self.tree.leaf_parents()
    }

    /// Looks `key` up in leaf `pid` without its parent (see `Tree::probe_leaf`).
    pub fn probe_leaf(&self, pid: u64, frame_hint: Option<u32>, key: &[u8]) -> Result<LeafProbe> {
        self.tree.probe_leaf(pid, frame_hint, key)
    }

    /// Fixes leaf `pid` without its parent for lookups (see `Tree::fix_leaf`).
    pub fn fix_leaf(&self, pid: u64, frame_hint: Option<u32>) -> Result<Option<LeafGuard<'_>>> {
        self.tree.fix_leaf(pid, frame_hint)
    }

    /// The number of pairs (walks every leaf).
    pub fn count_entries(&self) -> Result<u64> {
        self.tree.count_entries()
    }

    /// Refits the linear model of the leaf covering `key`; returns (slope, intercept).
    pub fn refit_leaf(&self, key: &[u8]) -> Result<(f64, f64)> {
        self.tree.refit_leaf(key)
    }

    /// Test hook: turns page checksum verification off (see `PageFile`). Never in production.
    #[doc(hidden)]
    pub fn set_verify_pages_for_test(&self, on: bool) {
        self.tree.pool.file().set_verify_pages_for_test(on);
    }

    /// Test hook: readers skip the leaf's version validation (a broken protocol).
    #[doc(hidden)]
    pub fn set_skip_leaf_validation_for_test(&self, on: bool) {
        self.tree
            .sabotage
            .skip_leaf_validation
            .store(on, Ordering::Relaxed);
    }

    /// Stops the provider thread. No checkpoint is taken (see the module docs).
    pub fn close(self) -> Result<()> {
        self.stop_provider();
        match self.background_error.lock().ok().and_then(|g| g.clone()) {
            Some(e) => Err(Error::Closed(format!("the provider thread failed: {e}"))),
            None => Ok(()),
        }
    }

    fn stop_provider(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.provider.lock().ok().and_then(|mut h| h.take());
        if let Some(h) = handle {
            // A panicked provider already stopped; its panic is a bug reported on its thread.
            let _ = h.join();
        }
    }
}

impl Drop for BTree {
    fn drop(&mut self) {
        self.stop_provider();
    }
}

/// The provider loop: once the pool is nearly full, keep the cooling share and a few frames
/// free.
fn provide(tree: &Tree, stop: &AtomicBool, error: &Mutex<Option<String>>) {
    let free_target = (tree.pool.frame_count() / 64).max(2);
    while !stop.load(Ordering::Relaxed) {
        let mut worked = false;
        let (cooling, target) = tree.pool.cooling_level();
        // Cool only under memory pressure (fewer free frames than the cooling share).
        if cooling < target && tree.pool.free_count() < target {
            worked |= tree.cool(target - cooling) > 0;
        }
        if tree.pool.free_count() < free_target {
            match tree.pool.evict_one() {
                Ok(evicted) => worked |= evicted,
                Err(e) => {
                    if let Ok(mut g) = error.lock() {
                        *g = Some(e.to_string());
                    }
                    return;
                }
            }
        }
        if !worked {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
