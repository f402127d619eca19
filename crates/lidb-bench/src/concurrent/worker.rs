//! One thread of a run: draws its operations, runs them on the shared index, checks every answer
//! and samples latencies. A thread owns its generator, its chunk of fresh keys and its counters;
//! the only shared things are the index, the start barrier, the progress bar and its own
//! timeline counter (written by it alone, read by the runner's thread: see `timeline.rs`).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use lidb_data::{Generator, Op};

use super::index::ConcurrentIndex;
use super::keys::value_of;
use super::timeline::PUBLISH_EVERY;
use crate::kv::hist::Histogram;

/// The operation types, in row order.
pub const OP_NAMES: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];

/// Sample the latency of every `SAMPLE_EVERY`th operation.
pub const SAMPLE_EVERY: u64 = 16;

/// Check the deadline and move the progress bar every this many operations.
const CHECK_EVERY: u64 = 1024;

/// What a thread runs.
#[derive(Debug, Clone)]
pub enum Stream {
    /// A YCSB generator over the loaded records (records past `loaded` are this thread's inserts).
    Ycsb(Box<Generator>),
    /// Inserts of the thread's fresh keys, in order.
    Inserts,
}

/// What one thread measured.
#[derive(Debug, Clone, Default)]
pub struct ThreadResult {
    /// Checked operations per type (index of [`OP_NAMES`]).
    pub done: [u64; 5],
    /// Sampled latencies per type.
    pub hist: [Histogram; 5],
    /// Failed or wrong operations.
    pub errors: u64,
    /// The first error, described.
    pub first_error: Option<String>,
    /// When the thread started and finished its operations (the run's time is from the first
    /// start to the last finish, taken by the workers: the spawning thread may be descheduled).
    pub span: Option<(Instant, Instant)>,
}

impl ThreadResult {
    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

/// The inputs of one thread.
#[derive(Debug)]
pub struct Work<'a> {
    pub loaded: &'a [u64],
    pub fresh: &'a [u64],
    pub ops: u64,
    pub deadline: Duration,
}

/// Runs `work` on `index` from `start` on; returns what it measured. Publishes the operations
/// run so far (checked ones plus errors) in `progress`: every [`PUBLISH_EVERY`] and at the end.
pub fn run_thread(
    index: &dyn ConcurrentIndex,
    mut stream: Stream,
    work: &Work<'_>,
    start: Instant,
    bar: &ProgressBar,
    progress: &AtomicU64,
) -> ThreadResult {
    let mut r = ThreadResult::default();
    let mut inserted = 0usize;
    let mut scan_buf = Vec::with_capacity(128);
    for i in 0..work.ops {
        if i % PUBLISH_EVERY == 0 {
            progress.store(i, Relaxed);
        }
        if i % CHECK_EVERY == CHECK_EVERY - 1 {
            bar.inc(CHECK_EVERY);
            if start.elapsed() > work.deadline {
                break;
            }
        }
        let op = match &mut stream {
            Stream::Ycsb(g) => g.next_op(),
            Stream::Inserts => Op::Insert(work.loaded.len() as u64 + inserted as u64),
        };
        let key_of = |record: u64| -> Option<u64> {
            let rec = record as usize;
            match rec.checked_sub(work.loaded.len()) {
                None => work.loaded.get(rec).copied(),
                Some(j) => work.fresh.get(j).copied(),
            }
        };
        let sampled = i % SAMPLE_EVERY == 0;
        let t0 = sampled.then(Instant::now);
        let (kind, ok) = match op {
            Op::Read(rec) => (0, key_of(rec).map(|k| check_get(index, k))),
            Op::Update(rec) => (1, key_of(rec).map(|k| check_update(index, k))),
            Op::Insert(_) => {
                let k = work.fresh.get(inserted).copied();
                inserted += 1;
                (2, k.map(|k| index.insert(k, value_of(k)).is_none()))
            }
            Op::Scan { start, len } => (
                3,
                key_of(start).map(|k| check_scan(index, k, len as usize, &mut scan_buf)),
            ),
            Op::ReadModifyWrite(rec) => (
                4,
                key_of(rec).map(|k| check_get(index, k) && check_update(index, k)),
            ),
        };
        if let Some(t0) = t0
            && let Some(h) = r.hist.get_mut(kind)
        {
            h.record(t0.elapsed().as_nanos() as u64);
        }
        match ok {
            Some(true) => {
                if let Some(d) = r.done.get_mut(kind) {
                    *d += 1;
                }
            }
            Some(false) => r.error(format!("{op:?}: wrong answer")),
            None => r.error(format!(
                "{op:?}: no key (this thread's insert keys ran out)"
            )),
        }
    }
    r.span = Some((start, Instant::now()));
    progress.store(r.done.iter().sum::<u64>() + r.errors, Relaxed);
    bar.inc(work.ops % CHECK_EVERY);
    r
}

fn check_get(index: &dyn ConcurrentIndex, k: u64) -> bool {
    index.get(k) == Some(value_of(k))
}

fn check_update(index: &dyn ConcurrentIndex, k: u64) -> bool {
    index.update(k, value_of(k)) == Some(value_of(k))
}

/// A scan from a present key: it comes first, keys ascend, values are right.
fn check_scan(index: &dyn ConcurrentIndex, k: u64, len: usize, buf: &mut Vec<(u64, u64)>) -> bool {
    buf.clear();
    index.scan(k, len, buf);
    buf.first().map(|e| e.0) == Some(k)
        && buf.len() <= len
        && buf.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0))
        && buf.iter().all(|&(key, v)| v == value_of(key))
}
