//! `li+delta`: the delta-buffer design the FINEdex paper compares with (XIndex-like, without its
//! merging), built from lidb parts: a static PGM index (lidb-index, boundary [`BOUNDARY`]) over
//! the bulk-loaded sorted keys, their values as `AtomicU64`s updated in place, and a concurrent
//! ordered buffer (crossbeam-skiplist's `SkipMap`) that takes every insert of a key not loaded.
//!
//! A read looks in the buffer, then in the static part. A removed loaded key keeps its slot with
//! the value [`TOMBSTONE`], so the value `u64::MAX` cannot be stored (`insert`/`update` of it is
//! a caller bug: debug assertion). NOT built: merging the buffer into a retrained static part
//! (the buffer only grows), so inserts slow reads down as the buffer fills.
//!
//! Threads: any. Two writers of the same loaded key race only on its atomic (last write wins).

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_skiplist::SkipMap;
use lidb_index::{Family, LearnedIndex, Params, lower_bound_with};

use lidb_bench::concurrent::ConcurrentIndex;

use super::peers::skipmap_insert;

/// The PGM position boundary (the search window) of the static part.
pub const BOUNDARY: u64 = 64;

/// The value of a removed loaded key.
pub const TOMBSTONE: u64 = u64::MAX;

/// Static learned index plus delta buffer.
#[derive(Debug)]
pub struct LiDelta {
    keys: Vec<u64>,
    values: Vec<AtomicU64>,
    model: Option<Box<dyn LearnedIndex>>,
    buffer: SkipMap<u64, AtomicU64>,
}

impl LiDelta {
    /// Trains PGM over `entries` (keys strictly increasing).
    pub fn bulk_load(entries: &[(u64, u64)]) -> Result<LiDelta, String> {
        let keys: Vec<u64> = entries.iter().map(|e| e.0).collect();
        let values = entries.iter().map(|e| AtomicU64::new(e.1)).collect();
        let model = if keys.is_empty() {
            None
        } else {
            let m = lidb_index::build(Family::Pgm, &keys, &Params::new(BOUNDARY))
                .map_err(|e| format!("li+delta: {e}"))?;
            Some(m)
        };
        Ok(LiDelta {
            keys,
            values,
            model,
            buffer: SkipMap::new(),
        })
    }

    /// The position of `key` among the loaded keys, if it is one of them.
    fn slot(&self, key: u64) -> Option<&AtomicU64> {
        let model = self.model.as_deref()?;
        let pos = lower_bound_with(model, &self.keys, key) as usize;
        (self.keys.get(pos) == Some(&key))
            .then(|| self.values.get(pos))
            .flatten()
    }

    /// The first loaded position with key `>= key`.
    fn lower_bound(&self, key: u64) -> usize {
        match self.model.as_deref() {
            Some(m) => lower_bound_with(m, &self.keys, key) as usize,
            None => 0,
        }
    }
}

fn live(v: u64) -> Option<u64> {
    (v != TOMBSTONE).then_some(v)
}

impl ConcurrentIndex for LiDelta {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        debug_assert_ne!(value, TOMBSTONE, "li+delta cannot store u64::MAX");
        match self.slot(key) {
            Some(slot) => live(slot.swap(value, Ordering::AcqRel)),
            None => skipmap_insert(&self.buffer, key, value),
        }
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        debug_assert_ne!(value, TOMBSTONE, "li+delta cannot store u64::MAX");
        if let Some(e) = self.buffer.get(&key) {
            return Some(e.value().swap(value, Ordering::AcqRel));
        }
        let slot = self.slot(key)?;
        slot.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
            (old != TOMBSTONE).then_some(value)
        })
        .ok()
    }
    fn get(&self, key: u64) -> Option<u64> {
        if let Some(e) = self.buffer.get(&key) {
            return Some(e.value().load(Ordering::Acquire));
        }
        live(self.slot(key)?.load(Ordering::Acquire))
    }
    fn remove(&self, key: u64) -> Option<u64> {
        if let Some(e) = self.buffer.remove(&key) {
            return Some(e.value().load(Ordering::Acquire));
        }
        live(self.slot(key)?.swap(TOMBSTONE, Ordering::AcqRel))
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        let start = self.lower_bound(from);
        let mut loaded = self
            .keys
            .iter()
            .zip(&self.values)
            .skip(start)
            .filter_map(|(&k, v)| live(v.load(Ordering::Acquire)).map(|v| (k, v)))
            .peekable();
        let mut buffered = self
            .buffer
            .range(from..)
            .map(|e| (*e.key(), e.value().load(Ordering::Acquire)))
            .peekable();
        let mut taken = 0;
        while taken < limit {
            let next = match (loaded.peek(), buffered.peek()) {
                (Some(a), Some(b)) if a.0 <= b.0 => loaded.next(),
                (Some(_), Some(_)) | (None, Some(_)) => buffered.next(),
                (Some(_), None) => loaded.next(),
                (None, None) => None,
            };
            let Some(e) = next else { break };
            out.push(e);
            taken += 1;
        }
    }
}
