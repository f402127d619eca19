//! The real file system. Reads are buffered (through the OS page cache) unless opened with
//! `ReadMode::Direct`.
//!
//! Callers: every part of the engine, from any thread (handles are `Send`, readers `Sync`).
//!
//! Direct I/O (`ReadMode::Direct`): the file is opened with O_DIRECT and every read goes through
//! `direct.rs`, which widens it to whole aligned pages in an aligned bounce buffer. Invariants:
//! - every `pread` issued on a direct handle has a page-aligned offset, length and buffer;
//! - a file system that refuses O_DIRECT (EINVAL at open or at the first read) yields
//!   `Error::InvalidOption` naming the path, never a silent fallback to buffered reads. `open`
//!   probes the first page so the refusal surfaces when the table is opened, not mid-query.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::direct;
use crate::error::{Error, Result, io_err};
use crate::{RandomAccessFile, ReadMode, Storage, WritableFile};

/// Files on the local file system.
#[derive(Debug, Default, Clone)]
pub struct FsStorage;

#[derive(Debug)]
struct FsWritable {
    path: PathBuf,
    file: File,
    len: u64,
}

impl WritableFile for FsWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.write_all(data).map_err(io_err(&self.path))?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(io_err(&self.path))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct FsRandom {
    path: PathBuf,
    file: File,
    len: u64,
}

impl RandomAccessFile for FsRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(io_err(&self.path))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A file opened with O_DIRECT; see the module docs for the alignment rules.
#[derive(Debug)]
struct FsDirect {
    path: PathBuf,
    file: File,
    len: u64,
}

/// The error for a file system that refuses O_DIRECT.
fn direct_unsupported(path: &Path) -> Error {
    Error::InvalidOption(format!(
        "direct I/O is not supported by the file system holding {}",
        path.display()
    ))
}

impl FsDirect {
    fn open(path: &Path) -> Result<FsDirect> {
        // `open_direct` probes the first block: some file systems accept O_DIRECT at open and
        // refuse the reads.
        let file = direct::open_direct(OpenOptions::new().read(true), path)
            .map_err(io_err(path))?
            .ok_or_else(|| direct_unsupported(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        Ok(FsDirect {
            path: path.to_path_buf(),
            file,
            len,
        })
    }
}

impl RandomAccessFile for FsDirect {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let asked = buf.len();
        let eof = || Error::Io {
            file: self.path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {asked} bytes at offset {offset} is past the end ({} bytes)",
                    self.len
                ),
            ),
        };
        let end = offset.checked_add(buf.len() as u64).ok_or_else(eof)?;
        if end > self.len {
            return Err(eof());
        }
        match direct::read_exact_at(&self.file, offset, buf) {
            Ok(_) => Ok(()),
            Err(e) if direct::is_refusal(&e) => Err(direct_unsupported(&self.path)),
            // The file shrank under us.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(eof()),
            Err(e) => Err(io_err(&self.path)(e)),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug)]
struct FsLock {
    _file: File,
}

impl Storage for FsStorage {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io_err(path))?;
        Ok(Box::new(FsWritable {
            path: path.to_path_buf(),
            file,
            len: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        Ok(Box::new(FsWritable {
            path: path.to_path_buf(),
            file,
            len,
        }))
    }

    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        if mode == ReadMode::Direct {
            return Ok(Arc::new(FsDirect::open(path)?));
        }
        let file = File::open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        Ok(Arc::new(FsRandom {
            path: path.to_path_buf(),
            file,
            len,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(io_err(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(io_err(from))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(io_err(path))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        file.set_len(len).map_err(io_err(path))?;
        file.sync_all().map_err(io_err(path))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path).map_err(io_err(path))?.len())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + std::fmt::Debug>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err(path))?;
        file.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => Error::Io {
                file: path.to_path_buf(),
                source: std::io::Error::other("the database is in use by another process"),
            },
            std::fs::TryLockError::Error(source) => Error::Io {
                file: path.to_path_buf(),
                source,
            },
        })?;
        Ok(Box::new(FsLock { _file: file }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PAGE_SIZE;

    /// A fresh directory under `parent`, removed on drop (also when the test panics). These
    /// tests use `tempfile` itself: lidb-testkit's `Scratch` depends on this crate.
    fn scratch_in(parent: &Path, tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!(".lidb-lsm-{tag}-"))
            .tempdir_in(parent)
            .unwrap_or_else(|e| panic!("a scratch directory in {}: {e}", parent.display()))
    }

    /// Writes a file whose length is not a page multiple, then checks that direct reads of many
    /// spans equal the bytes written, or that the file system's refusal is a clear error.
    /// Returns whether the file system supports direct I/O.
    fn check_direct_reads(parent: &Path, tag: &str) -> bool {
        let scratch = scratch_in(parent, tag);
        let path = scratch.path().join("data");
        let len = 3 * PAGE_SIZE as usize + 123;
        let bytes: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file = match FsStorage.open(&path, ReadMode::Direct) {
            Ok(f) => f,
            Err(Error::InvalidOption(msg)) => {
                assert!(
                    msg.contains("direct I/O is not supported")
                        && msg.contains(&*path.to_string_lossy()),
                    "{msg}"
                );
                return false;
            }
            Err(e) => panic!("opening {} for direct I/O: {e}", path.display()),
        };
        assert_eq!(file.len(), len as u64);
        let page = PAGE_SIZE as usize;
        let points = [
            0,
            1,
            511,
            512,
            page - 1,
            page,
            page + 7,
            2 * page,
            len - 123,
            len - 1,
        ];
        for &offset in &points {
            for size in [0, 1, 100, page - 1, page, page + 1, 2 * page + 5, len] {
                let end = offset + size;
                let mut buf = vec![0u8; size];
                let got = file.read_at(offset as u64, &mut buf);
                if end <= len {
                    got.unwrap_or_else(|e| panic!("read {size} at {offset}: {e}"));
                    assert_eq!(buf.as_slice(), bytes.get(offset..end).unwrap_or_default());
                } else {
                    let err = got.err().map(|e| e.to_string()).unwrap_or_default();
                    assert!(
                        err.contains("past the end"),
                        "read {size} at {offset}: {err}"
                    );
                }
            }
        }
        let mut huge = [0u8; 4];
        assert!(file.read_at(u64::MAX - 1, &mut huge).is_err());
        true
    }

    #[test]
    fn direct_reads_on_tmp_and_current_dir() {
        let tmp = check_direct_reads(&std::env::temp_dir(), "direct-tmp");
        let cwd = std::env::current_dir().unwrap_or_else(|e| panic!("current dir: {e}"));
        let here = check_direct_reads(&cwd, "direct-cwd");
        eprintln!(
            "O_DIRECT supported: temp dir {tmp}, current dir ({}) {here}",
            cwd.display()
        );
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            let tmpfs = check_direct_reads(shm, "direct-shm");
            eprintln!("O_DIRECT supported: /dev/shm (tmpfs) {tmpfs}");
        }
    }

    #[test]
    fn direct_open_of_missing_file_is_io_naming_it() {
        let scratch = scratch_in(&std::env::temp_dir(), "direct-missing");
        let path = scratch.path().join("no-such-file-for-direct-io");
        match FsStorage.open(&path, ReadMode::Direct) {
            Err(Error::Io { file, .. }) => assert_eq!(file, path),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn direct_read_of_empty_file() {
        let scratch = scratch_in(&std::env::temp_dir(), "direct-empty");
        let path = scratch.path().join("empty");
        std::fs::write(&path, b"").unwrap_or_else(|e| panic!("{e}"));
        if let Ok(file) = FsStorage.open(&path, ReadMode::Direct) {
            assert_eq!(file.len(), 0);
            assert!(file.read_at(0, &mut []).is_ok());
            assert!(file.read_at(0, &mut [0u8; 1]).is_err());
        }
    }

    /// procfs refuses O_DIRECT at open (EINVAL): the refusal path on a file system we have.
    #[test]
    fn refusal_names_the_path() {
        let path = Path::new("/proc/self/status");
        if !path.exists() {
            return;
        }
        match FsStorage.open(path, ReadMode::Direct) {
            Err(Error::InvalidOption(msg)) => assert_eq!(
                msg,
                "direct I/O is not supported by the file system holding /proc/self/status"
            ),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => eprintln!("procfs accepted O_DIRECT here"),
        }
    }
}
