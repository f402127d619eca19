//! The durable engine handle: [`BTreeStore`] puts a write-ahead log in front of a
//! [`CheckpointTarget`] (the B+-tree), so that a kill at any instant loses no acknowledged write.
//!
//! - `target.rs`: the trait the tree implements;
//! - `recover.rs`: open (read and decide, then replay and write) and the recovery report;
//! - `checkpoint.rs`: checkpoints and the checkpointer thread.
//!
//! Durability: a write is acknowledged (`put`/`delete` return Ok) once its record is in the log
//! (appended to the file, and synced when `WalOptions::sync` is on) and it is applied to the
//! target. With `sync` a crash keeps every acknowledged write; without, the writes of a prefix
//! of the log (LSN order), at least through the last `flush`, `checkpoint` or `close` that
//! returned. A write is visible to readers once applied, which may be before its record is
//! synced: a crash may then lose a write a reader saw but whose writer had not returned.
//!
//! Threads: every method but `close` takes `&self`; any number of threads may read and write at
//! once. A write holds its key's stripe (one of [`STRIPES`] mutexes, by key hash) while it takes
//! its LSN and applies itself, so writes of one key reach the log in the order they are applied
//! (replay then ends each key at its live value); it waits for the log outside the stripe,
//! which lets concurrent writers share one fsync (`wal/group.rs`). The store owns one thread,
//! the checkpointer (unless `checkpoint_log_bytes` is 0), stopped and joined by `close` and
//! `Drop`. Lock order: `checkpointing`, stripe, the log's `file`, the log's `state`.
//!
//! A clean `close` syncs the log, checkpoints (unless `checkpoint_on_close` is off) and records
//! the log's synced length in `WALSTATE`, so a log shortened after it opens as damage, never as
//! a torn tail whose cut would drop acknowledged writes in silence; the next open clears it.

mod checkpoint;
pub mod recover;
pub mod target;

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use lidb_storage::Storage;
use lidb_storage::tail::RecoveryMode;

use crate::error::{Error, Result};
use crate::wal::files::{ClosedState, LOCK_NAME};
use crate::wal::group::GroupLog;
use crate::wal::{lock, record};
use checkpoint::{Checkpointer, Trigger};
pub use recover::WalRecovery;
pub use target::{CheckpointInfo, CheckpointTarget};

/// Stripes of the per-key write lock.
pub const STRIPES: usize = 64;

/// Makes the caller's blob saved with each checkpoint (the learned path's mapping table).
pub type ExtraHook = dyn Fn() -> Vec<u8> + Send + Sync;

/// Settings of the durability layer of a [`BTreeStore`].
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// A write returns only once its record is synced (concurrent writers share the sync);
    /// else once it is appended to the file (a crash may lose a suffix of the writes).
    pub sync: bool,
    /// What an open does with a bad log tail (`lidb_storage::RecoveryMode`).
    pub recovery_mode: RecoveryMode,
    /// A checkpoint runs by itself, in the background, once the current log holds this many
    /// bytes; 0 = never (only `checkpoint` and `close` do). The default,
    /// [`WalOptions::DEFAULT_CHECKPOINT_LOG_BYTES`] (64 MiB), is FineStore's and the LSM's
    /// memtable size: the log replayed at open stays near 64 MiB, while a checkpoint, which
    /// writes the tree's dirty pages, runs once per 64 MiB of writes.
    pub checkpoint_log_bytes: u64,
    /// `close` checkpoints (saving the caller's blob) when writes were logged since the last
    /// checkpoint, so the next open replays nothing.
    pub checkpoint_on_close: bool,
}

impl WalOptions {
    /// The default of [`WalOptions::checkpoint_log_bytes`]: 64 MiB.
    pub const DEFAULT_CHECKPOINT_LOG_BYTES: u64 = 64 << 20;
}

impl Default for WalOptions {
    fn default() -> WalOptions {
        WalOptions {
            sync: false,
            recovery_mode: RecoveryMode::default(),
            checkpoint_log_bytes: WalOptions::DEFAULT_CHECKPOINT_LOG_BYTES,
            checkpoint_on_close: true,
        }
    }
}

/// The store's state, shared by the handle and the checkpointer thread.
pub(crate) struct Shared<T> {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    opts: WalOptions,
    target: T,
    log: GroupLog,
    stripes: Vec<Mutex<()>>,
    /// Held by a checkpoint for its whole run: one at a time.
    checkpointing: Mutex<()>,
    /// The LSN of the last checkpoint (loaded or written).
    last_checkpoint_lsn: Mutex<u64>,
    extra_hook: Mutex<Option<Arc<ExtraHook>>>,
    loaded: CheckpointInfo,
    trigger: Arc<Trigger>,
    /// Why the checkpointer thread stopped, if a checkpoint of it failed.
    background_error: Mutex<Option<String>>,
    report: WalRecovery,
    _lock: Box<dyn Send + Sync + std::fmt::Debug>,
}

impl<T> Shared<T> {
    /// The blob for a checkpoint: the hook's, or else the one loaded at open, carried forward.
    fn checkpoint_extra(&self) -> Vec<u8> {
        let hook = lock(&self.extra_hook).clone();
        match hook {
            Some(h) => h(),
            None => self.loaded.extra.clone(),
        }
    }

    fn stripe(&self, key: &[u8]) -> &Mutex<()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        let i = (h.finish() % self.stripes.len() as u64) as usize;
        let stripe = self.stripes.get(i);
        debug_assert!(stripe.is_some(), "the index is below the stripe count");
        stripe.unwrap_or(&self.checkpointing)
    }
}

/// A B+-tree (any [`CheckpointTarget`]) with a write-ahead log: see the module documentation.
pub struct BTreeStore<T: CheckpointTarget + 'static> {
    shared: Arc<Shared<T>>,
    /// Stopped and joined in `close` and `Drop`.
    checkpointer: Checkpointer,
}

impl<T: CheckpointTarget + 'static> std::fmt::Debug for BTreeStore<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BTreeStore")
            .field("dir", &self.shared.dir)
            .field("opts", &self.shared.opts)
            .field("next_lsn", &self.shared.log.next_lsn())
            .finish_non_exhaustive()
    }
}

impl<T: CheckpointTarget + 'static> BTreeStore<T> {
    /// Opens (or creates) the log of the store in `dir` on `storage` over `target`, which has
    /// loaded its newest checkpoint: replays every logged write after the checkpoint's LSN onto
    /// it, cuts a torn tail (reported in [`BTreeStore::recovery_report`]) and removes obsolete
    /// logs. Errors: `Corruption` naming the file (and the offset, for a log) when the logs
    /// are damaged beyond what the recovery mode allows, saying how to go on; no file is
    /// changed then (the target may hold replayed writes in memory: drop it).
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        target: T,
        opts: WalOptions,
    ) -> Result<BTreeStore<T>> {
        storage.create_dir_all(dir)?;
        let lock_file = storage.lock(&dir.join(LOCK_NAME))?;
        let rec = recover::open(storage.as_ref(), dir, &target, opts.recovery_mode)?;
        let log = GroupLog::new(rec.log_id, rec.writer, rec.report.next_lsn, opts.sync);
        let shared = Arc::new(Shared {
            storage,
            dir: dir.to_path_buf(),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            checkpointing: Mutex::new(()),
            last_checkpoint_lsn: Mutex::new(rec.loaded.lsn),
            extra_hook: Mutex::new(None),
            loaded: rec.loaded,
            trigger: Arc::new(Trigger::default()),
            background_error: Mutex::new(None),
            report: rec.report,
            log,
            target,
            opts,
            _lock: lock_file,
        });
        let checkpointer = if shared.opts.checkpoint_log_bytes > 0 {
            let (_, log_bytes) = shared.log.current();
            if log_bytes >= shared.opts.checkpoint_log_bytes {
                shared.trigger.nudge();
            }
            Checkpointer::start(&shared)
        } else {
            Checkpointer::default()
        };
        Ok(BTreeStore {
            shared,
            checkpointer,
        })
    }

    /// What the open found: the checkpoint LSN, the records replayed, any tail cut.
    pub fn recovery_report(&self) -> &WalRecovery {
        &self.shared.report
    }

    /// The checkpoint the target opened with: its LSN and the caller's blob saved with it.
    pub fn loaded_checkpoint(&self) -> &CheckpointInfo {
        &self.shared.loaded
    }

    /// Sets the function that makes the blob saved with every later checkpoint (called by the
    /// checkpointing thread, after the writes below the checkpoint's LSN are applied). Without
    /// one, each checkpoint saves the blob loaded at open again.
    pub fn set_checkpoint_extra(&self, hook: Box<ExtraHook>) {
        *lock(&self.shared.extra_hook) = Some(Arc::from(hook));
    }

    /// The tree under the store, for reads the store does not wrap. Writing to it directly
    /// bypasses the log: such writes are lost at a crash.
    pub fn target(&self) -> &T {
        &self.shared.target
    }

    /// The LSN the next write gets.
    pub fn next_lsn(&self) -> u64 {
        self.shared.log.next_lsn()
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.shared.target.get(key)
    }

    /// Entries with `start <= key < end` (`None`: no upper bound) in key order, at most
    /// `limit`.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.shared.target.scan(start, end, limit)
    }

    /// Sets `key` to `value`; returns once the write is logged (synced, under `sync`) and
    /// applied.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if !record::fits(key, Some(value)) {
            return Err(Error::TooLarge(format!(
                "a key of {} bytes with a value of {} bytes exceeds a log record",
                key.len(),
                value.len()
            )));
        }
        self.shared.target.check_put(key, value)?;
        let payload = record::encode(key, Some(value));
        self.write(key, payload, |t| t.apply_put(key, value).map(|()| true))
            .map(|_| ())
    }

    /// Removes `key`; returns whether it was present (a delete of an absent key logs nothing).
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if !record::fits(key, None) {
            return Ok(false);
        }
        let payload = record::encode(key, None);
        self.write(key, payload, |t| t.apply_delete(key))
    }

    /// Logs `payload` (a write of `key`) and applies it with `apply` under the key's stripe,
    /// then waits for the log. A delete of an absent key is not logged (`Ok(false)`), but it is
    /// refused by a failed log and waits, like a logged write, for every record queued before
    /// it: the absence may be an unsynced record's doing.
    fn write(
        &self,
        key: &[u8],
        payload: Vec<u8>,
        apply: impl FnOnce(&T) -> Result<bool>,
    ) -> Result<bool> {
        let s = &self.shared;
        let is_delete = payload.first() == Some(&record::OP_DELETE);
        let (lsn, applied) = {
            let _stripe = lock(s.stripe(key));
            if is_delete && s.target.get(key)?.is_none() {
                let end = s.log.barrier()?;
                drop(_stripe);
                return s.log.commit_below(end).map(|()| false);
            }
            let (lsn, log_bytes) = s.log.append(payload)?;
            let applied = match apply(&s.target) {
                Ok(a) => a,
                Err(e) => {
                    // The log holds a write the tree refused: they disagree from here on.
                    s.log
                        .poison(format!("applying the write of LSN {lsn} failed: {e}"));
                    return Err(e);
                }
            };
            let threshold = s.opts.checkpoint_log_bytes;
            if threshold > 0 && log_bytes >= threshold {
                s.trigger.nudge();
            }
            (lsn, applied)
        };
        s.log.commit(lsn)?;
        Ok(applied)
    }

    /// Makes every write made so far durable.
    pub fn flush(&self) -> Result<()> {
        self.shared.log.flush()
    }

    /// Switches to a new log, has the target write a checkpoint holding every write before the
    /// switch (with the blob of [`BTreeStore::set_checkpoint_extra`]), then removes the old
    /// logs; writers go on meanwhile. Returns once the checkpoint is durable.
    pub fn checkpoint(&self) -> Result<()> {
        let s = &self.shared;
        let r = s.checkpoint();
        if let Err(e) = &r {
            // As after a failed automatic checkpoint: a sync or write of the storage failed, so
            // the store takes no more writes until it is reopened (what it acknowledged stays).
            let why = format!("a checkpoint failed: {e}");
            s.log.refuse(why.clone());
            lock(&s.background_error).get_or_insert(why);
        }
        r
    }

    /// Stops the checkpointer (a checkpoint it runs finishes), syncs every write, checkpoints
    /// if `checkpoint_on_close` and writes were logged since the last checkpoint, and records
    /// the log's synced length in `WALSTATE` (so an open finds a log shortened after this to
    /// be damage, not a torn tail). On an error nothing is recorded: the store then opens as
    /// after a crash. After a failed automatic checkpoint, writes are synced and its error
    /// returned (`Error::Closed`).
    pub fn close(self) -> Result<()> {
        self.checkpointer.stop();
        let s = &self.shared;
        s.log.refuse("the store is closed".into());
        s.log.flush()?;
        if let Some(why) = lock(&s.background_error).clone() {
            return Err(Error::Closed(why));
        }
        let logged_since = s.log.next_lsn().saturating_sub(1) > *lock(&s.last_checkpoint_lsn);
        if s.opts.checkpoint_on_close && logged_since {
            s.checkpoint()?;
        }
        let (log_id, log_bytes) = s.log.current();
        recover::write_state(
            s.storage.as_ref(),
            &s.dir,
            ClosedState { log_id, log_bytes },
        )
    }
}

impl<T: CheckpointTarget + 'static> Drop for BTreeStore<T> {
    /// Like a crash without loss: a checkpoint running finishes, and what was appended is
    /// synced when possible.
    fn drop(&mut self) {
        self.checkpointer.stop();
        let _ = self.shared.log.flush();
    }
}
