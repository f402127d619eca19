//! Ordered range scans (the paper's section 3.4): a depth-first walk of the layout in key order
//! (record, then its gap: level bins or the small model retrained from them), so the answer comes
//! out sorted without sorting at query time.
//!
//! Any thread may scan, lock-free, concurrently with writers and retraining. Each record is read
//! consistently (its seqlock) and each level-bin set as one consistent snapshot; the scan as a
//! whole is not a snapshot: a key written during the scan may or may not appear, but every key
//! present and untouched for the whole scan appears exactly once, because every key has exactly
//! one home at every instant (see gap.rs) and the walk visits each home once, in order. The
//! layout is held for the walk by the walking thread's pin or an `ArcSwap` guard (`pin.rs`: no
//! shared reference count written either way). A model retraining meanwhile moves records into
//! new arrays (`record.rs`): a moved record is frozen, while the gaps it shares with its copy go
//! on changing, and a key reclaimed there may come back into the previous record's (shared) gap.
//! An old layout can therefore show one key twice, frozen in a record and live in a gap. So the
//! walk stops at the first moved record and starts again at its key from the current layout
//! (everything emitted so far is below that key), and it emits a gap's entries only below the
//! key of the record that follows the gap in the walk (entries past it joined the gap after a
//! retraining, and the restart finds them).

use crate::gap::Step;
use crate::index::FineIndex;
use crate::layout::Layout;
use crate::node::Node;
use crate::record::Record;
use crate::seqlock::Backoff;

/// A pending piece of the walk: the gap below a record, or a node's records from a position; each
/// with the key of the record that follows it in the walk (`None`: the end), which bounds the
/// gap's entries.
enum Work<'a> {
    Gap(Record<'a>, Option<u64>),
    Records(&'a Node, usize, Option<u64>),
}

/// How one walk over one layout ended.
#[derive(Debug, PartialEq)]
enum Walked {
    Done,
    /// It reached a moved record with this key: go on from there in the current layout.
    Moved(u64),
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
        let end = out.len().saturating_add(limit);
        let mut from = lo;
        let mut backoff = Backoff::default();
        // A restart waits at most for the copy phase of the retraining that moved the record.
        while let Walked::Moved(key) = self.walk(from, hi, end, out) {
            from = key;
            backoff.snooze();
        }
    }

    /// One walk of the current layout from `lo`, appending until `out` holds `end` entries.
    fn walk(&self, lo: u64, hi: u64, end: usize, out: &mut Vec<(u64, u64)>) -> Walked {
        self.layout
            .with(|layout| walk_layout(layout, lo, hi, end, out))
    }
}

/// One walk of `layout` from `lo` (see [`FineIndex::range_into`]).
fn walk_layout(layout: &Layout, lo: u64, hi: u64, end: usize, out: &mut Vec<(u64, u64)>) -> Walked {
    {
        let Some((first, _)) = layout.node_for(lo) else {
            return Walked::Done;
        };
        let mut bins = Vec::new();
        let mut work: Vec<Work<'_>> = Vec::new();
        let nodes = layout.nodes();
        for (j, top) in nodes.iter().enumerate().skip(first) {
            let after = nodes.get(j + 1).and_then(|n| n.keys().first().copied());
            enter(top, lo, after, &mut work);
            while let Some(item) = work.pop() {
                match item {
                    Work::Records(node, i, after) => {
                        let Some(r) = node.record(i) else {
                            continue;
                        };
                        if r.key > hi {
                            return Walked::Done;
                        }
                        if r.is_moved() {
                            return Walked::Moved(r.key.max(lo));
                        }
                        let next = node.keys().get(i + 1).copied().or(after);
                        work.push(Work::Records(node, i + 1, after));
                        work.push(Work::Gap(r, next));
                        if r.key >= lo
                            && let Some(v) = r.read()
                        {
                            out.push((r.key, v));
                            if out.len() >= end {
                                return Walked::Done;
                            }
                        }
                    }
                    Work::Gap(r, next) => match r.gap().map(|g| g.snapshot(&mut bins)) {
                        // No bins (yet): nothing below this record.
                        None => {}
                        Some(Step::Descend(sub)) => enter(sub, lo, next, &mut work),
                        Some(Step::Done(())) => {
                            let below = |k: u64| next.is_none_or(|n| k < n);
                            for &(k, v) in bins.iter().filter(|e| e.0 >= lo && below(e.0)) {
                                if k > hi {
                                    return Walked::Done;
                                }
                                out.push((k, v));
                                if out.len() >= end {
                                    return Walked::Done;
                                }
                            }
                        }
                    },
                }
            }
        }
        Walked::Done
    }
}

/// Schedules the walk of `node` from `lo`: first the gap that may hold keys `>= lo` below the
/// last record `< lo`, then the records from the first `>= lo`; `after` is the key of the record
/// that follows the node's last one in the walk.
fn enter<'a>(node: &'a Node, lo: u64, after: Option<u64>, work: &mut Vec<Work<'a>>) {
    let (before, first) = node.scan_start(lo);
    work.push(Work::Records(node, first, after));
    if let Some(b) = before {
        let next = node.keys().get(first).copied().or(after);
        work.push(Work::Gap(b, next));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    /// A scan that holds a layout from before two retrainings: key 12 is frozen in its old record
    /// while, reclaimed and inserted again since, it also sits live in the gap of 10 that the old
    /// and new records share. The walk must not emit it twice: the gap stops below 12, and the
    /// moved record sends the scan to the current layout.
    #[test]
    fn an_old_layout_never_shows_a_key_twice() {
        let entries: Vec<(u64, u64)> = (0..50u64).map(|k| (k * 2, k)).collect();
        let ix =
            FineIndex::bulk_load(&entries, Config::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ix.insert(11, 110), None);
        let old = ix.layout.load_full();
        ix.retrain_models();
        assert_eq!(ix.remove(12), Some(6));
        assert_eq!(ix.retrain_models().reclaimed, 1);
        assert_eq!(ix.insert(12, 120), None);

        let mut out = Vec::new();
        let walked = walk_layout(&old, 8, 14, usize::MAX, &mut out);
        assert_eq!(
            walked,
            Walked::Moved(8),
            "the first record of the old layout is moved"
        );
        let mut out = Vec::new();
        assert_eq!(
            walk_layout(&old, 11, 14, usize::MAX, &mut out),
            Walked::Moved(12)
        );
        assert_eq!(
            out,
            vec![(11, 110)],
            "the shared gap showed a key past its old bound"
        );
        assert_eq!(
            ix.range(8, 14, 10),
            vec![(8, 4), (10, 5), (11, 110), (12, 120), (14, 7)]
        );
    }
}
