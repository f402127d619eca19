//! The stress workers: random puts, deletes, gets, multi-key batches and scans over the run's
//! keys, every read checked against the expected state; and the background thread that forces
//! the engine's own jobs (flush, compaction or GC, conversion, checkpoint) often.
//!
//! Threads: any number of workers share one [`Shared`]. Lock order: the target slot (read),
//! then key guards in ascending index order; the supervisor takes the slot for writing to
//! reopen, and so waits until no worker is inside an engine call.
//!
//! What counts as an operation: what the engine completed (reads it answered, writes it
//! acknowledged). A refused write or failed read is checked just the same (a write acknowledged
//! after a failed sync is a mismatch) but shows only in the error counters: spinning workers once
//! made most of a run's "operations" refusals, so a worker slows to one operation a millisecond
//! from a failed write until the reopen. The check that an engine refuses writes after a failure
//! allows 50 ms: a background job records its failure only once its sync returns, so a write
//! under way then may be taken (it is in the synced log); closing that window would make writers
//! wait for every background fsync in flight.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::codec;
use crate::expected::{
    ABSENT, Expected, Held, KeyState, Kind, OpLog, Record, describe, describe_all,
};
use crate::target::Target;
use lidb_storage::fault::FaultStorage;

/// Counters of one run (all threads).
#[derive(Debug, Default)]
pub struct Counters {
    /// Operations the engine completed: writes it acknowledged, reads it answered. Refused
    /// writes and failed reads are checked too, but counted only in the error counters.
    pub operations: AtomicU64,
    pub gets: AtomicU64,
    pub writes: AtomicU64,
    pub batches: AtomicU64,
    pub scans: AtomicU64,
    pub background_jobs: AtomicU64,
    pub read_errors: AtomicU64,
    pub write_errors: AtomicU64,
    pub background_errors: AtomicU64,
    pub mismatches: AtomicU64,
}

impl Counters {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the workers of one run share.
pub struct Shared {
    pub expected: Arc<Expected>,
    /// The target; None while the supervisor reopens it.
    pub target: RwLock<Option<Arc<dyn Target>>>,
    pub stop: AtomicBool,
    pub counters: Counters,
    /// The first mismatches, in full (later ones are only counted).
    pub failures: Mutex<Vec<String>>,
    /// The last error a write or background job returned, for the summary.
    pub last_error: Mutex<Option<String>>,
    /// Write errors since the last reopen (the supervisor reopens when this is not 0).
    pub errors_since_reopen: AtomicU64,
    /// The storage faults are injected through, when they are: a write that begins after a
    /// sync failed (since the last reopen) must be refused.
    pub faults: RwLock<Option<FaultStorage>>,
    /// Failed syncs the storage had counted when the target was last (re)opened.
    pub syncs_failed_at_open: AtomicU64,
    /// When a worker first saw a sync failure since the last (re)open.
    sync_failure_seen: Mutex<Option<Instant>>,
    pub seed: u64,
    pub value_size: usize,
    /// Stop after this many operations in all (None: at the deadline only).
    pub max_operations: Option<u64>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

const KEEP_FAILURES: usize = 20;

/// How long after a failed sync an engine may still take a write that was under way.
pub const SYNC_GRACE: Duration = Duration::from_millis(50);

impl Shared {
    pub fn new(
        expected: Arc<Expected>,
        target: Arc<dyn Target>,
        seed: u64,
        value_size: usize,
    ) -> Shared {
        Shared {
            expected,
            target: RwLock::new(Some(target)),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            failures: Mutex::new(Vec::new()),
            last_error: Mutex::new(None),
            errors_since_reopen: AtomicU64::new(0),
            faults: RwLock::new(None),
            syncs_failed_at_open: AtomicU64::new(0),
            sync_failure_seen: Mutex::new(None),
            seed,
            value_size,
            max_operations: None,
        }
    }

    /// Records a mismatch and stops the run.
    pub fn mismatch(&self, what: String) {
        Counters::bump(&self.counters.mismatches);
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if f.len() < KEEP_FAILURES {
            f.push(what);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    fn error(&self, counter: &AtomicU64, what: String) {
        Counters::bump(counter);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(what);
    }

    /// Failed syncs so far, where faults are injected.
    fn syncs_failed(&self) -> Option<u64> {
        let f = self.faults.read().unwrap_or_else(|p| p.into_inner());
        f.as_ref().map(|f| f.counts().sync_errors)
    }

    /// Whether a sync failed since the target was last opened (then writes must be refused).
    ///
    /// The engine learns of a failed sync when the storage returns the error, a moment after
    /// the storage counted it; a write that began in between may still be taken. So a write
    /// must be refused only once [`SYNC_GRACE`] has passed since a worker first saw the count
    /// grow: an engine that never stops writing is caught, one that stops at once is not
    /// blamed for the writes already under way.
    fn sync_failed_since_open(&self) -> bool {
        let grown = self
            .syncs_failed()
            .is_some_and(|n| n > self.syncs_failed_at_open.load(Ordering::SeqCst));
        if !grown {
            return false;
        }
        let mut seen = self
            .sync_failure_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        seen.get_or_insert_with(Instant::now).elapsed() >= SYNC_GRACE
    }

    /// Marks a (re)open: sync failures before it no longer stop writes.
    pub fn opened(&self) {
        let n = self.syncs_failed().unwrap_or(0);
        self.syncs_failed_at_open.store(n, Ordering::SeqCst);
        *self
            .sync_failure_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Counts a background job's error.
    pub fn background_failed(&self, what: String) -> u64 {
        self.error(&self.counters.background_errors, what);
        Counters::get(&self.counters.background_errors)
    }

    pub fn stopped(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        match self.max_operations {
            Some(max) => Counters::get(&self.counters.operations) >= max,
            None => false,
        }
    }
}

/// The state a read returned, or why the bytes are no value of key `i`.
fn held_of(i: u32, got: Option<&[u8]>) -> Result<Held, String> {
    match got {
        None => Ok(ABSENT),
        Some(bytes) => codec::version_of(i, bytes),
    }
}

/// One worker: operations until the run stops or `deadline` passes.
pub fn worker(shared: &Shared, thread: usize, deadline: Instant, mut log: Option<OpLog>) {
    let mut rng = ChaCha8Rng::seed_from_u64(shared.seed ^ ((thread as u64 + 1) << 40));
    let keys = shared.expected.len();
    if keys == 0 {
        return;
    }
    let mut since_progress = 0u32;
    while !shared.stopped() && Instant::now() < deadline {
        if shared.errors_since_reopen.load(Ordering::Relaxed) > 0 {
            // A write failed: the engine refuses writes until the supervisor reopens it (within
            // a tick). Go on issuing operations, so refusals are still checked, but slowly:
            // spinning on refused writes made most of a run's operations refusals.
            std::thread::sleep(Duration::from_millis(1));
        }
        // Hold the slot's read side for the whole operation: a reopen waits for it.
        let slot = shared.target.read().unwrap_or_else(|p| p.into_inner());
        let Some(target) = slot.as_ref() else {
            drop(slot);
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let result = one_op(shared, target.as_ref(), &mut rng, &mut log);
        drop(slot);
        match result {
            Ok(Done::Completed) => {}
            Ok(Done::Failed) => continue,
            Err(why) => shared.mismatch(format!("seed {} thread {thread}: {why}", shared.seed)),
        }
        Counters::bump(&shared.counters.operations);
        since_progress += 1;
        if since_progress == 256 {
            if let Some(l) = log.as_mut() {
                let _ = l.append(Record {
                    kind: Kind::Progress,
                    key: since_progress,
                    version: 0,
                });
            }
            since_progress = 0;
        }
    }
    if let Some(l) = log.as_mut() {
        let _ = l.append(Record {
            kind: Kind::Progress,
            key: since_progress,
            version: 0,
        });
    }
}

/// Whether the engine did an operation (checked either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// A write acknowledged, a read answered.
    Completed,
    /// The engine returned an error (a refused write, a failed read).
    Failed,
}

fn done(ok: bool) -> Done {
    if ok { Done::Completed } else { Done::Failed }
}

/// One random operation on `target`: Err describes a mismatch.
pub fn one_op(
    shared: &Shared,
    target: &dyn Target,
    rng: &mut ChaCha8Rng,
    log: &mut Option<OpLog>,
) -> Result<Done, String> {
    let keys = shared.expected.len();
    // A hot eighth of the keys takes half the operations, so threads meet on keys.
    let pick = |rng: &mut ChaCha8Rng| -> u32 {
        if rng.gen_bool(0.5) {
            rng.gen_range(0..keys.div_ceil(8))
        } else {
            rng.gen_range(0..keys)
        }
    };
    match rng.gen_range(0..100u32) {
        0..35 => write(shared, target, &[pick(rng)], false, log),
        35..45 => write(shared, target, &[pick(rng)], true, log),
        45..80 => get(shared, target, pick(rng)),
        80..90 => {
            let n = rng.gen_range(2..=8);
            let mut batch: Vec<u32> = (0..n).map(|_| pick(rng)).collect();
            batch.sort_unstable();
            batch.dedup();
            Counters::bump(&shared.counters.batches);
            write(shared, target, &batch, false, log)
        }
        _ => {
            let start = rng.gen_range(0..keys);
            let width = rng.gen_range(1..=32u32);
            scan(shared, target, start, start.saturating_add(width).min(keys))
        }
    }
}

/// Writes `keys` (ascending, distinct): one put or delete, or one batch of puts.
fn write(
    shared: &Shared,
    target: &dyn Target,
    keys: &[u32],
    delete: bool,
    log: &mut Option<OpLog>,
) -> Result<Done, String> {
    let mut guards = Vec::with_capacity(keys.len());
    for &i in keys {
        guards.push(shared.expected.lock(i).ok_or("key past the end")?);
    }
    let mut versions = Vec::with_capacity(keys.len());
    for (g, &i) in guards.iter_mut().zip(keys) {
        let v = g.begin(delete);
        if let Some(l) = log.as_mut() {
            l.append(Record {
                kind: Kind::Intent(delete),
                key: i,
                version: v,
            })?;
        }
        versions.push(v);
    }
    // Read before the call: a sync that fails during it may be this write's own.
    let must_refuse = shared.sync_failed_since_open();
    let encoded: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .zip(&versions)
        .map(|(&i, &v)| (codec::key(i), codec::value(i, v, shared.value_size)))
        .collect();
    let result = match (encoded.as_slice(), delete) {
        ([(k, _)], true) => target.delete(k),
        ([(k, v)], false) => target.put(k, v),
        (many, _) => {
            let entries: Vec<(&[u8], &[u8])> = many
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            target.put_many(&entries)
        }
    };
    shared
        .counters
        .writes
        .fetch_add(keys.len() as u64, Ordering::Relaxed);
    let ok = result.is_ok();
    if let Err(e) = result {
        shared.errors_since_reopen.fetch_add(1, Ordering::SeqCst);
        shared.error(&shared.counters.write_errors, e);
    }
    for ((g, &i), &v) in guards.iter_mut().zip(keys).zip(&versions) {
        if let Some(l) = log.as_mut() {
            let kind = if ok { Kind::Ack } else { Kind::Fail };
            l.append(Record {
                kind,
                key: i,
                version: v,
            })?;
        }
        g.finish(if delete { ABSENT } else { v }, ok);
    }
    if must_refuse && ok {
        let failed = shared
            .faults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(FaultStorage::last_failed_sync);
        return Err(format!(
            "a write of key {} was acknowledged after a failed sync (the last of {:?}), with no \
             reopen between: an engine must refuse writes once a sync failed",
            keys.first().copied().unwrap_or(0),
            failed
        ));
    }
    Ok(done(ok))
}

/// Gets key `i` under its guard: the answer must be a state the key may hold.
fn get(shared: &Shared, target: &dyn Target, i: u32) -> Result<Done, String> {
    let g = shared.expected.lock(i).ok_or("key past the end")?;
    Counters::bump(&shared.counters.gets);
    let got = match target.get(&codec::key(i)) {
        Ok(got) => got,
        Err(e) => {
            shared.error(&shared.counters.read_errors, e);
            return Ok(Done::Failed);
        }
    };
    let held = held_of(i, got.as_deref()).map_err(|why| format!("get of key {i}: {why}"))?;
    if !g.allows(held) {
        return Err(format!(
            "get of key {i} returned {}, expected {}",
            describe(held),
            describe_all(&g.allowed)
        ));
    }
    Ok(Done::Completed)
}

/// Scans keys `start..end` without holding their guards: each key must show a state it could
/// have held while the scan ran, in key order, nothing outside the range.
fn scan(shared: &Shared, target: &dyn Target, start: u32, end: u32) -> Result<Done, String> {
    let before: Vec<KeyState> = (start..end).map(|i| shared.expected.copy(i)).collect();
    Counters::bump(&shared.counters.scans);
    let width = (end - start) as usize;
    let rows = match target.scan(&codec::key(start), &codec::key(end), width + 1) {
        Ok(rows) => rows,
        Err(e) => {
            shared.error(&shared.counters.read_errors, e);
            return Ok(Done::Failed);
        }
    };
    let after: Vec<KeyState> = (start..end).map(|i| shared.expected.copy(i)).collect();
    let what = || format!("scan of keys {start}..{end}");
    let mut seen: Vec<Held> = vec![ABSENT; width];
    let mut last: Option<u32> = None;
    for (k, v) in &rows {
        let i = codec::index_of(k)
            .ok_or_else(|| format!("{}: returned a key no write made ({k:02x?})", what()))?;
        if i < start || i >= end || last.is_some_and(|l| l >= i) {
            return Err(format!(
                "{}: returned key {i} out of range or order",
                what()
            ));
        }
        last = Some(i);
        let held = held_of(i, Some(v)).map_err(|why| format!("{}: key {i}: {why}", what()))?;
        if let Some(slot) = seen.get_mut((i - start) as usize) {
            *slot = held;
        }
    }
    for (n, ((b, a), &held)) in before.iter().zip(&after).zip(&seen).enumerate() {
        if !a.allows_during(b, held) {
            let i = start + n as u32;
            return Err(format!(
                "{}: key {i} showed {}, expected {} (before the scan) or a write during it (up to {})",
                what(),
                describe(held),
                describe_all(&b.allowed),
                describe_all(&a.allowed)
            ));
        }
    }
    Ok(Done::Completed)
}

/// The background thread: one of the target's jobs every `every` (0.5x to 1.5x at random).
pub fn background(shared: &Shared, every: Duration, deadline: Instant) {
    let mut rng = ChaCha8Rng::seed_from_u64(shared.seed ^ 0xB6);
    while !shared.stopped() && Instant::now() < deadline {
        let nap = every.mul_f64(rng.gen_range(0.5..1.5));
        std::thread::sleep(nap.min(deadline.saturating_duration_since(Instant::now())));
        // The job holds the slot like an operation, so a reopen never runs beside it.
        let slot = shared.target.read().unwrap_or_else(|p| p.into_inner());
        let Some(target) = slot.as_ref() else {
            continue;
        };
        match target.background(rng.r#gen()) {
            Ok(_) => Counters::bump(&shared.counters.background_jobs),
            Err(e) => {
                shared.background_failed(e);
            }
        }
    }
}

/// Reads every key (and scans them all) after a reopen, with no writer running: each must hold
/// a state it may hold, and from then on holds exactly that one. Returns the keys verified.
pub fn verify_all(expected: &Expected, target: &dyn Target) -> Result<u64, String> {
    let mut present = Vec::new();
    for i in 0..expected.len() {
        let mut g = expected.lock(i).ok_or("key past the end")?;
        let got = target
            .get(&codec::key(i))
            .map_err(|e| format!("verify: get of key {i} failed: {e}"))?;
        let held = held_of(i, got.as_deref()).map_err(|why| format!("verify: key {i}: {why}"))?;
        if !g.allows(held) {
            return Err(format!(
                "verify after reopen: key {i} holds {}, expected {}",
                describe(held),
                describe_all(&g.allowed)
            ));
        }
        g.allowed = vec![held];
        if held != ABSENT {
            present.push((i, held));
        }
    }
    // One scan of everything must list exactly the keys the gets found, with the same values.
    let mut listed = Vec::new();
    let mut from = 0u32;
    while from < expected.len() {
        let to = from.saturating_add(4096).min(expected.len());
        let rows = target
            .scan(&codec::key(from), &codec::key(to), (to - from) as usize + 1)
            .map_err(|e| format!("verify: scan of keys {from}..{to} failed: {e}"))?;
        for (k, v) in rows {
            let i = codec::index_of(&k).ok_or("verify: scan returned a key no write made")?;
            let held =
                held_of(i, Some(&v)).map_err(|why| format!("verify: scan: key {i}: {why}"))?;
            listed.push((i, held));
        }
        from = to;
    }
    if listed != present {
        let first = listed
            .iter()
            .zip(&present)
            .position(|(a, b)| a != b)
            .unwrap_or(listed.len().min(present.len()));
        return Err(format!(
            "verify after reopen: a full scan lists {} keys, gets found {} (first difference at \
             entry {first}: scan {:?}, gets {:?})",
            listed.len(),
            present.len(),
            listed.get(first),
            present.get(first)
        ));
    }
    Ok(u64::from(expected.len()))
}
