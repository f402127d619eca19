//! In-memory storage for tests: a file system that knows which bytes and which directory entries
//! are durable, simulates power cuts, and injects faults.
//!
//! Callers: tests of every part of the engine, from any thread (`MemStorage` is a cheap `Clone`;
//! all clones share one machine behind one mutex).
//!
//! Model (the pessimistic reading of POSIX that the `Storage` contract promises no more than):
//! - A file is an inode holding `data` and `durable`: the length of the prefix of `data` that a
//!   `sync` made durable. Files only grow by `append`; `truncate` is durable at once.
//! - The namespace has two views: `live` (what the running process sees) and `durable` (what the
//!   directory entries on disk say). `create` of a new path, `rename` and `remove` change `live`
//!   only; `sync_dir(dir)` copies `live` into `durable` for every entry whose parent is `dir`.
//!   `create` of an existing path truncates that inode (durably: the old bytes are gone).
//! - Directories themselves are durable as soon as `create_dir_all` returns (a simplification:
//!   the engine never relies on a directory's own entry in its parent).
//! - [`MemStorage::crash`] is a power cut followed by a reboot: `live` becomes `durable`, every
//!   surviving inode keeps its durable bytes plus a seeded-random prefix of the rest (a torn
//!   write), inodes no durable entry names vanish, open handles go stale (their operations fail
//!   with `Error::Io`), locks are released and faults cleared.
//! - Faults ([`MemStorage::fail_after`]) are one-shot: `WriteError` and `ShortWrite` count
//!   appends, `SyncError` counts syncs; the (ops+1)-th such operation fails, later ones succeed.
//!   A failed sync makes nothing durable.
//!
//! Invariants: `durable <= data.len()` for every inode; every inode named by `durable` entries
//! exists; handles carry the epoch they were opened in and refuse to work in a later epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::{RandomAccessFile, ReadMode, Storage, WritableFile};

/// A fault to inject with [`MemStorage::fail_after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// An append fails and writes nothing.
    WriteError,
    /// An append writes the first half of its bytes (rounded down), then fails.
    ShortWrite,
    /// A sync fails and makes nothing durable.
    SyncError,
}

/// In-memory storage with crash simulation and fault injection (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    machine: Arc<Mutex<Machine>>,
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: usize,
}

#[derive(Debug, Default)]
struct Machine {
    inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    live: BTreeMap<PathBuf, u64>,
    durable: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    /// Incremented by every crash; handles of older epochs are stale.
    epoch: u64,
    /// Held locks: path to the token of the guard holding it.
    locks: BTreeMap<PathBuf, u64>,
    next_token: u64,
    /// Armed fault: how many matching operations still succeed, and the fault.
    fault: Option<(u64, Fault)>,
    /// `read_at` calls on files opened for random reads, since creation.
    random_reads: u64,
}

fn err(path: &Path, kind: std::io::ErrorKind, msg: impl Into<String>) -> Error {
    Error::Io {
        file: path.to_path_buf(),
        source: std::io::Error::new(kind, msg.into()),
    }
}

fn not_found(path: &Path) -> Error {
    err(path, std::io::ErrorKind::NotFound, "no such file")
}

fn stale(path: &Path) -> Error {
    err(
        path,
        std::io::ErrorKind::Other,
        "handle opened before a simulated crash",
    )
}

/// The parent directory of `path`, with "" for a bare name.
fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// SplitMix64: a tiny seeded generator (the library has no `rand` dependency).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: usize) -> usize {
        (self.next() % (max as u64 + 1)) as usize
    }
}

impl Machine {
    fn dir_exists(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || dir.parent().is_none() || self.dirs.contains(dir)
    }

    /// Consumes one matching operation of the armed fault; returns the fault if it fires now.
    fn take_fault(&mut self, is_sync: bool) -> Option<Fault> {
        let (left, fault) = self.fault?;
        if (fault == Fault::SyncError) != is_sync {
            return None;
        }
        if left == 0 {
            self.fault = None;
            Some(fault)
        } else {
            self.fault = Some((left - 1, fault));
            None
        }
    }

    /// Creates `path`, or truncates it if it exists; returns its inode.
    fn create(&mut self, path: &Path) -> Result<u64> {
        let dir = parent_of(path);
        if !self.dir_exists(&dir) {
            return Err(err(
                path,
                std::io::ErrorKind::NotFound,
                format!("directory {} does not exist", dir.display()),
            ));
        }
        if self.dirs.contains(path) {
            return Err(err(path, std::io::ErrorKind::Other, "is a directory"));
        }
        if let Some(&id) = self.live.get(path) {
            let inode = self.inode(id, path)?;
            inode.data.clear();
            inode.durable = 0;
            return Ok(id);
        }
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::default());
        self.live.insert(path.to_path_buf(), id);
        Ok(id)
    }

    fn inode(&mut self, id: u64, path: &Path) -> Result<&mut Inode> {
        self.inodes.get_mut(&id).ok_or_else(|| not_found(path))
    }
}

impl MemStorage {
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    fn machine(&self) -> MutexGuard<'_, Machine> {
        // A panic while holding the lock (a failed test assertion) must not hide the state.
        self.machine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Simulates a power cut and reboot (see the module docs). The same `seed` on the same
    /// history gives the same surviving bytes.
    pub fn crash(&self, seed: u64) {
        let mut m = self.machine();
        let mut rng = SplitMix(seed);
        m.live = m.durable.clone();
        let named: BTreeSet<u64> = m.durable.values().copied().collect();
        m.inodes.retain(|id, _| named.contains(id));
        for inode in m.inodes.values_mut() {
            let unsynced = inode.data.len() - inode.durable;
            let keep = inode.durable + rng.up_to(unsynced);
            inode.data.truncate(keep);
            inode.durable = keep;
        }
        m.epoch += 1;
        m.locks.clear();
        m.fault = None;
    }

    /// Arms a one-shot fault: after `ops` matching operations succeed, the next one fails
    /// (appends for `WriteError`/`ShortWrite`, syncs for `SyncError`). Replaces an armed fault.
    pub fn fail_after(&self, ops: u64, kind: Fault) {
        self.machine().fault = Some((ops, kind));
    }

    pub fn clear_faults(&self) {
        self.machine().fault = None;
    }

    /// How many `read_at` calls files opened for random reads have served (tables, value logs):
    /// the storage reads a test can hold a read path to.
    pub fn random_reads(&self) -> u64 {
        self.machine().random_reads
    }

    /// XORs the byte at `offset` of `path` with `xor_mask` (media corruption; durable at once).
    pub fn corrupt(&self, path: &Path, offset: u64, xor_mask: u8) -> Result<()> {
        let mut m = self.machine();
        let id = *m.live.get(path).ok_or_else(|| not_found(path))?;
        let inode = m.inode(id, path)?;
        let byte = usize::try_from(offset)
            .ok()
            .and_then(|o| inode.data.get_mut(o))
            .ok_or_else(|| {
                err(
                    path,
                    std::io::ErrorKind::InvalidInput,
                    format!("offset {offset} is past the end of the file"),
                )
            })?;
        *byte ^= xor_mask;
        Ok(())
    }

    /// Paths of every file the running process sees, sorted.
    pub fn files(&self) -> Vec<PathBuf> {
        self.machine().live.keys().cloned().collect()
    }

    /// Bytes of `path` that a sync made durable (for tests).
    pub fn durable_len(&self, path: &Path) -> Option<u64> {
        let m = self.machine();
        let id = m.live.get(path)?;
        m.inodes.get(id).map(|i| i.durable as u64)
    }
}

#[derive(Debug)]
struct MemWritable {
    machine: Arc<Mutex<Machine>>,
    path: PathBuf,
    inode: u64,
    epoch: u64,
    len: u64,
}

impl MemWritable {
    fn machine(&self) -> Result<MutexGuard<'_, Machine>> {
        let m = self.machine.lock().unwrap_or_else(|e| e.into_inner());
        if m.epoch != self.epoch {
            return Err(stale(&self.path));
        }
        Ok(m)
    }
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut m = self.machine()?;
        let fault = m.take_fault(false);
        let written = match fault {
            Some(Fault::WriteError) => 0,
            Some(Fault::ShortWrite) => data.len() / 2,
            _ => data.len(),
        };
        let inode = m.inode(self.inode, &self.path)?;
        inode
            .data
            .extend_from_slice(data.get(..written).unwrap_or_default());
        drop(m);
        self.len += written as u64;
        match fault {
            Some(f @ (Fault::WriteError | Fault::ShortWrite)) => Err(err(
                &self.path,
                std::io::ErrorKind::Other,
                format!("injected {f:?}: wrote {written} of {} bytes", data.len()),
            )),
            _ => Ok(()),
        }
    }

    fn sync(&mut self) -> Result<()> {
        let mut m = self.machine()?;
        if m.take_fault(true).is_some() {
            return Err(err(
                &self.path,
                std::io::ErrorKind::Other,
                "injected SyncError",
            ));
        }
        let inode = m.inode(self.inode, &self.path)?;
        inode.durable = inode.data.len();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct MemRandom {
    machine: Arc<Mutex<Machine>>,
    path: PathBuf,
    inode: u64,
    epoch: u64,
    len: u64,
}

impl RandomAccessFile for MemRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut m = self.machine.lock().unwrap_or_else(|e| e.into_inner());
        m.random_reads += 1;
        if m.epoch != self.epoch {
            return Err(stale(&self.path));
        }
        let data = &m
            .inodes
            .get(&self.inode)
            .ok_or_else(|| not_found(&self.path))?
            .data;
        let span = usize::try_from(offset)
            .ok()
            .and_then(|o| Some(o..o.checked_add(buf.len())?))
            .and_then(|r| data.get(r))
            .ok_or_else(|| {
                err(
                    &self.path,
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at offset {offset} is past the end ({} bytes)",
                        buf.len(),
                        data.len()
                    ),
                )
            })?;
        buf.copy_from_slice(span);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// Releases a lock of [`MemStorage::lock`] when dropped (unless a crash released it already).
#[derive(Debug)]
struct MemLock {
    machine: Arc<Mutex<Machine>>,
    path: PathBuf,
    token: u64,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut m = self.machine.lock().unwrap_or_else(|e| e.into_inner());
        if m.locks.get(&self.path) == Some(&self.token) {
            m.locks.remove(&self.path);
        }
    }
}

impl Storage for MemStorage {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut m = self.machine();
        let id = m.create(path)?;
        Ok(Box::new(MemWritable {
            machine: Arc::clone(&self.machine),
            path: path.to_path_buf(),
            inode: id,
            epoch: m.epoch,
            len: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut m = self.machine();
        let id = *m.live.get(path).ok_or_else(|| not_found(path))?;
        let len = m.inode(id, path)?.data.len() as u64;
        Ok(Box::new(MemWritable {
            machine: Arc::clone(&self.machine),
            path: path.to_path_buf(),
            inode: id,
            epoch: m.epoch,
            len,
        }))
    }

    fn open(&self, path: &Path, _mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        let m = self.machine();
        let id = *m.live.get(path).ok_or_else(|| not_found(path))?;
        let len = m.inodes.get(&id).map_or(0, |i| i.data.len() as u64);
        Ok(Arc::new(MemRandom {
            machine: Arc::clone(&self.machine),
            path: path.to_path_buf(),
            inode: id,
            epoch: m.epoch,
            len,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let m = self.machine();
        let id = m.live.get(path).ok_or_else(|| not_found(path))?;
        Ok(m.inodes.get(id).map(|i| i.data.clone()).unwrap_or_default())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut m = self.machine();
        if !m.dir_exists(&parent_of(to)) {
            return Err(err(
                to,
                std::io::ErrorKind::NotFound,
                "target directory missing",
            ));
        }
        let id = m.live.remove(from).ok_or_else(|| not_found(from))?;
        m.live.insert(to.to_path_buf(), id);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        // The inode stays while a durable entry names it (a crash may bring it back).
        self.machine()
            .live
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let mut m = self.machine();
        let id = *m.live.get(path).ok_or_else(|| not_found(path))?;
        let len = usize::try_from(len)
            .map_err(|_| err(path, std::io::ErrorKind::InvalidInput, "length too large"))?;
        let inode = m.inode(id, path)?;
        inode.data.resize(len, 0);
        inode.durable = len;
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let m = self.machine();
        if !m.dir_exists(dir) {
            return Err(not_found(dir));
        }
        let mut names: Vec<String> = m
            .live
            .keys()
            .chain(m.dirs.iter())
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut m = self.machine();
        for d in dir.ancestors() {
            if d.as_os_str().is_empty() || d.parent().is_none() {
                continue;
            }
            if m.live.contains_key(d) {
                return Err(err(d, std::io::ErrorKind::Other, "is a file"));
            }
            m.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut m = self.machine();
        if !m.dir_exists(dir) {
            return Err(not_found(dir));
        }
        let in_dir = |p: &PathBuf| parent_of(p) == dir;
        let live: Vec<(PathBuf, u64)> = m
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, id)| (p.clone(), *id))
            .collect();
        m.durable.retain(|p, _| !in_dir(p));
        m.durable.extend(live);
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let m = self.machine();
        m.live.contains_key(path) || m.dirs.contains(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let m = self.machine();
        let id = m.live.get(path).ok_or_else(|| not_found(path))?;
        Ok(m.inodes.get(id).map_or(0, |i| i.data.len() as u64))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + Debug>> {
        let mut m = self.machine();
        if m.locks.contains_key(path) {
            return Err(err(
                path,
                std::io::ErrorKind::WouldBlock,
                "the database is in use by another process",
            ));
        }
        if !m.live.contains_key(path) {
            m.create(path)?;
        }
        let token = m.next_token;
        m.next_token += 1;
        m.locks.insert(path.to_path_buf(), token);
        Ok(Box::new(MemLock {
            machine: Arc::clone(&self.machine),
            path: path.to_path_buf(),
            token,
        }))
    }
}
