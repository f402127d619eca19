//! The per-frame hybrid latch: a version word plus a mutex (LeanStore's `HybridLatch` in safe
//! Rust, as lidb-fine's `seqlock.rs`).
//!
//! Readers take nothing: [`HybridLatch::optimistic`] gives the version, they read the frame's
//! atomic words with `Relaxed` loads, and keep what they read only if [`HybridLatch::validate`]
//! says the version is unchanged. A failed validation is a restart the caller loops on. Writers
//! take the mutex and make the version odd for the length of their write; [`ExclusiveGuard`]'s
//! drop publishes (version + 2 in all).
//!
//! Callers: the buffer pool and the tree, from any thread.
//!
//! Invariants:
//! 1. Only the holder of `mutex` stores to `version` or to the data it protects.
//! 2. `version` is odd exactly while a writer holds the latch.
//! 3. The version never goes back: a frame reused for another page has a new version, so a
//!    reader that read the old page fails its validation.
//!
//! Orderings: writer `version = odd` (Relaxed), `fence(Release)`, data stores, `version = even`
//! (Release); reader `v1 = version` (Acquire), data loads, `fence(Acquire)`, `v2 = version`
//! (Relaxed). See lidb-fine's `seqlock.rs` for the argument.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// A version word plus a writers' mutex.
#[derive(Debug, Default)]
pub struct HybridLatch {
    version: AtomicU64,
    mutex: Mutex<()>,
}

impl HybridLatch {
    /// Starts an optimistic read: the version to validate against, or `None` while a writer
    /// holds the latch (the caller restarts).
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

    fn enter<'a>(&'a self, guard: MutexGuard<'a, ()>) -> ExclusiveGuard<'a> {
        let before = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(before & 1, 0, "a writer left the version odd");
        self.version.store(before | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        ExclusiveGuard {
            latch: self,
            _guard: guard,
            before,
        }
    }

    /// Takes the latch exclusively (blocks on other writers).
    pub fn lock(&self) -> ExclusiveGuard<'_> {
        // A writer that panicked made the version even again in its guard's drop; the
        // poison flag carries nothing more.
        let g = self
            .mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

    /// Like [`HybridLatch::upgrade`] but never blocks (for the provider and eviction, which
    /// must not wait on latches out of the lock order).
    pub fn try_upgrade(&self, v: u64) -> Option<ExclusiveGuard<'_>> {
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
}

impl ExclusiveGuard<'_> {
    /// The version the latch will have after this guard is dropped (for a writer that wants
    /// to go on reading optimistically).
    pub fn next_version(&self) -> u64 {
        self.before.wrapping_add(2)
    }
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        self.latch
            .version
            .store(self.before.wrapping_add(2), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_move_and_upgrades_check_them() {
        let l = HybridLatch::default();
        let v = l.optimistic().unwrap_or(1);
        assert_eq!(v, 0);
        {
            let g = l.upgrade(v);
            assert!(g.is_some());
            assert_eq!(l.optimistic(), None);
            assert!(l.try_lock().is_none());
        }
        assert!(!l.validate(v));
        assert!(l.upgrade(v).is_none());
        assert_eq!(l.optimistic(), Some(2));
    }
}
