//! Ordered iteration over a LIPP tree from a lower-bound seek.
//!
//! The seek descends along the query's predicted slots: by monotonicity every key in an earlier
//! slot of a node is smaller than the query and every key in a later slot is larger, so the
//! first key `>= q` is in the predicted slot's subtree or is the first key after it. The
//! iterator keeps a stack of (node, next slot) frames, inline up to [`INLINE_FRAMES`] deep, so a
//! seek allocates nothing (a heap-allocated stack made a seek's first entry cost several times
//! a `get`).

use smallvec::SmallVec;

use super::{Node, Slot};

/// Frames kept inside the iterator before the stack moves to the heap: deeper than LIPP trees
/// grow on real key sets.
pub(crate) const INLINE_FRAMES: usize = 16;

/// Pairs in increasing key order from a seek (see [`crate::UpdatableIndex::range_from`]).
#[derive(Debug)]
pub struct Iter<'a> {
    stack: SmallVec<[(&'a Node, usize); INLINE_FRAMES]>,
    /// A pair found by the seek itself, returned before the stack is walked.
    pending: Option<(u64, u64)>,
}

impl<'a> Iter<'a> {
    pub(crate) fn seek(root: &'a Node, key: u64) -> Iter<'a> {
        let mut stack = SmallVec::new();
        let mut pending = None;
        let mut node = root;
        loop {
            let slot = node.slot_of(key);
            stack.push((node, slot + 1));
            match node.slot(slot) {
                Slot::Data { key: k, value } if k >= key => pending = Some((k, value)),
                Slot::Child(child) => {
                    node = child;
                    continue;
                }
                _ => {}
            }
            break;
        }
        Iter { stack, pending }
    }
}

impl Iterator for Iter<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if let Some(pair) = self.pending.take() {
            return Some(pair);
        }
        loop {
            let (node, next) = self.stack.last_mut()?;
            if *next >= node.slot_count() {
                self.stack.pop();
                continue;
            }
            let slot = node.slot(*next);
            *next += 1;
            match slot {
                Slot::Empty => {}
                Slot::Data { key, value } => return Some((key, value)),
                Slot::Child(child) => self.stack.push((child, 0)),
            }
        }
    }
}
