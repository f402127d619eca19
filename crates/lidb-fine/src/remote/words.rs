//! The version words of a trained-data region and the lock-free copy of its record words
//! (docs/format/fine-wire.md, "Trained-data regions").
//!
//! Who may do what: any thread copies ([`RegionWords::copy`]: no lock, no index code: loads of
//! atomics only); writers of a trained record run their write inside [`RegionWords::write`]
//! (no lock of its own: two counters; the record's lock serialises writers of one record);
//! model retraining calls [`RegionWords::retire`] once, before it moves any record of the node.
//!
//! Two words: `started` (bit 63 RETIRED, set once and never cleared; bits 0..62 count writes
//! begun) and `finished` (writes ended). A writer adds 1 to `started` (Relaxed), fences
//! (Release), writes, and adds 1 to `finished` (Release). A copier loads `started` and
//! `finished` (Acquire), the record words (Relaxed), fences (Acquire) and loads `started` again.
//! The head word it sends is the first `started`, with bit 62 (WRITING) set when a write was in
//! flight (`started != finished`); the tail word is the second `started`. If any record word it
//! loaded was stored by a write, its Acquire fence synchronises with that write's Release fence,
//! so the second `started` counts the write and differs from the head: equal words without
//! WRITING or RETIRED mean the copied words held together at one instant.
//!
//! Invariants: both counts only grow; RETIRED is set before the first record of the node moves.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::record::Slot;

/// Bit 63 of a version word: the region's node was replaced by a model retraining.
pub const RETIRED: u64 = 1 << 63;
/// Bit 62 of a head version word: a write of the region was in flight when the copy began.
pub const WRITING: u64 = 1 << 62;

/// Words per record in a copy: key, flags (bit 0: removed), value.
pub const WORDS_PER_RECORD: usize = 3;

/// Ids of regions: unique for the life of the process, never 0 (0 means "no region" on the wire).
static NEXT_REGION_ID: AtomicU64 = AtomicU64::new(1);

/// The region identity and version words of one trained array.
#[derive(Debug)]
pub(crate) struct RegionWords {
    pub id: u64,
    started: AtomicU64,
    finished: AtomicU64,
}

impl RegionWords {
    pub fn new() -> RegionWords {
        RegionWords {
            id: NEXT_REGION_ID.fetch_add(1, Ordering::Relaxed),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        }
    }

    /// Runs `write` (which changes record words of this region) counted as a write in flight.
    pub fn write<T>(&self, write: impl FnOnce() -> T) -> T {
        self.started.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        // Counted as finished even if `write` panics, so copies do not stay torn forever.
        let _done = Done {
            finished: &self.finished,
        };
        write()
    }

    /// Marks the region retired (copies from now on carry RETIRED); a copy in flight is torn.
    pub fn retire(&self) {
        self.started.fetch_or(RETIRED, Ordering::AcqRel);
    }

    pub fn is_retired(&self) -> bool {
        self.started.load(Ordering::Acquire) & RETIRED != 0
    }

    /// Appends to `out` the head version, the words of records `offset..offset + count` (clamped
    /// to the array; record `i` is key `keys[i]` with words `slots[i]`), and the tail version.
    /// `mid`, if any, runs after half the records were copied (the test hook that tears a copy).
    pub fn copy(
        &self,
        keys: &[u64],
        slots: &[Slot],
        offset: usize,
        count: usize,
        out: &mut Vec<u64>,
        mid: Option<&mut dyn FnMut()>,
    ) {
        let len = keys.len().min(slots.len());
        let from = offset.min(len);
        let to = offset.saturating_add(count).min(len);
        let keys = keys.get(from..to).unwrap_or_default();
        let window = slots.get(from..to).unwrap_or_default();
        out.reserve(2 + window.len() * WORDS_PER_RECORD);
        let started = self.started.load(Ordering::Acquire);
        let finished = self.finished.load(Ordering::Acquire);
        let in_flight = started & !RETIRED != finished;
        out.push(started | if in_flight { WRITING } else { 0 });
        let half = window.len() / 2;
        let mut mid = mid;
        for (i, (&key, slot)) in keys.iter().zip(window).enumerate() {
            if i == half
                && let Some(f) = mid.take()
            {
                f();
            }
            let (removed, value) = slot.raw_words();
            out.extend_from_slice(&[key, u64::from(removed), value]);
        }
        if let Some(f) = mid.take() {
            f();
        }
        fence(Ordering::Acquire);
        out.push(self.started.load(Ordering::Relaxed));
    }
}

/// Whether a copy's head and tail version words show a consistent, current copy.
pub fn copy_is_valid(head: u64, tail: u64) -> bool {
    head == tail && head & (RETIRED | WRITING) == 0
}

/// Bit 62 of a bin copy's version words (READ_BIN): the bin's region was retired before the
/// copy began (head) or before it ended (tail). Bit 63 there is the bin latch's own RETIRED
/// (its entries moved to a small model); bit 0 set means a writer was inside.
pub const BIN_REGION_RETIRED: u64 = 1 << 62;

/// Whether a bin copy's head and tail words show a consistent copy of a live bin: equal, even,
/// neither the latch nor the region retired.
pub fn bin_copy_is_valid(head: u64, tail: u64) -> bool {
    head == tail && head & 1 == 0 && head & (RETIRED | BIN_REGION_RETIRED) == 0
}

/// Counts a write as finished when dropped.
struct Done<'a> {
    finished: &'a AtomicU64,
}

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.finished.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::indexing_slicing, reason = "a copy of 2 records has 8 words")]
    fn a_copy_is_valid_only_without_writes_in_flight_or_between_its_loads() {
        let (keys, slots) = ([1, 2], [Slot::new(Some(10), 0), Slot::new(Some(20), 0)]);
        let w = RegionWords::new();
        let mut out = Vec::new();
        w.copy(&keys, &slots, 0, 2, &mut out, None);
        assert_eq!(out[1..7], [1, 0, 10, 2, 0, 20]);
        assert!(copy_is_valid(out[0], out[7]), "{out:?}");
        // A write in flight when the copy begins (its `finished` not yet counted).
        w.started.fetch_add(1, Ordering::Relaxed);
        out.clear();
        w.copy(&keys, &slots, 0, 2, &mut out, None);
        assert!(!copy_is_valid(out[0], out[7]), "{out:?}");
        w.finished.fetch_add(1, Ordering::Relaxed);
        out.clear();
        w.copy(&keys, &slots, 0, 2, &mut out, None);
        assert!(copy_is_valid(out[0], out[7]), "{out:?}");
        // A write that begins and ends inside the copy.
        out.clear();
        w.copy(&keys, &slots, 0, 2, &mut out, Some(&mut || w.write(|| ())));
        assert!(!copy_is_valid(out[0], out[7]), "{out:?}");
        w.retire();
        out.clear();
        w.copy(&keys, &slots, 0, 2, &mut out, None);
        assert!(
            !copy_is_valid(out[0], out[7]) && out[0] & RETIRED != 0,
            "{out:?}"
        );
    }
}
