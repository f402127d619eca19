//! FineStore (the FineStore paper, sections 3 and 4.3): a durable key-value store of byte keys and byte
//! values over [`crate::FineIndex`].
//!
//! - `memory.rs`: byte keys over layers of indexes, one per 8-byte key slice (order-preserving
//!   images, full-key buckets that become a layer when they fill);
//! - `logger.rs`: the log buffer and the logger thread that batches, writes and syncs;
//! - `checkpoint.rs`: the fuzzy checkpoint, and the checkpointer thread that runs one by itself;
//! - `format.rs`: the bytes of the log, the checkpoint and `FINESTATE`;
//! - `recover.rs`: open (read everything, decide, then write) and the recovery report;
//! - `repair.rs`: offline rebuild of a store that does not open, from what reads cleanly.
//!
//! Durability: with `sync` a write returns once the batch holding it is synced; without, once
//! it is buffered, and a crash keeps the writes of a prefix of the log (seq order), at least
//! through the last `flush`, `checkpoint` or `close` that returned. A failed append or sync
//! stops every later write (`Error::Closed`); reads go on. `close` records the synced log
//! length in `FINESTATE`, so a log shortened after a clean close opens as damage, never as a
//! torn tail whose cut would drop acknowledged writes in silence; the next open clears it.
//!
//! Threads: every method but `close` takes `&self`; any number of threads may read and write at
//! once. The store owns two threads, started by the open and stopped and joined by `close` and
//! by `Drop`: the logger, and (unless `checkpoint_log_bytes` is 0) the checkpointer, which is
//! stopped first (a checkpoint it runs or that is due finishes) and holds the `Shared` state
//! behind an `Arc`.
//! A write holds its key's bucket lock while it buffers its log record and applies itself, so
//! records of one key reach the log in the order they were applied, and the log as a whole in
//! seq order (`logger.rs`).
//!
//! Checkpoints are fuzzy (writers never wait for one): the logger switches to a new log at a
//! seq P (every record below P is then in the old log, synced; every one from P on goes to the
//! new log); the snapshot is read bucket by bucket without stopping writers, so it holds every
//! write below P (such a write held its bucket lock from before P was chosen until it applied
//! itself) and any mix of later ones; the log is flushed (every write the snapshot may hold is
//! then durable in the new log); the checkpoint is written with next_seq P, `FINESTATE` names it
//! and the new log, and the old pair goes. Recovery loads the checkpoint and replays the new log
//! from its start. That is right because a log record is idempotent: it holds the whole new
//! value of one key (or its deletion), not a change to it, so replaying in seq order the records
//! from P on over a snapshot holding each key's value at some moment after P gives each key its
//! last logged value, or its snapshot value when it has no record from P on (then it did not
//! change after P). A crash between the switch and the new `FINESTATE` leaves the old state,
//! whose log is followed by the new one: recovery replays the chain of logs
//! (`recover.rs`).
//!
//! Automatic checkpoints: the writer whose record takes the current log to
//! `FineStoreOptions::checkpoint_log_bytes` (64 MiB by default) wakes the checkpointer thread
//! (a condvar, no polling), which runs the same checkpoint; explicit and automatic checkpoints
//! never overlap, as each holds `files`, and one made stale by an explicit checkpoint is skipped.
//! A log recovered at the threshold is checkpointed right after the open. A failed automatic
//! checkpoint refuses every later write and `close` with `Error::Closed` naming it, after
//! making the acknowledged writes durable (`checkpoint.rs`, invariant 3); reads go on.
//!
//! Lock order: `files` (held by a checkpoint for its whole run, and by close), bucket, logger
//! state, checkpoint trigger (a leaf: a writer nudges under the logger state).

mod checkpoint;
mod format;
mod logger;
mod memory;
mod recover;
mod repair;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use lidb_storage::Storage;
use lidb_storage::fs::FsStorage;
use lidb_storage::tail::RecoveryMode;
use lidb_storage::{Error, Result};

use crate::Config;
use checkpoint::{Checkpointer, Trigger};
use format::State;
use logger::Logger;
pub use memory::{BucketStats, SPLIT_AT as BUCKET_SPLIT_AT};
use memory::{Memory, lock};
pub use recover::FineRecovery;
pub use repair::FineRepair;

/// The files of an open store: the state on disk, and the last log of its chain (the one
/// appended to; after the state's own log when a checkpoint did not finish).
#[derive(Debug, Clone, Copy)]
struct Files {
    state: State,
    last_log_id: u64,
}

/// Settings of a [`FineStore`].
#[derive(Debug, Clone)]
pub struct FineStoreOptions {
    /// A write returns only once the batch holding it is synced (else once it is buffered: a
    /// crash may then lose a suffix of the acknowledged writes, never more).
    pub sync: bool,
    /// What an open does with a bad log tail (`lidb_storage::RecoveryMode`).
    pub recovery_mode: RecoveryMode,
    /// Settings of the index.
    pub index: Config,
    /// A checkpoint runs by itself, in the background, once the current log holds this many
    /// bytes (written since the last checkpoint, or since the open when the log was already
    /// there); 0 = never (only `checkpoint` does). The default,
    /// [`FineStoreOptions::DEFAULT_CHECKPOINT_LOG_BYTES`] (64 MiB), is the LSM engine's default
    /// memtable size (and RocksDB's), the same trade: the log to replay at open and the disk
    /// beyond the live data stay near 64 MiB (`examples/store.rs` on a 2-core machine replayed a
    /// 55 MB log of 400k records in 0.25 s, and checkpointed them in 0.3 s), while a checkpoint,
    /// which writes every live entry, runs once per 64 MiB of writes. A store whose live data is
    /// much larger than the threshold rewrites all of it per checkpoint: raise the threshold for
    /// such a store.
    pub checkpoint_log_bytes: u64,
}

impl FineStoreOptions {
    /// The default of [`FineStoreOptions::checkpoint_log_bytes`]: 64 MiB.
    pub const DEFAULT_CHECKPOINT_LOG_BYTES: u64 = 64 << 20;
}

impl Default for FineStoreOptions {
    fn default() -> FineStoreOptions {
        FineStoreOptions {
            sync: false,
            recovery_mode: RecoveryMode::default(),
            index: Config::default(),
            checkpoint_log_bytes: FineStoreOptions::DEFAULT_CHECKPOINT_LOG_BYTES,
        }
    }
}

/// The durable store: see the module documentation.
#[derive(Debug)]
pub struct FineStore {
    shared: Arc<Shared>,
    /// Stopped and joined before `shared`'s logger stops (in `close` and `Drop`).
    checkpointer: Checkpointer,
}

/// The store's state, shared by the handle and the checkpointer thread. Dropping it stops the
/// logger thread (what was buffered is written and synced when possible).
#[derive(Debug)]
struct Shared {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    opts: FineStoreOptions,
    memory: Memory,
    logger: Arc<Logger>,
    logger_thread: Mutex<Option<JoinHandle<()>>>,
    /// The files of the store (changed by checkpoints); one checkpoint at a time holds it.
    files: Mutex<Files>,
    report: FineRecovery,
    _lock: Box<dyn Send + Sync + std::fmt::Debug>,
}

impl FineStore {
    /// Opens or creates the store in `dir` on the real file system.
    pub fn open(dir: &Path, opts: FineStoreOptions) -> Result<FineStore> {
        FineStore::open_with_storage(Arc::new(FsStorage), dir, opts)
    }

    /// Opens or creates the store in `dir` on `storage`. Errors: `Corruption` naming the file
    /// (and the offset, for a log) when the files are damaged beyond what the recovery mode
    /// allows; no file is changed then.
    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        opts: FineStoreOptions,
    ) -> Result<FineStore> {
        opts.index
            .validate()
            .map_err(|e| Error::InvalidOption(e.to_string()))?;
        storage.create_dir_all(dir)?;
        let lock_file = storage.lock(&dir.join("LOCK"))?;
        let opened = recover::open(
            storage.as_ref(),
            dir,
            opts.recovery_mode,
            opts.index.clone(),
        )?;
        let trigger = Trigger::new(opts.checkpoint_log_bytes);
        let (logger, thread) = Logger::start(
            opened.log_file,
            opened.next_seq,
            opts.sync,
            Arc::clone(&trigger),
        );
        let shared = Arc::new(Shared {
            storage,
            dir: dir.to_path_buf(),
            opts,
            memory: opened.memory,
            logger,
            logger_thread: Mutex::new(Some(thread)),
            files: Mutex::new(Files {
                state: opened.state,
                last_log_id: opened.last_log_id,
            }),
            report: opened.report,
            _lock: lock_file,
        });
        // A chain of logs (a checkpoint that did not finish) is folded into one checkpoint at
        // once, so `close` can record the length of the one log the state names.
        let files = *lock(&shared.files);
        if files.last_log_id != files.state.log_id {
            shared.checkpoint()?;
        }
        // A log recovered at or above the threshold has nudged the trigger already: the thread
        // checkpoints it at once.
        let checkpointer = Checkpointer::start(&shared, trigger);
        Ok(FineStore {
            shared,
            checkpointer,
        })
    }

    /// Rebuilds the store in `dir` on the real file system from what reads cleanly (offline:
    /// no store may be open on it), setting aside in `dir/lost/` what does not; see
    /// [`FineStore::repair_with_storage`].
    pub fn repair(dir: &Path) -> Result<FineRepair> {
        FineStore::repair_with_storage(&FsStorage, dir)
    }

    /// Rebuilds the store in `dir` on `storage` (`repair.rs`): the checkpoint if it reads whole
    /// (else an older one, else none), then every intact log record after it in seq order,
    /// resynchronising past damaged ranges, which are copied to `lost/`; then a new checkpoint,
    /// an empty log and `FINESTATE`, atomically. Errors are I/O errors, a held lock or a
    /// directory without a store; damage is reported, not an error.
    pub fn repair_with_storage(storage: &dyn Storage, dir: &Path) -> Result<FineRepair> {
        repair::repair(storage, dir)
    }

    /// What the open found: the checkpoint and log replayed, and any tail cut.
    pub fn recovery_report(&self) -> &FineRecovery {
        &self.shared.report
    }

    /// Figures of the root layer's index (its keys are images of the first 8 key bytes, its
    /// values slot ids; `memory.rs`).
    pub fn index_stats(&self) -> crate::FineStats {
        self.shared.memory.index().stats()
    }

    /// How the keys spread over buckets and layers, with the heap of every layer's index
    /// (walks every slot, locking each bucket in turn: for statistics, not for a hot path).
    pub fn bucket_stats(&self) -> BucketStats {
        self.shared.memory.bucket_stats()
    }

    /// Bytes of the keys and values the store holds in memory (every one it has).
    pub fn data_bytes(&self) -> u64 {
        self.shared.memory.data_bytes()
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.shared.memory.get(key)
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let seq = self.apply_put(key, value, true)?;
        self.acknowledge(seq)
    }

    /// Sets each key of `entries` in order, as [`FineStore::put`] one at a time. With `sync`
    /// each waits for its own record's sync, as a put does: a single wait for the lot would let
    /// the logger thread cut the batch wherever it wakes, and a deterministic run (`lidb stress
    /// --deterministic`) counts on the same writes making the same storage operations. Without
    /// `sync` they are acknowledged together: their log records are written to the log file on
    /// this thread (one `write`, no thread wake-up for the lot) unless another thread is
    /// writing the log at that moment; then the logger thread writes them, as it does a single
    /// put's. An error may leave a prefix of `entries` applied.
    pub fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<()> {
        if self.shared.opts.sync {
            return entries.iter().try_for_each(|(k, v)| self.put(k, v));
        }
        let mut any = false;
        for (key, value) in entries {
            self.apply_put(key, value, false)?;
            any = true;
        }
        if any {
            self.shared.logger.write_out()
        } else {
            Ok(())
        }
    }

    /// Buffers the log record of `key = value` (waking the logger thread if `wake` and it is
    /// idle) and applies it in memory, under the key's bucket lock; returns the record's seq.
    fn apply_put(&self, key: &[u8], value: &[u8], wake: bool) -> Result<u64> {
        if !format::fits(key, value) {
            return Err(Error::InvalidOption(format!(
                "a key of {} bytes with a value of {} bytes exceeds a log record's {} bytes",
                key.len(),
                value.len(),
                format::MAX_PAYLOAD_BYTES
            )));
        }
        let s = &self.shared;
        let mut b = s.memory.bucket_or_create(key);
        let encode = |seq, buf: &mut Vec<u8>| format::encode_record(buf, seq, key, Some(value));
        let seq = if wake {
            s.logger.append(encode)?
        } else {
            s.logger.append_quiet(encode)?
        };
        b.insert(key, value);
        Ok(seq)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let s = &self.shared;
        let seq = {
            let Some(mut b) = s.memory.bucket(key) else {
                return self.acknowledge_unchanged().map(|()| false);
            };
            if !b.contains_key(key) {
                drop(b);
                return self.acknowledge_unchanged().map(|()| false);
            }
            let seq = s
                .logger
                .append(|seq, buf| format::encode_record(buf, seq, key, None))?;
            b.remove(key);
            seq
        };
        self.acknowledge(seq).map(|()| true)
    }

    /// Acknowledges a write that found nothing to change (a delete of an absent key) as a
    /// logged one would be: refused by a failed or refusing log, and under `sync` only once
    /// every record buffered before it is durable, since the absence may be an unsynced
    /// record's doing.
    fn acknowledge_unchanged(&self) -> Result<()> {
        match self.shared.logger.barrier()? {
            Some(seq) => self.acknowledge(seq),
            None => Ok(()),
        }
    }

    fn acknowledge(&self, seq: u64) -> Result<()> {
        if self.shared.opts.sync {
            self.shared.logger.wait_durable(seq)
        } else {
            Ok(())
        }
    }

    /// Entries with `start <= key < end` (`None`: no upper bound) in key order, at most
    /// `limit`.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.shared.memory.scan(start, end, limit)
    }

    /// Makes every write made so far durable.
    pub fn flush(&self) -> Result<()> {
        self.shared.logger.flush()
    }

    /// Writes a checkpoint of the whole data and starts a new log, so the next open replays
    /// only what follows; writers go on meanwhile (a fuzzy checkpoint: see the module
    /// documentation). The old checkpoint and logs are removed only after the new state is
    /// durable. An automatic checkpoint running meanwhile finishes first.
    pub fn checkpoint(&self) -> Result<()> {
        self.shared.checkpoint()
    }

    /// Lets an automatic checkpoint running or due finish, and stops the checkpointer (so the
    /// log left is below `checkpoint_log_bytes`); syncs
    /// every write, stops the logger thread, records the log's synced length in `FINESTATE`
    /// (so an open finds a log shortened after this to be damage, not a torn tail) and closes
    /// the store. On an error the length is not recorded: the store then opens as after a
    /// crash. After a failed automatic checkpoint, writes are synced and its error returned
    /// (`Error::Closed`).
    pub fn close(self) -> Result<()> {
        self.checkpointer.stop();
        let s = &self.shared;
        let r = s.logger.flush();
        s.stop_logger();
        r?;
        if let Some(why) = s.logger.refused() {
            // Every acknowledged write is synced; the store opens as after a crash.
            return Err(Error::Closed(why));
        }
        let files = *lock(&s.files);
        if files.last_log_id != files.state.log_id {
            // A checkpoint failed midway: the state names the first of two logs. Nothing is
            // recorded; the store opens as after a crash (and folds the chain).
            return Ok(());
        }
        let state = State {
            closed_log_bytes: Some(s.logger.file_len()),
            ..files.state
        };
        recover::write_state(s.storage.as_ref(), &s.dir, state)
    }
}

impl Drop for FineStore {
    /// Like a crash without loss: a checkpoint running or due finishes, what was buffered is
    /// written and synced when possible (`Shared`'s drop, once the checkpointer let go of it).
    fn drop(&mut self) {
        self.checkpointer.stop();
    }
}

impl Shared {
    fn stop_logger(&self) {
        self.logger.shutdown();
        if let Some(t) = lock(&self.logger_thread).take() {
            // A panic of the logger thread is a bug already reported on stderr.
            let _ = t.join();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.logger.flush();
        self.stop_logger();
    }
}
