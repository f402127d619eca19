//! Group commit over lidb-lsm's record log: writers queue their records, and whichever waiting
//! writer finds no batch in flight leads the next one (leader/follower, no thread of its own):
//! it takes the whole queue, appends it with [`LogWriter`], syncs once when the store runs with
//! `sync`, and wakes every writer the batch covers. Writers that queue while a batch is being
//! synced ride on the next one, so concurrent writers share one fsync.
//!
//! Threads: any thread may call every method. Lock order: `file`, then `state`; nobody takes
//! `file` while holding `state`, and only the holder of `file` takes the queue.
//!
//! Invariants:
//! 1. LSNs are given in queue order, one per record, without gaps; the queue is taken only by
//!    the holder of `file`, so records reach the files in LSN order.
//! 2. `written_lsn` (`durable_lsn`): every record with a smaller LSN is appended (synced) to a
//!    log file; `durable_lsn <= written_lsn <= next_lsn`.
//! 3. After the first failed append or sync, `error` is set for good and every later call fails:
//!    the file may end in a partial record, so records after it would be unreadable.
//! 4. A switch happens at an LSN P: under `file` it appends and syncs every queued record (all
//!    of LSN < P) to the old file and only then puts the new file in place, so every record
//!    below P is in the old file, synced, and every record from P on goes to the new one.

use std::sync::{Condvar, Mutex};

use lidb_storage::log::{LogWriter, RECORD_HEADER_BYTES};

use crate::error::{Error, Result};
use crate::wal::{lock, record};

/// The log file appended to.
#[derive(Debug)]
struct CurrentLog {
    id: u64,
    writer: LogWriter,
}

#[derive(Debug)]
struct State {
    /// Payloads queued for the next batch, LSNs `written_lsn..next_lsn` (once taken, in flight).
    queue: Vec<Vec<u8>>,
    /// Framed bytes of the queue.
    queued_bytes: u64,
    next_lsn: u64,
    written_lsn: u64,
    durable_lsn: u64,
    /// A writer is leading a batch.
    leading: bool,
    /// Why the log failed (invariant 3).
    error: Option<String>,
    /// Why appends are refused while the log still works (the store is closing).
    refused: Option<String>,
    /// Bytes of the current file after the last batch written to it.
    file_bytes: u64,
}

/// The group-committing log: see the module documentation.
#[derive(Debug)]
pub struct GroupLog {
    state: Mutex<State>,
    /// Wakes writers waiting for a batch.
    done: Condvar,
    file: Mutex<CurrentLog>,
    sync_writes: bool,
}

impl GroupLog {
    /// A log appending to `writer` (log `id`), giving LSNs from `next_lsn` on; with
    /// `sync_writes` a commit waits for its batch to be synced.
    pub fn new(id: u64, writer: LogWriter, next_lsn: u64, sync_writes: bool) -> GroupLog {
        let file_bytes = writer.len();
        GroupLog {
            state: Mutex::new(State {
                queue: Vec::new(),
                queued_bytes: 0,
                next_lsn,
                written_lsn: next_lsn,
                durable_lsn: next_lsn,
                leading: false,
                error: None,
                refused: None,
                file_bytes,
            }),
            done: Condvar::new(),
            file: Mutex::new(CurrentLog { id, writer }),
            sync_writes,
        }
    }

    fn failed(why: &str) -> Error {
        Error::Closed(format!("the write-ahead log failed: {why}"))
    }

    /// Queues `payload` (made by `record::encode`) under the next LSN, which it writes into it.
    /// Returns the LSN and the bytes the current log will hold once the queue is written.
    pub fn append(&self, mut payload: Vec<u8>) -> Result<(u64, u64)> {
        let mut st = lock(&self.state);
        if let Some(e) = &st.error {
            return Err(GroupLog::failed(e));
        }
        if let Some(why) = &st.refused {
            return Err(Error::Closed(why.clone()));
        }
        let lsn = st.next_lsn;
        if lsn == u64::MAX {
            return Err(Error::Closed("the log's LSNs are exhausted".into()));
        }
        record::set_lsn(&mut payload, lsn);
        st.next_lsn = lsn + 1;
        st.queued_bytes += RECORD_HEADER_BYTES + payload.len() as u64;
        st.queue.push(payload);
        Ok((lsn, st.file_bytes + st.queued_bytes))
    }

    /// For a write that changes nothing (a delete of an absent key): fails as [`GroupLog::append`]
    /// would on a failed or refusing log, and otherwise returns the end (exclusive) of the LSNs
    /// queued so far. The caller waits for them ([`GroupLog::commit_below`]) before it
    /// acknowledges: the absence it saw may be the work of a record not yet synced, and a crash
    /// would bring the key back.
    pub fn barrier(&self) -> Result<u64> {
        let st = lock(&self.state);
        if let Some(e) = &st.error {
            return Err(GroupLog::failed(e));
        }
        if let Some(why) = &st.refused {
            return Err(Error::Closed(why.clone()));
        }
        Ok(st.next_lsn)
    }

    /// Returns once every record below `end` is in the log file (synced, when the log syncs
    /// writes).
    pub fn commit_below(&self, end: u64) -> Result<()> {
        self.wait_for(end, self.sync_writes)
    }

    /// Returns once the record `lsn` is in the log file (synced, when the log syncs writes).
    pub fn commit(&self, lsn: u64) -> Result<()> {
        self.wait_for(lsn.saturating_add(1), self.sync_writes)
    }

    /// Writes and syncs every record queued so far.
    pub fn flush(&self) -> Result<()> {
        let end = lock(&self.state).next_lsn;
        self.wait_for(end, true)
    }

    /// Waits until every record below `end` is written (and synced, with `sync`), leading a
    /// batch whenever none is in flight.
    fn wait_for(&self, end: u64, sync: bool) -> Result<()> {
        let mut st = lock(&self.state);
        loop {
            let reached = if sync { st.durable_lsn } else { st.written_lsn };
            if reached >= end {
                return Ok(());
            }
            if let Some(e) = &st.error {
                return Err(GroupLog::failed(e));
            }
            if st.leading {
                st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.leading = true;
            drop(st);
            self.lead(sync);
            st = lock(&self.state);
            st.leading = false;
            self.done.notify_all();
        }
    }

    /// Writes the queue as one batch (invariant 1: under `file`); records a failure in `error`.
    fn lead(&self, sync: bool) {
        let mut file = lock(&self.file);
        let (batch, end) = self.take_queue();
        let r = write_batch(&mut file.writer, &batch, sync);
        let mut st = lock(&self.state);
        st.file_bytes = file.writer.len();
        match r {
            Ok(()) => {
                st.written_lsn = end;
                if sync {
                    st.durable_lsn = end;
                }
            }
            Err(e) => {
                st.error.get_or_insert(e.to_string());
            }
        }
    }

    fn take_queue(&self) -> (Vec<Vec<u8>>, u64) {
        let mut st = lock(&self.state);
        st.queued_bytes = 0;
        (std::mem::take(&mut st.queue), st.next_lsn)
    }

    /// Makes `writer` (log `id`, its header synced) the log from the next LSN P on, after
    /// syncing every record below P to the old one (invariant 4). Returns P and the old log's
    /// id. Writers only queue meanwhile. A failure stops the log (invariant 3).
    pub fn switch(&self, id: u64, writer: LogWriter) -> Result<(u64, u64)> {
        let mut file = lock(&self.file);
        if let Some(e) = self.error() {
            return Err(GroupLog::failed(&e));
        }
        let (batch, end) = self.take_queue();
        let r = write_batch(&mut file.writer, &batch, true);
        let mut st = lock(&self.state);
        if let Err(e) = r {
            let why = st.error.get_or_insert(e.to_string()).clone();
            self.done.notify_all();
            return Err(GroupLog::failed(&why));
        }
        let old_id = file.id;
        *file = CurrentLog { id, writer };
        st.file_bytes = file.writer.len();
        st.written_lsn = end;
        st.durable_lsn = end;
        self.done.notify_all();
        Ok((end, old_id))
    }

    /// Refuses every later append with `why` (`Error::Closed`); queued records are still
    /// written by `flush`.
    pub fn refuse(&self, why: String) {
        lock(&self.state).refused.get_or_insert(why);
    }

    /// Stops the log for good: a record was queued whose write could not be applied.
    pub fn poison(&self, why: String) {
        lock(&self.state).error.get_or_insert(why);
        self.done.notify_all();
    }

    /// Why the log failed, if it did.
    pub fn error(&self) -> Option<String> {
        lock(&self.state).error.clone()
    }

    /// The LSN the next record gets.
    pub fn next_lsn(&self) -> u64 {
        lock(&self.state).next_lsn
    }

    /// The id of the current log and the bytes in its file (all synced after a `flush` with no
    /// append since).
    pub fn current(&self) -> (u64, u64) {
        let file = lock(&self.file);
        (file.id, file.writer.len())
    }
}

fn write_batch(writer: &mut LogWriter, batch: &[Vec<u8>], sync: bool) -> Result<()> {
    for payload in batch {
        writer.add_record(payload)?;
    }
    if sync {
        writer.sync()?;
    }
    Ok(())
}
