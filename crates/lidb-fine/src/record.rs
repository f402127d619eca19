//! A trained record: one key of a trained data array, its value, its removal flag, its per-record
//! lock, and the gap below it where later keys go (level bins, or a small model once the bins were
//! retrained).
//!
//! Records are shared (`Arc<Record>`) between every model layout that covers them: model
//! retraining builds new arrays of pointers to the same records, so an update or removal made
//! through an old layout is the one the new layout reads (the paper's shared level bins, extended
//! to the trained records' values and flags, which the paper writes in place too).
//!
//! Who may do what: any thread reads ([`Record::read`], lock-free); any thread writes through
//! [`Record::modify`], which takes the per-record lock. `key` never changes.
//!
//! The state word: bit 0 = locked (a writer is inside), bit 1 = removed, bits 2.. = a counter
//! bumped by each write. Orderings as in the seqlock (`seqlock.rs`): the writer's lock CAS is
//! followed by `fence(Release)` before the value store, and the unlocking store is `Release`;
//! readers load the state `Acquire`, the value `Relaxed`, then `fence(Acquire)` and re-load.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::gap::GapSlot;
use crate::seqlock::Backoff;

const LOCKED: u64 = 1;
const REMOVED: u64 = 2;
const ONE_WRITE: u64 = 4;

/// One trained record with its gap.
///
/// `repr(C)` with the state and value first: behind the `Arc`'s two counters they sit at bytes
/// 16..32 of a 16-byte aligned allocation, so a read never spans two cache lines.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Record {
    state: AtomicU64,
    value: AtomicU64,
    pub key: u64,
    /// Keys strictly between `key` and the next trained key of the array this record was trained
    /// in.
    pub gap: GapSlot,
}

impl Record {
    /// A live record.
    pub fn new(key: u64, value: u64) -> Record {
        Record {
            key,
            state: AtomicU64::new(0),
            value: AtomicU64::new(value),
            gap: GapSlot::default(),
        }
    }

    /// A removed record: a placeholder whose key only fixes where its gap starts.
    pub fn removed(key: u64) -> Record {
        Record {
            key,
            state: AtomicU64::new(REMOVED),
            value: AtomicU64::new(0),
            gap: GapSlot::default(),
        }
    }

    /// The value, or `None` when the record is removed. Lock-free; retries while a writer is
    /// inside.
    pub fn read(&self) -> Option<u64> {
        let mut backoff = Backoff::default();
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & LOCKED == 0 {
                let value = self.value.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if self.state.load(Ordering::Relaxed) == s {
                    return (s & REMOVED == 0).then_some(value);
                }
            }
            backoff.snooze();
        }
    }

    /// Replaces the entry atomically under the per-record lock: `op` gets the current value
    /// (`None` if removed) and returns the new one (`None` removes). Returns the old value.
    /// If `op` panics the record is unlocked unchanged.
    pub fn modify(&self, op: &mut dyn FnMut(Option<u64>) -> Option<u64>) -> Option<u64> {
        let mut backoff = Backoff::default();
        let s = loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & LOCKED == 0
                && self
                    .state
                    .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break s;
            }
            backoff.snooze();
        };
        fence(Ordering::Release);
        let mut unlock = Unlock {
            state: &self.state,
            next: (s & !(LOCKED | REMOVED)).wrapping_add(ONE_WRITE) | (s & REMOVED),
        };
        // Under the lock the value is ours: Relaxed sees the last store (made before the last
        // unlock, which our Acquire CAS synchronised with).
        let old = (s & REMOVED == 0).then(|| self.value.load(Ordering::Relaxed));
        let new = op(old);
        unlock.next &= !REMOVED;
        match new {
            Some(v) => self.value.store(v, Ordering::Relaxed),
            None => unlock.next |= REMOVED,
        }
        old
    }
}

/// Releases a record's lock when dropped (also when the caller's op panics), publishing `next`.
struct Unlock<'a> {
    state: &'a AtomicU64,
    next: u64,
}

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        self.state.store(self.next, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modify_updates_removes_and_revives() {
        let r = Record::new(5, 50);
        assert_eq!(r.read(), Some(50));
        assert_eq!(r.modify(&mut |_| Some(51)), Some(50));
        assert_eq!(r.read(), Some(51));
        assert_eq!(r.modify(&mut |_| None), Some(51));
        assert_eq!(r.read(), None);
        assert_eq!(r.modify(&mut |old| old.or(Some(7))), None);
        assert_eq!(r.read(), Some(7));
        assert_eq!(Record::removed(9).read(), None);
    }

    #[test]
    fn a_panicking_op_leaves_the_record_unlocked_and_unchanged() {
        let r = Record::new(5, 50);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.modify(&mut |_| panic!("op fails"));
        }));
        assert!(caught.is_err());
        assert_eq!(r.read(), Some(50));
        assert_eq!(r.modify(&mut |_| Some(1)), Some(50));
    }
}
