//! One concurrent model test over the engines: learnedkv, lsm+, lsm+tier,
//! finedex, learnedstore and btree, each opened through `lidb_engines::open` with tiny
//! thresholds (64 KiB write buffer and cache, the smallest buffer pool, a low GC
//! over-provisioning) and a thread forcing its background work (`gc()`: a GC, a checkpoint)
//! every few milliseconds, while 8 threads run random puts, deletes, gets, memory-only gets and
//! scans on a small shared key space.
//!
//! Every value is tagged uniquely (key, thread, sequence number), and every write is recorded
//! with the ticks of a global clock taken before it was called and after it returned. A get that
//! ran between ticks `gs` and `ge` may return the value of a write that started before `ge` and
//! was not superseded before `gs`, that is, no other write of the key started after it ended and
//! ended before `gs` (the initial state is a deletion at tick 0). Anything else (a value never
//! written, a value overwritten by a write that completed before the get began, a deleted key
//! come back, a key missing that was there) is a failure. Scans are checked the same way, per
//! key, plus order and range; a key certainly present for the whole scan must appear in it.
//!
//! Bounded: `LIDB_MODEL_OPS` operations per thread (default 20,000) and `LIDB_MODEL_SECS` seconds
//! per engine (default 5). The seed is printed; `LIDB_MODEL_SEED=<n>` replays a run's operation
//! sequences (the thread interleaving is the machine's). `LIDB_MODEL_ENGINES=a,b` picks engines.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lidb_engines::{Engine, EngineConfig};
use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const THREADS: u64 = 8;
const KEYS: u64 = 128;
const ENGINES: [&str; 6] = [
    "learnedkv",
    "lsm+",
    "lsm+tier",
    "finedex",
    "learnedstore",
    "btree",
];

/// One write of a key: clock ticks before the call and after its return (`u64::MAX` while
/// it runs), and the value written (`None`: a deletion).
#[derive(Debug, Clone)]
struct Write {
    start: u64,
    end: u64,
    value: Option<Vec<u8>>,
}

/// The writes of every key, and the clock.
struct History {
    clock: AtomicU64,
    keys: Vec<Mutex<Vec<Write>>>,
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// A value unique to (key, thread, seq), padded to `len` bytes.
fn value(k: u64, thread: u64, seq: u64, len: usize) -> Vec<u8> {
    let mut v = format!("k{k:04}|t{thread}|s{seq}|").into_bytes();
    v.resize(len.max(v.len()), b'.');
    v
}

impl History {
    fn new() -> History {
        History {
            clock: AtomicU64::new(1),
            keys: (0..KEYS)
                .map(|_| {
                    Mutex::new(vec![Write {
                        start: 0,
                        end: 0,
                        value: None,
                    }])
                })
                .collect(),
        }
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    fn writes(&self, k: u64) -> std::sync::MutexGuard<'_, Vec<Write>> {
        match self.keys.get(k as usize) {
            Some(m) => m.lock().unwrap_or_else(PoisonError::into_inner),
            None => panic!("key {k} outside the key space"),
        }
    }

    /// Records the start of a write of `k`; its index in the key's history.
    fn begin(&self, k: u64, value: Option<Vec<u8>>) -> usize {
        let mut w = self.writes(k);
        let start = self.tick();
        w.push(Write {
            start,
            end: u64::MAX,
            value,
        });
        w.len() - 1
    }

    fn end(&self, k: u64, at: usize) {
        let mut w = self.writes(k);
        let end = self.tick();
        if let Some(e) = w.get_mut(at) {
            e.end = end;
        }
    }

    /// The values a read of `k` between ticks `gs` and `ge` may return.
    fn admissible(&self, k: u64, gs: u64, ge: u64) -> Vec<Option<Vec<u8>>> {
        let w = self.writes(k);
        // The latest start of a write that completed before the read began: every write that
        // ended before it is superseded.
        let floor = w
            .iter()
            .filter(|x| x.end < gs)
            .map(|x| x.start)
            .max()
            .unwrap_or(0);
        w.iter()
            .filter(|x| x.start < ge && x.end >= floor)
            .map(|x| x.value.clone())
            .collect()
    }
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(v) => String::from_utf8_lossy(v.get(..v.len().min(24)).unwrap_or_default()).into(),
        None => "<none>".into(),
    }
}

fn check_read(
    h: &History,
    k: u64,
    got: &Option<Vec<u8>>,
    gs: u64,
    ge: u64,
    what: &str,
) -> Result<(), String> {
    let ok = h.admissible(k, gs, ge);
    if ok.contains(got) {
        Ok(())
    } else {
        Err(format!(
            "{what} of key {k} in ticks [{gs}, {ge}] returned {}; admissible: {:?}",
            show(got),
            ok.iter().map(show).collect::<Vec<_>>()
        ))
    }
}

/// Checks a scan of keys `[lo, hi)` (indices) with `limit` that ran in ticks `[ss, se]`.
fn check_scan(
    h: &History,
    lo: u64,
    hi: u64,
    limit: usize,
    got: &[(Vec<u8>, Vec<u8>)],
    ss: u64,
    se: u64,
) -> Result<(), String> {
    let index = |k: &[u8]| -> Option<u64> { std::str::from_utf8(k.get(1..)?).ok()?.parse().ok() };
    let mut prev: Option<u64> = None;
    for (k, v) in got {
        let i = index(k).ok_or_else(|| format!("scan returned a key never written: {k:?}"))?;
        if i < lo || i >= hi {
            return Err(format!("scan of [{lo}, {hi}) returned key {i}"));
        }
        if prev.is_some_and(|p| p >= i) {
            return Err(format!("scan returned key {i} after {prev:?}"));
        }
        prev = Some(i);
        check_read(h, i, &Some(v.clone()), ss, se, "scan")?;
    }
    if got.len() > limit {
        return Err(format!("scan with limit {limit} returned {}", got.len()));
    }
    // Keys certainly present for the whole scan appear, up to where the scan stopped.
    let upto = if got.len() == limit {
        prev.unwrap_or(lo)
    } else {
        hi
    };
    for i in lo..upto {
        let ok = h.admissible(i, ss, se);
        let present = !ok.is_empty() && ok.iter().all(Option::is_some);
        if present && !got.iter().any(|(k, _)| index(k) == Some(i)) {
            return Err(format!(
                "scan of [{lo}, {hi}) limit {limit} in ticks [{ss}, {se}] missed key {i}, present throughout"
            ));
        }
    }
    Ok(())
}

fn worker(
    e: &dyn Engine,
    h: &History,
    thread: u64,
    seed: u64,
    ops: u64,
    deadline: Instant,
) -> Result<u64, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ thread.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let name = e.name();
    let mut done = 0;
    for seq in 0..ops {
        if Instant::now() > deadline {
            break;
        }
        let k = rng.gen_range(0..KEYS);
        let op = rng.gen_range(0..100u32);
        let err = |x: lidb_engines::EngineError| format!("{name}: thread {thread} op {seq}: {x}");
        match op {
            0..=24 => {
                let v = value(k, thread, seq, rng.gen_range(16..900));
                let at = h.begin(k, Some(v.clone()));
                e.put(&key(k), &v).map_err(err)?;
                h.end(k, at);
            }
            25..=34 => {
                let at = h.begin(k, None);
                e.delete(&key(k)).map_err(err)?;
                h.end(k, at);
            }
            35..=74 => {
                let gs = h.tick();
                let got = e.get(&key(k)).map_err(err)?;
                let ge = h.tick();
                check_read(h, k, &got, gs, ge, "get").map_err(|m| format!("{name}: {m}"))?;
            }
            75..=84 => {
                let gs = h.tick();
                let got = e.get_if_in_memory(&key(k)).map_err(err)?;
                let ge = h.tick();
                if let Some(got) = got {
                    check_read(h, k, &got, gs, ge, "get_if_in_memory")
                        .map_err(|m| format!("{name}: {m}"))?;
                }
            }
            _ => {
                let lo = k;
                let hi = (lo + rng.gen_range(1..40)).min(KEYS);
                let limit = rng.gen_range(1..24);
                let bounded = rng.gen_bool(0.7);
                let end = key(hi);
                let mut got = Vec::new();
                let ss = h.tick();
                e.scan(
                    &key(lo),
                    bounded.then_some(end.as_slice()),
                    limit,
                    &mut |k, v| {
                        got.push((k.to_vec(), v.to_vec()));
                    },
                )
                .map_err(err)?;
                let se = h.tick();
                let hi = if bounded { hi } else { KEYS };
                check_scan(h, lo, hi, limit, &got, ss, se).map_err(|m| format!("{name}: {m}"))?;
            }
        }
        done += 1;
    }
    Ok(done)
}

fn config(dir: std::path::PathBuf) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    cfg.lsm.memtable_bytes = 64 << 10;
    cfg.lsm.block_cache_bytes = 64 << 10;
    // Half of it a row cache (learnedstore, btree): gets fill it while writers invalidate.
    cfg.tree.pool_bytes = 32 * 4096;
    cfg.tree.row_cache_share = 0.5;
    cfg.tier.over_provisioning = 0.1;
    cfg.background = true;
    cfg
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs one engine; the first failure, if any.
fn run_engine(name: &str, seed: u64, ops: u64, secs: u64) -> Result<(u64, u64), String> {
    let scratch = Scratch::new(&format!("engines-model-{name}-{seed}"));
    let e: Arc<dyn Engine> = Arc::from(
        lidb_engines::open(name, &config(scratch.join("db")))
            .map_err(|x| format!("{name}: open: {x}"))?,
    );
    let h = Arc::new(History::new());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let stop = Arc::new(AtomicBool::new(false));
    // Background work forced often: a GC (learnedkv, lsm+, lsm+tier) or a checkpoint
    // (finedex, learnedstore, btree) every few milliseconds.
    let forcer = {
        let (e, stop) = (Arc::clone(&e), Arc::clone(&stop));
        std::thread::spawn(move || -> Result<u64, String> {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(15));
                e.gc().map_err(|x| format!("{}: gc: {x}", e.name()))?;
                n += 1;
            }
            Ok(n)
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (e, h) = (Arc::clone(&e), Arc::clone(&h));
            std::thread::spawn(move || worker(e.as_ref(), &h, t, seed, ops, deadline))
        })
        .collect();
    let mut result = Ok(0u64);
    for w in workers {
        let r = w
            .join()
            .unwrap_or_else(|_| Err(format!("{name}: a worker panicked")));
        result = match (result, r) {
            (Ok(a), Ok(b)) => Ok(a + b),
            (Err(x), _) | (Ok(_), Err(x)) => Err(x),
        };
    }
    stop.store(true, Ordering::Relaxed);
    let gcs = forcer
        .join()
        .unwrap_or_else(|_| Err(format!("{name}: the gc thread panicked")));
    // Every key ends as its last write left it (writes are over).
    let settled = (0..KEYS).try_for_each(|k| {
        let gs = h.tick();
        let got = e
            .get(&key(k))
            .map_err(|x| format!("{name}: final get: {x}"))?;
        check_read(&h, k, &got, gs, h.tick(), "final get").map_err(|m| format!("{name}: {m}"))
    });
    drop(e);
    let ops_done = result?;
    let gcs = gcs?;
    settled?;
    Ok((ops_done, gcs))
}

#[test]
fn engines_agree_with_the_model_under_concurrency() {
    let seed = env_u64(
        "LIDB_MODEL_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    );
    let ops = env_u64("LIDB_MODEL_OPS", 20_000);
    let secs = env_u64("LIDB_MODEL_SECS", 5);
    let pick = std::env::var("LIDB_MODEL_ENGINES").unwrap_or_default();
    eprintln!("concurrent model: seed {seed} (replay with LIDB_MODEL_SEED={seed})");
    let mut failures = Vec::new();
    let mut ran = 0;
    for name in ENGINES {
        if !pick.is_empty() && !pick.split(',').any(|p| p == name) {
            continue;
        }
        ran += 1;
        match run_engine(name, seed, ops, secs) {
            Ok((n, gcs)) => {
                eprintln!("{name}: {n} operations, {gcs} forced gc/checkpoints: ok");
                assert!(n > 0, "{name} ran no operation");
            }
            Err(m) => {
                eprintln!("{name}: FAILED: {m}");
                failures.push(m);
            }
        }
    }
    assert!(ran > 0, "no engine picked by LIDB_MODEL_ENGINES={pick}");
    assert!(
        failures.is_empty(),
        "seed {seed} (LIDB_MODEL_SEED={seed}): {failures:#?}"
    );
}
