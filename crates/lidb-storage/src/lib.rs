//! What every lidb engine stores through. lidb-lsm, lidb-kv, lidb-fine, lidb-btree's log and
//! lidb-stress sit on this crate; none of them needs an LSM for it.
//!
//! - [`Storage`] (this file): all file I/O, so tests can inject faults and crashes.
//! - `error`: [`Error`], which keeps corruption (bad bytes, naming the file) apart from I/O.
//! - `log`: the checksummed record framing of every log-like file; `tail`: telling a torn tail
//!   from damage, and the [`RecoveryMode`]s that decide what each costs.
//! - `cache`: the sharded page and entry cache table readers share; `hash`: the key hash it
//!   shards by (also the hash of lidb-lsm's Bloom filters, so it is part of a file format).
//! - `report`: what an open found and cut, and `lost/`; `size`: byte sizes as people write them;
//!   `bytes`: the one bounds-checked cursor every decoder reads untrusted bytes with; `direct`:
//!   O_DIRECT opens, aligned buffers and reads, for every direct reader of the workspace.
//!
//! Implementations of [`Storage`]: `fs::FsStorage` (the real file system, optional O_DIRECT reads) and
//! `mem::MemStorage` (in memory; tracks which bytes are durable, can simulate a crash that drops
//! everything not synced, and can inject failed writes, short writes and flipped bytes).
//! Wrappers over any storage: `powercut::PowerCut` (cuts the power at its N-th operation) and
//! `fault::FaultStorage` (injects EIO on reads, writes and syncs, short writes and ENOSPC at
//! seeded rates, for `lidb stress --faults`).
//!
//! Contract:
//! - `WritableFile::append` either appends all bytes or returns an error; bytes appended are
//!   durable only after `sync` returns Ok. A crash keeps a prefix of the unsynced bytes (possibly
//!   none, possibly torn mid-record).
//! - `rename` is atomic and durable once `sync_dir` on the directory returns Ok; `create` and
//!   `remove` likewise need `sync_dir` to be durable.
//! - `RandomAccessFile::read_at` fills the whole buffer or fails (a short file is an error).
//! - Every method may be called from any thread.
//! - Errors are `Error::Io` naming the path.

pub mod bytes;
pub mod cache;
pub mod direct;
pub mod error;
pub mod fault;
pub mod fs;
pub mod hash;
pub mod log;
pub mod mem;
pub mod powercut;
pub mod report;
pub mod size;
pub mod tail;

pub use error::{Error, Result};
pub use tail::RecoveryMode;

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The I/O page: direct I/O reads are aligned to it, the page cache holds it.
pub const PAGE_SIZE: u64 = 4096;

/// A file being written sequentially.
pub trait WritableFile: Send + Debug {
    /// Appends all of `data`.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Makes every appended byte durable.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets, from any thread.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Fills `buf` from `offset`; fails if the file is shorter.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Size of the file when it was opened.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The path, for error messages.
    fn path(&self) -> &Path;
}

/// How a file is opened for reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// Through the operating system's page cache.
    #[default]
    Buffered,
    /// O_DIRECT: reads bypass the OS cache; the implementation aligns offsets, lengths and
    /// buffers to PAGE_SIZE itself. Opening fails with a clear error where the file system
    /// refuses O_DIRECT.
    Direct,
}

/// Files of one engine instance.
pub trait Storage: Send + Sync + Debug {
    /// Creates `path` (truncating it if it exists) for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file to append to its end; `len()` starts at its current size. Used only
    /// to rewrite a closed table's tail after `truncate` (offline re-indexing).
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for random reads.
    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole (small) file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn remove(&self, path: &Path) -> Result<()>;
    /// Cuts a file to `len` bytes and makes that durable (used to drop a torn log tail).
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
    /// Names (not paths) of the entries of a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    fn exists(&self, path: &Path) -> bool;
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Takes an exclusive lock on `path` (creating it) for the life of the returned guard, so two
    /// processes never open one database. Fails with a clear error if another holder exists.
    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + Debug>>;
}

/// `dir/name`, for the fixed file names of a database directory.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
