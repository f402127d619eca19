//! [`FineIndex`]: the concurrent index. Point operations, and model retraining (the paper's
//! section 3.3.2) which publishes a new model layout.
//!
//! Threads: every method takes `&self` and may be called from any number of threads at once.
//! Readers take no lock; writers lock one trained record, one child bin, or one level-bin set;
//! model retraining runs on one thread at a time (`retrain_lock`) and blocks no reader.
//!
//! Model retraining, per top-level node (a model of the layout, `layout.rs`):
//! 1. flatten the node, in key order, into the list of its records followed, after each record
//!    whose gap was retrained, by the records of that small model (recursively), and plan which
//!    removed records without a gap to leave out (reclamation; never the first, whose key the
//!    layout routes by);
//! 2. train LPA over the planned keys and cut them into one node per model (`plan_nodes`), still
//!    without any lock: keys never change;
//! 3. the copy phase: move each record into its new array under its lock (`Record::move_out`):
//!    same key, value and flag, the same gap (shared, so the level bins are never copied: the
//!    paper's shared bins; the copy's node gives it an id in its own gap table) unless its small
//!    model was flattened here, in which case the copy has none; the old record is frozen for
//!    good;
//! 4. publish a layout in which the new nodes replace the old one (the other nodes are shared):
//!    bump the layout version, then `ArcSwap::store` (`pin.rs`).
//!
//! A writer that reaches a moved record through an old layout starts again from the current
//! layout (`record.rs`), so from step 3 on no write lands in an old record, and every write made
//! before its record moved is in the copy. Writers to the node being retrained therefore wait
//! for at most its copy phase (tens of nanoseconds per record); readers never wait: an old
//! layout stays readable, frozen records included, and is freed when its last reader lets go of
//! it (the RCU barrier's job of keeping it alive while read, without waiting for anyone). Point
//! operations and scans run on the calling thread's pin of the layout, or on an `ArcSwap` guard
//! when the pin is not current (`pin.rs`); a thread's pin keeps an old layout alive until the
//! thread pins another layout in that slot, or exits. A record planned for reclamation that was
//! revived or got a gap before its lock was taken is copied after all, and that node's models are
//! trained again over the final keys.
//!
//! A node is retrained when one of its small models needed a smaller one (the paper's trigger)
//! and its small models gathered at least `records / model_retrain_divisor` entries, when small
//! models nest 8 deep below it, or when a quarter of its records were removed (reclamation);
//! [`FineIndex::retrain_models`] retrains all.
//!
//! The paper copies the trained arrays "in the newly assigned space" too; it does not say what
//! happens to a write to a trained record during the copy, which is what the moved bit decides.
//! Limit: a node is rebuilt by re-running LPA on its chunk, so models multiply (151 models over 1M
//! random keys become 240).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::Config;
use crate::error::{FineError, Result};
use crate::gap::Step;
use crate::layout::{Layout, build_nodes, plan_nodes};
use crate::node::{DEEP_SMALL_MODELS, Home, Node};
use crate::pin::Published;
use crate::record::{MovePlan, Moved, NewRecord, Record};
use crate::seqlock::Backoff;

/// The concurrent learned index over u64 keys and u64 values.
#[derive(Debug)]
pub struct FineIndex {
    pub(crate) layout: Published,
    pub(crate) cfg: Config,
    retrain_lock: Mutex<()>,
    pub(crate) level_bin_retrains: AtomicU64,
    pub(crate) level_bin_retrain_ns: AtomicU64,
    pub(crate) model_retrains: AtomicU64,
    pub(crate) model_retrain_us: AtomicU64,
}

/// What one model retraining did.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRetrain {
    /// Top-level nodes retrained (each into one or more new ones).
    pub nodes_retrained: u64,
    /// Trained records in the new nodes (removed ones that could not be reclaimed included).
    pub records: u64,
    /// Removed trained records left out of the new nodes (freed once no reader holds an older
    /// layout).
    pub reclaimed: u64,
    /// Top-level nodes (models) of the new layout.
    pub nodes: u64,
    /// Wall time of flattening, training and publishing, in microseconds.
    pub took_us: u64,
}

impl FineIndex {
    /// An empty index.
    pub fn new(cfg: Config) -> Result<FineIndex> {
        FineIndex::bulk_load(&[], cfg)
    }

    /// An index trained over `entries` (keys strictly increasing): they become the trained data.
    pub fn bulk_load(entries: &[(u64, u64)], cfg: Config) -> Result<FineIndex> {
        cfg.validate()?;
        if let Some(i) = entries
            .windows(2)
            .position(|w| matches!(w, [a, b] if b.0 <= a.0))
        {
            return Err(FineError::Unsorted {
                position: i as u64 + 1,
            });
        }
        if entries.len() as u64 >= u64::from(u32::MAX) {
            return Err(FineError::TooManyKeys {
                count: entries.len() as u64,
            });
        }
        let layout = trained_layout(entries, &cfg);
        Ok(FineIndex {
            layout: Published::new(layout),
            cfg,
            retrain_lock: Mutex::new(()),
            level_bin_retrains: AtomicU64::new(0),
            level_bin_retrain_ns: AtomicU64::new(0),
            model_retrains: AtomicU64::new(0),
            model_retrain_us: AtomicU64::new(0),
        })
    }

    /// The settings this index was built with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The value of `key`. Lock-free.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u64> {
        self.layout.with(|layout| get_in(layout, key))
    }

    /// Inserts `key`, or overwrites its value if present (the paper's insert keeps keys unique);
    /// returns the old value.
    pub fn insert(&self, key: u64, value: u64) -> Option<u64> {
        self.write(key, true, &mut |_| Some(value))
    }

    /// Overwrites the value of `key` only if present (an atomic in-place write); returns the old
    /// value, `None` (and no change) if absent.
    pub fn update(&self, key: u64, value: u64) -> Option<u64> {
        self.write(key, false, &mut |old| old.map(|_| value))
    }

    /// Sets `key` to `f(current value)` atomically with respect to every other write of `key`;
    /// returns the old value. `f` runs under the key's record or level-bin lock: keep it short,
    /// and do not call this index from it (that would wait on the lock `f` runs under). If `f`
    /// panics, the key is left as it was.
    pub fn upsert(&self, key: u64, f: impl FnOnce(Option<u64>) -> u64) -> Option<u64> {
        let mut f = Some(f);
        // `write` calls its op exactly once; a second call would keep the value as it is.
        self.write(key, true, &mut |old| match f.take() {
            Some(f) => Some(f(old)),
            None => old,
        })
    }

    /// Removes `key`; returns its old value.
    pub fn remove(&self, key: u64) -> Option<u64> {
        self.write(key, false, &mut |_| None)
    }

    /// Applies `op` (old value to new value, `None` = absent / remove) to `key` under the lock of
    /// its record or level-bin set. `may_insert`: whether `op` may turn `None` into a value.
    fn write(
        &self,
        key: u64,
        may_insert: bool,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
    ) -> Option<u64> {
        self.write_from(key, may_insert, op, None)
    }

    /// [`FineIndex::write`] whose first try starts at `start`: a top-level node and the position
    /// of the record that holds `key` or whose gap does (checked by the caller); later tries,
    /// after a model retraining moved that record, start from the current layout.
    pub(crate) fn write_from(
        &self,
        key: u64,
        may_insert: bool,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
        start: Option<(&Node, usize)>,
    ) -> Option<u64> {
        let mut backoff = Backoff::default();
        let mut start = start;
        loop {
            match self.try_write(key, may_insert, op, start.take()) {
                Ok(old) => return old,
                // A model retraining moved the record this key reached (`op` did not run); the
                // layout with its copy is about to be published.
                Err(Moved) => backoff.snooze(),
            }
        }
    }

    fn try_write(
        &self,
        key: u64,
        may_insert: bool,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
        start: Option<(&Node, usize)>,
    ) -> std::result::Result<Option<u64>, Moved> {
        self.layout
            .with(|layout| self.write_in(layout, key, may_insert, op, start))
    }

    /// One try of a write through `layout` (from `start` if given). A model retraining it
    /// triggers runs here too: on this thread's pin of `layout` (the retraining reads the
    /// current layout itself, and a pin holds no lock).
    fn write_in(
        &self,
        layout: &Layout,
        key: u64,
        may_insert: bool,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
        start: Option<(&Node, usize)>,
    ) -> std::result::Result<Option<u64>, Moved> {
        let top: &Node = match start {
            Some((n, _)) => n,
            None => match layout.node_for(key) {
                Some((_, top)) => top,
                None => return Ok(None),
            },
        };
        let mut node: &Node = top;
        let mut first = start.and_then(|(n, pos)| n.home_at(pos, key));
        let mut depth = 0u32;
        loop {
            let home = match first.take() {
                Some(h) => Some(h),
                None => node.home(key),
            };
            match home {
                None => return Ok(None),
                Some(Home::Record(r)) => {
                    let m = node.region.write(|| r.modify(op))?;
                    if m.removed {
                        let removed = top.removed_records.fetch_add(1, Relaxed) + 1;
                        if self.cfg.model_retrain_after_nested > 0
                            && removed >= reclaim_due(top)
                            && let Ok(_g) = self.retrain_lock.try_lock()
                        {
                            self.retrain_wanted_locked();
                        }
                    }
                    return Ok(m.old);
                }
                Some(Home::Gap(r)) => {
                    let gap = if may_insert {
                        r.gap_for_insert(&self.cfg)?
                    } else {
                        match r.gap() {
                            Some(g) => g,
                            // No bins: the key is absent, and `op` keeps it so.
                            None => return Ok(None),
                        }
                    };
                    match gap.modify(r.key, key, op, &self.cfg) {
                        Step::Descend(sub) => {
                            node = sub;
                            depth += 1;
                        }
                        Step::Done(w) => {
                            if w.retrained {
                                self.count_level_bin_retraining(key, depth, w.retrain_ns);
                            }
                            return Ok(w.old);
                        }
                    }
                }
            }
        }
    }

    /// A level-bin retraining happened `depth` small models below the top: count it on the node
    /// that covers `key` now (a model retraining may have replaced the node the write came
    /// through; its counters died with it; one still in flight may drop this count too, which
    /// only delays the next), and retrain models if that node calls for it.
    #[cold]
    #[inline(never)]
    fn count_level_bin_retraining(&self, key: u64, depth: u32, retrain_ns: u64) {
        self.level_bin_retrains.fetch_add(1, Relaxed);
        self.level_bin_retrain_ns.fetch_add(retrain_ns, Relaxed);
        let entries = u64::from(self.cfg.root_slots) * u64::from(self.cfg.child_slots);
        let wanted = self.layout.with(|layout| {
            let Some((_, top)) = layout.node_for(key) else {
                return false;
            };
            top.retrained_entries.fetch_add(entries, Relaxed);
            let nested = depth >= 1;
            if nested {
                top.nested_small_models.fetch_add(1, Relaxed);
            }
            if depth >= DEEP_SMALL_MODELS {
                top.deep.store(true, Relaxed);
            }
            nested && self.wants_retraining(top)
        });
        if wanted
            && self.cfg.model_retrain_after_nested > 0
            && let Ok(_g) = self.retrain_lock.try_lock()
        {
            // Another thread retraining already covers this trigger.
            self.retrain_wanted_locked();
        }
    }

    /// Whether a top-level node calls for its model retraining: a quarter of its records were
    /// removed (the retraining reclaims them), its small models nest [`DEEP_SMALL_MODELS`]
    /// deep, or one of them needed a smaller one
    /// `model_retrain_after_nested` times (at least once) and they gathered at least
    /// `records / model_retrain_divisor` entries (0: no minimum).
    fn wants_retraining(&self, node: &Node) -> bool {
        if node.deep.load(Relaxed) || node.removed_records.load(Relaxed) >= reclaim_due(node) {
            return true;
        }
        let nested = node.nested_small_models.load(Relaxed);
        if nested == 0 || nested < self.cfg.model_retrain_after_nested {
            return false;
        }
        let divisor = self.cfg.model_retrain_divisor;
        divisor == 0 || node.retrained_entries.load(Relaxed) >= node.len() as u64 / divisor
    }

    /// Model retraining of every top-level node now (waits for one already running first).
    pub fn retrain_models(&self) -> ModelRetrain {
        let _g = self
            .retrain_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.retrain_locked(|_| true)
    }

    /// A new index trained as a bulk load of every entry this one holds now, level bins and
    /// small models included, for [`FineIndex::install`]. Model retraining keeps level bins
    /// where they are (the paper's design: writers go on in them during the retraining), so an
    /// index grown from few trained keys by many inserts keeps most of them in bins; this trains
    /// them all. Takes no lock and blocks nobody: the entries are read as a scan would, so an
    /// insert made meanwhile may or may not be in the copy (the caller keeps those inserts, and
    /// hands them to `install`). Also returns the number of entries trained.
    pub(crate) fn trained_copy(&self) -> (FineIndex, u64) {
        let entries = self.range(0, u64::MAX, usize::MAX);
        let copy = FineIndex {
            layout: Published::new(trained_layout(&entries, &self.cfg)),
            cfg: self.cfg.clone(),
            retrain_lock: Mutex::new(()),
            level_bin_retrains: AtomicU64::new(0),
            level_bin_retrain_ns: AtomicU64::new(0),
            model_retrains: AtomicU64::new(0),
            model_retrain_us: AtomicU64::new(0),
        };
        (copy, entries.len() as u64)
    }

    /// Inserts `pending` into `copy` (from [`FineIndex::trained_copy`] of this index), then
    /// publishes `copy`'s nodes as this index's next layout. Readers go on throughout (on the
    /// old layout, which holds the same entries, until they re-pin). The caller keeps every
    /// writer of this index out for the call, and every insert made since `copy`'s entries
    /// were read is in `pending` or was inserted into `copy` by the caller (some may be in
    /// `copy` twice over, with the same values); a write through the old layout that is in
    /// neither would be lost, as would any update or removal since the copy. FineStore's layers
    /// only insert, only under their `create` lock, which it holds.
    pub(crate) fn install(&self, copy: FineIndex, pending: &[(u64, u64)]) {
        for &(key, value) in pending {
            copy.insert(key, value);
        }
        let _g = self
            .retrain_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = self.layout.load_full();
        let nodes = copy.layout.load().nodes().to_vec();
        // Remote readers of the old nodes' trained data must learn it is old.
        for node in old.nodes() {
            node.region.retire();
        }
        self.layout
            .publish(Layout::from_nodes(nodes, old.version + 1));
        self.model_retrains.fetch_add(1, Relaxed);
    }

    /// Model retraining of the top-level nodes whose small models call for it (see
    /// [`Config::model_retrain_after_nested`]), unless a retraining runs; `None` if nothing was
    /// done.
    pub fn retrain_models_if_wanted(&self) -> Option<ModelRetrain> {
        let _g = self.retrain_lock.try_lock().ok()?;
        self.retrain_wanted_locked()
    }

    fn retrain_wanted_locked(&self) -> Option<ModelRetrain> {
        let layout = self.layout.load();
        let any = layout.nodes().iter().any(|n| self.wants_retraining(n));
        drop(layout);
        any.then(|| self.retrain_locked(|n| self.wants_retraining(n)))
    }

    /// Retrains the nodes `pick` selects and publishes the new layout; the caller holds
    /// `retrain_lock`, so the layout changes only here meanwhile.
    fn retrain_locked(&self, pick: impl Fn(&Node) -> bool) -> ModelRetrain {
        let started = Instant::now();
        let old = self.layout.load_full();
        let mut nodes = Vec::with_capacity(old.nodes().len());
        let (mut retrained, mut records, mut reclaimed) = (0u64, 0u64, 0u64);
        for node in old.nodes() {
            if pick(node) {
                let before = nodes.len();
                let (kept, dropped) = self.rebuild(node, &mut nodes);
                records += kept;
                reclaimed += dropped;
                retrained += 1;
                debug_assert!(nodes.len() > before);
            } else {
                nodes.push(Arc::clone(node));
            }
        }
        let layout = Layout::from_nodes(nodes, old.version + 1);
        let report = ModelRetrain {
            nodes_retrained: retrained,
            records,
            reclaimed,
            nodes: layout.nodes().len() as u64,
            took_us: 0,
        };
        self.layout.publish(layout);
        let took_us = started.elapsed().as_micros() as u64;
        self.model_retrains.fetch_add(1, Relaxed);
        self.model_retrain_us.fetch_add(took_us, Relaxed);
        ModelRetrain { took_us, ..report }
    }
}

impl FineIndex {
    /// Steps 1-3 of a model retraining (module documentation) for one top-level node: appends
    /// the new nodes to `out`; the records copied and the records reclaimed.
    fn rebuild(&self, node: &Node, out: &mut Vec<Arc<Node>>) -> (u64, u64) {
        let flat = flatten(node);
        let plans: Vec<MovePlan> = flat
            .iter()
            .enumerate()
            .map(|(i, (r, drop_gap))| {
                let drop_gap = *drop_gap;
                if i > 0 && !drop_gap && r.is_empty() {
                    MovePlan::Reclaim
                } else {
                    MovePlan::Keep { drop_gap }
                }
            })
            .collect();
        let mut keys: Vec<u64> = flat
            .iter()
            .zip(&plans)
            .filter(|(_, p)| **p != MovePlan::Reclaim)
            .map(|((r, _), _)| r.key)
            .collect();
        let mut plan = plan_nodes(&keys, &self.cfg);
        // Remote readers of this node's trained data must learn it is old before any record
        // moves (docs/format/fine-wire.md, invariant 3).
        node.region.retire();
        // The copy phase: from here writers of this node's keys wait for the publication.
        let mut copies = Vec::with_capacity(keys.len());
        let mut revived = false;
        for ((r, _), &p) in flat.iter().zip(&plans) {
            match r.move_out(p) {
                Some(copy) => {
                    revived |= p == MovePlan::Reclaim;
                    copies.push(copy);
                }
                None => debug_assert!(p == MovePlan::Reclaim, "record {} moved twice", r.key),
            }
        }
        if revived {
            keys = copies.iter().map(|r| r.key).collect();
            plan = plan_nodes(&keys, &self.cfg);
        }
        let kept = copies.len() as u64;
        build_nodes(keys, copies, plan, out);
        (kept, flat.len() as u64 - kept)
    }
}

/// A layout trained over `entries` (keys strictly increasing), the first version of an index.
fn trained_layout(entries: &[(u64, u64)], cfg: &Config) -> Layout {
    // Invariant 2 of node.rs: the top node starts at key 0.
    let mut records = Vec::with_capacity(entries.len() + 1);
    if entries.first().is_none_or(|e| e.0 != 0) {
        records.push(NewRecord::removed(0));
    }
    records.extend(entries.iter().map(|&(k, v)| NewRecord::live(k, v)));
    Layout::build(records, cfg)
}

/// The value of `key` in `layout`.
#[inline]
fn get_in(layout: &Layout, key: u64) -> Option<u64> {
    let (_, mut node) = layout.node_for(key)?;
    loop {
        match node.home(key)? {
            Home::Record(r) => return r.read(),
            Home::Gap(r) => match r.gap()?.get(key) {
                Step::Done(v) => return v,
                Step::Descend(sub) => node = sub,
            },
        }
    }
}

/// Removed trained records below a top-level node at which its model retraining (which reclaims
/// them) is due: a quarter of its records, at least 16.
fn reclaim_due(node: &Node) -> u64 {
    (node.len() as u64 / 4).max(16)
}

/// Every record reachable from `top`, in key order: each record, then the records of the small
/// model retrained from its gap, if any (depth first, with an explicit stack: small models may
/// nest deeply when model retraining is off). With each record, whether its small model was
/// flattened here.
pub(crate) fn flatten(top: &Node) -> Vec<(Record<'_>, bool)> {
    let mut out = Vec::with_capacity(top.len());
    let mut stack: Vec<(&Node, usize)> = vec![(top, 0)];
    while let Some((node, i)) = stack.last_mut() {
        let node: &Node = node;
        let Some(r) = node.record(*i) else {
            stack.pop();
            continue;
        };
        *i += 1;
        let sub = r.gap().and_then(|g| g.sub());
        out.push((r, sub.is_some()));
        if let Some(sub) = sub {
            stack.push((sub, 0));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interleaving the concurrent tests can only hope to hit: a writer loaded the layout,
    /// then a model retraining moved the record its key reaches (here: reclaimed it) and
    /// published a layout without it. Through the old layout the write must be refused (`Moved`,
    /// op not run), or it would land in a record the current layout no longer holds.
    #[test]
    fn a_write_through_an_old_layout_never_lands_in_a_moved_record() {
        let entries: Vec<(u64, u64)> = (0..100u64).map(|k| (k * 2, k)).collect();
        let ix =
            FineIndex::bulk_load(&entries, Config::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ix.remove(10), Some(5));
        let old = ix.layout.load_full();
        let report = ix.retrain_models();
        assert_eq!(report.reclaimed, 1, "{report:?}");

        let Some((_, node)) = old.node_for(10) else {
            panic!("no node for 10");
        };
        let Some(Home::Record(r)) = node.home(10) else {
            panic!("10 is not a trained record of the old layout");
        };
        let mut ran = false;
        let got = r.modify(&mut |_| {
            ran = true;
            Some(7)
        });
        assert_eq!(got, Err(Moved), "a moved record took a write");
        assert!(!ran);
        let Some(Home::Gap(g)) = node.home(11) else {
            panic!("11 does not fall in the gap of 10 in the old layout");
        };
        assert!(g.same_as(&r));
        assert!(
            g.gap_for_insert(&ix.cfg).is_err(),
            "a moved record got a gap"
        );
        assert_eq!(
            r.read(),
            None,
            "a reader of the old layout sees the key absent"
        );
        // A kept record is frozen in the old layout too, and its value lives on in the copy.
        let Some(Home::Record(kept)) = node.home(12) else {
            panic!("12 is not a trained record of the old layout");
        };
        assert_eq!(kept.modify(&mut |_| Some(0)), Err(Moved));
        assert_eq!(kept.read(), Some(6));
        assert_eq!(ix.update(12, 60), Some(6));
        assert_eq!(kept.read(), Some(6), "the old record is frozen");

        // Through the current layout both keys land in the gap of record 8.
        assert_eq!(ix.insert(10, 70), None);
        assert_eq!(ix.insert(11, 71), None);
        assert_eq!(ix.get(10), Some(70));
        assert_eq!(ix.get(11), Some(71));
        assert_eq!(
            ix.range(8, 12, 10),
            vec![(8, 4), (10, 70), (11, 71), (12, 60)]
        );
    }

    /// A reader inside an operation on its pinned layout while another thread retrains (every
    /// record moves) and then writes through the new layout: the old layout still answers with
    /// the value current when the reader started; a call made after the publication misses the
    /// pin and sees the write; the next call outside re-pins. Fails if the pin's version check
    /// is skipped.
    #[test]
    fn a_pinned_reader_keeps_its_layout_through_a_publication_and_then_re_pins() {
        let entries: Vec<(u64, u64)> = (0..200u64).map(|k| (k * 2, k)).collect();
        let ix =
            FineIndex::bulk_load(&entries, Config::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ix.get(10), Some(5));
        assert_eq!(ix.layout.pinned_version(), Some(1));
        let seen = ix.layout.with(|old| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert_eq!(ix.retrain_models().nodes_retrained, 1);
                    assert_eq!(ix.update(10, 500), Some(5));
                });
            });
            let frozen = get_in(old, 10);
            let inner = ix.get(10);
            (old.version, frozen, inner)
        });
        assert_eq!(seen, (1, Some(5), Some(500)));
        assert_eq!(
            ix.layout.pinned_version(),
            Some(1),
            "a call inside an operation replaced the pin under it"
        );
        assert_eq!(ix.get(10), Some(500));
        assert_eq!(ix.layout.pinned_version(), Some(2));
        assert_eq!(ix.insert(11, 7), None);
        assert_eq!(ix.get(11), Some(7));
    }

    #[test]
    fn model_retraining_copies_a_flattened_small_model_and_drops_its_parent_gap() {
        // Ascending inserts after one trained key nest small models under it; retraining merges
        // them into the top array, and the copy of the parent record has no gap left.
        let cfg = Config {
            model_retrain_after_nested: 0,
            ..Config::default()
        };
        let ix = FineIndex::bulk_load(&[(1_000, 1)], cfg).unwrap_or_else(|e| panic!("{e}"));
        for k in 1_001..1_500u64 {
            ix.insert(k, k);
        }
        assert!(ix.stats().small_models > 0, "{:?}", ix.stats());
        ix.retrain_models();
        let s = ix.stats();
        assert_eq!(s.small_models, 0, "{s:?}");
        assert_eq!(s.live_trained + s.bin_entries, 500, "{s:?}");
        let layout = ix.layout.load();
        let Some((_, node)) = layout.node_for(1_000) else {
            panic!("no node");
        };
        let Some(Home::Record(parent)) = node.home(1_000) else {
            panic!("1000 is not trained");
        };
        assert!(
            parent.gap().is_none(),
            "the parent kept the gap of a merged small model"
        );
        assert_eq!(ix.range(0, u64::MAX, 1_000).len(), 500);
    }
}
