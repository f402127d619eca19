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
//! [`Record::modify`] and creates the gap through [`Record::gap_for_insert`], both under the
//! per-record lock; model retraining reclaims a removed record through [`Record::reclaim`]
//! (under the lock too). `key` never changes.
//!
//! The state word: bit 0 = locked (a writer is inside), bit 1 = removed, bit 2 = pinned (the
//! first record of a node made by bulk load or level-bin retraining: it fixes where its node
//! starts, so it is never reclaimed), bit 3 = dead (reclaimed: removed for good, never given a
//! gap, left out of the layout being published), bits 4.. = a counter bumped by each write.
//! Orderings as in the seqlock (`seqlock.rs`): the writer's lock CAS is followed by
//! `fence(Release)` before the value store, and the unlocking store is `Release`; readers load the
//! state `Acquire`, the value `Relaxed`, then `fence(Acquire)` and re-load.
//!
//! Reclamation: a dead record stays reachable from older layouts until their last reader drops
//! them. A reader there finds it removed (correct: the key is absent). A writer there gets
//! [`Dead`] and starts again from the current layout; the retraining that killed the record
//! publishes a layout without it right after, so that wait is bounded by one retraining. The gap
//! is created under the same lock as the kill, so a record is never killed with a gap (whose keys
//! would be lost) and never gets one after its death.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::config::Config;
use crate::gap::GapSlot;
use crate::seqlock::Backoff;

const LOCKED: u64 = 1;
const REMOVED: u64 = 2;
const PINNED: u64 = 4;
const DEAD: u64 = 8;
const ONE_WRITE: u64 = 16;

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

/// The record was reclaimed by a model retraining: the write must start again from the current
/// layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dead;

/// What [`Record::modify`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modified {
    /// The value before (`None`: removed).
    pub old: Option<u64>,
    /// This write removed a live record.
    pub removed: bool,
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

    /// This record, never to be reclaimed (the first record of a node).
    pub fn pinned(mut self) -> Record {
        *self.state.get_mut() |= PINNED;
        self
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

    /// Takes the per-record lock; the state before. `Err(Dead)` (and no lock) once reclaimed.
    fn lock(&self) -> Result<u64, Dead> {
        let mut backoff = Backoff::default();
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & DEAD != 0 {
                return Err(Dead);
            }
            if s & LOCKED == 0
                && self
                    .state
                    .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                fence(Ordering::Release);
                return Ok(s);
            }
            backoff.snooze();
        }
    }

    /// Replaces the entry atomically under the per-record lock: `op` gets the current value
    /// (`None` if removed) and returns the new one (`None` removes). `op` is not called when the
    /// record is dead. If `op` panics the record is unlocked unchanged.
    pub fn modify(&self, op: &mut dyn FnMut(Option<u64>) -> Option<u64>) -> Result<Modified, Dead> {
        let s = self.lock()?;
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
        Ok(Modified {
            old,
            removed: old.is_some() && new.is_none(),
        })
    }

    /// Makes sure the gap exists before an insert into it, creating it under the per-record lock
    /// so that it never races with [`Record::reclaim`]. `Err(Dead)` once reclaimed.
    pub fn gap_for_insert(&self, cfg: &Config) -> Result<(), Dead> {
        if self.gap.created() {
            return Ok(());
        }
        let s = self.lock()?;
        let _unlock = Unlock {
            state: &self.state,
            next: s,
        };
        self.gap.create(cfg);
        Ok(())
    }

    /// Model retraining: kills this record if it is removed, not pinned, and has no gap, so the
    /// layout being built may leave it out. Whether it is dead (now or before).
    pub fn reclaim(&self) -> bool {
        let quick = self.state.load(Ordering::Relaxed);
        if quick & DEAD != 0 {
            return true;
        }
        if quick & (REMOVED | PINNED) != REMOVED || self.gap.created() {
            return false;
        }
        let Ok(s) = self.lock() else {
            return true;
        };
        let dead = s & (REMOVED | PINNED) == REMOVED && !self.gap.created();
        let _unlock = Unlock {
            state: &self.state,
            next: if dead { s | DEAD } else { s },
        };
        dead
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

    fn old(m: Result<Modified, Dead>) -> Option<u64> {
        m.map(|m| m.old).unwrap_or(Some(u64::MAX))
    }

    #[test]
    fn modify_updates_removes_and_revives() {
        let r = Record::new(5, 50);
        assert_eq!(r.read(), Some(50));
        assert_eq!(old(r.modify(&mut |_| Some(51))), Some(50));
        assert_eq!(r.read(), Some(51));
        assert_eq!(
            r.modify(&mut |_| None),
            Ok(Modified {
                old: Some(51),
                removed: true
            })
        );
        assert_eq!(r.read(), None);
        assert_eq!(
            r.modify(&mut |_| None),
            Ok(Modified {
                old: None,
                removed: false
            })
        );
        assert_eq!(old(r.modify(&mut |old| old.or(Some(7)))), None);
        assert_eq!(r.read(), Some(7));
        assert_eq!(Record::removed(9).read(), None);
    }

    #[test]
    fn a_panicking_op_leaves_the_record_unlocked_and_unchanged() {
        let r = Record::new(5, 50);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = r.modify(&mut |_| panic!("op fails"));
        }));
        assert!(caught.is_err());
        assert_eq!(r.read(), Some(50));
        assert_eq!(old(r.modify(&mut |_| Some(1))), Some(50));
    }

    #[test]
    fn only_removed_unpinned_records_without_a_gap_are_reclaimed() {
        let cfg = Config::default();
        assert!(!Record::new(1, 10).reclaim(), "a live record");
        assert!(!Record::removed(2).pinned().reclaim(), "a pinned record");
        let with_gap = Record::removed(3);
        assert_eq!(with_gap.gap_for_insert(&cfg), Ok(()));
        assert!(!with_gap.reclaim(), "a record with a gap");

        let r = Record::removed(4);
        assert!(r.reclaim());
        assert!(r.reclaim(), "dead stays dead");
        assert_eq!(r.read(), None);
        let mut called = false;
        let got = r.modify(&mut |_| {
            called = true;
            Some(1)
        });
        assert_eq!(got, Err(Dead));
        assert!(!called, "the op of a write to a dead record never runs");
        assert_eq!(r.gap_for_insert(&cfg), Err(Dead));
        assert!(!r.gap.created(), "a dead record never gets a gap");
    }
}
