//! A trained record: one key of a trained data array, its value, its removal flag, its per-record
//! lock, and the gap below it where later keys go (level bins, or a small model once the bins were
//! retrained).
//!
//! Records live inline in their node's array (`node.rs`), so a lookup that lands on a trained key
//! reads its state and value from the line after the key search, with no pointer to follow. The
//! gap is shared (`Arc`) between a record and the copy a model retraining makes of it, so writes
//! into level bins never have to be copied.
//!
//! Who may do what: any thread reads ([`Record::read`], lock-free); any thread writes through
//! [`Record::modify`] and creates the gap through [`Record::gap_for_insert`], both under the
//! per-record lock; model retraining copies a record out with [`Record::move_out`] (under the
//! lock too), after which the record is *moved*: frozen for good. `key` never changes.
//!
//! The state word: bit 0 = locked (a writer is inside), bit 1 = removed, bit 2 = moved, bits 3.. =
//! a counter bumped by each write. Orderings as in the seqlock (`seqlock.rs`): the writer's lock
//! CAS is followed by `fence(Release)` before the value store, and the unlocking store is
//! `Release`; readers load the state `Acquire`, the value `Relaxed`, then `fence(Acquire)` and
//! re-load.
//!
//! Moving (model retraining, `index.rs`): the retrainer trains the new models first, then moves
//! the node's records one by one into the new arrays and publishes the new layout. A writer that
//! reaches a moved record through an older layout gets [`Moved`] before its op runs and starts
//! again from the current layout, so it waits at most for the copy phase of one retraining; no
//! write can land in a moved record, so a moved record's value is the one its copy started with,
//! and until the new layout is published the copy takes no write either. A reader never waits:
//! what it reads in a moved record was current when it loaded its layout, or was overwritten by a
//! write that began after that (a write through the new layout), so the read is linearizable at
//! its start. The gap is created under the same lock, so it is either created before the move
//! (and shared with the copy) or refused. A removed record without a gap may be moved without a
//! copy (reclaimed): the new layout has no record there, and its keys go to the previous record's
//! gap.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::config::Config;
use crate::gap::GapSlot;
use crate::seqlock::Backoff;

const LOCKED: u64 = 1;
const REMOVED: u64 = 2;
const MOVED: u64 = 4;
const ONE_WRITE: u64 = 8;

/// One trained record with its gap.
///
/// `repr(C)` with the state and value first, 32 bytes in all: in an array aligned to 8 bytes a
/// record's state and value share a cache line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Record {
    state: AtomicU64,
    value: AtomicU64,
    pub key: u64,
    /// Keys strictly between `key` and the next trained key of the array this record is in.
    pub gap: GapSlot,
}

/// The record was moved by a model retraining: the write must start again from the current
/// layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moved;

/// What [`Record::modify`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modified {
    /// The value before (`None`: removed).
    pub old: Option<u64>,
    /// This write removed a live record.
    pub removed: bool,
}

/// What model retraining planned for a record (decided without its lock, checked under it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MovePlan {
    /// Copy it into the new array. `drop_gap`: its gap's small model was flattened into that
    /// array too, so the copy starts without a gap (the retired bins stay with the old record).
    Keep { drop_gap: bool },
    /// It was removed and had no gap: leave it out if that still holds.
    Reclaim,
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

    /// The removal flag and the value word as they are, with no retry (a remote-read copy,
    /// validated by its region's version word instead, `remote/words.rs`).
    pub fn raw_words(&self) -> (bool, u64) {
        let s = self.state.load(Ordering::Relaxed);
        (s & REMOVED != 0, self.value.load(Ordering::Relaxed))
    }

    /// Whether a model retraining moved this record (it is frozen; its copy is current).
    pub fn is_moved(&self) -> bool {
        self.state.load(Ordering::Acquire) & MOVED != 0
    }

    /// Whether the record is removed and has no gap (a candidate for reclamation).
    pub fn is_empty(&self) -> bool {
        self.read().is_none() && !self.gap.created()
    }

    /// Takes the per-record lock; the state before. `Err(Moved)` (and no lock) once moved.
    fn lock(&self) -> Result<u64, Moved> {
        let mut backoff = Backoff::default();
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & MOVED != 0 {
                return Err(Moved);
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
    /// record was moved. If `op` panics the record is unlocked unchanged.
    pub fn modify(
        &self,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
    ) -> Result<Modified, Moved> {
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
    /// so that it never races with [`Record::move_out`]. `Err(Moved)` once moved without a gap.
    pub fn gap_for_insert(&self, cfg: &Config) -> Result<(), Moved> {
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

    /// Model retraining's copy phase: under the lock, the copy of this record for the new array
    /// (same key, value and removal flag; the same gap unless `drop_gap`), or `None` when it is
    /// reclaimed; then this record is moved for good. A record planned for reclamation that was
    /// revived or got a gap since is copied after all. `None` too (with no change) if it was
    /// moved already, which the retrainer never does.
    pub fn move_out(&self, plan: MovePlan) -> Option<Record> {
        let s = self.lock().ok()?;
        let _unlock = Unlock {
            state: &self.state,
            next: s | MOVED,
        };
        let drop_gap = match plan {
            MovePlan::Reclaim if s & REMOVED != 0 && !self.gap.created() => return None,
            MovePlan::Reclaim => false,
            MovePlan::Keep { drop_gap } => drop_gap,
        };
        Some(Record {
            state: AtomicU64::new(s & REMOVED),
            value: AtomicU64::new(self.value.load(Ordering::Relaxed)),
            key: self.key,
            gap: if drop_gap {
                GapSlot::default()
            } else {
                self.gap.share()
            },
        })
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

    fn old(m: Result<Modified, Moved>) -> Option<u64> {
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
    fn a_moved_record_is_frozen_and_its_copy_shares_the_gap() {
        let cfg = Config::default();
        let r = Record::new(5, 50);
        assert_eq!(r.gap_for_insert(&cfg), Ok(()));
        let copy = r.move_out(MovePlan::Keep { drop_gap: false });
        let Some(copy) = copy else {
            panic!("no copy");
        };
        assert_eq!((copy.key, copy.read()), (5, Some(50)));
        assert!(copy.gap.same_as(&r.gap), "the copy has its own gap");
        let mut ran = false;
        let got = r.modify(&mut |_| {
            ran = true;
            Some(1)
        });
        assert_eq!(got, Err(Moved));
        assert!(!ran, "the op of a write to a moved record never runs");
        assert_eq!(r.read(), Some(50), "a moved record still reads");
        assert_eq!(
            r.move_out(MovePlan::Keep { drop_gap: false })
                .map(|c| c.key),
            None
        );
        assert_eq!(old(copy.modify(&mut |_| Some(51))), Some(50));
    }

    #[test]
    fn only_removed_records_without_a_gap_are_reclaimed() {
        let cfg = Config::default();
        assert!(Record::removed(1).move_out(MovePlan::Reclaim).is_none());
        let revived = Record::new(2, 20);
        let kept = revived.move_out(MovePlan::Reclaim);
        assert_eq!(
            kept.map(|c| c.read()),
            Some(Some(20)),
            "a live record is copied after all"
        );
        let with_gap = Record::removed(3);
        assert_eq!(with_gap.gap_for_insert(&cfg), Ok(()));
        assert!(
            with_gap.move_out(MovePlan::Reclaim).is_some(),
            "a gap is never dropped"
        );
        let dead = Record::removed(4);
        assert!(dead.move_out(MovePlan::Reclaim).is_none());
        assert_eq!(dead.gap_for_insert(&cfg), Err(Moved));
        assert!(!dead.gap.created(), "a moved record never gets a gap");
        let dropped = Record::removed(6);
        assert_eq!(dropped.gap_for_insert(&cfg), Ok(()));
        let copy = dropped.move_out(MovePlan::Keep { drop_gap: true });
        assert_eq!(copy.map(|c| c.gap.created()), Some(false));
    }
}
