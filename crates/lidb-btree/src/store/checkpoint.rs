//! Checkpoints: switch to a new log at an LSN P, let every write below P finish applying, ask
//! the target for a checkpoint at LSN P - 1, then remove the old logs; and the background
//! thread that runs one when the current log reaches `WalOptions::checkpoint_log_bytes`.
//!
//! Threads: `Shared::checkpoint` from any thread (one at a time: it holds `checkpointing`); the
//! checkpointer thread waits on [`Trigger`] and is stopped and joined by the store's `close`
//! and `Drop`. A writer nudges the trigger without blocking on it (an atomic first).
//!
//! Invariants:
//! 1. The new log exists, its header and directory entry synced, before the switch; so a crash
//!    at any instant leaves every record in some log recovery reads (`recover.rs`).
//! 2. When the target's checkpoint starts, every write with an LSN below P is applied: a write
//!    holds its key's stripe from before it takes its LSN until it is applied, and the
//!    checkpoint takes every stripe once after the switch.
//! 3. Old logs go only after the target's checkpoint at P - 1 returned (durable): every record
//!    they hold is then in it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::store::recover::create_log;
use crate::store::{Shared, target::CheckpointTarget};
use crate::wal::{files::log_name, lock, read::list_logs};

impl<T: CheckpointTarget> Shared<T> {
    /// Runs one checkpoint (see the module documentation).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        let _one = lock(&self.checkpointing);
        if let Some(e) = self.log.error() {
            return Err(Error::Closed(format!("the write-ahead log failed: {e}")));
        }
        let storage = self.storage.as_ref();
        let (old_id, _) = self.log.current();
        let new_id = old_id
            .checked_add(1)
            .ok_or_else(|| Error::Closed("the log file ids are exhausted".into()))?;
        let writer = create_log(storage, &self.dir, new_id)?;
        let (switch_lsn, _) = self.log.switch(new_id, writer)?;
        for stripe in &self.stripes {
            drop(lock(stripe));
        }
        let extra = self.checkpoint_extra();
        self.target
            .checkpoint(switch_lsn.saturating_sub(1), &extra)?;
        let mut removed = false;
        for id in list_logs(storage, &self.dir)? {
            if id < new_id {
                storage.remove(&self.dir.join(log_name(id)))?;
                removed = true;
            }
        }
        if removed {
            storage.sync_dir(&self.dir)?;
        }
        *lock(&self.last_checkpoint_lsn) = switch_lsn.saturating_sub(1);
        Ok(())
    }
}

#[derive(Debug, Default)]
struct TriggerState {
    due: bool,
    stop: bool,
}

/// Wakes the checkpointer thread when the log is due for a checkpoint, or to stop.
#[derive(Debug, Default)]
pub(crate) struct Trigger {
    state: Mutex<TriggerState>,
    wake: Condvar,
    /// A copy of `state.due`, so writers past the threshold do not take the lock each time.
    due: AtomicBool,
}

impl Trigger {
    /// Asks for a checkpoint (a writer whose record took the log past the threshold).
    pub(crate) fn nudge(&self) {
        if !self.due.swap(true, Ordering::AcqRel) {
            lock(&self.state).due = true;
            self.wake.notify_all();
        }
    }

    fn stop(&self) {
        lock(&self.state).stop = true;
        self.wake.notify_all();
    }

    /// Waits for a nudge; false when asked to stop.
    fn wait(&self) -> bool {
        let mut st = lock(&self.state);
        while !st.due && !st.stop {
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        !st.stop
    }

    /// The checkpoint asked for is done: later nudges count again.
    fn done(&self) {
        lock(&self.state).due = false;
        self.due.store(false, Ordering::Release);
    }
}

/// The checkpointer thread of a store, if it has one.
#[derive(Debug, Default)]
pub(crate) struct Checkpointer {
    trigger: Arc<Trigger>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread over `shared` (whose `trigger` it waits on); a checkpoint it runs
    /// that fails refuses every later write, naming the failure.
    pub(crate) fn start<T: CheckpointTarget + 'static>(shared: &Arc<Shared<T>>) -> Checkpointer {
        let trigger = Arc::clone(&shared.trigger);
        let s = Arc::clone(shared);
        let thread = std::thread::Builder::new()
            .name("btree-checkpointer".into())
            .spawn(move || {
                while s.trigger.wait() {
                    // An explicit checkpoint may have switched logs since the nudge.
                    let (_, log_bytes) = s.log.current();
                    let r = if log_bytes >= s.opts.checkpoint_log_bytes {
                        s.checkpoint()
                    } else {
                        Ok(())
                    };
                    s.trigger.done();
                    if let Err(e) = r {
                        let why = format!("an automatic checkpoint failed: {e}");
                        s.log.refuse(why.clone());
                        lock(&s.background_error).get_or_insert(why);
                        return;
                    }
                }
            })
            .unwrap_or_else(|e| panic!("cannot start the checkpointer thread: {e}"));
        Checkpointer {
            trigger,
            thread: Mutex::new(Some(thread)),
        }
    }

    /// Stops the thread once the checkpoint it runs (if any) is done, and joins it.
    pub(crate) fn stop(&self) {
        self.trigger.stop();
        if let Some(t) = lock(&self.thread).take() {
            // A panic of the thread is a bug already reported on stderr.
            let _ = t.join();
        }
    }
}
