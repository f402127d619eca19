//! The hybrid latch: a version word plus a mutex (LeanStore's `HybridLatch`, from "LeanStore:
//! In-Memory Data Management beyond Main Memory" and "Scalable and Robust Latches for Database
//! Systems", in safe Rust). One type serves FINEdex's level bins and the B+-tree's frames.
//!
//! Readers take nothing and write nothing: [`HybridLatch::optimistic`] gives the version, they
//! read the protected atomic words with `Relaxed` loads, and keep what they read only if
//! [`HybridLatch::validate`] says the version is unchanged. A failed validation is a restart the
//! caller loops on (a `bool`/`Option`, never a jump). Writers take the mutex and make the version
//! odd for the length of their write; dropping the [`ExclusiveGuard`] publishes.
//!
//! Callers: any thread.
//!
//! Invariants:
//! 1. Only the holder of `mutex` stores to `version` or to the data it protects.
//! 2. `version` is odd exactly while a writer holds the latch.
//! 3. The counter part of the version never goes back: every write section adds 2, so a reader
//!    that read an older state fails its validation (a frame reused for another page included).
//! 4. [`RETIRED`] is set once, by the writer that hands the protected data over to a successor,
//!    and never cleared: a retired latch's data is stale.
//!
//! Orderings (the classic seqlock with fences, as in Boehm's "Can seqlocks get along with
//! programming language memory models?"):
//! - writer: `version = odd` (Relaxed), `fence(Release)`, data stores (Relaxed), `version = even`
//!   (Release). The fence orders the odd store before every data store.
//! - reader: `v1 = version` (Acquire), data loads (Relaxed), `fence(Acquire)`, `v2 = version`
//!   (Relaxed). If a data load saw any store of a writer, the acquire fence synchronises with
//!   that writer's release fence, so `v2` sees at least its odd version and `v1 != v2`; if `v1`
//!   saw a writer's final even store, the Acquire load makes all its data stores visible.
//!
//! `tests/loom.rs` checks these orderings under loom's memory model (build with `--cfg loom`),
//! and fails when the reader's fence is removed.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};
use std::sync::{PoisonError, TryLockError};

/// The version bit that marks a retired latch (invariant 4).
pub const RETIRED: u64 = 1 << 63;

/// A version word plus a writers' mutex.
#[derive(Debug, Default)]
pub struct HybridLatch {
    version: AtomicU64,
    mutex: Mutex<()>,
}

impl HybridLatch {
    pub fn new() -> HybridLatch {
        HybridLatch::default()
    }

    /// Starts an optimistic read: the version to validate against, or `None` while a writer
    /// holds the latch (the caller backs off and restarts).
    #[inline]
    pub fn optimistic(&self) -> Option<u64> {
        let v = self.version.load(Ordering::Acquire);
        (v & 1 == 0).then_some(v)
    }

    /// Whether everything read since `optimistic` returned `v` is one consistent state.
    #[inline]
    pub fn validate(&self, v: u64) -> bool {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == v
    }

    /// The version word as it is (Acquire), odd or not: the head word of a remote copy.
    #[inline]
    pub fn raw_version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The version word (Relaxed), read inside another latch's read window.
    #[inline]
    pub fn raw_version_relaxed(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// The tail word of a remote copy: an Acquire fence, then the version (as `validate`).
    #[inline]
    pub fn raw_version_after(&self) -> u64 {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed)
    }

    fn enter<'a>(&'a self, guard: MutexGuard<'a, ()>) -> ExclusiveGuard<'a> {
        // Only mutex holders store the version (invariant 1): a Relaxed load sees the last one.
        let before = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(before & 1, 0, "a writer left the version odd");
        self.version.store(before | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        ExclusiveGuard {
            latch: self,
            _guard: guard,
            before,
            retire: false,
        }
    }

    /// Takes the latch exclusively (blocks on other writers).
    pub fn lock(&self) -> ExclusiveGuard<'_> {
        // A writer that panicked made the version even again in its guard's drop (during
        // unwinding); the poison flag carries nothing more.
        let g = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        self.enter(g)
    }

    /// Takes the latch exclusively if no one holds it.
    pub fn try_lock(&self) -> Option<ExclusiveGuard<'_>> {
        match self.mutex.try_lock() {
            Ok(g) => Some(self.enter(g)),
            Err(TryLockError::Poisoned(p)) => Some(self.enter(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Turns an optimistic read at version `v` into an exclusive latch, or `None` if a writer
    /// came in between (the caller restarts).
    pub fn upgrade(&self, v: u64) -> Option<ExclusiveGuard<'_>> {
        if !self.validate(v) {
            return None;
        }
        let g = self.lock();
        (g.before == v).then_some(g)
    }

    /// [`HybridLatch::upgrade`] that never blocks (for threads that must not wait on latches
    /// out of their lock order). A stale `v` fails before the mutex is tried, so it costs other
    /// readers no version change.
    pub fn try_upgrade(&self, v: u64) -> Option<ExclusiveGuard<'_>> {
        if !self.validate(v) {
            return None;
        }
        let g = self.try_lock()?;
        (g.before == v).then_some(g)
    }
}

/// An exclusive hold of a [`HybridLatch`]; dropping it publishes the writes.
#[derive(Debug)]
pub struct ExclusiveGuard<'a> {
    latch: &'a HybridLatch,
    _guard: MutexGuard<'a, ()>,
    before: u64,
    retire: bool,
}

impl ExclusiveGuard<'_> {
    /// The version the latch will have after this guard is dropped (for a writer that goes on
    /// reading optimistically).
    pub fn next_version(&self) -> u64 {
        let retired = if self.retire {
            RETIRED
        } else {
            self.before & RETIRED
        };
        ((self.before & !RETIRED).wrapping_add(2) & !RETIRED) | retired
    }

    /// Whether the latch was retired before this writer entered: its data is stale and the
    /// writer must go to the successor instead.
    pub fn is_retired(&self) -> bool {
        self.before & RETIRED != 0
    }

    /// Marks the latch retired when this write section ends (invariant 4).
    pub fn retire(&mut self) {
        self.retire = true;
    }
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        self.latch
            .version
            .store(self.next_version(), Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn versions_move_by_two_and_upgrades_check_them() {
        let l = HybridLatch::new();
        let v = l.optimistic();
        assert_eq!(v, Some(0));
        {
            let g = l.upgrade(0);
            assert!(g.is_some());
            assert_eq!(l.optimistic(), None);
            assert!(l.try_lock().is_none());
            assert_eq!(l.raw_version() & 1, 1);
        }
        assert!(!l.validate(0));
        assert!(l.upgrade(0).is_none());
        assert!(l.try_upgrade(0).is_none());
        assert_eq!(l.optimistic(), Some(2));
        assert!(l.validate(2));
        let g = l.try_upgrade(2);
        assert_eq!(g.as_ref().map(ExclusiveGuard::next_version), Some(4));
    }

    #[test]
    fn retirement_is_kept_by_every_later_write() {
        let l = HybridLatch::new();
        {
            let mut w = l.lock();
            assert!(!w.is_retired());
            w.retire();
        }
        assert_eq!(l.optimistic(), Some(2 | RETIRED));
        {
            let w = l.lock();
            assert!(w.is_retired());
        }
        assert_eq!(l.optimistic(), Some(4 | RETIRED));
    }

    #[test]
    fn a_panicking_writer_leaves_the_version_even() {
        let l = std::sync::Arc::new(HybridLatch::new());
        let l2 = std::sync::Arc::clone(&l);
        let r = std::thread::spawn(move || {
            let _g = l2.lock();
            panic!("writer dies inside its section");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(l.optimistic(), Some(2));
        assert!(l.try_lock().is_some(), "a poisoned mutex is still usable");
    }

    /// One step of the writer in `every_interleaving_of_a_reader_and_two_writes`: section
    /// `round` (1 or 2) locks, stores `round` to word a, then to word b, then unlocks.
    #[derive(Clone, Copy)]
    enum WriterStep {
        Lock,
        StoreA(u64),
        StoreB(u64),
        Unlock,
    }

    /// A reader's optimistic read of two words: start, load a, load b, validate.
    #[derive(Clone, Copy, PartialEq)]
    enum ReaderStep {
        Start,
        LoadA,
        LoadB,
        Validate,
    }

    /// Every schedule of `writer` and `reader` steps, as the positions of the reader's steps.
    fn schedules(total: usize, picks: usize) -> Vec<Vec<usize>> {
        fn rec(
            from: usize,
            total: usize,
            left: usize,
            cur: &mut Vec<usize>,
            out: &mut Vec<Vec<usize>>,
        ) {
            if left == 0 {
                out.push(cur.clone());
                return;
            }
            for i in from..=total - left {
                cur.push(i);
                rec(i + 1, total, left - 1, cur, out);
                cur.pop();
            }
        }
        let mut out = Vec::new();
        rec(0, total, picks, &mut Vec::new(), &mut out);
        out
    }

    /// The protocol, checked over every interleaving (run on one thread, so each schedule is
    /// exact): a writer makes two write sections, each storing its round to two words; a reader
    /// reads both words optimistically. Whenever the reader's validation passes, the two words
    /// it read are equal (no torn state is ever accepted), and whenever no write section
    /// overlaps the read, it passes (a read is not refused for nothing). It fails if the
    /// validation is dropped (torn reads accepted), if `optimistic` ignores a writer holding the
    /// latch, or if a section's unlock leaves the version where it was.
    #[test]
    fn every_interleaving_of_a_reader_and_two_writes() {
        use WriterStep::*;
        use std::sync::atomic::AtomicU64;
        let writer = [
            Lock,
            StoreA(1),
            StoreB(1),
            Unlock,
            Lock,
            StoreA(2),
            StoreB(2),
            Unlock,
        ];
        let reader = [
            ReaderStep::Start,
            ReaderStep::LoadA,
            ReaderStep::LoadB,
            ReaderStep::Validate,
        ];
        let total = writer.len() + reader.len();
        let (mut accepted, mut refused) = (0u32, 0u32);
        for at in schedules(total, reader.len()) {
            let latch = HybridLatch::default();
            let (a, b) = (AtomicU64::new(0), AtomicU64::new(0));
            let mut guard: Option<ExclusiveGuard<'_>> = None;
            let (mut w, mut r) = (writer.iter(), reader.iter());
            let mut version: Option<u64> = None;
            let (mut seen_a, mut seen_b) = (0, 0);
            let mut verdict: Option<bool> = None;
            // Whether a write section was open at any point of the read.
            let mut overlapped = false;
            let mut reading = false;
            for step in 0..total {
                if at.contains(&step) {
                    let Some(&rs) = r.next() else { break };
                    match rs {
                        ReaderStep::Start => {
                            version = latch.optimistic();
                            reading = true;
                        }
                        ReaderStep::LoadA => seen_a = a.load(Ordering::Relaxed),
                        ReaderStep::LoadB => seen_b = b.load(Ordering::Relaxed),
                        ReaderStep::Validate => {
                            verdict = Some(version.is_some_and(|v| latch.validate(v)));
                            reading = false;
                        }
                    }
                    if reading && guard.is_some() {
                        overlapped = true;
                    }
                } else {
                    let Some(&ws) = w.next() else { break };
                    match ws {
                        Lock => guard = Some(latch.lock()),
                        StoreA(v) => a.store(v, Ordering::Relaxed),
                        StoreB(v) => b.store(v, Ordering::Relaxed),
                        Unlock => guard = None,
                    }
                    if reading {
                        overlapped = true;
                    }
                }
            }
            drop(guard);
            match verdict {
                Some(true) => {
                    accepted += 1;
                    assert_eq!(
                        seen_a, seen_b,
                        "schedule {at:?}: a validated read saw a torn state"
                    );
                }
                Some(false) => {
                    refused += 1;
                    assert!(
                        overlapped,
                        "schedule {at:?}: a read no writer touched was refused"
                    );
                }
                None => panic!("schedule {at:?}: the reader did not finish"),
            }
        }
        // C(12, 4) schedules; both outcomes occur.
        assert_eq!(accepted + refused, 495);
        assert!(
            accepted > 0 && refused > 0,
            "{accepted} accepted, {refused} refused"
        );
    }
}
