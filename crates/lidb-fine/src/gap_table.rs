//! The gap table of a node: where the gaps of its records live, so that a record is only its key
//! (in the node's key array) and a 16-byte {state, value} slot (`record.rs`).
//!
//! A record's state word carries its gap id (`0`: no gap; else index + 1 into this table). The
//! table is append-only: segment `k` holds `FIRST_SEGMENT << k` entries and is allocated when the
//! first id in it is handed out, so a node whose records have few gaps pays for few entries (at
//! most twice the gaps plus 4, and one `OnceLock` per segment that could ever be needed). Each
//! entry is a `OnceLock<Arc<Gap>>`, set once; an entry never changes after, and segments are
//! never freed before the node.
//!
//! The price of a 24-byte record: an operation below a record follows the gap id through the
//! table (segment array, then entry) instead of a pointer beside the state word, one more
//! dependent load that is mostly a cache miss for random keys (callgrind's cache model, 1M keys,
//! 1 MiB last level: 0.5 more last-level misses per insert, 0.7 per get of a key in a gap; about
//! a tenth of an insert's time on the 2-core machine). Gets of trained keys, which touch no gap,
//! got cheaper (denser slots).
//!
//! Who may do what: any thread reads ([`GapTable::get`]: two `OnceLock` loads, no lock); a
//! writer hands out an id with [`GapTable::push`] only under the lock of a record that has no
//! gap (`Record::gap_for_insert`), and stores the id into the record's state word in the
//! unlocking (Release) store, after the entry was set; a reader that loads that state (Acquire)
//! therefore finds the entry. A node's builder pushes the gaps its copied records share
//! (`Node::with_router`) before any other thread sees the node.
//!
//! Invariants:
//! 1. Ids are handed out in order (an atomic counter) and each to one record of the node, once,
//!    so at most `records` ids exist: the table is sized for that many when built and never
//!    runs out.
//! 2. The entry of an id a record's state word holds is set, to the gap of that record.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::gap::Gap;

/// Entries of segment 0; segment `k` has `FIRST_SEGMENT << k`.
const FIRST_SEGMENT: usize = 4;

type Entry = OnceLock<Arc<Gap>>;
type Segment = OnceLock<Box<[Entry]>>;

/// The gaps of one node's records, by id.
#[derive(Debug)]
pub(crate) struct GapTable {
    segments: Box<[Segment]>,
    /// Ids handed out so far (the next id is `handed + 1`).
    handed: AtomicU32,
}

/// Segment and offset of entry `i` (id `i + 1`): segment `k` starts at `FIRST_SEGMENT * (2^k - 1)`.
fn locate(i: usize) -> (usize, usize) {
    let j = i / FIRST_SEGMENT + 1;
    let k = (usize::BITS - 1 - j.leading_zeros()) as usize;
    (k, i - FIRST_SEGMENT * ((1 << k) - 1))
}

impl GapTable {
    /// An empty table that can hold at least `capacity` gaps (the node's record count, invariant
    /// 1).
    pub fn new(capacity: usize) -> GapTable {
        let segments = if capacity == 0 {
            0
        } else {
            locate(capacity - 1).0 + 1
        };
        GapTable {
            segments: (0..segments).map(|_| Segment::new()).collect(),
            handed: AtomicU32::new(0),
        }
    }

    /// The gap of id `id` (`None` for 0 or an id not handed out).
    #[inline]
    pub fn get(&self, id: u32) -> Option<&Arc<Gap>> {
        let (k, at) = locate((id as usize).checked_sub(1)?);
        self.segments.get(k)?.get()?.get(at)?.get()
    }

    /// Stores `gap` under the next id; that id and the gap as stored. `None` if the table is
    /// full, which invariant 1 rules out. Only under the lock of a record without a gap, or by
    /// the node's builder.
    pub fn push(&self, gap: Arc<Gap>) -> Option<(u32, &Gap)> {
        // Relaxed: the id reaches readers through the record's state word (Release / Acquire).
        let i = self.handed.fetch_add(1, Ordering::Relaxed) as usize;
        let (k, at) = locate(i);
        let segment = self
            .segments
            .get(k)?
            .get_or_init(|| (0..FIRST_SEGMENT << k).map(|_| Entry::new()).collect());
        let entry = segment.get(at)?;
        entry.set(gap).ok()?;
        Some((u32::try_from(i + 1).ok()?, &**entry.get()?))
    }

    /// Heap bytes of the table: its segment array and the segments allocated (not the gaps).
    pub fn heap_bytes(&self) -> u64 {
        let allocated: usize = self
            .segments
            .iter()
            .filter_map(|s| s.get())
            .map(|s| s.len())
            .sum();
        (self.segments.len() * std::mem::size_of::<Segment>()
            + allocated * std::mem::size_of::<Entry>()) as u64
    }

    /// Ids handed out so far.
    #[cfg(test)]
    pub fn len(&self) -> u32 {
        self.handed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn entries_map_to_doubling_segments() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(3), (0, 3));
        assert_eq!(locate(4), (1, 0));
        assert_eq!(locate(11), (1, 7));
        assert_eq!(locate(12), (2, 0));
        assert_eq!(locate(27), (2, 15));
        assert_eq!(locate(28), (3, 0));
        // Every index has its own entry.
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            let (k, at) = locate(i);
            assert!(at < FIRST_SEGMENT << k, "{i} -> ({k}, {at})");
            assert!(seen.insert((k, at)), "{i} shares ({k}, {at})");
        }
        assert_eq!(GapTable::new(0).segments.len(), 0);
        assert_eq!(GapTable::new(4).segments.len(), 1);
        assert_eq!(GapTable::new(5).segments.len(), 2);
        assert_eq!(GapTable::new(12).segments.len(), 2);
        assert_eq!(GapTable::new(13).segments.len(), 3);
    }

    #[test]
    fn ids_are_handed_in_order_across_segments_up_to_the_capacity() {
        let cfg = Config::default();
        let table = GapTable::new(30);
        let empty = table.heap_bytes();
        assert_eq!(empty, 4 * std::mem::size_of::<Segment>() as u64);
        assert!(table.get(0).is_none() && table.get(1).is_none());
        let gaps: Vec<Arc<Gap>> = (0..30).map(|_| Gap::new(&cfg)).collect();
        for (n, g) in gaps.iter().enumerate() {
            assert_eq!(table.push(Arc::clone(g)).map(|p| p.0), Some(n as u32 + 1));
            assert_eq!(table.len(), n as u32 + 1);
            if n == 3 {
                // Segment 0 (4 entries) only.
                assert_eq!(table.heap_bytes(), empty + 4 * 16);
            }
            if n == 4 {
                assert_eq!(table.heap_bytes(), empty + 12 * 16, "segment 1 (8 entries)");
            }
        }
        for (n, g) in gaps.iter().enumerate() {
            let got = table.get(n as u32 + 1);
            assert!(got.is_some_and(|t| Arc::ptr_eq(t, g)), "id {}", n + 1);
        }
        assert!(table.get(31).is_none());
        // Room for at least the capacity: the 4 segments of a table of 30 hold 60.
        for id in 31..=60 {
            assert_eq!(table.push(Gap::new(&cfg)).map(|p| p.0), Some(id));
        }
        assert!(
            table.push(Gap::new(&cfg)).is_none(),
            "a 61st gap in 4 segments"
        );
        assert!(table.get(61).is_none() && table.get(60).is_some());
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }

    #[test]
    fn concurrent_pushes_get_distinct_ids_and_every_entry_is_found() {
        let cfg = Config::default();
        let table = GapTable::new(4_000);
        let ids: Vec<Vec<(u32, Arc<Gap>)>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..1_000)
                            .map(|_| {
                                let g = Gap::new(&cfg);
                                (table.push(Arc::clone(&g)).map_or(0, |p| p.0), g)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_default())
                .collect()
        });
        let mut all: Vec<u32> = ids.iter().flatten().map(|(id, _)| *id).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=4_000).collect::<Vec<u32>>());
        for (id, g) in ids.iter().flatten() {
            assert!(table.get(*id).is_some_and(|t| Arc::ptr_eq(t, g)), "id {id}");
        }
    }
}
