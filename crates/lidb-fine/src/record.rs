//! A trained record: one key of a trained data array, its value, its removal flag, its per-record
//! lock, and the gap below it where later keys go (level bins, or a small model once the bins were
//! retrained).
//!
//! Memory: a trained key costs 24 bytes. Its key sits in the node's key array (8 bytes; the
//! models search keys alone) and the rest in a [`Slot`] at the same position of the node's slot
//! array: a state word and a value word (16 bytes, aligned so that one never straddles a cache
//! line), read after the key search lands. The gap is not in the record: the state word carries
//! a gap id into the node's gap table (`gap_table.rs`). A [`Record`] is a handle (key, slot,
//! table) that `Node` hands out; it owns nothing.
//!
//! Who may do what: any thread reads ([`Record::read`], [`Record::gap`]: lock-free); any thread
//! writes through [`Record::modify`] and creates the gap through [`Record::gap_for_insert`], both
//! under the per-record lock; model retraining copies a record out with [`Record::move_out`]
//! (under the lock too), after which the record is *moved*: frozen for good. `key` never changes.
//!
//! The state word: bit 0 = locked (a writer is inside), bit 1 = removed, bit 2 = moved, bits 3..31
//! = a counter bumped by each write (the readers' version), bits 32..63 = the gap id (0: none; set
//! once, under the lock, and kept by every later state). Orderings as in the seqlock
//! (`seqlock.rs`): the writer's lock CAS is followed by `fence(Release)` before the value store,
//! and the unlocking store is `Release`; readers load the state `Acquire`, the value `Relaxed`,
//! then `fence(Acquire)` and re-load. A reader that loads a gap id (`Acquire`) finds its table
//! entry set: the entry was set before the unlocking store that published the id.
//!
//! The version wraps after 2^29 writes of one record. A read compares the whole state word before
//! and after its value load, so a wrap could fool it only if a multiple of 2^29 writes of this
//! record (each a lock CAS and an unlocking store: seconds of them at the least) fell between two
//! loads a few instructions apart. Even then the read is right, because the value is one atomic
//! word stored only by writes that leave the record present: the value loaded is the one current
//! at the first load, or one stored by a write that (our `Acquire` fence against its `Release`
//! fence) had locked the record before our second load and, since that load sees no lock, had
//! unlocked it before: in both cases a value that was current at an instant inside the read.
//! What the counter adds is that a read which validates saw no write complete between its loads
//! (tested below, and what a read of more than one word would need).
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
//! (and shared with the copy, which gets an id in its new node's table) or refused. A removed
//! record without a gap may be moved without a copy (reclaimed): the new layout has no record
//! there, and its keys go to the previous record's gap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::config::Config;
use crate::gap::Gap;
use crate::gap_table::GapTable;
use crate::seqlock::Backoff;

const LOCKED: u64 = 1;
const REMOVED: u64 = 2;
const MOVED: u64 = 4;
const ONE_WRITE: u64 = 8;
/// Bits 3..31 of the state word: the write counter.
const COUNTER: u64 = 0xFFFF_FFF8;
/// The gap id is the state word's high half.
const GAP_SHIFT: u32 = 32;

fn gap_id(state: u64) -> u32 {
    (state >> GAP_SHIFT) as u32
}

/// A record's state and value words, beside its key in the node (module documentation).
#[derive(Debug)]
#[repr(C, align(16))]
pub(crate) struct Slot {
    state: AtomicU64,
    value: AtomicU64,
}

/// One trained record of a node: its key, its slot and the node's gap table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'a> {
    pub key: u64,
    slot: &'a Slot,
    gaps: &'a GapTable,
}

/// What a new node's record starts with: a record at bulk load, or the copy of one that model
/// retraining moved (with the gap it shares), or the first record of a small model.
#[derive(Debug)]
pub(crate) struct NewRecord {
    pub key: u64,
    /// `None`: removed.
    pub value: Option<u64>,
    pub gap: Option<Arc<Gap>>,
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

impl NewRecord {
    /// A live record.
    pub fn live(key: u64, value: u64) -> NewRecord {
        NewRecord {
            key,
            value: Some(value),
            gap: None,
        }
    }

    /// A removed record: a placeholder whose key only fixes where its gap starts.
    pub fn removed(key: u64) -> NewRecord {
        NewRecord {
            key,
            value: None,
            gap: None,
        }
    }
}

impl Slot {
    /// The slot of a record with `value` (`None`: removed) and gap id `gap`.
    pub fn new(value: Option<u64>, gap: u32) -> Slot {
        let removed = if value.is_some() { 0 } else { REMOVED };
        Slot {
            state: AtomicU64::new(removed | u64::from(gap) << GAP_SHIFT),
            value: AtomicU64::new(value.unwrap_or(0)),
        }
    }

    /// The value, or `None` when removed. Lock-free; retries while a writer is inside.
    #[inline]
    pub fn read(&self) -> Option<u64> {
        self.read_observed(|| ()).0
    }

    /// The read protocol, with the number of tries; `between` runs after the value load and
    /// before the validation (a test tears a read there).
    #[inline]
    fn read_observed(&self, mut between: impl FnMut()) -> (Option<u64>, u32) {
        let mut backoff = Backoff::default();
        let mut tries = 0u32;
        loop {
            tries = tries.wrapping_add(1);
            let s = self.state.load(Ordering::Acquire);
            if s & LOCKED == 0 {
                let value = self.value.load(Ordering::Relaxed);
                between();
                fence(Ordering::Acquire);
                if self.state.load(Ordering::Relaxed) == s {
                    return ((s & REMOVED == 0).then_some(value), tries);
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
}

impl<'a> Record<'a> {
    /// The record of key `key` whose words are `slot`, in a node with gap table `gaps`.
    #[inline]
    pub fn new(key: u64, slot: &'a Slot, gaps: &'a GapTable) -> Record<'a> {
        Record { key, slot, gaps }
    }

    /// The value, or `None` when the record is removed. Lock-free; retries while a writer is
    /// inside.
    #[inline]
    pub fn read(&self) -> Option<u64> {
        self.slot.read()
    }

    /// The gap below this record, if one was created. Lock-free.
    #[inline]
    pub fn gap(&self) -> Option<&'a Gap> {
        let id = gap_id(self.slot.state.load(Ordering::Acquire));
        self.gaps.get(id).map(|g| &**g)
    }

    /// Whether a model retraining moved this record (it is frozen; its copy is current).
    pub fn is_moved(&self) -> bool {
        self.slot.state.load(Ordering::Acquire) & MOVED != 0
    }

    /// Whether the record is removed and has no gap (a candidate for reclamation).
    pub fn is_empty(&self) -> bool {
        self.read().is_none() && self.gap().is_none()
    }

    /// Whether both handles are the same record.
    #[cfg(test)]
    pub fn same_as(&self, other: &Record<'_>) -> bool {
        std::ptr::eq(self.slot, other.slot)
    }

    /// Replaces the entry atomically under the per-record lock: `op` gets the current value
    /// (`None` if removed) and returns the new one (`None` removes). `op` is not called when the
    /// record was moved. If `op` panics the record is unlocked unchanged.
    pub fn modify(
        &self,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
    ) -> Result<Modified, Moved> {
        let s = self.slot.lock()?;
        let bumped = (s & !COUNTER) | (s.wrapping_add(ONE_WRITE) & COUNTER);
        let mut unlock = Unlock {
            state: &self.slot.state,
            next: bumped,
        };
        // Under the lock the value is ours: Relaxed sees the last store (made before the last
        // unlock, which our Acquire CAS synchronised with).
        let old = (s & REMOVED == 0).then(|| self.slot.value.load(Ordering::Relaxed));
        let new = op(old);
        unlock.next &= !REMOVED;
        match new {
            Some(v) => self.slot.value.store(v, Ordering::Relaxed),
            None => unlock.next |= REMOVED,
        }
        Ok(Modified {
            old,
            removed: old.is_some() && new.is_none(),
        })
    }

    /// The gap, created if there is none yet (before an insert into it), under the per-record
    /// lock so that it never races with [`Record::move_out`]. `Err(Moved)` once moved without a
    /// gap.
    pub fn gap_for_insert(&self, cfg: &Config) -> Result<&'a Gap, Moved> {
        if let Some(g) = self.gap() {
            return Ok(g);
        }
        let s = self.slot.lock()?;
        let mut unlock = Unlock {
            state: &self.slot.state,
            next: s,
        };
        if let Some(g) = self.gaps.get(gap_id(s)) {
            // Created between our look and our lock.
            return Ok(&**g);
        }
        let Some((id, gap)) = self.gaps.push(Gap::new(cfg)) else {
            panic!("a node's gap table is full: more gaps than records");
        };
        // Published by the unlocking (Release) store, after the table entry was set.
        unlock.next = s | u64::from(id) << GAP_SHIFT;
        Ok(gap)
    }

    /// Model retraining's copy phase: under the lock, what the copy of this record in the new
    /// array starts with (same key, value and removal flag; the same gap unless `drop_gap`), or
    /// `None` when it is reclaimed; then this record is moved for good. A record planned for
    /// reclamation that was revived or got a gap since is copied after all. `None` too (with no
    /// change) if it was moved already, which the retrainer never does.
    pub fn move_out(&self, plan: MovePlan) -> Option<NewRecord> {
        let s = self.slot.lock().ok()?;
        let _unlock = Unlock {
            state: &self.slot.state,
            next: s | MOVED,
        };
        let gap = self.gaps.get(gap_id(s));
        let drop_gap = match plan {
            MovePlan::Reclaim if s & REMOVED != 0 && gap.is_none() => return None,
            MovePlan::Reclaim => false,
            MovePlan::Keep { drop_gap } => drop_gap,
        };
        Some(NewRecord {
            key: self.key,
            value: (s & REMOVED == 0).then(|| self.slot.value.load(Ordering::Relaxed)),
            gap: if drop_gap { None } else { gap.cloned() },
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

    /// One record's words and a gap table of its own.
    struct Words {
        slot: Slot,
        gaps: GapTable,
    }

    fn words(value: Option<u64>) -> Words {
        Words {
            slot: Slot::new(value, 0),
            gaps: GapTable::new(1),
        }
    }

    impl Words {
        fn record(&self, key: u64) -> Record<'_> {
            Record::new(key, &self.slot, &self.gaps)
        }
    }

    fn old(m: Result<Modified, Moved>) -> Option<u64> {
        m.map(|m| m.old).unwrap_or(Some(u64::MAX))
    }

    #[test]
    fn a_record_is_a_key_and_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 16);
        assert_eq!(std::mem::align_of::<Slot>(), 16);
    }

    #[test]
    fn modify_updates_removes_and_revives() {
        let w = words(Some(50));
        let r = w.record(5);
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
        assert_eq!(words(None).record(9).read(), None);
    }

    /// The readers' version: a write that starts and ends between a read's value load and its
    /// validation must make the read try again (and so return the newer value). Fails if a write
    /// does not bump the counter.
    #[test]
    fn a_read_overtaken_by_a_write_tries_again() {
        let w = words(Some(50));
        let r = w.record(5);
        let mut wrote = false;
        let (got, tries) = w.slot.read_observed(|| {
            if !wrote {
                wrote = true;
                assert_eq!(old(r.modify(&mut |_| Some(51))), Some(50));
            }
        });
        assert_eq!(
            (got, tries),
            (Some(51), 2),
            "the read validated across a write"
        );
        // The counter wraps inside its bits and never touches the gap id or the flags.
        let cfg = Config::default();
        assert!(r.gap_for_insert(&cfg).is_ok());
        w.slot.state.fetch_or(COUNTER, Ordering::Relaxed);
        assert_eq!(old(r.modify(&mut |_| Some(52))), Some(51));
        let s = w.slot.state.load(Ordering::Relaxed);
        assert_eq!((s & COUNTER, gap_id(s), s & 7), (0, 1, 0), "{s:#x}");
        assert!(r.gap().is_some());
        assert_eq!(r.read(), Some(52));
    }

    #[test]
    fn a_panicking_op_leaves_the_record_unlocked_and_unchanged() {
        let w = words(Some(50));
        let r = w.record(5);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = r.modify(&mut |_| panic!("op fails"));
        }));
        assert!(caught.is_err());
        assert_eq!(r.read(), Some(50));
        assert_eq!(old(r.modify(&mut |_| Some(1))), Some(50));
    }

    #[test]
    fn the_gap_is_created_once_under_the_lock_and_its_id_is_in_the_state() {
        let cfg = Config::default();
        let w = words(Some(50));
        let r = w.record(5);
        assert!(r.gap().is_none());
        let first = r.gap_for_insert(&cfg).map(|g| g as *const Gap);
        let again = r.gap_for_insert(&cfg).map(|g| g as *const Gap);
        assert!(first.is_ok() && first == again, "a second gap was created");
        assert_eq!(w.gaps.len(), 1);
        assert_eq!(gap_id(w.slot.state.load(Ordering::Relaxed)), 1);
        assert_eq!(r.read(), Some(50), "creating the gap changed the value");
        assert_eq!(old(r.modify(&mut |_| None)), Some(50));
        assert!(r.gap().is_some(), "a write dropped the gap id");
    }

    #[test]
    fn a_moved_record_is_frozen_and_its_copy_takes_the_gap() {
        let cfg = Config::default();
        let w = words(Some(50));
        let r = w.record(5);
        let gap = r.gap_for_insert(&cfg).map(|g| g as *const Gap);
        let copy = r.move_out(MovePlan::Keep { drop_gap: false });
        let Some(copy) = copy else {
            panic!("no copy");
        };
        assert_eq!((copy.key, copy.value), (5, Some(50)));
        assert_eq!(
            copy.gap.as_deref().map(|g| g as *const Gap),
            gap.ok(),
            "the copy has its own gap"
        );
        let mut ran = false;
        let got = r.modify(&mut |_| {
            ran = true;
            Some(1)
        });
        assert_eq!(got, Err(Moved));
        assert!(!ran, "the op of a write to a moved record never runs");
        assert_eq!(r.read(), Some(50), "a moved record still reads");
        assert!(r.gap().is_some(), "a moved record still shows its gap");
        assert!(r.move_out(MovePlan::Keep { drop_gap: false }).is_none());
    }

    #[test]
    fn only_removed_records_without_a_gap_are_reclaimed() {
        let cfg = Config::default();
        assert!(words(None).record(1).move_out(MovePlan::Reclaim).is_none());
        let revived = words(Some(20));
        let kept = revived.record(2).move_out(MovePlan::Reclaim);
        assert_eq!(
            kept.map(|c| c.value),
            Some(Some(20)),
            "a live record is copied after all"
        );
        let with_gap = words(None);
        assert!(with_gap.record(3).gap_for_insert(&cfg).is_ok());
        let copy = with_gap.record(3).move_out(MovePlan::Reclaim);
        assert!(
            copy.is_some_and(|c| c.gap.is_some() && c.value.is_none()),
            "a gap is never dropped"
        );
        let dead = words(None);
        assert!(dead.record(4).move_out(MovePlan::Reclaim).is_none());
        assert!(dead.record(4).gap_for_insert(&cfg).is_err());
        assert!(
            dead.record(4).gap().is_none() && dead.gaps.len() == 0,
            "a moved record never gets a gap"
        );
        let dropped = words(None);
        assert!(dropped.record(6).gap_for_insert(&cfg).is_ok());
        let copy = dropped
            .record(6)
            .move_out(MovePlan::Keep { drop_gap: true });
        assert_eq!(copy.map(|c| c.gap.is_some()), Some(false));
    }
}
