//! The write path: writers queue, and the writer at the head of the queue leads a group
//! (LevelDB's `DBImpl::Write` with RocksDB's `allow_concurrent_memtable_write`).
//!
//! A caller of [`write`] leads a group at once when none runs; otherwise it queues. A leader
//! takes the write mutex, makes room in the memtable (switching it, stalling), takes the queued
//! batches (up to `MAX_GROUP_BYTES`), gives them consecutive sequence numbers, appends one WAL
//! record per batch and syncs the WAL once if `Options::sync`. Then the batches go into the
//! memtable: when the followers bring `PARALLEL_INSERT_MIN_OPS` ops or more, every writer of the
//! group inserts its own batch on its own thread, and the leader waits for all of them; a smaller
//! group the leader inserts alone. (The memtable is an `RwLock<BTreeMap>`, so these inserts take
//! its write lock in turn: a lock-free skiplist that would let them overlap was built and measured
//! out, see memtable.rs. What the group saves today is one WAL append and one sync per group.) The leader then publishes the group's last
//! sequence number, releases the write mutex, tells the group its outcome and ends its lead,
//! waking the oldest queued writer to take it (a writer arriving first takes it instead). When
//! the memtable is full it becomes immutable and a new memtable and WAL take writes; leaders
//! stall while too many immutable memtables wait for flush or L0 is too deep.
//!
//! Waiting writers spin briefly, then sleep on their own condition variable; a leader notifies
//! only sleeping ones.
//!
//! [`try_write`] is the write that never waits on I/O or on a slow group (`lidb serve` calls it
//! on its async workers): it leads a group of its own batch only when no group runs or is queued
//! (or a group of another `try_write` ends within `TRY_WAIT`), the write mutex is free, the
//! memtable has room and `sync` is off; otherwise it declines, having written nothing, and the
//! caller uses [`write`] from a thread that may block. Its group keeps every invariant below.
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
//! 4. A leader checks `Shared::bg_error` under the write mutex before it logs its group. A failed
//!    memtable switch sets it under that mutex, so no group that starts after it is acknowledged;
//!    a flush or compaction sets it on its own thread just after its failed call returns, so a
//!    group whose leader took the mutex in between may still be acknowledged (its writes are in
//!    the WAL and durable as promised: only the refusal comes one group late).
//!
//! Lock order: write mutex (`Shared::write`), then the queue mutex, then a writer's phase mutex;
//! the group's countdown mutex is taken alone.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use crate::batch::WriteBatch;
use crate::compaction::picker::should_stall;
use crate::db::state::{Shared, SuperVersion, WriteState, lock};
use crate::db::{compact, flush};
use crate::memtable::MemTable;
use lidb_storage::error::{Error, Result};
use lidb_storage::log::LogWriter;

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
    /// A leader is running a group.
    leading: bool,
    /// The running group is a [`try_write`]'s: it cannot wait on I/O, and ends in microseconds.
    quick: bool,
}

/// Followers insert their own batches in parallel when they bring at least this many ops;
/// below it the leader inserts them itself. Waking a follower costs more than inserting a few
/// entries: on 2 cores, 16 threads of single puts took 1.5 to 1.9 s of CPU for 200K writes with
/// every follower inserting, 0.9 s with the leader inserting (0.6 s for the old single mutex).
const PARALLEL_INSERT_MIN_OPS: u64 = 64;
/// Spins of a waiting writer before it sleeps: a short group may end first. Not longer, and no
/// yields (RocksDB's `AwaitState` also yields): on 2 cores with 16 threads, writers spinning 64
/// times and yielding 32 halved the throughput of the readers beside them (YCSB A, `lidb bench
/// ycsb`), against sleeping at once.
const WAIT_SPINS: u32 = 16;
/// How long a [`try_write`] waits, spinning, for another `try_write`'s group to end before it
/// declines: such a group is a WAL append to the page cache and a few memtable inserts, some
/// microseconds. Two async workers of `lidb serve` writing pipelines of SETs meet here all the
/// time; without the wait, one of them hands its batch to the engine threads, and then the
/// queued batch makes the next tries decline too.
const TRY_WAIT: Duration = Duration::from_micros(100);

/// One queued caller of [`write`].
#[derive(Debug)]
struct Writer {
    batch: WriteBatch,
    /// Set (under `phase`'s mutex) when `phase` holds something to take, so a spinning writer
    /// sees it without the mutex.
    told: AtomicBool,
    phase: Mutex<Told>,
    wake: Condvar,
}

/// A writer's phase, and whether it sleeps on `wake` (only then does `tell` notify).
#[derive(Debug)]
struct Told {
    phase: Phase,
    asleep: bool,
}

/// What a writer is told to do next; it takes the phase and leaves `Waiting` behind.
#[derive(Debug)]
enum Phase {
    Waiting,
    /// Lead the next group if no other writer does yet.
    TryLead,
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
        let mut told = lock(&self.phase);
        told.phase = next;
        self.told.store(true, Ordering::Release);
        if told.asleep {
            self.wake.notify_one();
        }
    }

    /// Waits until told something (spinning briefly, then asleep), and takes it.
    fn next_phase(&self) -> Phase {
        for _ in 0..WAIT_SPINS {
            if self.told.load(Ordering::Acquire) {
                break;
            }
            std::hint::spin_loop();
        }
        let mut told = lock(&self.phase);
        while matches!(told.phase, Phase::Waiting) {
            told.asleep = true;
            told = self.wake.wait(told).unwrap_or_else(PoisonError::into_inner);
            told.asleep = false;
        }
        self.told.store(false, Ordering::Relaxed);
        std::mem::replace(&mut told.phase, Phase::Waiting)
    }
}

/// Inserts `batch` into `mem`, op i at `first_seq + i`.
fn insert(mem: &MemTable, batch: &WriteBatch, first_seq: u64) {
    for (seq, op) in (first_seq..).zip(batch.ops()) {
        mem.insert(seq, op.kind, &op.key, &op.value);
    }
}

pub(crate) fn write(s: &Arc<Shared>, batch: WriteBatch) -> Result<()> {
    batch.validate()?;
    if batch.is_empty() {
        return Ok(());
    }
    let me = {
        let mut q = lock(&s.writers.state);
        if !q.leading {
            q.leading = true;
            drop(q);
            // No group runs: lead one at once, without queueing.
            return lead(s, &batch);
        }
        let me = Arc::new(Writer {
            batch,
            told: AtomicBool::new(false),
            phase: Mutex::new(Told {
                phase: Phase::Waiting,
                asleep: false,
            }),
            wake: Condvar::new(),
        });
        q.waiting.push_back(Arc::clone(&me));
        me
    };
    loop {
        match me.next_phase() {
            Phase::TryLead => {
                let mut q = lock(&s.writers.state);
                // Lead unless a writer arriving meanwhile leads, or took this batch into its group.
                if !q.leading
                    && let Some(at) = q.waiting.iter().position(|w| Arc::ptr_eq(w, &me))
                {
                    q.waiting.remove(at);
                    q.leading = true;
                    drop(q);
                    return lead(s, &me.batch);
                }
            }
            Phase::Insert {
                mem,
                first_seq,
                group,
            } => {
                insert(&mem, &me.batch, first_seq);
                group.done_one();
            }
            Phase::Done(outcome) => return outcome,
            Phase::Waiting => debug_assert!(false, "next_phase returned Waiting"),
        }
    }
}

/// Writes `batch` only if that needs no wait: no group runs or is queued, the write mutex is free,
/// the memtable has room and no stall is due, and the WAL is not synced per write
/// (`Options::sync` off: then a write is a WAL append to the operating system's page cache and
/// memtable inserts, as Redis's event loop appends to its AOF). Returns `Ok(false)`, having
/// written nothing, when it would wait; the caller then calls [`write`] from a thread that may
/// block. `lidb serve` writes a pipeline's SETs this way on its async worker.
///
/// The write is a group of its own batch alone, under the same invariants as every group.
pub(crate) fn try_write(s: &Arc<Shared>, batch: &WriteBatch) -> Result<bool> {
    batch.validate()?;
    if batch.is_empty() {
        return Ok(true);
    }
    if s.opts.sync {
        return Ok(false);
    }
    let mut since: Option<Instant> = None;
    loop {
        let mut q = lock(&s.writers.state);
        if !q.leading && q.waiting.is_empty() {
            q.leading = true;
            q.quick = true;
            break;
        }
        let started = *since.get_or_insert_with(Instant::now);
        if !q.quick || !q.waiting.is_empty() || started.elapsed() > TRY_WAIT {
            return Ok(false);
        }
        drop(q);
        for _ in 0..WAIT_SPINS {
            std::hint::spin_loop();
        }
    }
    let w = match s.write.try_lock() {
        Ok(w) => w,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            hand_off(s);
            return Ok(false);
        }
    };
    if let Err(e) = check_open(s) {
        drop(w);
        hand_off(s);
        return Err(e);
    }
    if !has_room(s) {
        drop(w);
        hand_off(s);
        return Ok(false);
    }
    run_group(s, w, batch, Vec::new())?;
    Ok(true)
}

/// Runs one group led by `me` (see the module documentation) and hands the lead on.
fn lead(s: &Arc<Shared>, own: &WriteBatch) -> Result<()> {
    let mut w = lock(&s.write);
    if let Err(e) = check_open(s).and_then(|()| make_room(s, &mut w)) {
        drop(w);
        hand_off(s);
        return Err(e);
    }
    let followers = take_group(s, own.approximate_bytes());
    run_group(s, w, own, followers)
}

/// Logs and inserts the group of `own` and `followers` under the write mutex `w`, publishes its
/// last sequence number, tells the followers the outcome and hands the lead on.
fn run_group(
    s: &Arc<Shared>,
    mut w: MutexGuard<'_, WriteState>,
    own: &WriteBatch,
    followers: Vec<Arc<Writer>>,
) -> Result<()> {
    let first_seq = s.last_seq.load(Ordering::SeqCst) + 1;
    let mut seqs = Vec::with_capacity(followers.len() + 1);
    let mut next_seq = first_seq;
    for batch in std::iter::once(own).chain(followers.iter().map(|f| &f.batch)) {
        seqs.push(next_seq);
        next_seq += batch.len() as u64;
    }
    let logged = log_group(s, &mut w, own, &followers, &seqs);
    if let Err(e) = logged {
        drop(w);
        for f in &followers {
            f.tell(Phase::Done(Err(same_error(&e))));
        }
        hand_off(s);
        return Err(e);
    }
    let mem = Arc::clone(&s.current().mem);
    let follower_ops: u64 = followers.iter().map(|f| f.batch.len() as u64).sum();
    if follower_ops < PARALLEL_INSERT_MIN_OPS {
        for (f, &seq) in followers.iter().zip(seqs.iter().skip(1)) {
            insert(&mem, &f.batch, seq);
        }
        insert(&mem, own, first_seq);
    } else {
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
        insert(&mem, own, first_seq);
        group.wait();
    }
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
    own: &WriteBatch,
    followers: &[Arc<Writer>],
    seqs: &[u64],
) -> Result<()> {
    let batches = std::iter::once(own).chain(followers.iter().map(|f| &f.batch));
    for (batch, &seq) in batches.zip(seqs) {
        w.wal.add_record(&batch.encode(seq))?;
    }
    if s.opts.sync {
        w.wal.sync()?;
    }
    Ok(())
}

/// Ends the lead and wakes the oldest queued writer to take it. A writer that arrives first
/// takes it instead (it is running, the queued one may be asleep) and groups the queued batches,
/// as a mutex lets a running thread barge ahead of a sleeping one. The queued writer is told
/// under the queue mutex, while it is still queued, so no group has told it anything this could
/// overwrite.
fn hand_off(s: &Shared) {
    let mut q = lock(&s.writers.state);
    q.leading = false;
    q.quick = false;
    if let Some(next) = q.waiting.front() {
        next.tell(Phase::TryLead);
    }
}

/// The error a group's leader got, for each follower.
fn same_error(e: &Error) -> Error {
    match e {
        Error::Io { .. } => e.duplicate(),
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

/// Whether a write can go into the memtable now, with no switch and no stall.
fn has_room(s: &Shared) -> bool {
    let sv = s.current();
    sv.mem.approximate_bytes() < s.opts.write_buffer_bytes
        && !should_stall(&sv.tables.version, s.opts.l0_stop_writes)
}

/// Ensures the memtable has room, switching it and stalling as needed. Holds the write mutex.
fn make_room(s: &Arc<Shared>, w: &mut WriteState) -> Result<()> {
    let mut stalled = Duration::ZERO;
    loop {
        if has_room(s) {
            break;
        }
        let sv = s.current();
        let full = sv.mem.approximate_bytes() >= s.opts.write_buffer_bytes;
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
///
/// A failure stops writes (`Shared::set_bg_error`): a failed sync of the old WAL, or of the
/// directory that names the new one. The old WAL stays the current one, but a directory sync
/// that failed leaves it unknown which directory entries are durable, and a later switch that
/// retried it could report them durable.
pub(crate) fn switch_memtable(s: &Shared, w: &mut WriteState) -> Result<()> {
    switch_memtable_once(s, w).inspect_err(|e| s.set_bg_error(e))
}

fn switch_memtable_once(s: &Shared, w: &mut WriteState) -> Result<()> {
    // The old WAL stays until its memtable is flushed; make what it holds durable first. If that
    // fails the WAL stays the (poisoned) current one.
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
