//! Patching the mapping table after a split, without waiting for the full rebuild: the leaves a
//! slot's range holds now are read from their parents (`Tree::leaves_between`, no leaf read) and
//! hung on the slot as its split list; a lookup the table sends to that slot then picks the
//! split leaf covering its key by the list's fences.
//!
//! Why a list per slot and not a new slot in the table: the model was trained over the slots'
//! positions, so inserting a slot would shift every later position out of the model's error
//! bound, and the table is shared by lookups that hold no lock (copying it per split would cost
//! O(slots) each). The slot keeps its fences (the split leaves cover exactly its range) and its
//! position, so the model stays exact for it; the next full rebuild (the retraining thread, when
//! mispredictions / SMOs pass the tolerance) folds the lists into slots of their own.
//!
//! The paper (section IV-C) updates the table only lazily, through the frame pointers checked
//! against the page id, and leaves splits to retraining; this list is the same kind of hint:
//! a stale list (a later split, a merge) sends a lookup to a leaf whose own fences, checked
//! under its latch version, do not cover the key, which is a misprediction and a walk, then a
//! new patch; never a wrong answer.
//!
//! A list is a stopgap, searched by binary search over its fences: one longer than
//! [`MAX_SPLIT_LEAVES`] means the table is far behind the tree (a slot that now holds many leaves,
//! e.g. a table built before a bulk load), so the patch also wakes the full rebuild (unless the
//! tolerance is infinite: retraining off), which puts those leaves back under the model.
//!
//! Callers: the learned path's gets and writes (`lookup.rs`), any thread: after a write that
//! split the leaf, and after a probe of a slot's leaf that no longer covers the key. Concurrent
//! patches of one slot each store a whole list read after their own split; the last store wins
//! (a list that misses a split only costs that misprediction again). Lists are stored before
//! `has_split` is set (Release / Acquire), and never removed from a published table.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::image::image;
use super::table::{Slot, Table};
use super::{Learned, bump};
use crate::error::Result;

/// Leaves a split list may hold before its patch wakes the full rebuild.
pub(crate) const MAX_SPLIT_LEAVES: usize = 8;

/// A slot's split list as loaded by a lookup (the guard keeps it alive while it is used).
pub(crate) type SplitGuard = Option<arc_swap::Guard<Option<Arc<Vec<Slot>>>>>;

impl Slot {
    /// The slot's split list, if it has one: one flag load when it has none.
    pub fn split_leaves(&self) -> SplitGuard {
        self.has_split
            .load(Ordering::Acquire)
            .then(|| self.split.load())
    }
}

/// The leaf of `slot` to try for `key`: the first leaf of its split list (`split`, from
/// [`Slot::split_leaves`]) whose upper fence is at or above the key, or the slot itself when
/// there is no list (or the list ends below the key).
pub(crate) fn pick<'a>(slot: &'a Slot, split: &'a SplitGuard, key: &[u8]) -> &'a Slot {
    let Some(leaves) = split.as_ref().and_then(|g| g.as_deref()) else {
        return slot;
    };
    let i = leaves.partition_point(|s| s.upper.as_deref().is_some_and(|u| u < key));
    leaves.get(i).unwrap_or(slot)
}

impl Learned {
    /// [`Learned::patch`] for callers that go on whatever happens: a failed patch leaves the slot
    /// as it was (the next miss tries again) and is counted in `LearnedStats::patch_errors`.
    pub(super) fn patch_or_count(&self, table: &Table, i: usize) {
        if self.patch(table, i).is_err() {
            bump(&self.counters.patch_errors);
        }
    }

    /// Reads the leaves slot `i` of `table` covers now and hangs them on it (see the module
    /// documentation). A slot still holding its one leaf is left as it is.
    pub(super) fn patch(&self, table: &Table, i: usize) -> Result<()> {
        let Some(slot) = table.slots.get(i) else {
            return Ok(());
        };
        if self.skip_patches.load(Ordering::Relaxed) {
            return Ok(());
        }
        let leaves = self
            .tree
            .leaves_between(table.lower(i), slot.upper.as_deref())?;
        if let [only] = leaves.as_slice()
            && only.pid == slot.pid
            && !slot.has_split.load(Ordering::Acquire)
        {
            return Ok(());
        }
        let count = leaves.len();
        let split: Vec<Slot> = leaves
            .into_iter()
            .map(|l| {
                let img = l
                    .upper
                    .as_deref()
                    .map_or(u64::MAX, |u| image(&table.prefix, u));
                Slot::new(l, img)
            })
            .collect();
        slot.split.store(Some(Arc::new(split)));
        slot.has_split.store(true, Ordering::Release);
        bump(&self.counters.table_patches);
        if count > MAX_SPLIT_LEAVES && self.opts.tolerance.is_finite() {
            self.retrain_table.nudge();
        }
        Ok(())
    }
}
