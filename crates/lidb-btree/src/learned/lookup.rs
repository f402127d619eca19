//! The learned path's operations: predict the slot, check it against the table's fences (no
//! I/O), pick the slot's leaf (the slot's own, or the one of its split list covering the key,
//! `patch.rs`), reach it by its frame hint or page id (loading it UNLINKED if needed), check the
//! leaf's own fences, answer; on any mismatch count a misprediction, patch the slot when its
//! leaf no longer covers the key, and walk the tree. A write that split its leaf patches the
//! slot after the tree's walk.
//!
//! Callers: the engine's target (`engine.rs`), any thread. The table snapshot is held only for
//! the lookup; no lock is held while the tree is called.

use std::sync::atomic::Ordering;

use super::Learned;
use super::patch::pick;
use super::table::{SlotFind, Table};
use crate::error::Result;
use crate::tree::{LeafProbe, LeafWrite};

/// What the learned path did with a lookup.
enum Reached {
    /// Answered from the leaf.
    Answer(Option<Vec<u8>>),
    /// The leaf is not resident and no read was allowed.
    NotResident,
    /// Mispredicted (counted): walk the tree.
    Miss,
}

impl Learned {
    /// The value of `key`: the learned path, the tree walk when it misses.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.reach(key, true)? {
            Reached::Answer(v) => Ok(v),
            Reached::NotResident | Reached::Miss => {
                self.counters.fallbacks.incr();
                self.tree.get(key)
            }
        }
    }

    /// The value of `key` if it can be found with no device read: `None` when a read would be
    /// needed (nothing is read then).
    pub fn get_if_in_memory(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        match self.reach(key, false)? {
            Reached::Answer(v) => Ok(Some(v)),
            Reached::NotResident | Reached::Miss => self.tree.get_resident(key),
        }
    }

    fn reach(&self, key: &[u8], may_load: bool) -> Result<Reached> {
        self.counters.lookups.incr();
        let table = self.table.load();
        let slot = match table.find(key) {
            SlotFind::Slot(i) => table.slots.get(i),
            SlotFind::Miss => None,
        };
        let Some(slot) = slot else {
            self.mispredicted();
            return Ok(Reached::Miss);
        };
        let split = slot.split_leaves();
        let leaf = pick(slot, &split, key);
        let probe = match self.tree.probe_resident(leaf.pid, leaf.frame_hint(), key)? {
            Some(p) => p,
            None if !may_load => return Ok(Reached::NotResident),
            None => {
                self.counters.unlinked_loads.incr();
                self.tree.probe_leaf(leaf.pid, None, key)?
            }
        };
        match probe {
            LeafProbe::Found { value, frame } => {
                leaf.set_frame_hint(frame);
                self.counters.hits.incr();
                Ok(Reached::Answer(Some(value)))
            }
            LeafProbe::Absent { frame } => {
                leaf.set_frame_hint(frame);
                self.counters.hits.incr();
                Ok(Reached::Answer(None))
            }
            LeafProbe::Miss => {
                self.mispredicted();
                self.patch_after_miss(&table, key);
                Ok(Reached::Miss)
            }
        }
    }

    /// Patches the slot whose table fences cover `key` (its leaf split or merged since the
    /// table was built). A failed patch leaves the slot as it was and is counted: the tree walk
    /// that follows reports any I/O error it meets.
    fn patch_after_miss(&self, table: &Table, key: &[u8]) {
        if let SlotFind::Slot(i) = table.find(key) {
            self.patch_or_count(table, i);
        }
    }

    /// Sets `key` to `value` in its leaf through the table; the tree's put when the leaf is
    /// not the one predicted or needs a split.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let table = self.table.load();
        let found = table.find(key);
        let mut patch = None;
        if let SlotFind::Slot(i) = found
            && let Some(slot) = table.slots.get(i)
        {
            let split = slot.split_leaves();
            let leaf = pick(slot, &split, key);
            match self
                .tree
                .put_in_leaf(leaf.pid, leaf.frame_hint(), key, value)?
            {
                LeafWrite::Done { frame, .. } => {
                    leaf.set_frame_hint(frame);
                    self.counters.learned_writes.incr();
                    self.mark_changed(&table, i);
                    return Ok(());
                }
                LeafWrite::Miss => self.mispredicted(),
                LeafWrite::Full => {}
            }
            // The leaf split under the walk below (Full), or had split or merged before (Miss).
            patch = Some(i);
        } else {
            self.mispredicted();
        }
        self.counters.fallbacks.incr();
        self.tree.put(key, value)?;
        if let Some(i) = patch {
            // A failed patch leaves the slot as it was (the next miss tries again), counted.
            self.patch_or_count(&table, i);
        }
        self.mark_changed(&table, table.slot_of(key));
        Ok(())
    }

    /// Removes `key` through the table; the tree's delete when the leaf is not the one
    /// predicted. Returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let table = self.table.load();
        if let SlotFind::Slot(i) = table.find(key)
            && let Some(slot) = table.slots.get(i)
        {
            let split = slot.split_leaves();
            let leaf = pick(slot, &split, key);
            match self.tree.delete_in_leaf(leaf.pid, leaf.frame_hint(), key)? {
                LeafWrite::Done { frame, found } => {
                    leaf.set_frame_hint(frame);
                    self.counters.learned_writes.incr();
                    if found {
                        self.mark_changed(&table, i);
                    }
                    return Ok(found);
                }
                LeafWrite::Miss | LeafWrite::Full => self.mispredicted(),
            }
        } else {
            self.mispredicted();
        }
        self.counters.fallbacks.incr();
        let found = self.tree.delete(key)?;
        self.mark_changed(&table, table.slot_of(key));
        Ok(found)
    }

    /// Whether the background threads were asked to stop.
    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}
