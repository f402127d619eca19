//! The gap below a trained record: its level bins, created on the first write, and, once they
//! filled up and were retrained (level-bin retraining, the paper's section 3.3.1), the small
//! model that took their entries.
//!
//! Where it lives: a `Gap` is allocated on the first insert below its record and shared (`Arc`)
//! between the record and the copies model retraining makes of it, so writes into level bins
//! never have to be copied. The record's node keeps the `Arc` in its gap table
//! (`gap_table.rs`), under the id the record's state word carries (`record.rs`).
//!
//! Who may do what: any thread reads ([`Gap::get`], [`Gap::snapshot`]) without locks; any
//! thread writes through [`Gap::modify`], which writes in place under one child bin's latch when
//! it can and otherwise takes the set's structural write section (root latch, then every
//! child's; `bins.rs`). Only a writer in the structural write section retrains, so a gap's `sub`
//! is set at most once.
//!
//! Protocol of level-bin retraining (all inside the structural write section, so only this set
//! is locked): build the small model from the bins' entries plus the new one; set `sub` (a
//! `OnceLock`: a release store); empty the bins and retire the root latch (its final version is
//! a release store). A reader that sees the retired version (acquire) therefore finds `sub` set,
//! and a reader that validated a read of the bins before retirement read a state that was
//! current at that moment. A writer that finds the root latch retired (the structural one on
//! entry, the in-place one when validating the root) leaves and follows `sub`. Entries live in
//! exactly one place at every instant, so no write is lost and none is seen twice.

use std::sync::{Arc, OnceLock};

use crate::bins::{ChildWrite, LevelBins, Read, Shape};
use crate::config::Config;
use crate::node::Node;
use crate::seqlock::Backoff;

/// A gap's level bins and the small model they may have been retrained into.
#[derive(Debug)]
pub(crate) struct Gap {
    bins: LevelBins,
    sub: OnceLock<Arc<Node>>,
}

/// The answer of a read or write that may have to go on in a small model.
#[derive(Debug)]
pub(crate) enum Step<'a, T> {
    Done(T),
    Descend(&'a Arc<Node>),
}

/// A finished write.
#[derive(Debug)]
pub(crate) struct Written {
    pub old: Option<u64>,
    /// This write retrained the level bins into a small model.
    pub retrained: bool,
    /// How long that took (building the small model, publishing it), in nanoseconds.
    pub retrain_ns: u64,
}

impl Written {
    /// A write that did not retrain.
    fn plain(old: Option<u64>) -> Written {
        Written {
            old,
            retrained: false,
            retrain_ns: 0,
        }
    }
}

impl Gap {
    /// Empty level bins of the configured shape.
    pub fn new(cfg: &Config) -> Arc<Gap> {
        Arc::new(Gap {
            bins: LevelBins::new(cfg.root_slots as usize, cfg.child_slots as usize),
            sub: OnceLock::new(),
        })
    }

    /// The small model retrained from these bins, if any.
    pub fn sub(&self) -> Option<&Arc<Node>> {
        self.sub.get()
    }

    /// The level bins (retired and empty once `sub` is set).
    pub fn bins(&self) -> &LevelBins {
        &self.bins
    }

    /// Heap bytes of this gap's allocation (the `Arc`'s two counts and the gap) and its bins'
    /// arrays; not the small model.
    pub fn heap_bytes(&self) -> u64 {
        let counts = 2 * std::mem::size_of::<usize>();
        let bins_inline = std::mem::size_of::<LevelBins>() as u64;
        (counts + std::mem::size_of::<Gap>()) as u64 + self.bins.heap_bytes() - bins_inline
    }

    /// Lock-free point read.
    pub fn get(&self, q: u64) -> Step<'_, Option<u64>> {
        let mut backoff = Backoff::default();
        loop {
            if let Some(sub) = self.sub.get() {
                return Step::Descend(sub);
            }
            match self.bins.get(q) {
                Read::Done(v) => return Step::Done(v),
                // `sub` is set now (module protocol); the next turn follows it.
                Read::Retired => {}
                Read::Retry => backoff.snooze(),
            }
        }
    }

    /// Lock-free read of all entries in key order into `out` (cleared first).
    pub fn snapshot(&self, out: &mut Vec<(u64, u64)>) -> Step<'_, ()> {
        let mut backoff = Backoff::default();
        loop {
            if let Some(sub) = self.sub.get() {
                return Step::Descend(sub);
            }
            match self.bins.snapshot(out) {
                Read::Done(()) => return Step::Done(()),
                Read::Retired => {}
                Read::Retry => backoff.snooze(),
            }
        }
    }

    /// Applies `op` to key `q` of this gap (below a record of key `parent < q`): `op` gets the
    /// current value and returns the new one (`None` removes). Retrains the bins into a small
    /// model when the new key does not fit.
    pub fn modify(
        &self,
        parent: u64,
        q: u64,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
        cfg: &Config,
    ) -> Step<'_, Written> {
        debug_assert!(parent < q);
        let (m, n) = (cfg.root_slots as usize, cfg.child_slots as usize);
        let bins = &self.bins;
        loop {
            if let Some(sub) = self.sub.get() {
                return Step::Descend(sub);
            }
            match bins.write_in_child(q, op) {
                ChildWrite::Done(old) => {
                    return Step::Done(Written::plain(old));
                }
                ChildWrite::Retired => continue,
                ChildWrite::Structural => {}
            }
            let mut w = bins.lock_all();
            if w.root.is_retired() {
                continue;
            }
            // Under the structural section: still in place where possible (the set may have
            // changed since the in-place writer gave up).
            let (old, v) = {
                let Some(spot) = bins.spot(q, false) else {
                    debug_assert!(false, "level bins torn under the write section");
                    return Step::Done(Written::plain(None));
                };
                let old = bins.value_at(&w, &spot);
                let new = op(old);
                match (old, new) {
                    (None, None) => {
                        return Step::Done(Written::plain(old));
                    }
                    (Some(_), Some(v)) => {
                        bins.set_value(&w, &spot, v);
                        return Step::Done(Written::plain(old));
                    }
                    (None, Some(v)) => {
                        if bins.insert_in_place(&w, &spot, q, v) {
                            return Step::Done(Written::plain(old));
                        }
                        (old, Some(v))
                    }
                    (Some(_), None) => (old, None),
                }
            };
            let mut shape = bins.load_shape(&w);
            let Some(v) = v else {
                shape.remove(q);
                bins.store_shape(&w, &shape);
                return Step::Done(Written::plain(old));
            };
            if shape.upsert(q, v, m, n) {
                bins.store_shape(&w, &shape);
                return Step::Done(Written::plain(old));
            }
            // Level-bin retraining: the full set and the new entry become a small model.
            let started = std::time::Instant::now();
            let mut entries = shape.into_items();
            let at = entries.partition_point(|e| e.0 < q);
            entries.insert(at, (q, v));
            let node = Arc::new(Node::retrained(parent, &entries, cfg));
            let set = self.sub.set(node);
            debug_assert!(set.is_ok(), "a gap was retrained twice");
            bins.store_shape(&w, &Shape::Flat(Vec::new()));
            w.root.retire();
            return Step::Done(Written {
                old,
                retrained: true,
                retrain_ns: started.elapsed().as_nanos() as u64,
            });
        }
    }
}
