//! The per-bin latch: lidb-sync's hybrid latch (a version word plus a mutex, LeanStore's
//! `HybridLatch` in safe Rust), under the names the bins use.
//!
//! Writers take the mutex, which serialises them, and make the version odd for the length of
//! their write; readers take nothing: they read the version ([`SeqLock::optimistic`]), read the
//! protected atomics with `Relaxed` loads, and keep what they read only if the version is
//! unchanged and even ([`SeqLock::validate`]). A failed validation is a restart the caller loops
//! on. [`RETIRED`] marks a latch whose data moved to a successor (level-bin retraining). The
//! orderings, their argument and the loom model that checks them are in
//! `crates/lidb-sync/src/latch.rs`.

pub(crate) use lidb_sync::latch::{ExclusiveGuard as SeqWrite, HybridLatch as SeqLock, RETIRED};

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
        let v0 = lock.optimistic();
        assert_eq!(v0, Some(0));
        {
            let w = lock.lock();
            assert!(!w.is_retired());
            assert_eq!(lock.optimistic(), None);
        }
        let v1 = lock.optimistic();
        assert_eq!(v1, Some(2));
        assert!(!lock.validate(0));
        assert!(lock.validate(2));
        {
            let mut w = lock.lock();
            w.retire();
        }
        let v2 = lock.optimistic().unwrap_or(0);
        assert_eq!(v2, 4 | RETIRED);
        assert!(lock.lock().is_retired());
    }
}
