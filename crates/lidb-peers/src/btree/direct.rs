//! [`DirectBackend`]: a `redb::StorageBackend` over one file opened with `O_DIRECT`, so redb's
//! own cache (`Builder::set_cache_size`) is the only copy of its pages in memory and every miss
//! is a device read, which the backend counts.
//!
//! redb asks for arbitrary offsets and lengths; `O_DIRECT` needs the buffer, the offset and the
//! length aligned to the logical block size. Every request is therefore widened to whole
//! [`ALIGN`]-byte blocks in an aligned bounce buffer (lidb-storage's `direct`, which every
//! direct reader of the workspace shares): a read reads the covering blocks and copies the middle out; a write that does not
//! cover whole blocks first reads the covering blocks, patches them and writes them back
//! (read-modify-write).
//!
//! Invariants:
//! 1. `len` is the file's logical length as redb set it; a write's aligned tail beyond it is cut
//!    off again with `set_len`, so the file never looks longer to redb than it made it.
//! 2. Writes (and `set_len`) hold `write_lock`, so two read-modify-writes of one block never
//!    interleave; reads take no lock (redb never reads a range it is writing).
//! 3. If the file system refuses `O_DIRECT` (EINVAL at open or on the first aligned read), the
//!    file is opened buffered and [`DirectBackend::is_direct`] says so; the runner prints it.
//!
//! Threads: redb calls the backend from any thread; all methods take `&self`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lidb_storage::direct::{self, AlignedBuf};

/// Alignment of offsets, lengths and buffers for `O_DIRECT` (covers 512 and 4096-byte sectors).
pub use lidb_storage::direct::ALIGN;

/// Counters shared between a backend and whoever reports on it (they outlive a reopen).
#[derive(Debug, Default)]
pub struct IoCounters {
    /// Read requests sent to the file (one per `pread` of a redb read or of a read-modify-write).
    pub reads: AtomicU64,
    pub read_bytes: AtomicU64,
    pub writes: AtomicU64,
}

/// redb storage over an `O_DIRECT` file (see the module doc).
#[derive(Debug)]
pub struct DirectBackend {
    file: File,
    direct: bool,
    len: AtomicU64,
    write_lock: Mutex<()>,
    counters: Arc<IoCounters>,
}

impl DirectBackend {
    /// Opens (creating) `path`, with `O_DIRECT` where the file system allows it.
    pub fn open(path: &Path, counters: Arc<IoCounters>) -> io::Result<DirectBackend> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        let direct_file = direct::open_direct(&options, path)?;
        let (file, direct) = match direct_file {
            Some(file) => (file, true),
            None => (options.open(path)?, false),
        };
        let len = file.metadata()?.len();
        Ok(DirectBackend {
            file,
            direct,
            len: AtomicU64::new(len),
            write_lock: Mutex::new(()),
            counters,
        })
    }

    /// Whether the file is really open with `O_DIRECT` (false: the buffered fallback).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Reads the aligned range starting at `start` into `buf`; bytes past the end of the file
    /// stay as they were (zero in a fresh bounce buffer).
    fn read_aligned(&self, start: u64, buf: &mut [u8]) -> io::Result<()> {
        let filled = direct::read_aligned(&self.file, start, buf)?;
        self.counters
            .reads
            .fetch_add(filled.preads, Ordering::Relaxed);
        self.counters
            .read_bytes
            .fetch_add(filled.bytes as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// The aligned range `[start, end)` that covers `offset .. offset + len`.
fn covering(offset: u64, len: u64) -> io::Result<(u64, u64)> {
    direct::covering(offset, len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset overflows u64"))
}

fn bounce(start: u64, end: u64) -> io::Result<AlignedBuf> {
    let len = usize::try_from(end - start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "request too large"))?;
    AlignedBuf::zeroed(len)
}

fn out_of_range(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

impl redb::StorageBackend for DirectBackend {
    fn len(&self) -> io::Result<u64> {
        Ok(self.len.load(Ordering::Acquire))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let len = out.len() as u64;
        if offset.saturating_add(len) > self.len.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read of {len} bytes at {offset} past the end of the file"),
            ));
        }
        if out.is_empty() {
            return Ok(());
        }
        if !self.direct {
            self.counters.reads.fetch_add(1, Ordering::Relaxed);
            self.counters.read_bytes.fetch_add(len, Ordering::Relaxed);
            return self.file.read_exact_at(out, offset);
        }
        let (start, end) = covering(offset, len)?;
        let mut bounce = bounce(start, end)?;
        let buf = bounce.as_mut_slice();
        self.read_aligned(start, buf)?;
        let from = (offset - start) as usize;
        let src = buf
            .get(from..from + out.len())
            .ok_or_else(|| out_of_range("bounce buffer shorter than the read"))?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.file.set_len(len)?;
        self.len.store(len, Ordering::Release);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let len = data.len() as u64;
        let logical = self.len.load(Ordering::Acquire);
        let new_len = logical.max(offset.saturating_add(len));
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        if !self.direct {
            self.file.write_all_at(data, offset)?;
            self.len.store(new_len, Ordering::Release);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let (start, end) = covering(offset, len)?;
        let mut bounce = bounce(start, end)?;
        let buf = bounce.as_mut_slice();
        if offset != start || offset + len != end {
            // Read-modify-write: keep the bytes of the edge blocks that redb is not writing.
            self.read_aligned(start, buf)?;
        }
        let from = (offset - start) as usize;
        buf.get_mut(from..from + data.len())
            .ok_or_else(|| out_of_range("bounce buffer shorter than the write"))?
            .copy_from_slice(data);
        self.file.write_all_at(buf, start)?;
        if end > new_len {
            // The aligned tail went past the logical end: cut it off again (invariant 1).
            self.file.set_len(new_len)?;
        }
        self.len.store(new_len, Ordering::Release);
        Ok(())
    }
}
