//! Helpers shared by the store's integration tests: a store over `MemTarget` in `/db`, and a
//! storage that counts (and slows) syncs, to see group commit.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lidb_btree::testing::MemTarget;
use lidb_btree::{BTreeStore, WalOptions};
use lidb_storage::{RandomAccessFile, ReadMode, Storage, WritableFile};

pub const DIR: &str = "/db";

pub fn dir() -> &'static Path {
    Path::new(DIR)
}

/// Path of log `id` of the test store.
pub fn log_path(id: u64) -> PathBuf {
    dir().join(format!("wal-{id:06}.log"))
}

/// Opens the test store (target snapshot `/db/tree.snap`) on `storage`.
pub fn open(
    storage: Arc<dyn Storage>,
    opts: WalOptions,
) -> lidb_btree::Result<BTreeStore<MemTarget>> {
    let target = MemTarget::open(Arc::clone(&storage), &dir().join("tree.snap"))?;
    BTreeStore::open(storage, dir(), target, opts)
}

/// Options with `sync` and no automatic checkpoint.
pub fn synced() -> WalOptions {
    WalOptions {
        sync: true,
        checkpoint_log_bytes: 0,
        ..WalOptions::default()
    }
}

/// A storage that counts the syncs of its files and makes each take `sync_delay`.
#[derive(Debug)]
pub struct SlowSync {
    pub inner: Arc<dyn Storage>,
    pub syncs: Arc<AtomicU64>,
    pub sync_delay: Duration,
}

#[derive(Debug)]
struct SlowFile {
    inner: Box<dyn WritableFile>,
    syncs: Arc<AtomicU64>,
    sync_delay: Duration,
}

impl WritableFile for SlowFile {
    fn append(&mut self, data: &[u8]) -> lidb_storage::Result<()> {
        self.inner.append(data)
    }
    fn sync(&mut self) -> lidb_storage::Result<()> {
        std::thread::sleep(self.sync_delay);
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl SlowSync {
    fn wrap(&self, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(SlowFile {
            inner,
            syncs: Arc::clone(&self.syncs),
            sync_delay: self.sync_delay,
        })
    }
}

impl Storage for SlowSync {
    fn create(&self, path: &Path) -> lidb_storage::Result<Box<dyn WritableFile>> {
        Ok(self.wrap(self.inner.create(path)?))
    }
    fn open_append(&self, path: &Path) -> lidb_storage::Result<Box<dyn WritableFile>> {
        Ok(self.wrap(self.inner.open_append(path)?))
    }
    fn open(&self, path: &Path, mode: ReadMode) -> lidb_storage::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, mode)
    }
    fn read_all(&self, path: &Path) -> lidb_storage::Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> lidb_storage::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> lidb_storage::Result<()> {
        self.inner.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> lidb_storage::Result<()> {
        self.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> lidb_storage::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> lidb_storage::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> lidb_storage::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> lidb_storage::Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> lidb_storage::Result<Box<dyn Send + Sync + Debug>> {
        self.inner.lock(path)
    }
}

/// Asserts that a full scan of `tree` gives exactly `model`, every key with its newest value.
pub fn assert_scan_is(
    tree: &lidb_btree::BTree,
    model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let scanned = tree
        .scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("scan: {e}"));
    assert_eq!(scanned.len(), model.len());
    assert!(
        scanned
            .iter()
            .zip(model)
            .all(|((k, v), (mk, mv))| k == mk && v == mv),
        "the scan gives every key with its newest value"
    );
}
