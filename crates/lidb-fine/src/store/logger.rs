//! The log buffer and the logger thread (paper 004, section 4.3): writers append encoded records
//! to one buffer; one logger thread takes the whole buffer as a batch, appends it to the log
//! file with one `append`, and syncs it when the store runs with `sync` or someone waits for
//! durability (`flush`).
//!
//! Threads: writers call [`Logger::append`] and [`Logger::wait_durable`]; `flush` and `switch`
//! from any thread; the logger thread runs [`run`]. Lock order: `state`, then (logger thread
//! only, after releasing `state`) `file`; `switch` takes `file` alone.
//!
//! Invariants:
//! 1. Records reach the file in the order of their sequence numbers (one buffer, one taker), so
//!    a crash keeps a prefix of the acknowledged writes.
//! 2. `durable_seq`: every record with a smaller seq is synced; `written_seq` <= `next_seq`.
//! 3. After the first failed append or sync, `error` is set for good: the file may end in a
//!    partial record, so later records could not be read back; every later call fails.

use std::sync::{Arc, Condvar, Mutex, RwLockWriteGuard};
use std::thread::JoinHandle;

use lidb_lsm::storage::WritableFile;
use lidb_lsm::{Error, Result};

use crate::store::memory::lock;

#[derive(Debug)]
struct State {
    pending: Vec<u8>,
    /// Seq the next record gets.
    next_seq: u64,
    /// Every record below this seq is synced.
    durable_seq: u64,
    /// A flush asked that every record below this seq be synced.
    sync_wanted: u64,
    error: Option<String>,
    shutdown: bool,
    /// The logger thread has ended: nothing will become durable any more.
    stopped: bool,
}

/// The log buffer shared by writers and the logger thread.
#[derive(Debug)]
pub struct Logger {
    state: Mutex<State>,
    /// Wakes the logger thread.
    work: Condvar,
    /// Wakes writers waiting for durability.
    done: Condvar,
    file: Mutex<Box<dyn WritableFile>>,
    sync_every_batch: bool,
}

impl Logger {
    /// A logger appending to `file` (its header written and synced), numbering from `next_seq`.
    /// Starts the logger thread.
    pub fn start(
        file: Box<dyn WritableFile>,
        next_seq: u64,
        sync_every_batch: bool,
    ) -> (Arc<Logger>, JoinHandle<()>) {
        let logger = Arc::new(Logger {
            state: Mutex::new(State {
                pending: Vec::new(),
                next_seq,
                durable_seq: next_seq,
                sync_wanted: next_seq,
                error: None,
                shutdown: false,
                stopped: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            file: Mutex::new(file),
            sync_every_batch,
        });
        let l = Arc::clone(&logger);
        let handle = std::thread::Builder::new()
            .name("finestore-logger".into())
            .spawn(move || run(&l))
            .unwrap_or_else(|e| panic!("cannot start the logger thread: {e}"));
        (logger, handle)
    }

    fn failed(why: &str) -> Error {
        Error::Closed(format!("the FineStore log failed: {why}"))
    }

    /// Buffers one record made by `encode(seq, buffer)`; returns its seq. The write counts as
    /// acknowledged-when-buffered; wait for [`Logger::wait_durable`] for more.
    pub fn append(&self, encode: impl FnOnce(u64, &mut Vec<u8>)) -> Result<u64> {
        let mut st = lock(&self.state);
        if let Some(e) = &st.error {
            return Err(Logger::failed(e));
        }
        if st.shutdown {
            return Err(Error::Closed("the store is closed".into()));
        }
        // Recovery never yields a record seq of u64::MAX, so a logger may start there (a
        // checkpoint or record claiming the last seq): it then refuses writes, not overflows.
        let seq = st.next_seq;
        if seq == u64::MAX {
            return Err(Error::Closed(
                "the log's sequence numbers are exhausted".into(),
            ));
        }
        st.next_seq = seq + 1;
        encode(seq, &mut st.pending);
        self.work.notify_one();
        Ok(seq)
    }

    /// Waits until the record `seq` is synced.
    pub fn wait_durable(&self, seq: u64) -> Result<()> {
        let mut st = lock(&self.state);
        loop {
            if st.durable_seq > seq {
                return Ok(());
            }
            if let Some(e) = &st.error {
                return Err(Logger::failed(e));
            }
            if st.stopped {
                return Err(Error::Closed("the store is closed".into()));
            }
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Writes and syncs every record buffered so far.
    pub fn flush(&self) -> Result<()> {
        let target = {
            let mut st = lock(&self.state);
            st.sync_wanted = st.sync_wanted.max(st.next_seq);
            self.work.notify_one();
            st.next_seq
        };
        match target.checked_sub(1) {
            Some(last) => self.wait_durable(last),
            None => Ok(()),
        }
    }

    /// The seq the next record gets.
    pub fn next_seq(&self) -> u64 {
        lock(&self.state).next_seq
    }

    /// Replaces the log file (checkpoint). The caller flushed, and keeps writers out: it holds
    /// the store's checkpoint gate exclusively, which `_writers_out` proves.
    pub fn switch(&self, _writers_out: &RwLockWriteGuard<'_, ()>, file: Box<dyn WritableFile>) {
        debug_assert!(lock(&self.state).pending.is_empty());
        *lock(&self.file) = file;
    }

    /// Bytes in the log file (after `flush`: all of them synced).
    pub fn file_len(&self) -> u64 {
        lock(&self.file).len()
    }

    /// Stops the store's writes for good (a checkpoint failed where the files may disagree).
    pub fn poison(&self, why: String) {
        lock(&self.state).error.get_or_insert(why);
        self.done.notify_all();
    }

    /// Asks the logger thread to end once the buffer is written.
    pub fn shutdown(&self) {
        lock(&self.state).shutdown = true;
        self.work.notify_all();
    }
}

/// The logger thread: batch, write, sync, repeat; on its end, wakes every waiter.
fn run(l: &Logger) {
    batch_loop(l);
    lock(&l.state).stopped = true;
    l.done.notify_all();
}

fn batch_loop(l: &Logger) {
    loop {
        let (batch, end_seq, sync) = {
            let mut st = lock(&l.state);
            loop {
                if st.error.is_some() {
                    return;
                }
                if !st.pending.is_empty() || st.sync_wanted > st.durable_seq {
                    break;
                }
                if st.shutdown {
                    return;
                }
                st = l.work.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            let batch = std::mem::take(&mut st.pending);
            let sync = l.sync_every_batch || st.sync_wanted > st.durable_seq;
            (batch, st.next_seq, sync)
        };
        let r = {
            let mut file = lock(&l.file);
            let appended = if batch.is_empty() {
                Ok(())
            } else {
                file.append(&batch)
            };
            appended.and_then(|()| if sync { file.sync() } else { Ok(()) })
        };
        let mut st = lock(&l.state);
        match r {
            Ok(()) if sync => st.durable_seq = end_seq,
            Ok(()) => {}
            Err(e) => {
                st.error.get_or_insert(e.to_string());
            }
        }
        l.done.notify_all();
    }
}
