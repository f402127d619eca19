//! The per-bin latch: a version word plus a mutex (LeanStore's `HybridLatch` in safe Rust).
//!
//! Writers take the mutex, which serialises them, and make the version odd for the length of
//! their write; readers take nothing: they read the version, read the protected atomics with
//! `Relaxed` loads, and keep what they read only if the version is unchanged and even
//! ([`SeqLock::validate`]). A failed validation is a restart the caller loops on.
//!
//! Invariants:
//! 1. Only the holder of `mutex` stores to `version` or to the data it protects.
//! 2. `version` is odd exactly while a writer is inside its write section.
//! 3. [`RETIRED`] is set once, by the writer that hands the protected data over to a successor
//!    (level-bin retraining), and never cleared: a retired latch's data is empty and stale.
//!
//! Orderings (the classic seqlock with fences, as in Boehm's "Can seqlocks get along with
//! programming language memory models?"):
//! - writer: `version = odd` (Relaxed), `fence(Release)`, data stores (Relaxed), `version = even`
//!   (Release). The fence orders the odd store before every data store.
//! - reader: `v1 = version` (Acquire), data loads (Relaxed), `fence(Acquire)`, `v2 = version`
//!   (Relaxed). If a data load saw any store of a writer, the acquire fence synchronises with
//!   that writer's release fence, so `v2` sees at least its odd version and `v1 != v2`; if `v1`
//!   saw a writer's final even store, the Acquire load makes all its data stores visible.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Mutex, MutexGuard};

/// The version bit that marks a retired latch (its data moved to a small model).
pub(crate) const RETIRED: u64 = 1 << 63;

/// A version word plus a writers' mutex.
#[derive(Debug, Default)]
pub(crate) struct SeqLock {
    version: AtomicU64,
    mutex: Mutex<()>,
}

impl SeqLock {
    /// Starts an optimistic read: the version to validate against, or `None` while a writer is
    /// inside (the caller backs off and retries).
    #[inline]
    pub fn read_begin(&self) -> Option<u64> {
        let v = self.version.load(Ordering::Acquire);
        (v & 1 == 0).then_some(v)
    }

    /// Whether everything read since `read_begin` returned `v` is one consistent state.
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

    /// Enters the write section (blocks on other writers).
    pub fn write(&self) -> SeqWrite<'_> {
        // A writer that panicked left the data consistent with what it wrote before the panic
        // at the granularity of single atomics; the version is made even again by its guard's
        // drop during unwinding, so a poisoned mutex carries no extra meaning here.
        let guard = self
            .mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Only mutex holders store the version (invariant 1): a Relaxed load sees the last one.
        let before = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(before & 1, 0, "a writer left the version odd");
        self.version.store(before | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        SeqWrite {
            lock: self,
            _guard: guard,
            before,
            retire: false,
        }
    }
}

/// The write section of a [`SeqLock`]; leaving it (drop) publishes the writes.
#[derive(Debug)]
pub(crate) struct SeqWrite<'a> {
    lock: &'a SeqLock,
    _guard: MutexGuard<'a, ()>,
    before: u64,
    retire: bool,
}

impl SeqWrite<'_> {
    /// Whether the latch was retired before this writer entered: its data is stale and the
    /// writer must go to the successor instead.
    pub fn is_retired(&self) -> bool {
        self.before & RETIRED != 0
    }

    /// Marks the latch retired when this write section ends (invariant 3).
    pub fn retire(&mut self) {
        self.retire = true;
    }
}

impl Drop for SeqWrite<'_> {
    fn drop(&mut self) {
        let retired = if self.retire {
            RETIRED
        } else {
            self.before & RETIRED
        };
        let counter = (self.before & !RETIRED).wrapping_add(2) & !RETIRED;
        self.lock
            .version
            .store(counter | retired, Ordering::Release);
    }
}

/// Spins a little, then yields: the wait of a reader or writer that met a writer.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    pub fn snooze(&mut self) {
        if self.step < 6 {
            for _ in 0..(1u32 << self.step) {
                std::hint::spin_loop();
            }
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_even_outside_writes_and_change_per_write() {
        let lock = SeqLock::default();
        let v0 = lock.read_begin();
        assert_eq!(v0, Some(0));
        {
            let w = lock.write();
            assert!(!w.is_retired());
            assert_eq!(lock.read_begin(), None);
        }
        let v1 = lock.read_begin();
        assert_eq!(v1, Some(2));
        assert!(!lock.validate(0));
        assert!(lock.validate(2));
        {
            let mut w = lock.write();
            w.retire();
        }
        let v2 = lock.read_begin().unwrap_or(0);
        assert_eq!(v2, 4 | RETIRED);
        assert!(lock.write().is_retired());
    }
}
