//! Checkpoints: the fuzzy checkpoint itself (see the module documentation of `store` for why it
//! is exact), and the checkpointer thread that runs one by itself once the current log holds
//! `FineStoreOptions::checkpoint_log_bytes`.
//!
//! Threads: [`Shared::checkpoint`] from any thread (an explicit `FineStore::checkpoint`, the open
//! that folds a chain of logs, or the checkpointer thread); one at a time, because a checkpoint
//! holds `files` for its whole run. The logger calls [`Trigger::log_grew`] from a writer's
//! `append` (under the logger's state lock: the trigger's lock is a leaf). The checkpointer
//! thread runs [`run`]; `FineStore` starts it after the open and stops and joins it
//! ([`Checkpointer::stop`]) before the logger stops, in `close` and in `Drop`: a checkpoint
//! running or due runs to its end first, so a closed store's log is below the threshold (no
//! writer is left to grow it: `close` owns the store, and `Drop` runs when no one holds it).
//!
//! Invariants:
//! 1. A nudge is never lost: the writer whose record takes the log across the threshold (or a
//!    multiple of it) sets `due` under the trigger's lock and the thread clears it under the
//!    same lock just before it checks the log's size, so a crossing during a checkpoint runs
//!    another one after it.
//! 2. A checkpoint runs only when the log still holds the threshold once `files` is held
//!    ([`Shared::checkpoint_if_due`]): a nudge made stale by an explicit checkpoint is dropped.
//! 3. A failed checkpoint, automatic or explicit, stops the store's writes
//!    (`Logger::refuse_writes`, then a flush, so every write acknowledged before is kept): every
//!    later write and `close` return
//!    `Error::Closed` naming the failure, so it is never silent. Reads and `flush` go on. (A
//!    failure of the log itself, or of the state switch, stops the log as well: `poison`.)
//!
//! Why 64 MiB: the LSM's default memtable size, so replay and disk beyond the live data stay near
//! it, while each checkpoint rewrites every live entry; 0 never checkpoints; the writer nudges
//! again at each further multiple while the log keeps growing (as when an explicit checkpoint
//! failed before its switch). Limits: the threshold is a fixed byte count, not relative to the
//! live data, so a store whose live data is far larger rewrites all of it every threshold of
//! writes (raise the threshold); writers are never slowed when checkpoints fall behind (the log
//! then grows past the threshold until one finishes).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use lidb_storage::Result;

use crate::store::format::{self, State, checkpoint_name, log_name};
use crate::store::memory::lock;
use crate::store::{Files, Shared, recover};

/// When the checkpointer thread should run: set by the writer that takes the log across the
/// threshold, taken by the thread.
#[derive(Debug)]
pub struct Trigger {
    /// Bytes in the current log (header included) from which a checkpoint runs; 0 = never.
    threshold_bytes: u64,
    state: Mutex<TriggerState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct TriggerState {
    /// The log crossed the threshold since the thread last looked.
    due: bool,
    /// The store is closing: the thread ends once no checkpoint is due.
    stop: bool,
}

impl Trigger {
    pub fn new(threshold_bytes: u64) -> Arc<Trigger> {
        Arc::new(Trigger {
            threshold_bytes,
            state: Mutex::new(TriggerState::default()),
            wake: Condvar::new(),
        })
    }

    /// The current log grew from `before` to `after` bytes: nudges the thread when that
    /// crosses the threshold, or a multiple of it (a log still growing past it, because an
    /// explicit checkpoint failed before its switch or the thread is behind, nudges again once
    /// per threshold; a new log starts below it).
    pub fn log_grew(&self, before: u64, after: u64) {
        let t = self.threshold_bytes;
        if t > 0 && after >= t && before / t != after / t {
            lock(&self.state).due = true;
            self.wake.notify_one();
        }
    }

    /// Waits for a nudge (true) or the stop (false); a nudge goes first.
    fn wait_due(&self) -> bool {
        let mut st = lock(&self.state);
        loop {
            if std::mem::take(&mut st.due) {
                return true;
            }
            if st.stop {
                return false;
            }
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The checkpointer thread of a store (none when the threshold is 0).
#[derive(Debug)]
pub struct Checkpointer {
    trigger: Arc<Trigger>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread over `shared`, woken by `trigger` (the logger's); none for threshold 0.
    pub fn start(shared: &Arc<Shared>, trigger: Arc<Trigger>) -> Checkpointer {
        let thread = (trigger.threshold_bytes > 0).then(|| {
            let (s, t) = (Arc::clone(shared), Arc::clone(&trigger));
            std::thread::Builder::new()
                .name("finestore-checkpointer".into())
                .spawn(move || run(&s, &t))
                .unwrap_or_else(|e| panic!("cannot start the checkpointer thread: {e}"))
        });
        Checkpointer {
            trigger,
            thread: Mutex::new(thread),
        }
    }

    /// Ends the thread: a checkpoint it is running, or one due, finishes first. Idempotent.
    pub fn stop(&self) {
        lock(&self.trigger.state).stop = true;
        self.trigger.wake.notify_all();
        if let Some(t) = lock(&self.thread).take() {
            // A panic of the thread is a bug already reported on stderr.
            let _ = t.join();
        }
    }
}

/// The checkpointer thread: wait for a nudge, checkpoint if still due, repeat until stopped or
/// a checkpoint fails (invariant 3).
fn run(shared: &Shared, trigger: &Trigger) {
    while trigger.wait_due() {
        if let Err(e) = shared.checkpoint_if_due(trigger.threshold_bytes) {
            // Refuse later writes, and keep the acknowledged ones: a checkpoint that failed
            // leaves the files readable (a chain of logs at worst), so the log may go on.
            let why = format!("an automatic checkpoint failed: {e}");
            shared.logger.refuse_writes(why);
            let _ = shared.logger.flush();
            return;
        }
    }
}

impl Shared {
    /// A checkpoint, if the current log holds at least `threshold_bytes` once `files` is held.
    fn checkpoint_if_due(&self, threshold_bytes: u64) -> Result<()> {
        let mut files = lock(&self.files);
        if self.logger.log_bytes() < threshold_bytes {
            return Ok(());
        }
        self.checkpoint_locked(&mut files)
    }

    /// See `FineStore::checkpoint`. A failure stops the store's writes as a failed automatic
    /// checkpoint does (invariant 3): a sync or write of the storage failed, and the store takes
    /// no more writes until it is reopened.
    pub fn checkpoint(&self) -> Result<()> {
        let mut files = lock(&self.files);
        let r = self.checkpoint_locked(&mut files);
        drop(files);
        if let Err(e) = &r {
            self.logger
                .refuse_writes(format!("a checkpoint failed: {e}"));
            let _ = self.logger.flush();
        }
        r
    }

    /// The fuzzy checkpoint; `files` is held for the whole run, so one runs at a time.
    fn checkpoint_locked(&self, files: &mut Files) -> Result<()> {
        let old = *files;
        // A hand-made FINESTATE may name ids at the end of u64: refuse, never wrap.
        let next = |id: u64| {
            id.checked_add(1).ok_or_else(|| {
                lidb_storage::Error::Closed("the store's file numbers are exhausted".into())
            })
        };
        let new = State {
            checkpoint_id: next(old.state.checkpoint_id)?,
            log_id: next(old.last_log_id)?,
            closed_log_bytes: None,
        };
        let s = self.storage.as_ref();
        let log = recover::create_log(s, &self.dir, new.log_id)?;
        // Acknowledged writes go to the new log before any state names it: its directory entry
        // must be durable first, so that recovery finds it at the end of the old state's chain.
        s.sync_dir(&self.dir)?;
        let (switch_seq, old_log) = self.logger.switch(log)?;
        drop(old_log);
        files.last_log_id = new.log_id;
        let entries = self.memory.snapshot();
        // Every write the snapshot may hold has its record in the buffer by now: make them
        // durable in the new log before a state names the snapshot.
        self.logger.flush()?;
        let bytes = format::encode_checkpoint(switch_seq, &entries);
        let mut f = s.create(&self.dir.join(checkpoint_name(new.checkpoint_id)))?;
        f.append(&bytes)?;
        f.sync()?;
        drop(f);
        // From the rename on, the state may name the new files: if it fails, the store stops
        // taking writes (the state may name either; the chain keeps both readable).
        if let Err(e) = recover::write_state(s, &self.dir, new) {
            self.logger.poison(format!("checkpoint failed: {e}"));
            return Err(e);
        }
        files.state = new;
        let mut removed = Vec::new();
        if old.state.checkpoint_id > 0 {
            removed.push(checkpoint_name(old.state.checkpoint_id));
        }
        removed.extend((old.state.log_id..=old.last_log_id).map(log_name));
        for name in removed {
            s.remove(&self.dir.join(name))?;
        }
        s.sync_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `log_grew(before, after)` nudges, on a fresh trigger of threshold `t`.
    fn nudges(t: u64, before: u64, after: u64) -> bool {
        let trigger = Trigger::new(t);
        trigger.log_grew(before, after);
        std::mem::take(&mut lock(&trigger.state).due)
    }

    #[test]
    fn nudges_once_per_threshold_of_log() {
        assert!(!nudges(100, 0, 99));
        assert!(nudges(100, 99, 100));
        assert!(nudges(100, 0, 250));
        assert!(
            !nudges(100, 100, 199),
            "past the threshold, within its first multiple"
        );
        assert!(
            nudges(100, 199, 200),
            "a log still growing nudges again at 2x"
        );
        assert!(nudges(100, 8, 1000));
        assert!(!nudges(0, 0, u64::MAX), "0 = never");
    }
}
