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
}
