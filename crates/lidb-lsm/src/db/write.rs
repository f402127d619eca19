//! The write path: writers queue, and the writer at the head of the queue leads a group
//! (LevelDB's `DBImpl::Write` with RocksDB's `allow_concurrent_memtable_write`).
//!
//! A caller of [`write`] joins the queue. When no group is running it leads one: it takes the
//! write mutex, makes room in the memtable (switching it, stalling), takes the queued batches
//! (up to `MAX_GROUP_BYTES`), gives them consecutive sequence numbers, appends one WAL record per
//! batch and syncs the WAL once if `Options::sync`. Then every writer of the group inserts its
//! own batch into the memtable, in parallel on its own thread; the leader waits for all of them,
//! publishes the group's last sequence number, releases the write mutex, wakes the group with
//! its outcome and hands the lead to the next queued writer. When the memtable is full it becomes
//! immutable and a new memtable and WAL take writes; leaders stall while too many immutable
//! memtables wait for flush or L0 is too deep.
//!
//! Threads: any thread may call [`write`]; [`switch_memtable`] and [`sync_wal`] are called with
//! the write mutex (flush, close).
//!
//! Invariants:
//! 1. At most one group runs at a time, and its leader holds the write mutex from making room
//!    until its last sequence number is published. So WAL order is sequence order, and the
//!    memtable is never switched (nor flushed) while a group still inserts into it.
//! 2. `last_seq` is published only after every batch of the group is in the memtable: a snapshot
//!    at `last_seq` misses no write at or below it.
//! 3. A writer's `write` returns Ok only after its batch is in the WAL (synced with
//!    `Options::sync`), in the memtable, and below the published `last_seq`. A failed WAL append
//!    or sync fails every batch of the group, none of which reaches the memtable; the WAL writer
//!    is then poisoned, so every later write fails too (a retried fsync could report success for
//!    data already lost), and a memtable switch never replaces a poisoned WAL.
//!
//! Lock order: write mutex (`Shared::write`) before the queue mutex, a writer's phase mutex and
//! the group's countdown mutex; the last three are never held together.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::batch::WriteBatch;
use crate::compaction::picker::should_stall;
use crate::db::state::{Shared, SuperVersion, WriteState, lock};
use crate::db::{compact, flush};
use crate::error::{Error, Result};
use crate::log::LogWriter;
use crate::memtable::MemTable;

/// Immutable memtables allowed to wait for flush before writers stall.
const MAX_IMMUTABLE: usize = 2;
/// Encoded bytes a leader takes into one group, at most (LevelDB's limit): a group is one WAL
/// sync, and a larger group makes its first writer wait longer.
const MAX_GROUP_BYTES: u64 = 1 << 20;
/// A group led by a small batch grows by at most this much, so a small write is not slowed by
/// large ones queued behind it (LevelDB's rule).
const SMALL_GROUP_GROWTH_BYTES: u64 = 128 << 10;

/// Writers waiting for a leader, and whether a group is running.
#[derive(Debug, Default)]
pub(crate) struct WriteQueue {
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    /// Writers not yet taken into a group, oldest first.
    waiting: VecDeque<Arc<Writer>>,
    /// A leader is running a group (or has been handed the lead and is waking up).
    leading: bool,
}

/// One caller of [`write`].
#[derive(Debug)]
struct Writer {
    batch: WriteBatch,
    phase: Mutex<Phase>,
    wake: Condvar,
}

/// What a writer is told to do next; it takes the phase and leaves `Waiting` behind.
#[derive(Debug)]
enum Phase {
    Waiting,
    /// Lead the next group.
    Lead,
    /// Insert the batch into `mem` from `first_seq` on, then count down `group`.
    Insert {
        mem: Arc<MemTable>,
        first_seq: u64,
        group: Arc<Countdown>,
    },
    /// The write is over.
    Done(Result<()>),
}

/// Inserts of a group still running; the leader waits for zero.
#[derive(Debug)]
struct Countdown {
    left: Mutex<usize>,
    zero: Condvar,
}

impl Countdown {
    fn done_one(&self) {
        let mut left = lock(&self.left);
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.zero.notify_all();
        }
    }

    fn wait(&self) {
        let mut left = lock(&self.left);
        while *left > 0 {
            left = self.zero.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Writer {
    fn tell(&self, next: Phase) {
        *lock(&self.phase) = next;
        self.wake.notify_one();
    }

    /// Waits until told something, and takes it.
    fn next_phase(&self) -> Phase {
        let mut phase = lock(&self.phase);
        while matches!(*phase, Phase::Waiting) {
            phase = self
                .wake
                .wait(phase)
                .unwrap_or_else(PoisonError::into_inner);
        }
        std::mem::replace(&mut *phase, Phase::Waiting)
    }

    fn insert(&self, mem: &MemTable, first_seq: u64) {
        for (seq, op) in (first_seq..).zip(self.batch.ops()) {
            mem.insert(seq, op.kind, &op.key, &op.value);
        }
    }
}

pub(crate) fn write(s: &Arc<Shared>, batch: WriteBatch) -> Result<()> {
    batch.validate()?;
    if batch.is_empty() {
        return Ok(());
    }
    let me = Arc::new(Writer {
        batch,
        phase: Mutex::new(Phase::Waiting),
        wake: Condvar::new(),
    });
    let leads_now = {
        let mut q = lock(&s.writers.state);
        if q.leading {
            q.waiting.push_back(Arc::clone(&me));
            false
        } else {
            q.leading = true;
            true
        }
    };
    if leads_now {
        return lead(s, &me);
    }
    loop {
        match me.next_phase() {
            Phase::Lead => return lead(s, &me),
            Phase::Insert {
                mem,
                first_seq,
                group,
            } => {
                me.insert(&mem, first_seq);
                group.done_one();
            }
            Phase::Done(outcome) => return outcome,
            Phase::Waiting => debug_assert!(false, "next_phase returned Waiting"),
        }
    }
}

/// Runs one group led by `me` (see the module documentation) and hands the lead on.
fn lead(s: &Arc<Shared>, me: &Arc<Writer>) -> Result<()> {
    let mut w = lock(&s.write);
    if let Err(e) = check_open(s).and_then(|()| make_room(s, &mut w)) {
        drop(w);
        hand_off(s);
        return Err(e);
    }
    let followers = take_group(s, me.batch.approximate_bytes());
    let first_seq = s.last_seq.load(Ordering::SeqCst) + 1;
    let mut seqs = Vec::with_capacity(followers.len() + 1);
    let mut next_seq = first_seq;
    for batch in std::iter::once(&me.batch).chain(followers.iter().map(|f| &f.batch)) {
        seqs.push(next_seq);
        next_seq += batch.len() as u64;
    }
    let logged = log_group(s, &mut w, me, &followers, &seqs);
    if let Err(e) = logged {
        drop(w);
        for f in &followers {
            f.tell(Phase::Done(Err(same_error(&e))));
        }
        hand_off(s);
        return Err(e);
    }
    let mem = Arc::clone(&s.current().mem);
    let group = Arc::new(Countdown {
        left: Mutex::new(followers.len()),
        zero: Condvar::new(),
    });
    for (f, &seq) in followers.iter().zip(seqs.iter().skip(1)) {
        f.tell(Phase::Insert {
            mem: Arc::clone(&mem),
            first_seq: seq,
            group: Arc::clone(&group),
        });
    }
    me.insert(&mem, first_seq);
    group.wait();
    s.last_seq.store(next_seq - 1, Ordering::SeqCst);
    drop(w);
    for f in &followers {
        f.tell(Phase::Done(Ok(())));
    }
    hand_off(s);
    Ok(())
}

/// Takes the queued writers that join the leader's group, oldest first, up to the group limit.
fn take_group(s: &Shared, leader_bytes: u64) -> Vec<Arc<Writer>> {
    let limit = if leader_bytes <= SMALL_GROUP_GROWTH_BYTES {
        leader_bytes + SMALL_GROUP_GROWTH_BYTES
    } else {
        MAX_GROUP_BYTES
    };
    let mut bytes = leader_bytes;
    let mut q = lock(&s.writers.state);
    let mut group = Vec::new();
    while let Some(next) = q.waiting.front() {
        bytes += next.batch.approximate_bytes();
        if bytes > limit {
            break;
        }
        group.extend(q.waiting.pop_front());
    }
    group
}

/// Appends one WAL record per batch of the group, then syncs once if `Options::sync`.
fn log_group(
    s: &Shared,
    w: &mut WriteState,
    me: &Writer,
    followers: &[Arc<Writer>],
    seqs: &[u64],
) -> Result<()> {
    let batches = std::iter::once(me).chain(followers.iter().map(|f| &**f));
    for (writer, &seq) in batches.zip(seqs) {
        w.wal.add_record(&writer.batch.encode(seq))?;
    }
    if s.opts.sync {
        w.wal.sync()?;
    }
    Ok(())
}

/// Passes the lead to the oldest queued writer, or ends leading if none waits.
fn hand_off(s: &Shared) {
    let next = {
        let mut q = lock(&s.writers.state);
        let next = q.waiting.pop_front();
        if next.is_none() {
            q.leading = false;
        }
        next
    };
    if let Some(next) = next {
        next.tell(Phase::Lead);
    }
}

/// The error a group's leader got, for each follower (`Error` is not `Clone`).
fn same_error(e: &Error) -> Error {
    match e {
        Error::Io { file, source } => Error::Io {
            file: file.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        other => Error::Closed(format!("the write group's log write failed: {other}")),
    }
}

fn check_open(s: &Shared) -> Result<()> {
    if let Some(e) = lock(&s.bg_error).as_ref() {
        return Err(Error::Closed(format!(
            "a background error stopped writes: {e}"
        )));
    }
    if s.closing.load(Ordering::SeqCst) {
        return Err(Error::Closed("the database is closing".into()));
    }
    Ok(())
}

/// Ensures the memtable has room, switching it and stalling as needed. Holds the write mutex.
fn make_room(s: &Arc<Shared>, w: &mut WriteState) -> Result<()> {
    let mut stalled = Duration::ZERO;
    loop {
        let sv = s.current();
        let full = sv.mem.approximate_bytes() >= s.opts.write_buffer_bytes;
        let l0_deep = should_stall(&sv.tables.version, s.opts.l0_stop_writes);
        if !full && !l0_deep {
            break;
        }
        if !s.opts.background_compaction {
            // No background thread: do the work inline, deterministically.
            if full {
                switch_memtable(s, w)?;
            }
            flush::flush_immutables(s)?;
            compact::compact_until_settled(s)?;
            continue;
        }
        if full && sv.imm.len() < MAX_IMMUTABLE {
            switch_memtable(s, w)?;
            s.notify();
            continue;
        }
        // Stall: wait for the background thread to flush or compact.
        let t = Instant::now();
        let g = lock(&s.work);
        s.notify_locked();
        let _ = s.work_cv.wait_timeout(g, Duration::from_millis(50));
        stalled += t.elapsed();
        check_open(s)?;
    }
    if stalled > Duration::ZERO {
        lock(&s.compaction_stats).stall_time += stalled;
    }
    Ok(())
}

/// Makes the memtable immutable and starts a new memtable with a new WAL. The caller holds the
/// write mutex, so no write group is inserting into the memtable it switches.
pub(crate) fn switch_memtable(s: &Shared, w: &mut WriteState) -> Result<()> {
    // The old WAL stays until its memtable is flushed; make what it holds durable first. If that
    // fails the WAL stays the (poisoned) current one, so writes keep failing.
    w.wal.sync()?;
    let number = lock(&s.manifest).new_file_number();
    let path = s.wal_path(number);
    let file = s.storage.create(&path)?;
    s.storage.sync_dir(&s.dir)?;
    w.wal = LogWriter::new(file, path);
    let old_number = std::mem::replace(&mut w.wal_number, number);
    s.update(|sv| {
        let mut imm = vec![(Arc::clone(&sv.mem), old_number)];
        imm.extend(sv.imm.iter().cloned());
        SuperVersion {
            mem: Arc::new(MemTable::new()),
            mem_wal: number,
            imm,
            tables: Arc::clone(&sv.tables),
        }
    });
    Ok(())
}

/// Syncs the current WAL (close, flush).
pub(crate) fn sync_wal(s: &Shared) -> Result<()> {
    lock(&s.write).wal.sync()
}
