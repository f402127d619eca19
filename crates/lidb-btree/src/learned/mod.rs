//! The learned leaf path (the paper's section IV): a mapping table with one slot per leaf,
//! filled from the leaves' parents, and a model over the slots' boundary keys that sends a
//! lookup or a write straight to its leaf; the tree walk is the fallback.
//!
//! - `image.rs`: the order-preserving u64 image of a key the model sees;
//! - `table.rs`: the mapping table (fences, page ids, frame hints) and its model;
//! - `lookup.rs`: gets, puts and deletes through the table, the fence checks, the fallback;
//! - `patch.rs`: after a split, the leaves of one slot's range hung on the slot (no rebuild);
//! - `retrain.rs`: the two background threads (table + model; in-leaf models) and publication;
//! - `blob.rs`: the table and model saved with each checkpoint (docs/format/btree-learned.md).
//!
//! Threads: [`Learned`] is shared (`Arc`) by the engine's callers, the checkpoint hook and the
//! two retraining threads. The published table is an `ArcSwap`: a lookup loads it without a
//! lock and keeps its snapshot for the whole lookup; a retrain builds a new table aside and
//! swaps it in, so lookups never wait for training. Counters are relaxed atomics.
//!
//! Correctness never depends on the table: it may be stale (leaves split or merged since it
//! was built), or wrong on purpose (test hooks). Every answer comes from a leaf whose own
//! fences, read under its latch version, cover the key; anything else falls back to the walk.
//!
//! Lock order: the learned path holds no lock of its own while it calls the tree (the
//! retraining threads' wake-up mutexes are taken and released around their waits only).

pub(crate) mod blob;
mod image;
mod lookup;
mod patch;
mod retrain;
pub(crate) mod table;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use arc_swap::ArcSwap;
use lidb_sync::Counter;

use crate::engine::LearnedOptions;
use crate::error::Result;
use crate::tree::Tree;
use table::Table;

pub(crate) use retrain::Trainers;

/// Counters of the learned path (all zero but `smos` when it is off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearnedStats {
    /// Gets (and `get_if_in_memory` calls) that tried the learned path.
    pub lookups: u64,
    /// Of those, answered by the learned path.
    pub hits: u64,
    /// Gets and writes whose model window held no slot covering the key, or whose leaf reached
    /// did not cover it.
    pub mispredictions: u64,
    /// Gets and writes that walked the tree after trying the learned path (writes also when
    /// the leaf needed a split).
    pub fallbacks: u64,
    /// Leaves the learned path read from the device into UNLINKED frames.
    pub unlinked_loads: u64,
    /// Puts and deletes applied through the learned path.
    pub learned_writes: u64,
    /// Splits and merges the tree did since open.
    pub smos: u64,
    /// Mapping table + model rebuilds published (the one at open included).
    pub table_retrains: u64,
    /// Slots patched with the leaves their range holds after a split (`patch.rs`).
    pub table_patches: u64,
    /// In-leaf model refits.
    pub leaf_refits: u64,
    /// Time spent building tables and models (listing the leaves included), in nanoseconds.
    pub training_ns: u64,
    /// Slots of the table published now.
    pub slots: u64,
    /// The family of the model published now (its lidb-index name; empty with the path off).
    pub family: &'static str,
    /// The error bound (in slots) of the model published now.
    pub error_bound: u64,
    /// Heap bytes of the published mapping table and its model (`Table::memory_bytes`).
    pub table_bytes: u64,
    /// Background table rebuilds and leaf refits that failed (each keeps what was published
    /// before; the next trigger tries again). Counted so a failing retrainer is seen, not
    /// silent. The checkpoint's fold of the split lists into a retrained table counts here too
    /// when its training fails (the blob then holds the table published now).
    pub retrain_errors: u64,
    /// Slot patches after a split that failed reading the tree's inner nodes (the slot keeps
    /// what it had; its next miss tries again). Counted so a failing device is seen here too.
    pub patch_errors: u64,
}

/// Where the table served after open came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnedSource {
    /// The learned path is off.
    Disabled,
    /// Decoded from the checkpoint's blob: no inner node was read.
    Loaded { slots: u64 },
    /// Built from the tree's level-1 nodes; `why` says why the blob was not used.
    Built { slots: u64, why: String },
}

/// The counters of lookups are per-thread shards (`lidb_sync::Counter`): every get bumps two of
/// them, and a shared word would be a line every reader writes.
#[derive(Debug, Default)]
struct Counters {
    lookups: Counter,
    hits: Counter,
    mispredictions: Counter,
    fallbacks: Counter,
    unlinked_loads: Counter,
    learned_writes: Counter,
    table_retrains: AtomicU64,
    table_patches: AtomicU64,
    leaf_refits: AtomicU64,
    training_ns: AtomicU64,
    retrain_errors: AtomicU64,
    patch_errors: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A wake-up flag with its condition variable (one per retraining thread).
#[derive(Debug, Default)]
struct Wake {
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    fn nudge(&self) {
        *self
            .flag
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.cv.notify_one();
    }
}

/// The learned path's shared state.
#[derive(Debug)]
pub(crate) struct Learned {
    tree: Arc<Tree>,
    opts: LearnedOptions,
    table: ArcSwap<Table>,
    counters: Counters,
    /// Mispredictions since the table was published, and the tree's SMO count then.
    mispredictions_since: AtomicU64,
    smos_at_train: AtomicU64,
    /// Slots marked changed since the last in-leaf refit pass.
    changed_since: AtomicU64,
    retrain_table: Wake,
    refit_leaves: Wake,
    /// Held for a whole rebuild (and by the test hooks that publish a table): two rebuilds never
    /// overlap, so a rebuild that listed the leaves earlier can never publish over a later one.
    rebuild: Mutex<()>,
    stop: AtomicBool,
    /// Test hook: splits are not patched into the table (`patch.rs`), to show what the
    /// patches do.
    skip_patches: AtomicBool,
}

/// Changed leaves that wake the in-leaf refit thread.
const REFIT_BATCH: u64 = 64;

impl Learned {
    /// The learned path over `tree`: the table from `blob` (the checkpoint's; empty: none) if
    /// it decodes, else built from the tree, with where it came from.
    pub fn open(
        tree: Arc<Tree>,
        opts: &LearnedOptions,
        blob: &[u8],
    ) -> Result<(Arc<Learned>, LearnedSource)> {
        let started = std::time::Instant::now();
        let decoded = if blob.is_empty() {
            Err("the checkpoint has no learned blob".to_string())
        } else {
            blob::decode(blob).map_err(|e| format!("the learned blob is damaged ({e})"))
        };
        // A blob trained with another family or error bound: the model is retrained over its
        // slots (no I/O), so a sweep across reopens measures the model asked for.
        let decoded = decoded.and_then(|t| {
            if t.model().family() == opts.family && t.model().boundary() == opts.error_bound.max(2)
            {
                Ok(t)
            } else {
                Table::build(t.leaf_refs(), opts.family, opts.error_bound)
                    .map_err(|e| format!("retraining the loaded table: {e}"))
            }
        });
        let (table, source) = match decoded {
            Ok(t) => {
                let slots = t.slots.len() as u64;
                (t, LearnedSource::Loaded { slots })
            }
            Err(why) => {
                let t = Table::build(tree.leaf_parents()?, opts.family, opts.error_bound)?;
                let slots = t.slots.len() as u64;
                (t, LearnedSource::Built { slots, why })
            }
        };
        let learned = Arc::new(Learned {
            smos_at_train: AtomicU64::new(tree.smo_count()),
            tree,
            opts: opts.clone(),
            table: ArcSwap::from_pointee(table),
            counters: Counters::default(),
            mispredictions_since: AtomicU64::new(0),
            changed_since: AtomicU64::new(0),
            retrain_table: Wake::default(),
            refit_leaves: Wake::default(),
            rebuild: Mutex::new(()),
            stop: AtomicBool::new(false),
            skip_patches: AtomicBool::new(false),
        });
        bump(&learned.counters.table_retrains);
        learned
            .counters
            .training_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok((learned, source))
    }

    /// The blob of the table published now (the checkpoint hook), with its split lists folded
    /// into slots of their own (the model retrained over them, in memory), so a restart serves
    /// the leaves of patched splits from the table as well, without walking to them.
    pub fn encode(&self) -> Vec<u8> {
        let table = self.table.load();
        let folded = table.folded_leaf_refs().and_then(|leaves| {
            Table::build(leaves, self.opts.family, self.opts.error_bound)
                .inspect_err(|_| self.retrain_failed())
                .ok()
        });
        blob::encode(folded.as_ref().unwrap_or(&table))
    }

    pub fn stats(&self) -> LearnedStats {
        let c = &self.counters;
        let table = self.table.load();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LearnedStats {
            lookups: c.lookups.get(),
            hits: c.hits.get(),
            mispredictions: c.mispredictions.get(),
            fallbacks: c.fallbacks.get(),
            unlinked_loads: c.unlinked_loads.get(),
            learned_writes: c.learned_writes.get(),
            smos: self.tree.smo_count(),
            table_retrains: get(&c.table_retrains),
            table_patches: get(&c.table_patches),
            leaf_refits: get(&c.leaf_refits),
            training_ns: get(&c.training_ns),
            slots: table.slots.len() as u64,
            family: table.model().family().name(),
            error_bound: table.model().boundary(),
            table_bytes: table.memory_bytes(),
            retrain_errors: get(&c.retrain_errors),
            patch_errors: get(&c.patch_errors),
        }
    }

    /// Counts a background retraining that failed (the retraining threads call it).
    pub(crate) fn retrain_failed(&self) {
        bump(&self.counters.retrain_errors);
    }

    /// Counts a misprediction and wakes the table's retraining when mispredictions / SMOs
    /// since the last training exceed the tolerance.
    fn mispredicted(&self) {
        self.counters.mispredictions.incr();
        let m = self.mispredictions_since.fetch_add(1, Ordering::Relaxed) + 1;
        let smos = self
            .tree
            .smo_count()
            .saturating_sub(self.smos_at_train.load(Ordering::Relaxed));
        if m as f64 / smos.max(1) as f64 > self.opts.tolerance {
            self.retrain_table.nudge();
        }
    }

    /// Marks the leaf of `key` changed (a write) for the in-leaf refit thread.
    fn mark_changed(&self, table: &Table, slot: usize) {
        if let Some(s) = table.slots.get(slot)
            && !s.changed.swap(true, Ordering::Relaxed)
            && self.changed_since.fetch_add(1, Ordering::Relaxed) + 1 >= REFIT_BATCH
        {
            self.refit_leaves.nudge();
        }
    }

    /// Test hook: turns the split patches (`patch.rs`) off or on.
    pub fn set_skip_patches_for_test(&self, on: bool) {
        self.skip_patches.store(on, Ordering::Relaxed);
    }

    /// Test hook: publishes a table built from the tree whose model windows are moved by
    /// `shift` slots (a model forced wrong).
    pub fn publish_shifted_for_test(&self, shift: i64) -> Result<()> {
        let _rebuild = self.rebuild.lock().unwrap_or_else(PoisonError::into_inner);
        let mut t = Table::build(
            self.tree.leaf_parents()?,
            self.opts.family,
            self.opts.error_bound,
        )?;
        t.set_shift_for_test(shift);
        self.table.store(Arc::new(t));
        Ok(())
    }

    /// Test hook: publishes a table built from the tree whose page ids are rotated by `by`
    /// slots (fences right, leaves wrong: only the in-page fence check catches it).
    pub fn publish_rotated_pids_for_test(&self, by: usize) -> Result<()> {
        let _rebuild = self.rebuild.lock().unwrap_or_else(PoisonError::into_inner);
        let mut leaves = self.tree.leaf_parents()?;
        let mut pids: Vec<u64> = leaves.iter().map(|l| l.pid).collect();
        if !pids.is_empty() {
            let by = by % pids.len();
            pids.rotate_left(by);
        }
        for (l, p) in leaves.iter_mut().zip(pids) {
            l.pid = p;
            l.frame = None;
        }
        let t = Table::build(leaves, self.opts.family, self.opts.error_bound)?;
        self.table.store(Arc::new(t));
        Ok(())
    }
}
