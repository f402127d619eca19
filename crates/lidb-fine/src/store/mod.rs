//! FineStore (paper 004, sections 3 and 4.3): a durable key-value store of byte keys and byte
//! values over [`crate::FineIndex`].
//!
//! - `memory.rs`: byte keys over the index (order-preserving image + full-key buckets);
//! - `logger.rs`: the log buffer and the logger thread that batches, writes and syncs;
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
//! once.
//! A write holds the checkpoint gate (shared), then its key's bucket lock while it buffers its
//! log record and applies itself, so records of one key reach the log in the order they were
//! applied, and the log as a whole in seq order (`logger.rs`). A checkpoint takes the gate
//! exclusively for its whole run: writers wait, readers do not.
//!
//! Lock order: gate, bucket, logger state. The checkpoint holds the gate, then `files`.

mod format;
mod logger;
mod memory;
mod recover;
mod repair;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use lidb_lsm::storage::Storage;
use lidb_lsm::storage::fs::FsStorage;
use lidb_lsm::tail::RecoveryMode;
use lidb_lsm::{Error, Result};

use crate::Config;
use format::{State, checkpoint_name, log_name};
use logger::Logger;
use memory::{Memory, lock};
pub use recover::FineRecovery;
pub use repair::FineRepair;

/// Settings of a [`FineStore`].
#[derive(Debug, Clone, Default)]
pub struct FineStoreOptions {
    /// A write returns only once the batch holding it is synced (else once it is buffered: a
    /// crash may then lose a suffix of the acknowledged writes, never more).
    pub sync: bool,
    /// What an open does with a bad log tail (`lidb_lsm::RecoveryMode`).
    pub recovery_mode: RecoveryMode,
    /// Settings of the index.
    pub index: Config,
}

/// The durable store: see the module documentation.
#[derive(Debug)]
pub struct FineStore {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    opts: FineStoreOptions,
    memory: Memory,
    logger: Arc<Logger>,
    logger_thread: Mutex<Option<JoinHandle<()>>>,
    /// Writers share it; a checkpoint holds it alone.
    gate: RwLock<()>,
    /// The files the state names (changed by checkpoints).
    files: Mutex<State>,
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
        let (logger, thread) = Logger::start(opened.log_file, opened.next_seq, opts.sync);
        Ok(FineStore {
            storage,
            dir: dir.to_path_buf(),
            opts,
            memory: opened.memory,
            logger,
            logger_thread: Mutex::new(Some(thread)),
            gate: RwLock::new(()),
            files: Mutex::new(opened.state),
            report: opened.report,
            _lock: lock_file,
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
        &self.report
    }

    /// Figures of the index under the store (its keys are key images, its values bucket ids).
    pub fn index_stats(&self) -> crate::FineStats {
        self.memory.index().stats()
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.memory.get(key)
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if !format::fits(key, value) {
            return Err(Error::InvalidOption(format!(
                "a key of {} bytes with a value of {} bytes exceeds a log record's {} bytes",
                key.len(),
                value.len(),
                format::MAX_PAYLOAD_BYTES
            )));
        }
        let seq = {
            let _gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
            let bucket = self.memory.bucket_or_create(key);
            let mut b = lock(&bucket);
            let seq = self
                .logger
                .append(|seq, buf| format::encode_record(buf, seq, key, Some(value)))?;
            b.insert(key.to_vec(), value.to_vec());
            seq
        };
        self.acknowledge(seq)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let seq = {
            let _gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
            let Some(bucket) = self.memory.bucket(key) else {
                return Ok(false);
            };
            let mut b = lock(&bucket);
            if !b.contains_key(key) {
                return Ok(false);
            }
            let seq = self
                .logger
                .append(|seq, buf| format::encode_record(buf, seq, key, None))?;
            b.remove(key);
            seq
        };
        self.acknowledge(seq).map(|()| true)
    }

    fn acknowledge(&self, seq: u64) -> Result<()> {
        if self.opts.sync {
            self.logger.wait_durable(seq)
        } else {
            Ok(())
        }
    }

    /// Entries with `start <= key < end` (`None`: no upper bound) in key order, at most
    /// `limit`.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.memory.scan(start, end, limit)
    }

    /// Makes every write made so far durable.
    pub fn flush(&self) -> Result<()> {
        self.logger.flush()
    }

    /// Writes a checkpoint of the whole data and starts a new log, so the next open replays
    /// only what follows. Writers wait meanwhile. The old checkpoint and log are removed only
    /// after the new state is durable.
    pub fn checkpoint(&self) -> Result<()> {
        let gate = self.gate.write().unwrap_or_else(|e| e.into_inner());
        self.logger.flush()?;
        let mut files = lock(&self.files);
        let old = *files;
        // A hand-made FINESTATE may name ids at the end of u64: refuse, never wrap.
        let next = |id: u64| {
            id.checked_add(1).ok_or_else(|| {
                lidb_lsm::Error::Closed("the store's file numbers are exhausted".into())
            })
        };
        let new = State {
            checkpoint_id: next(old.checkpoint_id)?,
            log_id: next(old.log_id)?,
            closed_log_bytes: None,
        };
        let s = self.storage.as_ref();
        let entries = self.memory.snapshot();
        let bytes = format::encode_checkpoint(self.logger.next_seq(), &entries);
        let mut f = s.create(&self.dir.join(checkpoint_name(new.checkpoint_id)))?;
        f.append(&bytes)?;
        f.sync()?;
        drop(f);
        let log = recover::create_log(s, &self.dir, new.log_id)?;
        // From the rename on, the state may name the new files: if anything fails now, the
        // store stops taking writes (they would go to a log the state may no longer name).
        if let Err(e) = recover::write_state(s, &self.dir, new) {
            self.logger.poison(format!("checkpoint failed: {e}"));
            return Err(e);
        }
        self.logger.switch(&gate, log);
        *files = new;
        drop(gate);
        let mut removed = Vec::new();
        if old.checkpoint_id > 0 {
            removed.push(checkpoint_name(old.checkpoint_id));
        }
        removed.push(log_name(old.log_id));
        for name in removed {
            s.remove(&self.dir.join(name))?;
        }
        s.sync_dir(&self.dir)
    }

    /// Syncs every write, stops the logger thread, records the log's synced length in
    /// `FINESTATE` (so an open finds a log shortened after this to be damage, not a torn tail)
    /// and closes the store. On an error the length is not recorded: the store then opens as
    /// after a crash.
    pub fn close(self) -> Result<()> {
        let r = self.logger.flush();
        self.stop_logger();
        r?;
        let state = State {
            closed_log_bytes: Some(self.logger.file_len()),
            ..*lock(&self.files)
        };
        recover::write_state(self.storage.as_ref(), &self.dir, state)
    }

    fn stop_logger(&self) {
        self.logger.shutdown();
        if let Some(t) = lock(&self.logger_thread).take() {
            // A panic of the logger thread is a bug already reported on stderr.
            let _ = t.join();
        }
    }
}

impl Drop for FineStore {
    /// Like a crash without loss: what was buffered is written and synced when possible.
    fn drop(&mut self) {
        let _ = self.logger.flush();
        self.stop_logger();
    }
}
