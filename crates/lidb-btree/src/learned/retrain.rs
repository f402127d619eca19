//! The two retraining threads (the paper's section IV-D): one rebuilds the mapping table and
//! its model when mispredictions / SMOs since the last training exceed the tolerance, the other
//! refits the in-leaf linear models of leaves written since (resident leaves only).
//!
//! A rebuild lists the leaves from the level-1 nodes (`Tree::leaf_parents`, which reads no
//! leaf), trains the model aside and publishes the new table with one `ArcSwap` store: lookups
//! in flight finish on the table they loaded, later ones see the new one; none waits.
//!
//! Threads: started by [`Trainers::start`], stopped and joined by [`Trainers::stop`] (the
//! engine's close and drop). Each waits on its own `Wake` (mutex + condvar). A rebuild holds the
//! `rebuild` mutex from listing the leaves to publishing, so an explicit `retrain_learned` and
//! the background thread never interleave (the older listing can never be published last);
//! lookups and writes never take it. A failed rebuild (an I/O error listing the leaves) keeps the old table.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::table::Table;
use super::{Learned, Wake, bump};
use crate::error::Result;

/// How long the in-leaf thread sleeps between passes when not woken.
const REFIT_PERIOD: Duration = Duration::from_millis(200);

impl Learned {
    /// Rebuilds the table and model from the tree and publishes them. Waits for a rebuild in
    /// flight (the background thread's) to publish first, and clears a pending wake of the
    /// background thread, which this rebuild answers (it lists the leaves after the wake).
    pub fn retrain_table(&self) -> Result<()> {
        let _rebuild = self.rebuild.lock().unwrap_or_else(PoisonError::into_inner);
        *self
            .retrain_table
            .flag
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = false;
        let started = Instant::now();
        let smos = self.tree.smo_count();
        let table = Table::build(
            self.tree.leaf_parents()?,
            self.opts.family,
            self.opts.error_bound,
        )?;
        // Carry the changed-leaf marks over, so the in-leaf refits are not lost.
        let old = self.table.load();
        for (i, s) in old.slots.iter().enumerate() {
            if s.changed.load(Ordering::Relaxed) {
                let key = s.upper.clone().or_else(|| old.lower(i).map(after));
                let j = key.map_or(table.slots.len().saturating_sub(1), |k| table.slot_of(&k));
                if let Some(n) = table.slots.get(j) {
                    n.changed.store(true, Ordering::Relaxed);
                }
            }
        }
        self.table.store(Arc::new(table));
        self.mispredictions_since.store(0, Ordering::Relaxed);
        self.smos_at_train.store(smos, Ordering::Relaxed);
        bump(&self.counters.table_retrains);
        self.counters
            .training_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Refits the in-leaf models of the leaves marked changed that are resident; returns how
    /// many were refitted.
    pub fn refit_changed_leaves(&self) -> Result<u64> {
        self.changed_since.store(0, Ordering::Relaxed);
        let table = self.table.load();
        let mut refitted = 0;
        for (i, s) in table.slots.iter().enumerate() {
            if self.stopping() {
                break;
            }
            if !s.changed.swap(false, Ordering::Relaxed) || !self.tree.is_resident(s.pid) {
                continue;
            }
            // A key the leaf covers: its upper fence, or just above its lower one.
            let key = match (&s.upper, table.lower(i)) {
                (Some(u), _) => u.clone(),
                (None, Some(l)) => after(l),
                (None, None) => Vec::new(),
            };
            self.tree.refit_leaf(&key)?;
            bump(&self.counters.leaf_refits);
            refitted += 1;
        }
        Ok(refitted)
    }
}

/// The smallest key above `k`.
fn after(k: &[u8]) -> Vec<u8> {
    let mut v = k.to_vec();
    v.push(0);
    v
}

/// The two threads, joined on stop.
#[derive(Debug, Default)]
pub(crate) struct Trainers {
    learned: Option<Arc<Learned>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Trainers {
    /// Starts the table and in-leaf threads over `learned`.
    pub fn start(learned: &Arc<Learned>) -> std::io::Result<Trainers> {
        let mut handles = Vec::new();
        let l = learned.clone();
        handles.push(
            std::thread::Builder::new()
                .name("lidb-learned-table".into())
                .spawn(move || {
                    while wait(&l.retrain_table, &l, None) {
                        // An error keeps the old table; the next trigger tries again. It is
                        // counted (LearnedStats::retrain_errors), not dropped.
                        if l.retrain_table().is_err() {
                            l.retrain_failed();
                        }
                    }
                })?,
        );
        let l = learned.clone();
        handles.push(
            std::thread::Builder::new()
                .name("lidb-learned-leaves".into())
                .spawn(move || {
                    while wait(&l.refit_leaves, &l, Some(REFIT_PERIOD)) {
                        if l.refit_changed_leaves().is_err() {
                            l.retrain_failed();
                        }
                    }
                })?,
        );
        Ok(Trainers {
            learned: Some(learned.clone()),
            handles: Mutex::new(handles),
        })
    }

    /// Asks both threads to stop and joins them.
    pub fn stop(&self) {
        let Some(l) = &self.learned else { return };
        l.stop.store(true, Ordering::Relaxed);
        l.retrain_table.nudge();
        l.refit_leaves.nudge();
        let handles =
            std::mem::take(&mut *self.handles.lock().unwrap_or_else(PoisonError::into_inner));
        for h in handles {
            // A panicked trainer is a bug already reported on its thread.
            let _ = h.join();
        }
    }
}

impl Drop for Trainers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until `wake` is nudged (or `period` passes); false once the threads must stop.
fn wait(wake: &Wake, l: &Learned, period: Option<Duration>) -> bool {
    let mut flag = wake.flag.lock().unwrap_or_else(PoisonError::into_inner);
    while !*flag && !l.stopping() {
        match period {
            Some(p) => {
                let (g, timeout) = wake
                    .cv
                    .wait_timeout(flag, p)
                    .unwrap_or_else(PoisonError::into_inner);
                flag = g;
                if timeout.timed_out() {
                    break;
                }
            }
            None => flag = wake.cv.wait(flag).unwrap_or_else(PoisonError::into_inner),
        }
    }
    *flag = false;
    !l.stopping()
}
