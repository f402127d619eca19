//! A concurrent model test of the engine: threads (more than the cores) run random puts, deletes,
//! gets and scans on a small shared key space, with write buffers and tables so small (the least the options allow) that flushes and
//! background compactions run all the time, so lookups race with every kind of super version
//! change. Every read is checked against the values its key could hold while the read ran.
//!
//! The checker keeps, outside the engine, a log per key of every write with the interval
//! `[start, end]` of a logical clock it ran in (a write enters the log before it reaches the
//! engine, with an open end, so a read can never see a value the log lacks). Values are unique:
//! `thread:counter:` then padding. A read that ran in `[t0, t1]` may return the value (or the
//! absence, for a delete or the initial state) of a write `w` when
//! - `w` started before the read ended (`w.start < t1`), and
//! - no write `w2` of the same key surely replaced `w` before the read began: none with
//!   `w.end < w2.start` and `w2.end < t0`.
//!
//! Anything else fails: a value never written, one written after the read, or one overwritten by
//! a write that completed before the read began. A scan is checked key by key the same way over
//! the interval of the `scan` call (its snapshot is taken inside it), including the keys of its
//! range it did not return. At the end, after a full compaction, the files on storage must be
//! exactly the live tables: no pin kept an obsolete table alive.
//!
//! Bounded in operations and in seconds. One seeded case (lidb-testkit's runner): a failure prints
//! the `LIDB_SEED=<n> LIDB_CASES=1 cargo test ...` line that replays the seed's operation
//! sequences (the thread interleaving is the scheduler's).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lidb_index::{Family, Params};
use lidb_lsm::{Db, IndexOptions, Options};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_testkit::Cases;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const THREADS: u64 = 8;
const OPS_PER_THREAD: u64 = 20_000;
const KEYS: u32 = 48;
const TIME_LIMIT: Duration = Duration::from_secs(20);

fn ok<T, E: Debug>(r: Result<T, E>, ctx: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{ctx}: {e:?}"),
    }
}

fn key_of(n: u32) -> Vec<u8> {
    format!("key{n:04}").into_bytes()
}

/// A value's `thread:counter` tag (without the padding), or `absent`.
fn tag(value: Option<&[u8]>) -> String {
    value.map_or_else(
        || "absent".to_owned(),
        |v| String::from_utf8_lossy(v).trim_end_matches('.').to_owned(),
    )
}

/// One write of a key: its value (`None`: a delete, or the state before any write) and the
/// clock interval it ran in (`end == u64::MAX` while it runs).
#[derive(Debug, Clone)]
struct WriteRec {
    value: Option<Vec<u8>>,
    start: u64,
    end: u64,
}

/// The expected state, outside the engine.
struct History {
    clock: AtomicU64,
    log: Mutex<BTreeMap<Vec<u8>, Vec<WriteRec>>>,
}

impl History {
    fn new() -> History {
        let initial = WriteRec {
            value: None,
            start: 0,
            end: 0,
        };
        let log = (0..KEYS)
            .map(|n| (key_of(n), vec![initial.clone()]))
            .collect();
        History {
            clock: AtomicU64::new(1),
            log: Mutex::new(log),
        }
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    fn log(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Vec<WriteRec>>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enters a write in the log before it runs; returns its position for `finish`.
    fn begin(&self, key: &[u8], value: Option<Vec<u8>>) -> usize {
        let mut log = self.log();
        let start = self.tick();
        let recs = log.entry(key.to_vec()).or_default();
        recs.push(WriteRec {
            value,
            start,
            end: u64::MAX,
        });
        recs.len() - 1
    }

    fn finish(&self, key: &[u8], at: usize) {
        let end = self.tick();
        if let Some(rec) = self.log().get_mut(key).and_then(|recs| recs.get_mut(at)) {
            rec.end = end;
        }
    }

    /// Panics unless `got` is a value `key` could hold during `[t0, t1]`.
    fn check(&self, key: &[u8], got: Option<&[u8]>, t0: u64, t1: u64, ctx: &str) {
        let log = self.log();
        let recs = log.get(key).map(Vec::as_slice).unwrap_or_default();
        let possible = |w: &WriteRec| {
            w.start < t1
                && !recs
                    .iter()
                    .any(|w2| w.end < w2.start && w2.end != u64::MAX && w2.end < t0)
        };
        let allowed = recs
            .iter()
            .any(|w| w.value.as_deref() == got && possible(w));
        if !allowed {
            let shown: Vec<String> = recs
                .iter()
                .map(|w| format!("{}@[{}, {}]", tag(w.value.as_deref()), w.start, w.end))
                .collect();
            panic!(
                "{ctx}: key {} read {} during [{t0}, {t1}], which it could not hold; writes: {}",
                String::from_utf8_lossy(key),
                tag(got),
                shown.join(", ")
            );
        }
    }
}

fn options() -> Options {
    Options {
        index: IndexOptions {
            family: Family::Pgm,
            params: Params::new(16),
            level_boundaries: vec![],
            kind: Default::default(),
        },
        sst_size_bytes: 16 * 1024,
        write_buffer_bytes: 64 * 1024,
        l0_compaction_trigger: 2,
        l0_stop_writes: 8,
        block_cache_bytes: 1 << 20,
        background_compaction: true,
        ..Options::default()
    }
}

fn worker(db: &Db, h: &History, seed: u64, thread: u64, deadline: Instant) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (thread + 1).wrapping_mul(0x9E37_79B9));
    let mut done = 0;
    for counter in 0..OPS_PER_THREAD {
        if Instant::now() > deadline {
            break;
        }
        let ctx = format!("seed {seed} thread {thread} op {counter}");
        let key = key_of(rng.gen_range(0..KEYS));
        match rng.gen_range(0..100) {
            0..=34 => {
                let mut v = format!("{thread}:{counter}:").into_bytes();
                v.resize(v.len() + rng.gen_range(0..400), b'.');
                let at = h.begin(&key, Some(v.clone()));
                ok(db.put(&key, &v), &ctx);
                h.finish(&key, at);
            }
            35..=44 => {
                let at = h.begin(&key, None);
                ok(db.delete(&key), &ctx);
                h.finish(&key, at);
            }
            45..=89 => {
                let t0 = h.tick();
                let got = ok(db.get(&key), &ctx);
                let t1 = h.tick();
                h.check(&key, got.as_deref(), t0, t1, &format!("{ctx} get"));
            }
            _ => {
                let (a, b) = (rng.gen_range(0..KEYS), rng.gen_range(0..KEYS));
                let (lo, hi) = (a.min(b), a.max(b) + 1);
                let (start, end) = (key_of(lo), key_of(hi));
                let t0 = h.tick();
                let mut it = ok(db.scan(&start, Some(&end)), &ctx);
                let t1 = h.tick();
                let mut seen = BTreeMap::new();
                while it.valid() {
                    seen.insert(it.key().to_vec(), it.value().to_vec());
                    ok(it.next(), &ctx);
                }
                let ctx = format!("{ctx} scan [{lo}, {hi})");
                for n in lo..hi {
                    let k = key_of(n);
                    h.check(&k, seen.remove(&k).as_deref(), t0, t1, &ctx);
                }
                assert!(seen.is_empty(), "{ctx}: keys outside the range: {seen:?}");
            }
        }
        done += 1;
    }
    done
}

#[test]
fn concurrent_reads_see_only_values_their_keys_could_hold() {
    Cases::new("concurrent model", 1)
        .base_seed(0x5EED_0001)
        .run(|_, seed| run(seed));
}

/// One case: the workers' generators derive from `seed` (each thread its own).
fn run(seed: u64) {
    let storage = MemStorage::new();
    let dir = Path::new("/db");
    let db = ok(
        Db::open_with_storage(Arc::new(storage.clone()), dir, options()),
        "open",
    );
    let history = History::new();
    let deadline = Instant::now() + TIME_LIMIT;
    let ops: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, h) = (&db, &history);
                s.spawn(move || worker(db, h, seed, t, deadline))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .sum()
    });
    let stats = db.stats();
    eprintln!(
        "{ops} operations; {} flushes, {} compactions",
        stats.compaction.flushes, stats.compaction.compactions
    );
    assert!(
        ops >= THREADS * 500,
        "seed {seed}: only {ops} operations ran"
    );
    assert!(
        stats.compaction.flushes > 10 && stats.compaction.compactions > 0,
        "seed {seed}: too little background work to race with: {:?}",
        stats.compaction
    );

    // Quiescent: every key reads its last write, and after a full compaction only the live
    // tables' files remain (nothing pinned an obsolete one).
    let t0 = history.tick();
    for n in 0..KEYS {
        let k = key_of(n);
        let got = ok(db.get(&k), "final get");
        history.check(&k, got.as_deref(), t0, history.tick(), "final get");
    }
    ok(db.compact(), "compact");
    let live: u64 = db.stats().levels.iter().map(|l| l.files).sum();
    let files = ok(storage.list(dir), "list");
    let tables = files.iter().filter(|f| f.ends_with(".sst")).count() as u64;
    assert_eq!(
        tables, live,
        "seed {seed}: table files on storage {files:?}, live tables {live}"
    );
}
