//! A storage that cuts the power at its N-th operation, for crash tests of everything built on
//! `Storage`.
//!
//! `PowerCut` wraps a [`MemStorage`] and counts every operation (any method of the storage or of a
//! file it handed out). At the `cut_at`-th the MemStorage crashes (unsynced bytes dropped or torn,
//! unsynced directory changes undone) and every later call fails. Trying every N from 1 up puts
//! the crash inside every write, flush, compaction, GC and manifest switch of a workload; the test
//! then reopens on the rebooted MemStorage and checks what survived.

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::mem::MemStorage;
use crate::{RandomAccessFile, ReadMode, Storage, WritableFile};

/// The shared power switch of a [`PowerCut`] storage and its files.
#[derive(Debug)]
pub struct Power {
    inner: MemStorage,
    ops: AtomicU64,
    cut_at: u64,
    seed: u64,
    dead: AtomicBool,
}

impl Power {
    /// Counts one operation; cuts the power when the count reaches `cut_at`.
    fn tick(&self) -> Result<()> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(dead());
        }
        if self.ops.fetch_add(1, Ordering::SeqCst) + 1 >= self.cut_at {
            self.dead.store(true, Ordering::SeqCst);
            self.inner.crash(self.seed);
            return Err(dead());
        }
        Ok(())
    }
}

fn dead() -> Error {
    Error::Io {
        file: "/power".into(),
        source: std::io::Error::other("power cut"),
    }
}

/// A storage whose power goes at operation `cut_at` (see the module documentation).
#[derive(Debug, Clone)]
pub struct PowerCut(Arc<Power>);

impl PowerCut {
    /// Wraps `inner`; the crash at `cut_at` tears unsynced data with `seed`.
    pub fn new(inner: MemStorage, cut_at: u64, seed: u64) -> PowerCut {
        PowerCut(Arc::new(Power {
            inner,
            ops: AtomicU64::new(0),
            cut_at,
            seed,
            dead: AtomicBool::new(false),
        }))
    }

    /// Operations counted so far.
    pub fn ops(&self) -> u64 {
        self.0.ops.load(Ordering::SeqCst)
    }

    /// Whether the power was cut.
    pub fn is_cut(&self) -> bool {
        self.0.dead.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct CutFile {
    power: Arc<Power>,
    inner: Box<dyn WritableFile>,
}

impl WritableFile for CutFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.power.tick()?;
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<()> {
        self.power.tick()?;
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Storage for PowerCut {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.tick()?;
        let inner = self.0.inner.create(path)?;
        Ok(Box::new(CutFile {
            power: Arc::clone(&self.0),
            inner,
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.tick()?;
        let inner = self.0.inner.open_append(path)?;
        Ok(Box::new(CutFile {
            power: Arc::clone(&self.0),
            inner,
        }))
    }
    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        self.0.tick()?;
        self.0.inner.open(path, mode)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.0.tick()?;
        self.0.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.tick()?;
        self.0.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0.tick()?;
        self.0.inner.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.0.tick()?;
        self.0.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.0.tick()?;
        self.0.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.0.tick()?;
        self.0.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.tick()?;
        self.0.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.0.tick()?;
        self.0.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + Debug>> {
        self.0.tick()?;
        self.0.inner.lock(path)
    }
}
