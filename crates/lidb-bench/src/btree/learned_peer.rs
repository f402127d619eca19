//! `learnedstore` and `btree`: LearnedStore (lidb-btree) as a [`PagedStore`], with its learned
//! leaf path on and off, so one run compares the learned path with the plain tree walk on the
//! same buffer manager.
//!
//! Keys are u64 stored as 8 bytes big-endian, so the tree's byte order is the u64 order. The
//! pool is the setup's `pool_bytes`; the page file is opened with `O_DIRECT` (every pool miss is
//! a device read, and the OS page cache holds no second copy); where the file system refuses
//! `O_DIRECT` it falls back to buffered reads, with a note, and `reopen_cold` then also drops
//! the file from the OS page cache. Writes are not synced per write (the paper's engines do not
//! sync either, nor do the peers); the write-ahead log still takes each one.
//!
//! - `bulk_load`: the tree's bulk load into the new, empty store (leaves filled to
//!   [`BULK_FILL`]), then a checkpoint, which makes it durable (the log holds none of it), then a
//!   close and reopen, so whatever the engine builds at open (the learned path's mapping table)
//!   sees the loaded tree. The pool is cold after the load; the experiments warm it themselves.
//! - `device_reads`: the page file's read counter (`Stats::io.reads`), kept across reopens.
//! - `reopen_cold`: a clean close (a checkpoint, so the reopen replays nothing) and an open: an
//!   empty pool.
//! - `simulate_inner_miss`: `LearnedStore::simulate_inner_miss`, set again after each reopen.
//!
//! Used from one thread at a time (`&mut self` for writes, and the store is `Sync`).

use std::path::{Path, PathBuf};

use lidb_btree::{LearnedOptions, LearnedStore, LearnedStoreOptions, PAGE_FILE_NAME};
use lidb_index::Family;

use super::store::{PagedStore, StoreError};

/// The names in rows: learned path on, and off.
pub const LEARNED: &str = "learnedstore";
pub const PLAIN: &str = "btree";

/// The learned path of engine `name`: `None` for `btree` or a name that is not this engine's;
/// `Some(None)` for `learnedstore` (the default model); `Some(Some(model))` for
/// `learnedstore:FAMILY/B`, or the model's parse error.
pub fn learned_of(name: &str) -> Option<Result<Option<(Family, u64)>, String>> {
    if name == LEARNED {
        return Some(Ok(None));
    }
    let spec = name.strip_prefix(LEARNED)?.strip_prefix(':')?;
    Some(LearnedOptions::parse_model(spec).map(Some))
}

/// Share of a leaf the bulk load fills (room for inserts before the first split).
pub const BULK_FILL: f64 = 0.9;

/// LearnedStore in a directory of its own.
#[derive(Debug)]
pub struct LearnedPeer {
    name: String,
    dir: PathBuf,
    opts: LearnedStoreOptions,
    store: Option<LearnedStore>,
    /// Device reads of the stores closed so far (each open starts its counter at 0).
    reads_before: u64,
    /// The simulated inner-node miss probability, set again after a reopen.
    inner_miss: f64,
    /// Whether `O_DIRECT` was refused and the file is read through the page cache.
    buffered: bool,
}

impl LearnedPeer {
    /// A new, empty store in `dir` (LearnedStore's files there are removed first) with a pool of
    /// `pool_bytes`, the learned path on with the default model (`learnedstore`) or with model
    /// `(family, error bound)` (`learnedstore:FAMILY/B`), or off (`btree`).
    pub fn create(
        dir: &Path,
        pool_bytes: u64,
        learned: Option<Option<(Family, u64)>>,
    ) -> Result<LearnedPeer, StoreError> {
        let name = match learned {
            None => PLAIN.to_string(),
            Some(None) => LEARNED.to_string(),
            Some(Some((family, bound))) => format!("{LEARNED}:{}/{bound}", family.name()),
        };
        std::fs::create_dir_all(dir)?;
        remove_store_files(dir)?;
        let mut opts = LearnedStoreOptions::default();
        opts.tree.pool_bytes = pool_bytes;
        opts.tree.direct_io = true;
        opts.learned.enabled = learned.is_some();
        if let Some(Some((family, bound))) = learned {
            (opts.learned.family, opts.learned.error_bound) = (family, bound);
        }
        opts.wal.sync = false;
        opts.wal.checkpoint_on_close = true;
        let mut peer = LearnedPeer {
            name,
            dir: dir.to_path_buf(),
            opts,
            store: None,
            reads_before: 0,
            inner_miss: 0.0,
            buffered: false,
        };
        match peer.open() {
            Err(StoreError::Engine { detail, .. }) if detail.contains("refuses O_DIRECT") => {
                remove_store_files(dir)?;
                peer.opts.tree.direct_io = false;
                peer.buffered = true;
                peer.open()?;
            }
            other => other?,
        }
        Ok(peer)
    }

    fn err(&self) -> impl Fn(lidb_btree::Error) -> StoreError + '_ {
        move |e| StoreError::Engine {
            engine: self.name.to_string(),
            detail: e.to_string(),
        }
    }

    fn open(&mut self) -> Result<(), StoreError> {
        let store = LearnedStore::open(&self.dir, &self.opts).map_err(self.err())?;
        if self.inner_miss > 0.0 {
            store.simulate_inner_miss(self.inner_miss);
        }
        self.store = Some(store);
        Ok(())
    }

    /// Closes the store cleanly (a checkpoint), keeping its device reads.
    fn close(&mut self) -> Result<(), StoreError> {
        if let Some(store) = self.store.take() {
            self.reads_before += store.stats().io.reads;
            store.close().map_err(self.err())?;
        }
        Ok(())
    }

    fn store(&self) -> Result<&LearnedStore, StoreError> {
        self.store.as_ref().ok_or_else(|| StoreError::Engine {
            engine: self.name.to_string(),
            detail: "store is closed (a reopen failed)".to_string(),
        })
    }
}

/// Removes LearnedStore's files from `dir` (page file, logs, `WALSTATE`, `LOCK`, `lost/`).
fn remove_store_files(dir: &Path) -> Result<(), StoreError> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = name == PAGE_FILE_NAME
            || name == "WALSTATE"
            || name == "LOCK"
            || (name.starts_with("wal-") && name.ends_with(".log"));
        if ours {
            std::fs::remove_file(entry.path())?;
        } else if name == "lost" {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

impl PagedStore for LearnedPeer {
    fn name(&self) -> &str {
        &self.name
    }

    fn bulk_load(
        &mut self,
        records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        let store = self.store()?;
        let pairs = records.map(|(key, value)| (key.to_be_bytes().to_vec(), value));
        store
            .tree()
            .bulk_load(pairs, BULK_FILL)
            .map_err(self.err())?;
        store.checkpoint().map_err(self.err())?;
        self.close()?;
        self.open()
    }

    fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError> {
        out.clear();
        match self.store()?.get(&key.to_be_bytes()).map_err(self.err())? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError> {
        self.store()?
            .put(&key.to_be_bytes(), value)
            .map_err(self.err())
    }

    fn delete(&mut self, key: u64) -> Result<bool, StoreError> {
        self.store()?.delete(&key.to_be_bytes()).map_err(self.err())
    }

    fn device_reads(&self) -> u64 {
        let now = self.store.as_ref().map_or(0, |s| s.stats().io.reads);
        self.reads_before + now
    }

    fn device_reads_source(&self) -> &'static str {
        if self.buffered {
            "page reads counted by the engine (buffered: may hit the OS page cache)"
        } else {
            "engine"
        }
    }

    fn pool_bytes(&self) -> u64 {
        self.opts.tree.pool_bytes
    }

    fn reopen_cold(&mut self) -> Result<(), StoreError> {
        self.close()?;
        if self.buffered {
            super::oscache::drop_os_cache(&self.dir.join(PAGE_FILE_NAME))?;
        }
        self.open()
    }

    fn simulate_inner_miss(&mut self, probability: f64) -> Result<(), StoreError> {
        self.store()?.simulate_inner_miss(probability);
        self.inner_miss = probability;
        Ok(())
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "{}: LearnedStore (lidb-btree), learned path {}, pool {} bytes of {}-byte pages, \
             bulk load fill {BULK_FILL}, writes logged unsynced; device reads are the page \
             file's reads",
            self.name,
            if self.opts.learned.enabled {
                format!("on (leaf model {})", self.opts.learned.model_name())
            } else {
                "off".to_string()
            },
            self.opts.tree.pool_bytes,
            self.opts.tree.page_size
        )];
        if self.buffered {
            notes.push(format!(
                "{}: O_DIRECT refused by the file system for {}: reads are buffered, the OS page \
                 cache may hold a second copy and serve misses (dropped at each cold reopen)",
                self.name,
                self.dir.display()
            ));
        }
        notes
    }
}
