//! The page device: a file of fixed-size slots read and written whole, by position.
//!
//! [`PageDevice`] is the only way the engine touches storage (one seam for every I/O, so faults and crashes can be injected there). [`FileDevice`] opens the
//! data file with `O_DIRECT` unless told to use the page cache; [`MemDevice`] keeps slots in memory
//! and simulates a crash: every write since the last `sync` is, at [`MemDevice::crash`], kept,
//! dropped or torn at a 512-byte boundary (seeded), and the device then reads what survived.
//!
//! Callers: the page file (`pagefile.rs`), from any thread; every method takes `&self`.
//!
//! Invariants:
//! 1. A slot is `page_size` bytes; `read`/`write` move exactly one slot.
//! 2. Counters only grow; they count calls that reached the medium, successful or not.
//! 3. `FileDevice` hands the kernel only buffers aligned to 4096 bytes whose length is the page
//!    size (a power of two, 4096..=65536), so `O_DIRECT` accepts them on any common file system.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::{Rng, SeedableRng};

use crate::error::{Error, Result};

/// I/O counters of a device (benchmarks report "device reads per lookup" from these).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoCounters {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub syncs: u64,
}

/// Reads are counted in per-thread shards: every buffer-pool miss counts one, from any reader.
#[derive(Debug, Default)]
struct Counters {
    reads: lidb_sync::Counter,
    writes: AtomicU64,
    bytes_read: lidb_sync::Counter,
    bytes_written: AtomicU64,
    syncs: AtomicU64,
}

impl Counters {
    fn read(&self, n: usize) {
        self.reads.incr();
        self.bytes_read.add(n as u64);
    }
    fn write(&self, n: usize) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
    }
    fn snapshot(&self) -> IoCounters {
        IoCounters {
            reads: self.reads.get(),
            writes: self.writes.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.get(),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
        }
    }
}

/// Storage of fixed-size slots. Reads of a slot past the end fail; writes past the end grow.
pub trait PageDevice: Send + Sync + fmt::Debug {
    /// The slot size in bytes.
    fn page_size(&self) -> usize;
    /// Reads slot `slot` into `buf` (`buf.len() == page_size`).
    fn read(&self, slot: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes `buf` to slot `slot`, growing the device if needed.
    fn write(&self, slot: u64, buf: &[u8]) -> Result<()>;
    /// Makes every write so far durable.
    fn sync(&self) -> Result<()>;
    /// Number of slots the device holds.
    fn slot_count(&self) -> u64;
    /// The device's I/O counters.
    fn counters(&self) -> IoCounters;
    /// The name used in errors (the file path, or `mem:` for memory).
    fn name(&self) -> &Path;
}

/// Checks a page size: a power of two in 4096..=65536.
pub fn check_page_size(page_size: usize) -> Result<()> {
    if page_size.is_power_of_two() && (4096..=65536).contains(&page_size) {
        Ok(())
    } else {
        Err(Error::InvalidOption(format!(
            "page size {page_size} must be a power of two in 4096..=65536"
        )))
    }
}

/// One 4096-byte aligned block; a page buffer is a run of them.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
struct Block([u8; 4096]);

/// A heap buffer aligned to 4096 bytes, viewed as bytes (no unsafe: bytemuck casts).
struct AlignedBuf(Vec<Block>);

impl AlignedBuf {
    /// `len` bytes: whole blocks, as every page size `check_page_size` admits is.
    fn new(len: usize) -> Self {
        debug_assert!(len.is_multiple_of(4096), "page sizes are whole blocks");
        AlignedBuf(vec![Block([0; 4096]); len.div_ceil(4096)])
    }
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.0)
    }
}

/// The data file, read and written with `O_DIRECT` (or through the page cache when `direct` is
/// false).
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    page_size: usize,
    direct: bool,
    slots: AtomicU64,
    counters: Counters,
    /// Whether an I/O has succeeded yet (EINVAL before that means O_DIRECT is refused).
    proven: AtomicBool,
}

impl FileDevice {
    /// Opens (creating if `create`) `path` with slots of `page_size` bytes.
    pub fn open(path: &Path, page_size: usize, direct: bool, create: bool) -> Result<Self> {
        check_page_size(page_size)?;
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(create);
        if direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let existed = path.exists();
        let file = opts.open(path).map_err(|e| direct_error(path, direct, e))?;
        if create && !existed {
            // The new directory entry must survive a crash like the file's contents.
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            let dir = dir.unwrap_or_else(|| Path::new("."));
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|source| Error::Io {
                    file: dir.to_path_buf(),
                    source,
                })?;
        }
        let len = file
            .metadata()
            .map_err(|source| Error::Io {
                file: path.to_path_buf(),
                source,
            })?
            .len();
        Ok(FileDevice {
            file,
            path: path.to_path_buf(),
            page_size,
            direct,
            slots: AtomicU64::new(len / page_size as u64),
            counters: Counters::default(),
            proven: AtomicBool::new(false),
        })
    }

    /// Whether the file is open with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    fn fail(&self, e: std::io::Error) -> Error {
        if self.proven.load(Ordering::Relaxed) {
            Error::Io {
                file: self.path.clone(),
                source: e,
            }
        } else {
            direct_error(&self.path, self.direct, e)
        }
    }
}

/// The error of an open or first I/O: EINVAL under O_DIRECT means the file system refuses it.
fn direct_error(path: &Path, direct: bool, e: std::io::Error) -> Error {
    if direct && e.raw_os_error() == Some(libc::EINVAL) {
        Error::Io {
            file: path.to_path_buf(),
            source: std::io::Error::new(
                e.kind(),
                format!(
                    "the file system refuses O_DIRECT ({e}); open with direct I/O off \
                     (Options::direct_io = false) to use the page cache"
                ),
            ),
        }
    } else {
        Error::Io {
            file: path.to_path_buf(),
            source: e,
        }
    }
}

impl PageDevice for FileDevice {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn read(&self, slot: u64, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len(), self.page_size);
        let mut aligned = AlignedBuf::new(self.page_size);
        self.counters.read(self.page_size);
        self.file
            .read_exact_at(aligned.bytes_mut(), slot * self.page_size as u64)
            .map_err(|e| self.fail(e))?;
        self.proven.store(true, Ordering::Relaxed);
        buf.copy_from_slice(aligned.bytes());
        Ok(())
    }

    fn write(&self, slot: u64, buf: &[u8]) -> Result<()> {
        debug_assert_eq!(buf.len(), self.page_size);
        let mut aligned = AlignedBuf::new(self.page_size);
        aligned.bytes_mut().copy_from_slice(buf);
        self.counters.write(self.page_size);
        self.file
            .write_all_at(aligned.bytes(), slot * self.page_size as u64)
            .map_err(|e| self.fail(e))?;
        self.proven.store(true, Ordering::Relaxed);
        self.slots.fetch_max(slot + 1, Ordering::Relaxed);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        self.file.sync_data().map_err(|source| Error::Io {
            file: self.path.clone(),
            source,
        })
    }

    fn slot_count(&self) -> u64 {
        self.slots.load(Ordering::Relaxed)
    }

    fn counters(&self) -> IoCounters {
        self.counters.snapshot()
    }

    fn name(&self) -> &Path {
        &self.path
    }
}

/// What a [`MemDevice`] holds: what reads see, and (with history) the durable slots and the
/// writes since the last sync, in order.
#[derive(Debug, Default, Clone)]
struct MemState {
    current: HashMap<u64, Vec<u8>>,
    durable: HashMap<u64, Vec<u8>>,
    pending: Vec<(u64, Vec<u8>)>,
    history: bool,
    slots: u64,
    /// Writes accepted so far; with `fail_after`, the write numbered `fail_after` and later fail.
    writes_seen: u64,
    fail_after: Option<u64>,
}

/// Slots in memory, with crash simulation (for tests) unless made `volatile`.
#[derive(Debug)]
pub struct MemDevice {
    page_size: usize,
    state: Mutex<MemState>,
    counters: Counters,
    name: PathBuf,
}

impl MemDevice {
    /// A device that remembers what was synced, for [`MemDevice::crash`].
    pub fn new(page_size: usize) -> Result<Self> {
        Self::build(page_size, true)
    }

    /// A device without crash history (benchmarks in memory): nothing is kept twice.
    pub fn volatile(page_size: usize) -> Result<Self> {
        Self::build(page_size, false)
    }

    fn build(page_size: usize, history: bool) -> Result<Self> {
        check_page_size(page_size)?;
        Ok(Self::from_state(
            page_size,
            MemState {
                history,
                ..MemState::default()
            },
        ))
    }

    fn from_state(page_size: usize, state: MemState) -> Self {
        MemDevice {
            page_size,
            state: Mutex::new(state),
            counters: Counters::default(),
            name: PathBuf::from("mem:"),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes every write from now on, after `n` more successful ones, fail with an I/O error
    /// (the moment of a simulated crash); `None` lifts it.
    pub fn fail_after_writes(&self, n: Option<u64>) {
        let mut st = self.state();
        st.fail_after = n.map(|n| st.writes_seen + n);
    }

    /// Simulates a power cut: each write since the last sync is kept, dropped or torn at a
    /// 512-byte boundary (its first part new, the rest as before), chosen by `seed`. Returns a
    /// new device holding what survived; `self` is left as it was. A volatile device keeps all.
    pub fn crash(&self, seed: u64) -> MemDevice {
        let st = self.state().clone();
        if !st.history {
            return self.snapshot();
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut slots = st.durable;
        for (slot, data) in st.pending {
            match rng.gen_range(0..3u32) {
                0 => {
                    slots.insert(slot, data);
                }
                1 => {}
                _ => {
                    let sectors = self.page_size / 512;
                    let cut = rng.gen_range(1..sectors) * 512;
                    let old = slots
                        .get(&slot)
                        .cloned()
                        .unwrap_or_else(|| vec![0; self.page_size]);
                    let mut torn = data;
                    if let (Some(dst), Some(src)) = (torn.get_mut(cut..), old.get(cut..)) {
                        dst.copy_from_slice(src);
                    }
                    slots.insert(slot, torn);
                }
            }
        }
        Self::from_state(
            self.page_size,
            MemState {
                current: slots.clone(),
                slots: slots.keys().max().map_or(0, |m| m + 1),
                durable: slots,
                history: true,
                ..MemState::default()
            },
        )
    }

    /// Flips the bits of `mask` in byte `offset` of slot `slot` as reads see it (and in its
    /// durable or pending copy): a corrupt medium, for tests.
    pub fn corrupt(&self, slot: u64, offset: usize, mask: u8) {
        let mut st = self.state();
        if let Some(b) = st.current.get_mut(&slot).and_then(|d| d.get_mut(offset)) {
            *b ^= mask;
        }
        let pending = st
            .pending
            .iter_mut()
            .rev()
            .find(|(s, _)| *s == slot)
            .map(|(_, d)| d);
        let target = match pending {
            Some(d) => Some(d),
            None => st.durable.get_mut(&slot),
        };
        if let Some(b) = target.and_then(|d| d.get_mut(offset)) {
            *b ^= mask;
        }
    }

    /// A copy of the device as it is now, every write durable (a clean shutdown).
    pub fn snapshot(&self) -> MemDevice {
        let st = self.state();
        Self::from_state(
            self.page_size,
            MemState {
                current: st.current.clone(),
                durable: if st.history {
                    st.current.clone()
                } else {
                    HashMap::new()
                },
                history: st.history,
                slots: st.slots,
                ..MemState::default()
            },
        )
    }

    fn stopped(&self, st: &MemState) -> Result<()> {
        if st.fail_after.is_some_and(|n| st.writes_seen >= n) {
            return Err(Error::Io {
                file: self.name.clone(),
                source: std::io::Error::other("simulated crash: the device stopped"),
            });
        }
        Ok(())
    }
}

impl PageDevice for MemDevice {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn read(&self, slot: u64, buf: &mut [u8]) -> Result<()> {
        self.counters.read(buf.len());
        let st = self.state();
        match st.current.get(&slot) {
            Some(d) if d.len() == buf.len() => {
                buf.copy_from_slice(d);
                Ok(())
            }
            _ => Err(Error::Io {
                file: self.name.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("slot {slot} was never written"),
                ),
            }),
        }
    }

    fn write(&self, slot: u64, buf: &[u8]) -> Result<()> {
        self.counters.write(buf.len());
        let mut st = self.state();
        self.stopped(&st)?;
        st.writes_seen += 1;
        st.slots = st.slots.max(slot + 1);
        st.current.insert(slot, buf.to_vec());
        if st.history {
            st.pending.push((slot, buf.to_vec()));
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state();
        self.stopped(&st)?;
        let pending = std::mem::take(&mut st.pending);
        for (slot, data) in pending {
            st.durable.insert(slot, data);
        }
        Ok(())
    }

    fn slot_count(&self) -> u64 {
        self.state().slots
    }

    fn counters(&self) -> IoCounters {
        self.counters.snapshot()
    }

    fn name(&self) -> &Path {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_keeps_synced_and_mixes_pending() -> Result<()> {
        let dev = MemDevice::new(4096)?;
        dev.write(0, &[1; 4096])?;
        dev.sync()?;
        dev.write(0, &[2; 4096])?;
        dev.write(1, &[3; 4096])?;
        let mut seen_torn = false;
        for seed in 0..64 {
            let after = dev.crash(seed);
            let mut buf = vec![0; 4096];
            after.read(0, &mut buf)?;
            let first = buf.first().copied().unwrap_or(0);
            let last = buf.last().copied().unwrap_or(0);
            assert!(first == 1 || first == 2, "seed {seed}");
            assert!(last == 1 || last == 2, "seed {seed}");
            seen_torn |= first == 2 && last == 1;
        }
        assert!(seen_torn, "some seed tears a page");
        Ok(())
    }

    #[test]
    fn fail_after_stops_writes() -> Result<()> {
        let dev = MemDevice::new(4096)?;
        dev.fail_after_writes(Some(1));
        dev.write(0, &[1; 4096])?;
        assert!(dev.write(1, &[1; 4096]).is_err());
        Ok(())
    }
}
