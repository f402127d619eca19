//! The engine: `Db` ties the WAL, memtables, tables, manifest and compaction together.
//!
//! Threads: any number of threads may call any method of `Db` at once. Writers are serialised by
//! the write mutex (WAL order = sequence order); readers never take it: a lookup pins the current
//! [`SuperVersion`] (memtables + table set, immutable) through arc-swap without writing a line
//! other readers write (db/current.rs), an iterator keeps an `Arc` of it; either way the snapshot
//! keeps its memtables and tables until the reader finishes. Lookups count into per-thread
//! shards (lidb-sync), summed by `stats()`. One background thread (when
//! `Options::background_compaction`) flushes immutable memtables and runs compactions.
//!
//! Invariants:
//! 1. A write is in the WAL before it is in a memtable; with `sync` it is durable before `put`
//!    returns.
//! 2. The manifest names exactly the live tables; a table leaves the manifest before its file is
//!    deleted, and the file is deleted only when no snapshot pins it (`TableHandle::drop`).
//! 3. A WAL is deleted only after the manifest records that its memtable was flushed.
//! 4. Sources are ordered newest first: memtable, immutable memtables (newest first), L0 tables
//!    (newest first), then L1, L2, ...; the first source holding a key decides its value.

mod background;
pub(crate) mod compact;
mod current;
mod flush;
pub(crate) mod level_index;
pub(crate) mod output;
mod read;
mod recover;
mod replay;

pub(crate) mod state;
mod write;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

pub use lidb_storage::report::{CutKind, LogCut};
pub use read::{DbIterator, Source, Traced};
pub use state::{DbStats, LevelStats, MemoryUsage, RecoveryReport};

use crate::batch::WriteBatch;
use crate::options::{Options, ScanOptions};
use crate::types::ReadStats;
use lidb_storage::Storage;
use lidb_storage::error::Result;
use lidb_storage::fs::FsStorage;
use state::{Shared, lock};

/// An open database. Dropping it closes it (waiting for background work to stop).
#[derive(Debug)]
pub struct Db {
    shared: Arc<Shared>,
    background: Option<JoinHandle<()>>,
    /// Set by [`Db::discard`]: dropping syncs nothing.
    discarded: bool,
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database in `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Db::open_with_storage(Arc::new(FsStorage), dir.as_ref(), opts)
    }

    /// Runs the read-only half of [`Db::open_with_storage`] and then reads every entry of every
    /// table: returns what the open would cut, or the error it (or a later full read) would fail
    /// with, and writes nothing. A store of several databases that reads all their keys at open
    /// anyway verifies them all before opening any, so that a failed open changes no file.
    pub fn verify_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        opts: &Options,
    ) -> Result<RecoveryReport> {
        opts.validate()?;
        let checked = recover::check(&storage, dir, opts)?;
        checked.verify_tables()?;
        Ok(checked.report)
    }

    /// Opens the database in `dir` through `storage` (tests pass an in-memory storage).
    pub fn open_with_storage(storage: Arc<dyn Storage>, dir: &Path, opts: Options) -> Result<Db> {
        opts.validate()?;
        let shared = Arc::new(recover::open(storage, dir.to_path_buf(), opts)?);
        let background = if shared.opts.background_compaction {
            let s = Arc::clone(&shared);
            let handle = std::thread::Builder::new()
                .name("lidb-compaction".into())
                .spawn(move || background::run(&s))
                .map_err(lidb_storage::error::io_err(dir))?;
            Some(handle)
        } else {
            None
        };
        Ok(Db {
            shared,
            background,
            discarded: false,
        })
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b)
    }

    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b)
    }

    /// Applies every operation of `batch` atomically: after a crash all or none are visible.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        write::write(&self.shared, batch)
    }

    /// Applies `batch` as [`Db::write`] does, but only if that needs no wait: no other write is
    /// running or queued, the memtable has room, no stall is due, and `Options::sync` is off.
    /// `Ok(false)`: nothing was written (call [`Db::write`] from a thread that may block). Not a
    /// promise that no system call runs: the WAL append is one write to the operating system.
    pub fn try_write(&self, batch: &WriteBatch) -> Result<bool> {
        write::try_write(&self.shared, batch)
    }

    /// The newest value of `key`, or None if it is absent or deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_with_stats(key)?.0)
    }

    /// The memory-only read tier (RocksDB's `kBlockCacheTier`): `Some(answer)` when memtables,
    /// filters, indexes and the page cache answer `key` with no storage read, `None` when the
    /// answer needs one (and then nothing was read). `lidb serve` answers such reads on its
    /// async workers and hands the others to its engine threads.
    pub fn get_if_in_memory(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        read::get_if_in_memory(&self.shared, key)
    }

    /// `get`, also returning what the lookup cost (tables probed, reads, bytes, time split).
    pub fn get_with_stats(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, ReadStats)> {
        let t = read::get(&self.shared, key)?;
        Ok((t.value, t.stats))
    }

    /// `get`, also returning its cost and which source (memtable or level) answered it.
    pub fn get_traced(&self, key: &[u8]) -> Result<Traced> {
        read::get(&self.shared, key)
    }

    /// A forward iterator over keys in `[start, end)` (`end` None: to the last key), seeing the
    /// database as it was when the call was made, whatever runs meanwhile.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>) -> Result<DbIterator> {
        read::scan(&self.shared, start, end, ScanOptions::default())
    }

    /// [`Db::scan`] read as `opts` says (whether it fills the page cache, how far it reads
    /// ahead).
    pub fn scan_with(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        opts: ScanOptions,
    ) -> Result<DbIterator> {
        read::scan(&self.shared, start, end, opts)
    }

    /// Writes the memtable (and any immutable ones) to L0 tables now.
    pub fn flush(&self) -> Result<()> {
        flush::flush_all(&self.shared)
    }

    /// Makes every write so far durable without flushing (syncs the WAL), for a caller that
    /// needs its writes durable before it writes elsewhere (a store switching to a new LSM).
    pub fn sync_wal(&self) -> Result<()> {
        write::sync_wal(&self.shared)
    }

    /// Why writes stopped, if they did: the first failed flush, compaction or memtable switch
    /// (see `flush.rs`). An embedding store that writes only some of its databases checks the
    /// others with this, since their background threads may fail on their own.
    pub fn background_error(&self) -> Option<String> {
        state::lock(&self.shared.bg_error).clone()
    }

    /// Compacts everything down until no level needs compaction and L0 is empty.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        compact::compact_all(&self.shared)
    }

    pub fn memory_usage(&self) -> MemoryUsage {
        state::memory_usage(&self.shared)
    }

    pub fn stats(&self) -> DbStats {
        state::stats(&self.shared)
    }

    /// Resizes the page cache to `bytes` (evicting least recently used pages down to it), for a
    /// caller sharing one memory budget between the indexes and the cache. `Options` keeps the
    /// size the database was opened with. With `Options::shared_cache` this is the shared pool's
    /// capacity, for every database in it.
    pub fn set_block_cache_bytes(&self, bytes: u64) {
        self.shared.cache.set_capacity(bytes);
    }

    /// The page cache's capacity now.
    pub fn block_cache_capacity_bytes(&self) -> u64 {
        self.shared.cache.capacity_bytes()
    }

    /// What opening found and repaired (torn WAL tails, replayed records).
    pub fn recovery_report(&self) -> RecoveryReport {
        lock(&self.shared.recovery).clone()
    }

    /// Re-indexes every table under `index` (table granularity only): closes the database,
    /// rewrites each table's tail (filter, index, meta, footer; the data region stays), and opens
    /// it again with the new options. For benchmarks trying index configurations on the same
    /// data; not crash-safe, so only for databases that can be reloaded.
    pub fn reindex(mut self, index: crate::options::IndexOptions) -> Result<Db> {
        if self.shared.opts.granularity != crate::options::Granularity::Table {
            return Err(crate::Error::InvalidOption(
                "re-indexing is for table granularity; level models are rebuilt by compaction"
                    .into(),
            ));
        }
        self.flush()?;
        let storage = Arc::clone(&self.shared.storage);
        let dir = self.shared.dir.clone();
        let mut opts = self.shared.opts.clone();
        opts.index = index;
        let tables: Vec<(usize, std::path::PathBuf)> = self
            .shared
            .current()
            .tables
            .levels
            .iter()
            .enumerate()
            .flat_map(|(l, ts)| ts.iter().map(move |t| (l, t.path.clone())))
            .collect();
        self.shutdown()?;
        drop(self);
        for (level, path) in tables {
            crate::table::reindex(&*storage, &path, output::table_options_for(&opts, level))?;
        }
        storage.sync_dir(&dir)?;
        Db::open_with_storage(storage, &dir, opts)
    }

    pub fn options(&self) -> &Options {
        &self.shared.opts
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Stops background work and syncs the WAL. Dropping the database does the same.
    /// Closes the database cleanly: flushes the memtables (so the WAL holds nothing the
    /// manifest does not name), syncs the WAL and stops the background thread. After a clean
    /// close every write is in a table the manifest names; damage to any file is then a
    /// `Corruption` error, never a silently shorter log. Dropping a `Db` only syncs the WAL.
    pub fn close(mut self) -> Result<()> {
        let flushed = self.flush();
        let stopped = self.shutdown();
        flushed.and(stopped)
    }

    /// Stops background work and syncs nothing: for a database whose files the caller deletes
    /// next (an embedding store retiring it). A sync then would only risk a failure about a file
    /// no acknowledged write depends on any more.
    pub fn discard(mut self) {
        self.stop_background();
        self.discarded = true;
    }

    fn stop_background(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.work_cv.notify_all();
        if let Some(h) = self.background.take() {
            let _ = h.join();
        }
    }

    fn shutdown(&mut self) -> Result<()> {
        self.stop_background();
        if self.discarded {
            return Ok(());
        }
        write::sync_wal(&self.shared)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
