//! Ordered range scans (the paper's section 3.4): a depth-first walk of the layout in key order
//! (record, then its gap: level bins or the small model retrained from them), so the answer comes
//! out sorted without sorting at query time.
//!
//! Any thread may scan, lock-free, concurrently with writers and retraining. Each record is read
//! consistently (its seqlock) and each level-bin set as one consistent snapshot; the scan as a
//! whole is not a snapshot: a key written during the scan may or may not appear, but every key
//! present and untouched for the whole scan appears exactly once, because every key has exactly
//! one home at every instant (see gap.rs) and the walk visits each home once, in order. The
//! layout is pinned for the scan (`load_full`); a model retraining meanwhile freezes the records
//! it copies (writes to them wait for the new layout, so what the walk reads there was current
//! when the scan began) and shares their bins, which the walk reads through the old layout.

use std::sync::Arc;

use crate::gap::{GapSlot, Step};
use crate::index::FineIndex;
use crate::layout::Layout;
use crate::node::Node;

/// A pending piece of the walk.
enum Work<'a> {
    /// A gap.
    Gap(&'a GapSlot),
    /// The records of a node from a position.
    Records(&'a Node, usize),
}

impl FineIndex {
    /// Entries with `lo <= key <= hi` in key order, at most `limit` of them.
    pub fn range(&self, lo: u64, hi: u64, limit: usize) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        self.range_into(lo, hi, limit, &mut out);
        out
    }

    /// [`FineIndex::range`] into `out` (appended; earlier content stays).
    pub fn range_into(&self, lo: u64, hi: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        if lo > hi || limit == 0 {
            return;
        }
        let layout: Arc<Layout> = self.layout.load_full();
        let Some((first, _)) = layout.node_for(lo) else {
            return;
        };
        let start = out.len();
        let mut bins = Vec::new();
        let mut work: Vec<Work<'_>> = Vec::new();
        let nodes = layout.nodes();
        for top in nodes.iter().skip(first) {
            enter(top, lo, &mut work);
            while let Some(item) = work.pop() {
                match item {
                    Work::Records(node, i) => {
                        let Some(r) = node.records().get(i) else {
                            continue;
                        };
                        if r.key > hi {
                            return;
                        }
                        work.push(Work::Records(node, i + 1));
                        work.push(Work::Gap(&r.gap));
                        if r.key >= lo
                            && let Some(v) = r.read()
                        {
                            out.push((r.key, v));
                            if out.len() - start >= limit {
                                return;
                            }
                        }
                    }
                    Work::Gap(slot) => match slot.snapshot(&mut bins) {
                        Step::Descend(sub) => enter(sub, lo, &mut work),
                        Step::Done(()) => {
                            for &(k, v) in bins.iter().filter(|e| e.0 >= lo) {
                                if k > hi {
                                    return;
                                }
                                out.push((k, v));
                                if out.len() - start >= limit {
                                    return;
                                }
                            }
                        }
                    },
                }
            }
        }
    }
}

/// Schedules the walk of `node` from `lo`: first the gap that may hold keys `>= lo` below the
/// last record `< lo`, then the records from the first `>= lo`.
fn enter<'a>(node: &'a Node, lo: u64, work: &mut Vec<Work<'a>>) {
    let (before, first) = node.scan_start(lo);
    work.push(Work::Records(node, first));
    if let Some(b) = before {
        work.push(Work::Gap(&b.gap));
    }
}
