//! The real file system. Reads are buffered (through the OS page cache) unless opened with
//! `ReadMode::Direct`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result, io_err};
use crate::storage::{RandomAccessFile, ReadMode, Storage, WritableFile};

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

    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        if mode == ReadMode::Direct {
            return Err(Error::InvalidOption(
                "direct I/O is not implemented by this storage yet".into(),
            ));
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
