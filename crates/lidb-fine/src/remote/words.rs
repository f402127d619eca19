//! The version word of a trained-data region and the lock-free copy of its record words
//! (docs/format/fine-wire.md, "Trained-data regions").
//!
//! Who may do what: any thread copies ([`RegionWords::copy`]: no lock, no index code: loads of
//! atomics only); writers of a trained record run their write inside [`RegionWords::write`]
//! (the region's writer latch, then the record's lock); model retraining calls
//! [`RegionWords::retire`] once, before it moves any record of the node.
//!
//! The version word: bit 63 RETIRED (set once, never cleared); bits 0..62 a counter, odd while a
//! writer is inside. Orderings are the seqlock's (`seqlock.rs`): a writer makes the counter odd
//! (Relaxed), fences (Release), writes, and stores the next even value (Release); a copier loads
//! the word (Acquire), the record words (Relaxed), fences (Acquire) and loads the word again.
//! Equal even loads without RETIRED mean no writer touched the region between them, so the
//! copied words held together at one instant.
//!
//! Invariants: the counter only grows; RETIRED is set before the first record of the node
//! moves; only one writer at a time is inside (the latch).

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Mutex, PoisonError};

use crate::record::Record;

/// Bit 63 of a version word: the region's node was replaced by a model retraining.
pub const RETIRED: u64 = 1 << 63;

/// Words per record in a copy: key, flags (bit 0: removed), value.
pub const WORDS_PER_RECORD: usize = 3;

/// Ids of regions: unique for the life of the process, never 0 (0 means "no region" on the wire).
static NEXT_REGION_ID: AtomicU64 = AtomicU64::new(1);

/// The region identity and version word of one trained array.
#[derive(Debug)]
pub(crate) struct RegionWords {
    pub id: u64,
    version: AtomicU64,
    writers: Mutex<()>,
}

impl RegionWords {
    pub fn new() -> RegionWords {
        RegionWords {
            id: NEXT_REGION_ID.fetch_add(1, Ordering::Relaxed),
            version: AtomicU64::new(0),
            writers: Mutex::new(()),
        }
    }

    /// Runs `write` (which changes record words of this region) with the counter odd.
    pub fn write<T>(&self, write: impl FnOnce() -> T) -> T {
        let _latch = self.writers.lock().unwrap_or_else(PoisonError::into_inner);
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        // Made even again even if `write` panics, so copies do not stay torn forever.
        let _even = Even {
            word: &self.version,
            next: v.wrapping_add(2),
        };
        write()
    }

    /// Marks the region retired (copies from now on carry RETIRED); a copy in flight is torn.
    pub fn retire(&self) {
        let _latch = self.writers.lock().unwrap_or_else(PoisonError::into_inner);
        let v = self.version.load(Ordering::Relaxed);
        self.version
            .store(v.wrapping_add(2) | RETIRED, Ordering::Release);
    }

    pub fn is_retired(&self) -> bool {
        self.version.load(Ordering::Acquire) & RETIRED != 0
    }

    /// Appends to `out` the head version, the words of `records[offset..offset + count]`
    /// (clamped to the array), and the tail version. `mid`, if any, runs after half the records
    /// were copied (the test hook that tears a copy).
    pub fn copy(
        &self,
        records: &[Record],
        offset: usize,
        count: usize,
        out: &mut Vec<u64>,
        mid: Option<&mut dyn FnMut()>,
    ) {
        let from = offset.min(records.len());
        let to = offset.saturating_add(count).min(records.len());
        let window = records.get(from..to).unwrap_or_default();
        out.reserve(2 + window.len() * WORDS_PER_RECORD);
        out.push(self.version.load(Ordering::Acquire));
        let half = window.len() / 2;
        let mut mid = mid;
        for (i, r) in window.iter().enumerate() {
            if i == half
                && let Some(f) = mid.take()
            {
                f();
            }
            let (removed, value) = r.raw_words();
            out.extend_from_slice(&[r.key, u64::from(removed), value]);
        }
        if let Some(f) = mid.take() {
            f();
        }
        fence(Ordering::Acquire);
        out.push(self.version.load(Ordering::Relaxed));
    }
}

/// Whether a copy's head and tail version words show a consistent, current copy.
pub fn copy_is_valid(head: u64, tail: u64) -> bool {
    head == tail && head & 1 == 0 && head & RETIRED == 0
}

/// Stores the next even counter when dropped.
struct Even<'a> {
    word: &'a AtomicU64,
    next: u64,
}

impl Drop for Even<'_> {
    fn drop(&mut self) {
        self.word.store(self.next, Ordering::Release);
    }
}
