//! The buffer manager: a fixed array of frames (pool bytes / page size), a page table of the
//! resident pages, the cooling FIFO, loads with one read per page however many threads miss it,
//! and write-back through the shadow-slot page file.
//!
//! The hot path (a tree walk over swizzled swips) touches none of the mutexes here: it reads
//! frames by index. The page table is consulted on a miss, when linking a cooling or unlinked
//! page, and by the learned path's load by page id. Cooling itself needs the tree (to find a
//! node's parent), so it lives in `tree/cooling.rs` behind [`Cooler`].
//!
//! Callers: the tree and the provider thread, any thread.
//!
//! Lock order: frame latches (top-down, left to right) before any mutex of this module and the
//! page file's table lock; those mutexes are leaves (never held while waiting for a latch or
//! doing I/O). Eviction only `try_lock`s latches, so it never waits on a latch at all.
//!
//! Invariants: see `frame.rs`; besides, a frame is on the free list iff its state is `Free`, and
//! a page id is in `resident.table` iff a frame holds it in state Hot, Cooling or Unlinked.

pub mod frame;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

pub use frame::{Frame, FrameState, SWIZZLED, Swip};

use crate::error::{Error, Result};
use crate::node;
use crate::page::PageKind;
use crate::pagefile::PageFile;

/// The fewest frames a pool has (a few tree levels, a split's new pages, room to evict).
pub const MIN_FRAMES: usize = 16;

/// Counters of the pool (monotonic; read with [`Pool::stats`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Swizzled swips followed to a resident frame (root slot included), by every walk.
    pub hits: u64,
    /// Pages read from the device.
    pub misses: u64,
    /// Pages written back (eviction and checkpoint).
    pub write_backs: u64,
    pub evictions: u64,
    /// Frames moved from HOT to COOLING.
    pub cooled: u64,
    /// Cooling or unlinked pages linked again by a tree walk.
    pub cooling_rehits: u64,
    /// Pages merged away (their frames freed without write-back).
    pub pages_freed: u64,
    /// Frames in use now.
    pub frames_used: u64,
    pub frames: u64,
}

#[derive(Debug, Default)]
struct Counters {
    /// Bumped by every walk at every level: per-thread shards, so walks write no shared line.
    hits: lidb_sync::Counter,
    misses: AtomicU64,
    write_backs: AtomicU64,
    evictions: AtomicU64,
    cooled: AtomicU64,
    cooling_rehits: AtomicU64,
    pages_freed: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug, Default)]
struct Resident {
    table: HashMap<u64, u32>,
    /// Pages being read by one thread; the others wait on `loaded`.
    in_flight: HashSet<u64>,
}

/// Moves HOT frames to COOLING (implemented by the tree, which can find parents).
pub trait Cooler {
    /// Tries to cool up to `n` frames; returns how many it cooled.
    fn cool(&self, n: usize) -> usize;
}

/// The pool of frames.
#[derive(Debug)]
pub struct Pool {
    frames: Box<[Frame]>,
    page_size: usize,
    file: Arc<PageFile>,
    free: Mutex<Vec<u32>>,
    /// Frames taken out of use by [`Pool::set_usable`] (state Free, in neither `free` nor the
    /// page table); their memory stays allocated, since optimistic readers may still read it.
    retired: Mutex<Vec<u32>>,
    resident: Mutex<Resident>,
    loaded: Condvar,
    fifo: Mutex<VecDeque<(u32, u64)>>,
    counters: Counters,
    /// The share of the usable frames the provider keeps cooling.
    cooling_share: f64,
    /// That share in frames (changed by [`Pool::set_usable`]).
    cooling_target: AtomicUsize,
    /// Frames COOLING or UNLINKED now (the FIFO may also hold stale entries of frames linked
    /// again since). Signed: a link may be counted before the push it follows is.
    unswizzled: std::sync::atomic::AtomicI64,
}

/// The frames to keep cooling out of `frames` (at least one).
fn cooling_frames(frames: usize, share: f64) -> usize {
    ((frames as f64 * share).ceil() as usize).max(1)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Pool {
    /// A pool of `frames` frames over `file`, keeping `cooling_share` of them cooling.
    pub fn new(file: Arc<PageFile>, frames: usize, cooling_share: f64) -> Pool {
        let page_size = file.page_size();
        let frames = frames.max(MIN_FRAMES);
        Pool {
            frames: (0..frames).map(|_| Frame::new(page_size)).collect(),
            page_size,
            file,
            free: Mutex::new((0..frames as u32).rev().collect()),
            retired: Mutex::new(Vec::new()),
            resident: Mutex::new(Resident::default()),
            loaded: Condvar::new(),
            fifo: Mutex::new(VecDeque::new()),
            counters: Counters::default(),
            cooling_share,
            cooling_target: AtomicUsize::new(cooling_frames(frames, cooling_share)),
            unswizzled: std::sync::atomic::AtomicI64::new(0),
        }
    }

    pub fn file(&self) -> &Arc<PageFile> {
        &self.file
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Frame `i`. An index read optimistically may be torn garbage: it is reduced modulo the
    /// frame count (the reader's validation then fails), so this never panics.
    #[expect(
        clippy::indexing_slicing,
        reason = "the index is reduced modulo the frame count, which `new` keeps non-zero"
    )]
    pub fn frame(&self, i: u32) -> &Frame {
        &self.frames[i as usize % self.frames.len()]
    }

    /// Counts a swizzled child followed (the hot path: a sharded counter).
    pub fn count_hit(&self) {
        self.counters.hits.incr();
    }
    /// Counts a cooling or unlinked frame made HOT again (the caller linked it).
    pub fn count_rehit(&self) {
        bump(&self.counters.cooling_rehits);
        self.unswizzled.fetch_sub(1, Ordering::Relaxed);
    }
    pub fn count_cooled(&self) {
        bump(&self.counters.cooled);
    }

    pub fn stats(&self) -> PoolStats {
        let c = &self.counters;
        let free = lock(&self.free).len() as u64;
        let retired = lock(&self.retired).len() as u64;
        PoolStats {
            hits: c.hits.get(),
            misses: c.misses.load(Ordering::Relaxed),
            write_backs: c.write_backs.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            cooled: c.cooled.load(Ordering::Relaxed),
            cooling_rehits: c.cooling_rehits.load(Ordering::Relaxed),
            pages_freed: c.pages_freed.load(Ordering::Relaxed),
            frames_used: (self.frames.len() as u64).saturating_sub(free + retired),
            frames: self.frames.len() as u64 - retired,
        }
    }

    /// How many frames are cooling (or unlinked) and how many the provider aims for.
    pub fn cooling_level(&self) -> (usize, usize) {
        let n = self.unswizzled.load(Ordering::Relaxed).max(0) as usize;
        (n, self.cooling_target())
    }

    pub fn free_count(&self) -> usize {
        lock(&self.free).len()
    }

    fn cooling_target(&self) -> usize {
        self.cooling_target.load(Ordering::Relaxed)
    }

    /// Lets the pool use `frames` of its frames (at least [`MIN_FRAMES`], at most those it was
    /// made with), so a memory budget can shrink it once the tree's resident parts are known:
    /// shrinking takes free frames out of use, evicting (and cooling through `cooler`) until
    /// enough are free; growing puts retired frames back. Returns the frames usable now, which
    /// can stay above `frames` when nothing more could be evicted (every frame latched or dirty
    /// on a failing device). Any thread; concurrent operations go on.
    pub fn set_usable(&self, frames: usize, cooler: &dyn Cooler) -> Result<usize> {
        let target = frames.clamp(MIN_FRAMES, self.frames.len());
        self.cooling_target.store(
            cooling_frames(target, self.cooling_share),
            Ordering::Relaxed,
        );
        let usable = |retired: usize| self.frames.len() - retired;
        {
            let mut retired = lock(&self.retired);
            while usable(retired.len()) < target {
                let Some(f) = retired.pop() else { break };
                lock(&self.free).push(f);
            }
        }
        let mut idle = 0;
        loop {
            let mut retired = lock(&self.retired);
            if usable(retired.len()) <= target {
                return Ok(usable(retired.len()));
            }
            if let Some(f) = lock(&self.free).pop() {
                retired.push(f);
                continue;
            }
            drop(retired);
            if self.evict_one()? {
                idle = 0;
            } else if cooler.cool(self.cooling_target()) == 0 {
                idle += 1;
                if idle > 1000 {
                    return Ok(usable(lock(&self.retired).len()));
                }
                std::thread::yield_now();
            }
        }
    }

    /// The frame holding `pid`, if resident.
    pub fn lookup(&self, pid: u64) -> Option<u32> {
        lock(&self.resident).table.get(&pid).copied()
    }

    /// Records a frame the caller just filled with a new page (state Hot, in the page table).
    pub fn publish_new(&self, pid: u64, f: u32) {
        lock(&self.resident).table.insert(pid, f);
    }

    /// Appends a frame just made COOLING to the FIFO (the caller holds its latch).
    pub fn push_cooling(&self, f: u32, pid: u64) {
        self.unswizzled.fetch_add(1, Ordering::Relaxed);
        lock(&self.fifo).push_front((f, pid));
    }

    /// A free frame in state `Reserved`, evicting (and asking `cooler` to cool) when none is
    /// free. Eviction and cooling only `try_lock` latches, so a caller holding latches cannot
    /// deadlock here, but the frames it holds cannot be freed.
    pub fn alloc(&self, cooler: &dyn Cooler) -> Result<u32> {
        // Frames held by other threads free up soon; give up only after a long while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The last failed write-back: every evictable frame was dirty and the page file refused
        // it. Cooling more frames may find clean ones; when none is left to cool, it is the error.
        let mut write_back_error = None;
        for attempt in 0u64.. {
            if attempt > 1000 && std::time::Instant::now() > deadline {
                break;
            }
            if let Some(f) = lock(&self.free).pop() {
                self.frame(f)
                    .set_meta(u64::MAX, FrameState::Reserved, false);
                return Ok(f);
            }
            let evicted = self.evict_one().unwrap_or_else(|e| {
                write_back_error = Some(e);
                false
            });
            if !evicted {
                let cooled = cooler.cool(self.cooling_target());
                if cooled == 0 && attempt > 100 {
                    if let Some(e) = write_back_error {
                        return Err(e);
                    }
                    std::thread::yield_now();
                }
            }
        }
        if let Some(e) = write_back_error {
            return Err(e);
        }
        Err(Error::InvalidOption(format!(
            "buffer pool of {} frames is too small: no frame could be freed (every frame is \
             latched or an inner node on the path); give it more memory",
            self.frames.len()
        )))
    }

    /// Returns a reserved frame unused (a restart after allocation).
    pub fn release_reserved(&self, f: u32) {
        self.frame(f).set_meta(u64::MAX, FrameState::Free, false);
        lock(&self.free).push(f);
    }

    /// Frees a frame whose page was merged away (the caller holds its latch and has unlinked
    /// it from its parent).
    pub fn discard(&self, f: u32) {
        let frame = self.frame(f);
        lock(&self.resident).table.remove(&frame.pid());
        frame.set_meta(u64::MAX, FrameState::Free, false);
        lock(&self.free).push(f);
        bump(&self.counters.pages_freed);
    }

    /// Evicts the FIFO's oldest evictable frame (writing it back if dirty). Returns false when
    /// the FIFO holds nothing evictable now. A dirty frame whose write-back fails (a full disk)
    /// stays resident and dirty, its newest contents kept, and goes to the FIFO's young end
    /// while the search goes on for a clean frame, so reads go on after the page file stops
    /// taking writes; the write-back's error is returned only when no frame could be evicted.
    pub fn evict_one(&self) -> Result<bool> {
        let tries = lock(&self.fifo).len();
        let mut failed = None;
        for _ in 0..tries {
            let Some((f, pid)) = lock(&self.fifo).pop_back() else {
                return Ok(false);
            };
            let frame = self.frame(f);
            let Some(guard) = frame.latch.try_lock() else {
                lock(&self.fifo).push_front((f, pid));
                continue;
            };
            let state = frame.state();
            if frame.pid() != pid || !matches!(state, FrameState::Cooling | FrameState::Unlinked) {
                continue; // relinked or reused since it was queued: a stale entry
            }
            if frame.is_dirty()
                && let Err(e) = self.write_back(f)
            {
                lock(&self.fifo).push_front((f, pid));
                failed.get_or_insert(e);
                continue;
            }
            lock(&self.resident).table.remove(&pid);
            frame.set_meta(u64::MAX, FrameState::Free, false);
            self.unswizzled.fetch_sub(1, Ordering::Relaxed);
            drop(guard);
            lock(&self.free).push(f);
            bump(&self.counters.evictions);
            return Ok(true);
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(false),
        }
    }

    /// Writes frame `f`'s page back through the page file and clears its dirty flag. The caller
    /// holds the frame's latch. Swizzled child words go out as page ids.
    pub fn write_back(&self, f: u32) -> Result<()> {
        let frame = self.frame(f);
        let mut buf = Vec::with_capacity(self.page_size);
        frame.copy_out(&mut buf);
        if node::kind(buf.as_slice()) == Some(PageKind::Inner) {
            for i in 0..=node::count(buf.as_slice()) {
                if let Swip::Frame(c) = Swip::decode(node::child(buf.as_slice(), i)) {
                    node::set_child(&mut buf, i, self.frame(c).pid());
                }
            }
        }
        self.file.write_page(frame.pid(), &mut buf)?;
        frame.set_dirty(false);
        bump(&self.counters.write_backs);
        Ok(())
    }

    /// The frame holding page `pid`, reading it into an `Unlinked` frame if it is not
    /// resident. Concurrent callers for one pid wait for one read. `Ok(None)`: no such page.
    /// The caller holds no latch (a load may wait and evict).
    pub fn load(&self, pid: u64, cooler: &dyn Cooler) -> Result<Option<u32>> {
        {
            let mut r = lock(&self.resident);
            loop {
                if let Some(f) = r.table.get(&pid) {
                    return Ok(Some(*f));
                }
                if r.in_flight.insert(pid) {
                    break;
                }
                r = self
                    .loaded
                    .wait(r)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        let result = self.read_into_frame(pid, cooler);
        let mut r = lock(&self.resident);
        r.in_flight.remove(&pid);
        if let Ok(Some(f)) = result {
            r.table.insert(pid, f);
            drop(r);
            self.push_cooling(f, pid);
        } else {
            drop(r);
        }
        self.loaded.notify_all();
        result
    }

    fn read_into_frame(&self, pid: u64, cooler: &dyn Cooler) -> Result<Option<u32>> {
        let f = self.alloc(cooler)?;
        let mut buf = vec![0u8; self.page_size];
        match self.file.read_page(pid, &mut buf) {
            Ok(Some(_)) => {}
            Ok(None) => {
                self.release_reserved(f);
                return Ok(None);
            }
            Err(e) => {
                self.release_reserved(f);
                return Err(e);
            }
        }
        bump(&self.counters.misses);
        let frame = self.frame(f);
        let _g = frame.latch.lock();
        frame.store(&buf);
        frame.set_meta(pid, FrameState::Unlinked, false);
        Ok(Some(f))
    }

    /// Frames that are dirty now (for a checkpoint).
    pub fn dirty_frames(&self) -> Vec<u32> {
        (0..self.frames.len() as u32)
            .filter(|f| self.frame(*f).is_dirty())
            .collect()
    }
}
