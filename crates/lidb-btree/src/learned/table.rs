//! The leaf mapping table and the model over it (the paper's section IV-A/B): one slot per
//! leaf, in key order, holding its boundary (upper fence, inclusive) key, its page id and a
//! frame hint; the lower fence of slot `i` is slot `i - 1`'s upper fence, so the fences of
//! every leaf, resident or evicted, stay in memory. A lidb-index model over the slots' key
//! images predicts a window of at most `error_bound` slots for a key.
//!
//! Invariants (of a table as built; the tree may have changed since, which the fence checks on
//! the lookup path catch):
//! 1. slots are sorted by upper fence, strictly; only the last slot's is `None` (infinite);
//! 2. the model was built over the slots' images (`image(prefix, upper)`, `u64::MAX` for the
//!    last; non-decreasing by 1 and the image's order), so its window holds the first slot
//!    whose image is at least the key's image.
//!
//! A table is immutable once published except for its frame hints (relaxed atomics, checked
//! against the frame's page id before use: the paper's lazy update), its changed-leaf marks
//! (read by the in-leaf retraining thread) and its split lists (`patch.rs`: the leaves a slot's
//! range holds after splits, swapped in whole; slots, fences and the model never change).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use arc_swap::ArcSwapOption;

use lidb_index::{Family, LearnedIndex, Params};

use super::image::{common_prefix, image};
use crate::error::{Error, Result};
use crate::tree::LeafRef;

/// "No frame" in a slot's hint.
const NO_FRAME: u32 = u32::MAX;

/// One leaf of the table.
#[derive(Debug)]
pub(crate) struct Slot {
    pub upper: Option<Vec<u8>>,
    /// `upper`'s image under the table's prefix (`u64::MAX` for the last slot): the search
    /// compares images first and reads `upper`'s bytes only on a tie.
    image: u64,
    pub pid: u64,
    frame: AtomicU32,
    /// Written through since the last in-leaf refit (the refit thread's work list).
    pub changed: AtomicBool,
    /// The leaves this slot's range held when last patched after a split (`patch.rs`), in key
    /// order, each a slot of its own (whose own list stays empty); `has_split` says whether to
    /// look (set after the list is stored), so a lookup of an unsplit slot loads one flag.
    pub(super) split: ArcSwapOption<Vec<Slot>>,
    pub(super) has_split: AtomicBool,
}

impl Slot {
    /// A slot for `leaf`, whose upper fence's image is `image`.
    pub(super) fn new(leaf: LeafRef, image: u64) -> Slot {
        Slot {
            upper: leaf.upper,
            image,
            pid: leaf.pid,
            frame: AtomicU32::new(leaf.frame.unwrap_or(NO_FRAME)),
            changed: AtomicBool::new(false),
            split: ArcSwapOption::empty(),
            has_split: AtomicBool::new(false),
        }
    }

    pub fn frame_hint(&self) -> Option<u32> {
        let f = self.frame.load(Ordering::Relaxed);
        (f != NO_FRAME).then_some(f)
    }

    /// Stores the hint only when it changed: a lookup that found the leaf where the hint said
    /// writes nothing to the shared slot.
    pub fn set_frame_hint(&self, f: u32) {
        if self.frame.load(Ordering::Relaxed) != f {
            self.frame.store(f, Ordering::Relaxed);
        }
    }

    /// Whether the slot's upper fence is below `key` (whose image is `key_image`): the images
    /// decide unless they tie (the image is order-preserving up to ties).
    fn ends_below(&self, key: &[u8], key_image: u64) -> bool {
        match self.image.cmp(&key_image) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => self.upper.as_deref().is_some_and(|u| u < key),
        }
    }
}

/// The mapping table and its model.
#[derive(Debug)]
pub(crate) struct Table {
    pub slots: Vec<Slot>,
    pub prefix: Vec<u8>,
    model: Box<dyn LearnedIndex>,
    /// Test hook: the model's windows are moved by this many slots (a model forced wrong).
    shift_for_test: i64,
}

/// Where the table sends a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotFind {
    /// The slot whose fences (in the table) cover the key.
    Slot(usize),
    /// No slot of the model's window covers the key (the model is wrong for it, or image ties
    /// spread further than the window).
    Miss,
}

impl Table {
    /// Heap bytes of the table and its model: the slot array (its capacity), each slot's
    /// boundary key, the shared prefix, and the model's encoded size (`size_bytes`, exact by the
    /// index contract). Allocator overhead is not counted.
    pub fn memory_bytes(&self) -> u64 {
        let slots = (self.slots.capacity() * std::mem::size_of::<Slot>()) as u64;
        let keys: u64 = self
            .slots
            .iter()
            .map(|s| s.upper.as_ref().map_or(0, |k| k.capacity() as u64))
            .sum();
        let split: u64 = self
            .slots
            .iter()
            .filter_map(|s| s.split.load_full())
            .map(|v| {
                let keys: u64 = v
                    .iter()
                    .map(|s| s.upper.as_ref().map_or(0, |k| k.capacity() as u64))
                    .sum();
                (v.capacity() * std::mem::size_of::<Slot>()) as u64 + keys
            })
            .sum();
        slots + keys + split + self.prefix.capacity() as u64 + self.model.size_bytes()
    }

    /// A table over `leaves` (from `Tree::leaf_parents`) with a `family` model of
    /// `error_bound` slots.
    pub fn build(leaves: Vec<LeafRef>, family: Family, error_bound: u64) -> Result<Table> {
        let prefix = common_prefix(leaves.iter().filter_map(|l| l.upper.as_deref()));
        let model = train(&prefix, &leaves, family, error_bound)?;
        Self::with_model(leaves, prefix, model)
    }

    /// A table over `leaves` with a model decoded from a blob (checked against the slots).
    pub fn with_model(
        leaves: Vec<LeafRef>,
        prefix: Vec<u8>,
        model: Box<dyn LearnedIndex>,
    ) -> Result<Table> {
        let images = images_of(&prefix, &leaves);
        if model.key_count() != images.len() as u64 || images.is_empty() {
            return Err(Error::InvalidOption(format!(
                "model over {} keys for a table of {} slots",
                model.key_count(),
                images.len()
            )));
        }
        let slots = leaves
            .into_iter()
            .zip(images)
            .map(|(l, image)| Slot::new(l, image))
            .collect();
        Ok(Table {
            slots,
            prefix,
            model,
            shift_for_test: 0,
        })
    }

    pub fn model(&self) -> &dyn LearnedIndex {
        self.model.as_ref()
    }

    pub fn set_shift_for_test(&mut self, shift: i64) {
        self.shift_for_test = shift;
    }

    /// The leaves of the table (page ids, fences, frame hints).
    pub fn leaf_refs(&self) -> Vec<LeafRef> {
        self.slots
            .iter()
            .map(|s| LeafRef {
                upper: s.upper.clone(),
                pid: s.pid,
                frame: s.frame_hint(),
            })
            .collect()
    }

    /// The leaves of the table with every split list (`patch.rs`) folded in: each listed leaf
    /// in place of its slot. `None` when no slot has a list, or when the folded fences are not
    /// strictly increasing (a list gone stale under a merge), so the caller keeps the table as
    /// it is.
    pub fn folded_leaf_refs(&self) -> Option<Vec<LeafRef>> {
        let mut out = Vec::with_capacity(self.slots.len());
        let mut folded = false;
        for s in &self.slots {
            let split = s.split_leaves();
            match split.as_ref().and_then(|g| g.as_deref()) {
                Some(leaves) if !leaves.is_empty() => {
                    folded = true;
                    out.extend(leaves.iter().map(|l| LeafRef {
                        upper: l.upper.clone(),
                        pid: l.pid,
                        frame: l.frame_hint(),
                    }));
                }
                _ => out.push(LeafRef {
                    upper: s.upper.clone(),
                    pid: s.pid,
                    frame: s.frame_hint(),
                }),
            }
        }
        let sorted = out.windows(2).all(|w| match w {
            [a, b] => match (&a.upper, &b.upper) {
                (Some(a), Some(b)) => a < b,
                (Some(_), None) => true,
                (None, _) => false,
            },
            _ => true,
        });
        (folded && sorted).then_some(out)
    }

    /// The slot's lower fence (exclusive; `None`: minus infinity).
    pub fn lower(&self, i: usize) -> Option<&[u8]> {
        i.checked_sub(1)
            .and_then(|p| self.slots.get(p))
            .and_then(|s| s.upper.as_deref())
    }

    /// Predicts the slot of `key`: the model's window, then a search by key bytes inside it
    /// (binary, over at most `error_bound` slots), then the check of the found slot's lower
    /// fence. Never reads a leaf.
    pub fn find(&self, key: &[u8]) -> SlotFind {
        let n = self.slots.len();
        let key_image = image(&self.prefix, key);
        let b = self.model.search(key_image);
        let shift = |x: u64| {
            (x as i64)
                .saturating_add(self.shift_for_test)
                .clamp(0, n as i64)
        };
        let (lo, hi) = (shift(b.lo) as usize, shift(b.hi) as usize);
        let Some(window) = self.slots.get(lo..hi) else {
            return SlotFind::Miss;
        };
        let i = lo + window.partition_point(|s| s.ends_below(key, key_image));
        if i >= hi {
            return SlotFind::Miss; // every slot of the window ends below the key
        }
        let starts_below = i
            .checked_sub(1)
            .and_then(|p| self.slots.get(p))
            .is_none_or(|s| s.ends_below(key, key_image));
        if !starts_below {
            return SlotFind::Miss; // the window starts above the key
        }
        SlotFind::Slot(i)
    }

    /// The slot whose table fences cover `key`, by binary search over all slots (no model):
    /// marks a leaf changed by a write without trusting the model.
    pub fn slot_of(&self, key: &[u8]) -> usize {
        self.slots
            .partition_point(|s| s.upper.as_deref().is_some_and(|u| u < key))
            .min(self.slots.len().saturating_sub(1))
    }
}

fn images_of(prefix: &[u8], leaves: &[LeafRef]) -> Vec<u64> {
    leaves
        .iter()
        .map(|l| l.upper.as_deref().map_or(u64::MAX, |u| image(prefix, u)))
        .collect()
}

/// Trains a `family` model (the default, RadixSpline, is the authors' code's) over the slots'
/// images.
pub(crate) fn train(
    prefix: &[u8],
    leaves: &[LeafRef],
    family: Family,
    error_bound: u64,
) -> Result<Box<dyn LearnedIndex>> {
    let images = images_of(prefix, leaves);
    lidb_index::build(family, &images, &Params::new(error_bound.max(2)))
        .map_err(|e| Error::InvalidOption(format!("training the leaf model: {e}")))
}
