//! A storage that injects I/O faults at seeded rates, for `lidb stress --faults` and for tests of
//! how the engine behaves when the disk says no.
//!
//! `FaultStorage` wraps any `Arc<dyn Storage>` (the real file system or a `MemStorage`). Files it
//! hands out (`create`, `open_append`, `open`) are wrapped too, so their operations meet the
//! faults. What each fault of a [`FaultSpec`] means:
//! - `read-eio=P`: each `read_at` of a file opened for random reads, and each `read_all`, fails
//!   with EIO with probability P and reads nothing.
//! - `write-eio=P`: an `append` fails with EIO and writes nothing.
//! - `short-write=P`: an `append` writes the first half of its bytes (rounded down), then fails.
//!   One draw decides an append: below `write-eio` it fails whole, within the next `short-write`
//!   of the unit interval it is short, so with both set their sum above 1 leaves short writes the
//!   rest (`1 - write-eio`).
//! - `sync-fail=P`: a file `sync` or a `sync_dir` fails with EIO and does NOT call the inner
//!   sync. On a real file system the appended bytes (or directory entries) may still reach the
//!   disk later through the kernel's writeback: the engine must treat them as not durable, and
//!   must not trust a later sync of the same file either (a retried fsync may report success for
//!   pages the kernel already dropped). That is the contract under test.
//! - `enospc=SIZE`: once SIZE bytes were appended through this storage while injection was on,
//!   appends fail with ENOSPC (`ErrorKind::StorageFull`); the append that would cross SIZE writes
//!   nothing. [`FaultStorage::reset_space`] starts the count again from 0 ("the space came back").
//!
//! Every injected error is `Error::Io` naming the path, with a message starting
//! "injected fault:" so that a reader of a log knows the disk did not really fail. Every other
//! method of the storage and of its files passes straight through, and so does everything while
//! injection is off ([`FaultStorage::set_enabled`]).
//!
//! Determinism: each decision takes the next number of a per-storage atomic operation counter n
//! and draws the n-th output of SplitMix64 seeded with the seed. One thread's sequence of
//! operations therefore replays from the seed; with several threads the same draws are dealt out
//! in the order the threads reach the counter. Only operations that a set fault could hit draw.
//!
//! Threads: `FaultStorage` is a cheap `Clone` whose clones share one state; every method may be
//! called from any thread. Counters are atomics, no lock is taken beyond the inner storage's.
//!
//! Invariants: a fault that fires never calls the inner operation, except a short write, which
//! appends exactly the first half; the ENOSPC byte count never exceeds its budget.

use std::fmt::{self, Debug};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::{RandomAccessFile, ReadMode, Storage, WritableFile};

/// The fault kinds `FaultSpec::parse` accepts, for its error messages.
const KINDS: &str = "read-eio=P, write-eio=P, short-write=P, sync-fail=P, enospc=SIZE \
                     (P in [0,1]; SIZE in bytes with an optional KiB, MiB or GiB suffix), or none";

/// Which faults to inject, parsed from a comma-separated list of kind=value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FaultSpec {
    /// `read-eio=P`: each `read_at` / `read_all` fails with EIO, probability P.
    pub read_error_rate: f64,
    /// `write-eio=P`: an append fails and writes nothing.
    pub write_error_rate: f64,
    /// `short-write=P`: an append writes the first half of its bytes, then fails.
    pub short_write_rate: f64,
    /// `sync-fail=P`: a file sync or `sync_dir` fails with EIO and does not call the inner sync.
    pub sync_error_rate: f64,
    /// `enospc=SIZE`: appends fail with ENOSPC once SIZE bytes were appended through the storage.
    pub enospc_after_bytes: Option<u64>,
}

impl FaultSpec {
    /// Parses "kind=value,kind=value"; "" or "none" is no faults. An unknown kind, a kind given
    /// twice, a rate outside [0,1] or a bad size is an error naming the item and the accepted
    /// kinds.
    pub fn parse(s: &str) -> std::result::Result<FaultSpec, String> {
        let s = s.trim();
        let mut spec = FaultSpec::default();
        if s.is_empty() || s == "none" {
            return Ok(spec);
        }
        let mut seen: Vec<&str> = Vec::new();
        for item in s.split(',').map(str::trim) {
            let bad = |why: &str| format!("fault {item:?}: {why}; accepted: {KINDS}");
            let (kind, value) = item
                .split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| bad("expected kind=value"))?;
            if seen.contains(&kind) {
                return Err(bad("kind given twice"));
            }
            seen.push(kind);
            let rate = || -> std::result::Result<f64, String> {
                match value.parse::<f64>() {
                    Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
                    _ => Err(bad("the rate must be a number in [0,1]")),
                }
            };
            match kind {
                "read-eio" => spec.read_error_rate = rate()?,
                "write-eio" => spec.write_error_rate = rate()?,
                "short-write" => spec.short_write_rate = rate()?,
                "sync-fail" => spec.sync_error_rate = rate()?,
                "enospc" => {
                    spec.enospc_after_bytes = Some(
                        crate::size::parse_size(value)
                            .ok()
                            .ok_or_else(|| bad("bad size"))?,
                    )
                }
                _ => return Err(bad("unknown kind")),
            }
        }
        Ok(spec)
    }

    /// Whether no fault is set.
    pub fn is_none(&self) -> bool {
        *self == FaultSpec::default()
    }
}

impl fmt::Display for FaultSpec {
    /// Writes what [`FaultSpec::parse`] reads back to an equal spec ("none" when none). Rates
    /// print in Rust's shortest round-trip form, sizes in bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Vec::new();
        let rates = [
            ("read-eio", self.read_error_rate),
            ("write-eio", self.write_error_rate),
            ("short-write", self.short_write_rate),
            ("sync-fail", self.sync_error_rate),
        ];
        for (kind, p) in rates {
            if p != 0.0 {
                items.push(format!("{kind}={p}"));
            }
        }
        if let Some(bytes) = self.enospc_after_bytes {
            items.push(format!("enospc={bytes}"));
        }
        if items.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&items.join(","))
        }
    }
}

/// How many faults of each kind were injected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub read_errors: u64,
    pub write_errors: u64,
    pub short_writes: u64,
    pub sync_errors: u64,
    pub enospc: u64,
}

impl FaultCounts {
    pub fn total(&self) -> u64 {
        self.read_errors + self.write_errors + self.short_writes + self.sync_errors + self.enospc
    }
}

/// The state shared by a [`FaultStorage`], its clones and the files it handed out.
#[derive(Debug)]
struct Injector {
    inner: Arc<dyn Storage>,
    spec: FaultSpec,
    seed: u64,
    enabled: AtomicBool,
    /// Decisions drawn so far: the index of the next SplitMix64 output.
    draws: AtomicU64,
    /// Bytes appended while injection was on, since creation or `reset_space`.
    appended_bytes: AtomicU64,
    read_errors: AtomicU64,
    write_errors: AtomicU64,
    short_writes: AtomicU64,
    sync_errors: AtomicU64,
    enospc: AtomicU64,
    /// The file or directory of the last failed sync, for messages.
    last_failed_sync: std::sync::Mutex<Option<std::path::PathBuf>>,
}

/// The n-th output (from 0) of SplitMix64 seeded with `seed`.
fn splitmix64(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn injected(path: &Path, kind: ErrorKind, what: String) -> Error {
    Error::Io {
        file: path.to_path_buf(),
        source: std::io::Error::new(kind, format!("injected fault: {what}")),
    }
}

fn eio(path: &Path, what: &str) -> Error {
    injected(path, ErrorKind::Other, format!("{what} failed with EIO"))
}

/// What an append is told to do.
enum AppendFate {
    Pass,
    Fail(Error),
    /// Write this many bytes, then fail with this error.
    Short(usize, Error),
}

impl Injector {
    fn on(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// A uniform draw in [0, 1) from the next decision of the seeded sequence.
    fn draw(&self) -> f64 {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        (splitmix64(self.seed, n) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether an operation with fault probability `rate` fails now (no draw when it cannot).
    fn fires(&self, rate: f64) -> bool {
        rate > 0.0 && self.on() && self.draw() < rate
    }

    fn check_read(&self, path: &Path, what: &str) -> Result<()> {
        if self.fires(self.spec.read_error_rate) {
            self.read_errors.fetch_add(1, Ordering::Relaxed);
            return Err(eio(path, what));
        }
        Ok(())
    }

    fn check_sync(&self, path: &Path, what: &str) -> Result<()> {
        if self.fires(self.spec.sync_error_rate) {
            *self
                .last_failed_sync
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(path.to_path_buf());
            self.sync_errors.fetch_add(1, Ordering::Relaxed);
            return Err(eio(path, what));
        }
        Ok(())
    }

    /// Decides the fate of an append of `len` bytes to `path`, taking its bytes from the ENOSPC
    /// budget when it may go ahead.
    fn append_fate(&self, path: &Path, len: usize) -> AppendFate {
        if !self.on() {
            return AppendFate::Pass;
        }
        let len_bytes = len as u64;
        if let Some(budget) = self.spec.enospc_after_bytes {
            let reserved =
                self.appended_bytes
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                        used.checked_add(len_bytes).filter(|&after| after <= budget)
                    });
            if let Err(used) = reserved {
                self.enospc.fetch_add(1, Ordering::Relaxed);
                return AppendFate::Fail(injected(
                    path,
                    ErrorKind::StorageFull,
                    format!(
                        "no space left on device (ENOSPC): an append of {len} bytes after \
                         {used} of a {budget}-byte budget"
                    ),
                ));
            }
        }
        let (w, s) = (self.spec.write_error_rate, self.spec.short_write_rate);
        if w <= 0.0 && s <= 0.0 {
            return AppendFate::Pass;
        }
        let u = self.draw();
        let fate = if u < w {
            self.write_errors.fetch_add(1, Ordering::Relaxed);
            AppendFate::Fail(eio(path, &format!("an append of {len} bytes")))
        } else if u - w < s {
            self.short_writes.fetch_add(1, Ordering::Relaxed);
            let half = len / 2;
            AppendFate::Short(
                half,
                eio(path, &format!("a short write: {half} of {len} bytes, then")),
            )
        } else {
            return AppendFate::Pass;
        };
        if self.spec.enospc_after_bytes.is_some() {
            let unwritten = match &fate {
                AppendFate::Short(half, _) => len - half,
                _ => len,
            };
            self.appended_bytes
                .fetch_sub(unwritten as u64, Ordering::Relaxed);
        }
        fate
    }
}

/// A storage that injects faults at seeded rates (see the module documentation).
#[derive(Debug, Clone)]
pub struct FaultStorage(Arc<Injector>);

impl FaultStorage {
    /// Wraps `inner`, injecting the faults of `spec` with decisions drawn from `seed`. Injection
    /// starts on.
    pub fn new(inner: Arc<dyn Storage>, spec: FaultSpec, seed: u64) -> FaultStorage {
        FaultStorage(Arc::new(Injector {
            inner,
            spec,
            seed,
            enabled: AtomicBool::new(true),
            draws: AtomicU64::new(0),
            appended_bytes: AtomicU64::new(0),
            read_errors: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            short_writes: AtomicU64::new(0),
            sync_errors: AtomicU64::new(0),
            enospc: AtomicU64::new(0),
            last_failed_sync: std::sync::Mutex::new(None),
        }))
    }

    /// The file (or directory, for `sync_dir`) of the last sync that failed, if one did.
    pub fn last_failed_sync(&self) -> Option<std::path::PathBuf> {
        self.0
            .last_failed_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Faults injected so far, per kind.
    pub fn counts(&self) -> FaultCounts {
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FaultCounts {
            read_errors: c(&self.0.read_errors),
            write_errors: c(&self.0.write_errors),
            short_writes: c(&self.0.short_writes),
            sync_errors: c(&self.0.sync_errors),
            enospc: c(&self.0.enospc),
        }
    }

    /// Turns injection off (false) or on; off, every call passes straight through. The stress
    /// harness turns it off to verify after a reopen.
    pub fn set_enabled(&self, on: bool) {
        self.0.enabled.store(on, Ordering::Relaxed);
    }

    /// "The space came back": the ENOSPC byte count starts again from 0.
    pub fn reset_space(&self) {
        self.0.appended_bytes.store(0, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct FaultyWritable {
    injector: Arc<Injector>,
    path: PathBuf,
    inner: Box<dyn WritableFile>,
}

impl WritableFile for FaultyWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        match self.injector.append_fate(&self.path, data.len()) {
            AppendFate::Pass => self.inner.append(data),
            AppendFate::Fail(e) => Err(e),
            AppendFate::Short(half, e) => {
                self.inner.append(data.get(..half).unwrap_or_default())?;
                Err(e)
            }
        }
    }

    fn sync(&mut self) -> Result<()> {
        self.injector.check_sync(&self.path, "sync")?;
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[derive(Debug)]
struct FaultyRandom {
    injector: Arc<Injector>,
    inner: Arc<dyn RandomAccessFile>,
}

impl RandomAccessFile for FaultyRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.injector.check_read(
            self.inner.path(),
            &format!("a read of {} bytes at offset {offset}", buf.len()),
        )?;
        self.inner.read_at(offset, buf)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl FaultStorage {
    fn writable(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(FaultyWritable {
            injector: Arc::clone(&self.0),
            path: path.to_path_buf(),
            inner,
        })
    }
}

impl Storage for FaultStorage {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inner = self.0.inner.create(path)?;
        Ok(self.writable(path, inner))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inner = self.0.inner.open_append(path)?;
        Ok(self.writable(path, inner))
    }
    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        let inner = self.0.inner.open(path, mode)?;
        Ok(Arc::new(FaultyRandom {
            injector: Arc::clone(&self.0),
            inner,
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.0.check_read(path, "read_all")?;
        self.0.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0.inner.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.0.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.0.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.0.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.check_sync(dir, "sync_dir")?;
        self.0.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.0.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + Debug>> {
        self.0.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemStorage;

    fn dir() -> PathBuf {
        PathBuf::from("/db")
    }

    fn ok<T>(r: Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    /// A MemStorage with /db, and a FaultStorage of `spec` over it.
    fn setup(spec: FaultSpec, seed: u64) -> (MemStorage, FaultStorage) {
        let mem = MemStorage::new();
        ok(mem.create_dir_all(&dir()));
        let fault = FaultStorage::new(Arc::new(mem.clone()), spec, seed);
        (mem, fault)
    }

    fn spec(s: &str) -> FaultSpec {
        FaultSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn is_injected(e: &Error, kind: ErrorKind) -> bool {
        matches!(e, Error::Io { source, .. }
            if source.kind() == kind && source.to_string().starts_with("injected fault:"))
    }

    #[test]
    fn parse_reads_every_kind_and_display_reads_back() {
        let s = spec("read-eio=0.25, write-eio=1,short-write=0.5,sync-fail=0,enospc=64MiB");
        assert_eq!(
            s,
            FaultSpec {
                read_error_rate: 0.25,
                write_error_rate: 1.0,
                short_write_rate: 0.5,
                sync_error_rate: 0.0,
                enospc_after_bytes: Some(64 << 20),
            }
        );
        assert_eq!(spec("enospc=512KiB").enospc_after_bytes, Some(512 << 10));
        assert_eq!(spec("enospc=1000").enospc_after_bytes, Some(1000));
        assert_eq!(spec("enospc=2g").enospc_after_bytes, Some(2 << 30));
        for text in ["", "none", " none "] {
            assert!(spec(text).is_none(), "{text:?}");
        }
        assert!(!spec("enospc=0").is_none());
        assert_eq!(FaultSpec::default().to_string(), "none");
        let odd = FaultSpec {
            read_error_rate: 0.1 + 0.2,
            write_error_rate: 1e-9,
            short_write_rate: 1.0 / 3.0,
            sync_error_rate: 0.5,
            enospc_after_bytes: Some(u64::MAX),
        };
        for s in [
            odd,
            FaultSpec::default(),
            spec("sync-fail=1"),
            spec("enospc=0"),
        ] {
            assert_eq!(spec(&s.to_string()), s, "{s}");
        }
    }

    #[test]
    fn parse_names_the_bad_item_and_the_accepted_kinds() {
        for (text, bad) in [
            ("read-eio=1.5", "read-eio=1.5"),
            ("write-eio=-0.1", "write-eio=-0.1"),
            ("sync-fail=NaN", "sync-fail=NaN"),
            ("sync-fail=x", "sync-fail=x"),
            ("read-eio=0.1,bogus=1", "bogus=1"),
            ("enospc=12XB", "enospc=12XB"),
            ("enospc=99999999999GiB", "enospc=99999999999GiB"),
            ("enospc=", "enospc="),
            ("read-eio", "read-eio"),
            ("read-eio=0.1,,", "\"\""),
            ("read-eio=0.1,read-eio=0.2", "read-eio=0.2"),
        ] {
            let e = match FaultSpec::parse(text) {
                Ok(s) => panic!("{text:?} parsed as {s:?}"),
                Err(e) => e,
            };
            assert!(e.contains(bad), "{text:?}: {e}");
            assert!(
                e.contains("short-write=P") && e.contains("enospc=SIZE"),
                "{e}"
            );
        }
    }

    #[test]
    fn write_eio_writes_nothing_and_no_fault_fires_at_rate_zero() {
        let (mem, f) = setup(spec("write-eio=1"), 1);
        let mut file = ok(f.create(&dir().join("a")));
        for _ in 0..10 {
            let e = file
                .append(b"hello")
                .err()
                .unwrap_or_else(|| panic!("append passed"));
            assert!(is_injected(&e, ErrorKind::Other), "{e}");
            assert!(e.to_string().contains("/db/a"), "{e}");
        }
        assert_eq!(ok(mem.read_all(&dir().join("a"))), b"");
        assert_eq!(f.counts().write_errors, 10);
        assert_eq!(f.counts().total(), 10);

        let (mem, f) = setup(spec("write-eio=0,short-write=0,read-eio=0,sync-fail=0"), 1);
        let mut file = ok(f.create(&dir().join("a")));
        for _ in 0..100 {
            ok(file.append(b"x"));
            ok(file.sync());
        }
        ok(f.sync_dir(&dir()));
        assert_eq!(ok(f.read_all(&dir().join("a"))).len(), 100);
        let r = ok(f.open(&dir().join("a"), ReadMode::Buffered));
        let mut byte = [0u8; 1];
        for offset in 0..100 {
            ok(r.read_at(offset, &mut byte));
        }
        assert_eq!(mem.durable_len(&dir().join("a")), Some(100));
        assert_eq!(f.counts(), FaultCounts::default());
    }

    #[test]
    fn short_write_leaves_the_first_half() {
        let (mem, f) = setup(spec("short-write=1"), 2);
        let mut file = ok(f.create(&dir().join("a")));
        let e = file
            .append(b"0123456789")
            .err()
            .unwrap_or_else(|| panic!("passed"));
        assert!(is_injected(&e, ErrorKind::Other), "{e}");
        assert!(file.append(b"abc").is_err());
        assert_eq!(ok(mem.read_all(&dir().join("a"))), b"01234a");
        assert_eq!(file.len(), 6);
        assert_eq!(f.counts().short_writes, 2);
    }

    #[test]
    fn failed_sync_makes_nothing_durable() {
        let (mem, f) = setup(spec("sync-fail=1"), 3);
        let path = dir().join("a");
        let mut file = ok(f.create(&path));
        ok(file.append(b"bytes"));
        let e = file.sync().err().unwrap_or_else(|| panic!("sync passed"));
        assert!(is_injected(&e, ErrorKind::Other), "{e}");
        assert_eq!(mem.durable_len(&path), Some(0));
        let e = f
            .sync_dir(&dir())
            .err()
            .unwrap_or_else(|| panic!("sync_dir passed"));
        assert!(e.to_string().contains("injected fault:"), "{e}");
        // The directory entry was not made durable: a crash takes the file away.
        mem.crash(0);
        assert!(!mem.exists(&path));
        assert_eq!(f.counts().sync_errors, 2);
    }

    #[test]
    fn read_eio_fails_reads_and_reads_nothing() {
        let (mem, f) = setup(spec("read-eio=1"), 4);
        let path = dir().join("a");
        let mut w = ok(mem.create(&path));
        ok(w.append(b"data"));
        let r = ok(f.open(&path, ReadMode::Buffered));
        let mut buf = [7u8; 4];
        let e = r
            .read_at(0, &mut buf)
            .err()
            .unwrap_or_else(|| panic!("read passed"));
        assert!(is_injected(&e, ErrorKind::Other), "{e}");
        assert_eq!(buf, [7; 4]);
        assert!(f.read_all(&path).is_err());
        assert_eq!(mem.random_reads(), 0);
        assert_eq!(f.counts().read_errors, 2);
    }

    #[test]
    fn enospc_fires_at_the_budget_and_reset_space_lets_appends_go_on() {
        let (mem, f) = setup(spec("enospc=10"), 5);
        let path = dir().join("a");
        let mut file = ok(f.create(&path));
        ok(file.append(b"0123"));
        ok(file.append(b"456789"));
        // Exactly at the budget: the next byte crosses it and writes nothing.
        let e = file
            .append(b"x")
            .err()
            .unwrap_or_else(|| panic!("append passed"));
        assert!(is_injected(&e, ErrorKind::StorageFull), "{e}");
        assert!(e.to_string().contains("ENOSPC"), "{e}");
        assert_eq!(ok(mem.read_all(&path)), b"0123456789");
        // Appends through other files share the budget.
        let mut other = ok(f.create(&dir().join("b")));
        assert!(other.append(b"y").is_err());
        assert_eq!(f.counts().enospc, 2);
        f.reset_space();
        ok(file.append(b"abcdefgh"));
        let e = file
            .append(b"ijk")
            .err()
            .unwrap_or_else(|| panic!("append passed"));
        assert!(is_injected(&e, ErrorKind::StorageFull), "{e}");
        ok(file.append(b"ij"));
        assert_eq!(ok(mem.read_all(&path)), b"0123456789abcdefghij");
    }

    #[test]
    fn disabled_injection_passes_straight_through() {
        let (mem, f) = setup(spec("read-eio=1,write-eio=1,sync-fail=1,enospc=0"), 6);
        let path = dir().join("a");
        f.set_enabled(false);
        let mut file = ok(f.create(&path));
        ok(file.append(b"abc"));
        ok(file.sync());
        ok(f.sync_dir(&dir()));
        assert_eq!(mem.durable_len(&path), Some(3));
        let mut buf = [0u8; 3];
        ok(ok(f.open(&path, ReadMode::Buffered)).read_at(0, &mut buf));
        assert_eq!(&buf, b"abc");
        assert_eq!(ok(f.read_all(&path)), b"abc");
        assert_eq!(f.counts(), FaultCounts::default());
        // A clone shares the switch.
        f.clone().set_enabled(true);
        assert!(file.append(b"d").is_err());
        assert!(f.read_all(&path).is_err());
    }

    /// Which of 200 appends fail, at rate 0.3 of write errors and 0.2 of short writes.
    fn failures(seed: u64) -> Vec<(usize, u64)> {
        let (_mem, f) = setup(spec("write-eio=0.3,short-write=0.2"), seed);
        let mut file = ok(f.create(&dir().join("a")));
        (0..200)
            .filter_map(|i| {
                let before = file.len();
                file.append(&[1u8; 8])
                    .err()
                    .map(|_| (i, file.len() - before))
            })
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_failures() {
        let a = failures(42);
        assert_eq!(a, failures(42));
        assert_ne!(a, failures(43));
        let short = a.iter().filter(|(_, written)| *written == 4).count();
        let whole = a.iter().filter(|(_, written)| *written == 0).count();
        // 60 and 40 expected; far outside would mean the draw is not uniform.
        assert!((30..=90).contains(&whole), "{whole} write errors of 200");
        assert!((15..=70).contains(&short), "{short} short writes of 200");
        assert_eq!(short + whole, a.len());
    }
}
