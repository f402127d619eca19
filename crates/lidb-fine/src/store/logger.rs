//! The log buffer and the logger thread (the FineStore paper, section 4.3): writers append encoded records
//! to one buffer; one logger thread takes the whole buffer as a batch, appends it to the log
//! file with one `append`, and syncs it when the store runs with `sync` or someone waits for
//! durability (`flush`).
//!
//! Threads: writers call [`Logger::append`] and [`Logger::wait_durable`]; `flush` and `switch`
//! from any thread (one `switch` at a time: the store's checkpoint holds `files`); the logger
//! thread runs [`run`]. A writer that buffered records without waking the logger
//! ([`Logger::append_quiet`]) may write the buffer itself ([`Logger::write_out`]): a taker of
//! the buffer (that writer or the logger thread) holds `file` from before it takes the batch
//! until the batch is written, so batches reach the file in the order they were taken. Only the
//! logger thread syncs and switches files. Lock order: `file`, then `state`; writers that only
//! buffer take `state` alone.
//!
//! Invariants:
//! 1. Records reach the file in the order of their sequence numbers (one buffer, taken whole by
//!    a taker that holds `file` until it is written), so a crash keeps a prefix of the
//!    acknowledged writes.
//! 2. `durable_seq`: every record with a smaller seq is synced; `durable_seq` <= `next_seq`.
//! 3. After the first failed append or sync, `error` is set for good: the file may end in a
//!    partial record, so later records could not be read back; every later call fails.
//! 4. A switch happens at a seq P: the logger thread takes the batch ending at P together with
//!    the request, appends it to the old file and syncs it, and only then puts the new file in
//!    place; so every record below P is in the old file, synced, and every record from P on goes
//!    to the new one, and writers never wait for it (they only buffer).
//! 5. `log_bytes` is the size the current log will have once every buffered record is written:
//!    the file's length at the start or switch, plus each record of it as it is buffered. The
//!    writer whose record takes it across the checkpoint threshold nudges the checkpointer
//!    (`Trigger::log_grew`, under `state`).
//! 6. No wake is lost and none is wasted: the logger thread sets `logger_idle` (and a waiter
//!    counts itself in `waiters`) under `state` just before it waits, and a writer (the logger)
//!    checks it under `state` before waking; a wake costs a system call, which at one per write
//!    cost more than the write itself while the logger was busy writing the previous batch.
//! 7. A record buffered quietly is taken by its writer's `write_out`, or, when another taker
//!    holds `file` (and may have taken its batch before the record), by the logger thread,
//!    which that `write_out` wakes if it is idle: so every buffered record is taken. Through the
//!    server (`lidb serve`), a pipeline's writes are buffered quietly and, when the file is
//!    free, written out on the connection's worker before the replies: one `write` a pipeline
//!    and no thread wake-up, where waking the logger per pipeline cost two context switches (a
//!    third of the server's CPU under redis-benchmark's SETs). It never waits for `file`: a
//!    worker blocked behind another's `write` would stall every connection it serves.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use lidb_storage::WritableFile;
use lidb_storage::{Error, Result};

use crate::store::checkpoint::Trigger;
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
    /// Why writes are refused while the log goes on (`Logger::refuse_writes`).
    refused: Option<String>,
    shutdown: bool,
    /// The logger thread has ended: nothing will become durable any more.
    stopped: bool,
    /// A file to switch to at the next batch (`Logger::switch`).
    switch_to: Option<Box<dyn WritableFile>>,
    /// The switch done: its seq P and the old file.
    switched: Option<(u64, Box<dyn WritableFile>)>,
    /// Bytes of the current log, buffered records included (invariant 5).
    log_bytes: u64,
    /// The logger thread waits on `work`: only then does a writer wake it (a wake is a system
    /// call, and one per write cost more than the write when the logger was busy anyway).
    logger_idle: bool,
    /// Threads waiting on `done`: the logger wakes them after a batch only if there are any.
    waiters: u32,
    /// The buffer of the last batch written, emptied: the writers' next buffer, so they append
    /// into memory that is already there instead of growing a new `Vec` every batch.
    spare: Vec<u8>,
}

impl State {
    /// Err when a write may not be taken: the log failed, refuses writes, or shut down.
    fn writable(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(Logger::failed(e));
        }
        if let Some(why) = &self.refused {
            return Err(Error::Closed(why.clone()));
        }
        if self.shutdown {
            return Err(Error::Closed("the store is closed".into()));
        }
        Ok(())
    }
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
    /// Told how the current log grows, to nudge the checkpointer.
    trigger: Arc<Trigger>,
}

impl Logger {
    /// A logger appending to `file` (its header written and synced), numbering from `next_seq`,
    /// telling `trigger` how the log grows (already when `file` is at or above its threshold).
    /// Starts the logger thread.
    pub fn start(
        file: Box<dyn WritableFile>,
        next_seq: u64,
        sync_every_batch: bool,
        trigger: Arc<Trigger>,
    ) -> (Arc<Logger>, JoinHandle<()>) {
        let log_bytes = file.len();
        trigger.log_grew(0, log_bytes);
        let logger = Arc::new(Logger {
            state: Mutex::new(State {
                pending: Vec::new(),
                next_seq,
                durable_seq: next_seq,
                sync_wanted: next_seq,
                error: None,
                refused: None,
                shutdown: false,
                stopped: false,
                switch_to: None,
                switched: None,
                log_bytes,
                logger_idle: false,
                waiters: 0,
                spare: Vec::new(),
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            file: Mutex::new(file),
            sync_every_batch,
            trigger,
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
        self.append_with(true, encode)
    }

    /// [`Logger::append`] without waking the logger thread: the caller calls
    /// [`Logger::write_out`] once it has buffered what it will (invariant 7).
    pub fn append_quiet(&self, encode: impl FnOnce(u64, &mut Vec<u8>)) -> Result<u64> {
        self.append_with(false, encode)
    }

    fn append_with(&self, wake: bool, encode: impl FnOnce(u64, &mut Vec<u8>)) -> Result<u64> {
        let mut st = lock(&self.state);
        st.writable()?;
        // Recovery never yields a record seq of u64::MAX, so a logger may start there (a
        // checkpoint or record claiming the last seq): it then refuses writes, not overflows.
        let seq = st.next_seq;
        if seq == u64::MAX {
            return Err(Error::Closed(
                "the log's sequence numbers are exhausted".into(),
            ));
        }
        st.next_seq = seq + 1;
        let buffered = st.pending.len();
        encode(seq, &mut st.pending);
        let before = st.log_bytes;
        st.log_bytes += (st.pending.len() - buffered) as u64;
        self.trigger.log_grew(before, st.log_bytes);
        if wake && st.logger_idle {
            self.work.notify_one();
        }
        Ok(seq)
    }

    /// Writes every record buffered so far to the log file on this thread, not synced, when no
    /// other taker holds the file; otherwise (or with `sync_every_batch`, where batches are
    /// synced) leaves them to the logger thread, woken if idle, and returns without waiting: a
    /// writer on an async worker never blocks behind another one's `write` (invariant 7). Err
    /// when the log failed, now or before.
    pub fn write_out(&self) -> Result<()> {
        let file = if self.sync_every_batch {
            None
        } else {
            match self.file.try_lock() {
                Ok(f) => Some(f),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        };
        let mut st = lock(&self.state);
        if let Some(e) = &st.error {
            return Err(Logger::failed(e));
        }
        let Some(mut file) = file else {
            if !st.pending.is_empty() && st.logger_idle {
                self.work.notify_one();
            }
            return Ok(());
        };
        if st.pending.is_empty() {
            return Ok(());
        }
        // A switch queued meanwhile is the logger thread's: it takes its batch (and P) after
        // this one is in the old file, and syncs the old file before it switches (invariant 4).
        let spare = std::mem::take(&mut st.spare);
        let mut batch = std::mem::replace(&mut st.pending, spare);
        drop(st);
        let r = file.append(&batch);
        drop(file);
        let mut st = lock(&self.state);
        if batch.capacity() <= KEEP_BUFFER_BYTES && st.spare.capacity() == 0 {
            batch.clear();
            st.spare = batch;
        }
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                let why = st.error.get_or_insert(e.to_string()).clone();
                drop(st);
                self.done.notify_all();
                Err(Logger::failed(&why))
            }
        }
    }

    /// For a write that changes nothing (a delete of an absent key): fails as [`Logger::append`]
    /// would on a failed, refusing or closed log, and otherwise returns the seq of the last
    /// record buffered so far (None when there is none). The caller waits for that record to be
    /// durable before it acknowledges: the absence it saw may be the work of a record not yet
    /// synced, and a crash would bring the key back.
    pub fn barrier(&self) -> Result<Option<u64>> {
        let st = lock(&self.state);
        st.writable()?;
        Ok(st.next_seq.checked_sub(1))
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
            st = self.wait_done(st);
        }
    }

    /// Waits on `done`, counted in `waiters` so the logger thread knows to wake us.
    fn wait_done<'a>(
        &self,
        mut st: std::sync::MutexGuard<'a, State>,
    ) -> std::sync::MutexGuard<'a, State> {
        st.waiters += 1;
        let mut st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        st.waiters -= 1;
        st
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

    /// Makes `file` (its header written and synced) the log from the next seq P on, and
    /// returns P and the old file: every record below P is in the old file and synced
    /// (invariant 4). Writers go on meanwhile. One switch at a time.
    pub fn switch(&self, file: Box<dyn WritableFile>) -> Result<(u64, Box<dyn WritableFile>)> {
        let mut st = lock(&self.state);
        debug_assert!(st.switch_to.is_none() && st.switched.is_none());
        st.switch_to = Some(file);
        self.work.notify_one();
        loop {
            if let Some(done) = st.switched.take() {
                return Ok(done);
            }
            // A failed or stopped logger never takes the file (or took it and failed before
            // switching): the switch did not happen, and the next one must find none queued.
            if let Some(e) = &st.error {
                let failed = Logger::failed(e);
                st.switch_to = None;
                return Err(failed);
            }
            if st.stopped {
                st.switch_to = None;
                return Err(Error::Closed("the store is closed".into()));
            }
            st = self.wait_done(st);
        }
    }

    /// Bytes of the current log once every record buffered so far is written (invariant 5).
    pub fn log_bytes(&self) -> u64 {
        lock(&self.state).log_bytes
    }

    /// Bytes in the log file (after `flush`: all of them synced). Called once the logger
    /// thread has ended, or while it may append (then a lower bound).
    pub fn file_len(&self) -> u64 {
        lock(&self.file).len()
    }

    /// Stops the store's writes for good (a checkpoint failed where the files may disagree).
    pub fn poison(&self, why: String) {
        lock(&self.state).error.get_or_insert(why);
        self.done.notify_all();
    }

    /// Refuses every later write with `why`, while what was buffered is still written and
    /// synced (`flush` goes on working): an automatic checkpoint failed, but the log did not.
    pub fn refuse_writes(&self, why: String) {
        lock(&self.state).refused.get_or_insert(why);
    }

    /// Why writes are refused, if they are (`refuse_writes`).
    pub fn refused(&self) -> Option<String> {
        lock(&self.state).refused.clone()
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

/// Capacity of a batch buffer the logger keeps for the next batch (a larger one is freed).
const KEEP_BUFFER_BYTES: usize = 1 << 20;

fn batch_loop(l: &Logger) {
    loop {
        {
            let mut st = lock(&l.state);
            loop {
                if st.error.is_some() {
                    return;
                }
                if st.switch_to.is_some()
                    || !st.pending.is_empty()
                    || st.sync_wanted > st.durable_seq
                {
                    break;
                }
                if st.shutdown {
                    return;
                }
                st.logger_idle = true;
                st = l.work.wait(st).unwrap_or_else(|e| e.into_inner());
                st.logger_idle = false;
            }
        }
        // The file before the batch (lock order, invariant 7): a writer's `write_out` may have
        // taken the work meanwhile, which leaves an empty batch here.
        let mut file = lock(&l.file);
        let (mut batch, end_seq, sync, switch) = {
            let mut st = lock(&l.state);
            if st.error.is_some() {
                return;
            }
            let spare = std::mem::take(&mut st.spare);
            let batch = std::mem::replace(&mut st.pending, spare);
            let switch = st.switch_to.take();
            if let Some(new) = &switch {
                // Records buffered from now on go to the new file.
                st.log_bytes = new.len();
            }
            let sync = l.sync_every_batch || st.sync_wanted > st.durable_seq || switch.is_some();
            (batch, st.next_seq, sync, switch)
        };
        let (r, old) = {
            let appended = if batch.is_empty() {
                Ok(())
            } else {
                file.append(&batch)
            };
            let r = appended.and_then(|()| if sync { file.sync() } else { Ok(()) });
            // The batch ending at `end_seq` is in the old file and synced: switch there.
            let old = match (&r, switch) {
                (Ok(()), Some(new)) => Some(std::mem::replace(&mut *file, new)),
                _ => None,
            };
            drop(file);
            (r, old)
        };
        let mut st = lock(&l.state);
        if batch.capacity() <= KEEP_BUFFER_BYTES && st.spare.capacity() == 0 {
            batch.clear();
            st.spare = batch;
        }
        match r {
            Ok(()) if sync => st.durable_seq = end_seq,
            Ok(()) => {}
            Err(e) => {
                st.error.get_or_insert(e.to_string());
            }
        }
        if let Some(old) = old {
            st.switched = Some((end_seq, old));
        }
        if st.waiters > 0 || st.error.is_some() {
            l.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use lidb_storage::Storage;
    use lidb_storage::mem::MemStorage;

    use super::*;
    use crate::store::checkpoint::Trigger;

    /// Records of 8 bytes, their seq.
    fn seq_record(seq: u64, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&seq.to_le_bytes());
    }

    fn seqs(bytes: &[u8]) -> Vec<u64> {
        bytes
            .chunks_exact(8)
            .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
            .collect()
    }

    fn stop(logger: &Logger, handle: JoinHandle<()>) -> Result<()> {
        logger.shutdown();
        handle
            .join()
            .map_err(|_| Error::Closed("the logger thread panicked".into()))
    }

    /// Waits (5 s at most) until the logger thread sleeps with nothing to do.
    fn until_idle(logger: &Logger) {
        for _ in 0..5000 {
            if lock(&logger.state).logger_idle {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the logger thread never went idle");
    }

    /// Invariant 7's order: the logger thread, woken while another taker holds the file, takes
    /// no batch until it holds the file itself, so a quiet record buffered meanwhile is taken
    /// with the records before it, and the file gets them in seq order.
    #[test]
    fn the_logger_takes_no_batch_while_another_taker_holds_the_file() -> Result<()> {
        let mem = MemStorage::new();
        let path = Path::new("/log");
        let (logger, handle) = Logger::start(mem.create(path)?, 0, false, Trigger::new(0));
        let held = lock(&logger.file);
        logger.append(seq_record)?;
        // The logger thread is awake now, and waits for the file.
        std::thread::sleep(Duration::from_millis(50));
        logger.append_quiet(seq_record)?;
        let pending = seqs(&lock(&logger.state).pending);
        drop(held);
        assert_eq!(pending, vec![0, 1], "a batch was taken without the file");
        logger.flush()?;
        assert_eq!(seqs(&mem.read_all(path)?), vec![0, 1]);
        stop(&logger, handle)
    }

    /// `write_out` with the file free writes the quiet records on the calling thread (they are
    /// in the file when it returns, though the logger thread was never woken for them); with
    /// the file held by another taker it returns at once and the logger thread writes them once
    /// the file is free.
    #[test]
    fn write_out_writes_quiet_records_or_hands_them_to_the_logger() -> Result<()> {
        let mem = MemStorage::new();
        let path = Path::new("/log");
        let (logger, handle) = Logger::start(mem.create(path)?, 0, false, Trigger::new(0));
        for round in 0..3u64 {
            until_idle(&logger);
            for _ in 0..4 {
                logger.append_quiet(seq_record)?;
            }
            logger.write_out()?;
            let want: Vec<u64> = (0..8 * round + 4).collect();
            assert_eq!(seqs(&mem.read_all(path)?), want, "written out");

            let held = lock(&logger.file);
            for _ in 0..4 {
                logger.append_quiet(seq_record)?;
            }
            logger.write_out()?;
            drop(held);
            // No flush: the logger thread was woken by `write_out` and writes them by itself.
            let want: Vec<u64> = (0..8 * (round + 1)).collect();
            let mut got = Vec::new();
            for _ in 0..5000 {
                got = seqs(&mem.read_all(path)?);
                if got == want {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(got, want, "handed to the logger");
        }
        stop(&logger, handle)
    }
}
