//! `lidb fine bench`: YCSB workloads through [`Client`]s against fine-wire servers, per mode,
//! with throughput, latency percentiles and round trips per operation (the FineStore paper,
//! section 5.7).
//!
//! Runs on the calling thread plus one thread per client thread; spawned servers listen on
//! 127.0.0.1 only. Every answer is checked: a value is always [`value_of`] its key, a read of
//! a record the thread knows exists must find it, a scan must start at its start record. A
//! wrong answer is counted and the run fails after its rows are printed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lidb_data::ycsb::{Generator, Op, Workload, record_key};
use lidb_fine::{Config, FineIndex};

use crate::client::{Client, Mode};
use crate::error::WireError;
use crate::relay::Relay;
use crate::server::{Server, ServerConfig};
use crate::target::Target;

/// The value every run stores under `key`, so any answer can be checked without a model.
pub fn value_of(key: u64) -> u64 {
    key.rotate_left(17) ^ 0x5bd1_e995
}

/// A workload of the bench: a YCSB core workload, or `insert` (only inserts of records not
/// loaded, each thread its own: the heavy-insert case of the paper's Figure 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BenchWorkload {
    Ycsb(Workload),
    Insert,
}

impl BenchWorkload {
    pub fn name(self) -> &'static str {
        match self {
            BenchWorkload::Ycsb(w) => w.name(),
            BenchWorkload::Insert => "insert",
        }
    }

    /// `a`..`f` or `insert`.
    pub fn parse(s: &str) -> Result<BenchWorkload, String> {
        if s == "insert" {
            return Ok(BenchWorkload::Insert);
        }
        Workload::from_name(s)
            .map(BenchWorkload::Ycsb)
            .map_err(|e| e.to_string())
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Servers to use (when `spawn_servers` is 0).
    pub servers: Vec<String>,
    /// Start this many servers on 127.0.0.1 per run (each bulk-loaded with its range).
    pub spawn_servers: u32,
    pub clients: u32,
    pub threads: u32,
    pub workloads: Vec<BenchWorkload>,
    pub records: u64,
    pub ops: u64,
    pub modes: Vec<Mode>,
    pub seed: u64,
    pub index: Config,
    /// When above 0, clients reach every server through a [`Relay`] on 127.0.0.1 that holds
    /// each chunk this many microseconds in each direction: a stand-in for `tc netem delay`
    /// where the kernel has no sch_netem.
    pub delay_us: u64,
}

/// One output row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub mode: &'static str,
    pub workload: &'static str,
    /// "all", "read", "update", "insert", "scan" or "rmw".
    pub op: &'static str,
    pub ops: u64,
    pub kops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub round_trips_per_op: f64,
    pub wrong: u64,
}

const KINDS: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];

#[derive(Debug, Default)]
struct Samples {
    ns: [Latencies; 5],
    round_trips: [u64; 5],
    wrong: u64,
    first_wrong: Option<String>,
    finished: Option<Instant>,
}

/// One operation kind's latencies in nanoseconds: an HdrHistogram (three significant digits,
/// growing as values arrive), the one way lidb takes latency percentiles.
#[derive(Debug)]
struct Latencies(hdrhistogram::Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        let mut h = hdrhistogram::Histogram::new(3)
            .unwrap_or_else(|_| unreachable!("3 significant digits are in hdrhistogram's range"));
        h.auto(true);
        Latencies(h)
    }
}

impl Latencies {
    fn record(&mut self, ns: u64) {
        // Auto-resizing: any value is recordable; were one refused, it counts at the top.
        if self.0.record(ns).is_err() {
            self.0.saturating_record(ns);
        }
    }

    fn merge(&mut self, other: &Latencies) {
        // One precision, both auto-resizing: adding cannot fail.
        let _added = self.0.add(&other.0);
        debug_assert!(_added.is_ok(), "histograms of one precision add");
    }
}

/// The key ranges of `k` shards splitting evenly the keys YCSB records take: `record_key` is
/// YCSB's fnvhash64, whose sign bit is cleared, so every record key is below 2^63 (an even split
/// of all of u64 left every record on the first of two shards). The last range runs to
/// u64::MAX, so the shards still cover every key.
pub fn shard_ranges(k: u32) -> Vec<(u64, u64)> {
    let k = u64::from(k.max(1));
    let width = (1u64 << 63) / k;
    (0..k)
        .map(|i| {
            let lo = i * width;
            let hi = if i + 1 == k { u64::MAX } else { lo + width - 1 };
            (lo, hi)
        })
        .collect()
}

pub(crate) fn spawn(cfg: &BenchConfig, mode: Mode) -> Result<Vec<Server>, WireError> {
    shard_ranges(cfg.spawn_servers)
        .into_iter()
        .map(|(lo, hi)| spawn_shard(cfg, mode, (lo, hi), &preload_entries(cfg.records, lo, hi)))
        .collect()
}

/// One spawned server on 127.0.0.1 owning `[lo, hi]`, bulk-loaded with `entries` (sorted).
pub(crate) fn spawn_shard(
    cfg: &BenchConfig,
    mode: Mode,
    (lo, hi): (u64, u64),
    entries: &[(u64, u64)],
) -> Result<Server, WireError> {
    // Model retraining runs on a server thread every 5 ms in every mode (writers never
    // retrain), so the modes differ only in how clients stay consistent with it: in
    // locks mode that thread retrains under the exclusive remote layout lock.
    let index_cfg = Config {
        model_retrain_after_nested: 0,
        ..cfg.index.clone()
    };
    let ix = FineIndex::bulk_load(entries, index_cfg)
        .map_err(|e| WireError::malformed(format!("bulk load: {e}")))?;
    let scfg = ServerConfig {
        shard_lo: lo,
        shard_hi: hi,
        retrain_every: Some(Duration::from_millis(5)),
        layout_locks: mode == Mode::Locks,
        ..ServerConfig::default()
    };
    Server::start(Arc::new(ix), "127.0.0.1:0", scfg)
}

/// The entries of the first `records` YCSB records whose keys lie in `[lo, hi]`, sorted: what
/// a server bulk-loads (`lidb fine serve --preload-ycsb`, spawned servers).
pub fn preload_entries(records: u64, lo: u64, hi: u64) -> Vec<(u64, u64)> {
    let mut keys: Vec<u64> = (0..records)
        .map(record_key)
        .filter(|k| (lo..=hi).contains(k))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().map(|k| (k, value_of(k))).collect()
}

/// External servers: unless they already hold record 0 (started with `--preload-ycsb`), inserts
/// every record through one client and asks the servers to retrain. Inserted records mostly stay
/// in level bins (a model retraining merges small models, not bins), so their gets take the
/// pipeline op too; preloaded servers hold them as trained data.
fn load(addrs: &[String], records: u64, progress: &mut dyn FnMut(&str)) -> Result<(), WireError> {
    let mut c = Client::connect(addrs, Mode::OnServer, Duration::from_secs(5))?;
    let first = record_key(0);
    if c.get(first)? == Some(value_of(first)) {
        progress("servers hold record 0: taken as preloaded (--preload-ycsb)");
        return Ok(());
    }
    progress(&format!(
        "loading {records} records by inserts (not preloaded)"
    ));
    for r in 0..records {
        let k = record_key(r);
        c.insert(k, value_of(k))?;
    }
    c.retrain_all()
}

/// Runs every (workload, mode); `progress` gets a line now and then.
pub fn run(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>, WireError> {
    if cfg.spawn_servers == 0 && !cfg.servers.is_empty() {
        load(&cfg.servers, cfg.records, progress)?;
    }
    let mut rows = Vec::new();
    let mut measured_cache = false;
    for &w in &cfg.workloads {
        for &mode in &cfg.modes {
            let servers = if cfg.spawn_servers > 0 {
                spawn(cfg, mode)?
            } else {
                Vec::new()
            };
            let addrs: Vec<String> = if servers.is_empty() {
                cfg.servers.clone()
            } else {
                servers.iter().map(|s| s.addr().to_string()).collect()
            };
            let relays = relays_for(&addrs, cfg.delay_us)?;
            let addrs: Vec<String> = if relays.is_empty() {
                addrs
            } else {
                relays.iter().map(|r| r.addr().to_string()).collect()
            };
            let clients = connect_clients(cfg, &addrs, mode)?;
            rows.extend(run_one(cfg, clients, w, mode.name(), progress)?);
            if !measured_cache {
                progress(&model_cache_note(&addrs, &servers)?);
                measured_cache = true;
            }
            drop(relays);
            for s in servers {
                s.shutdown();
            }
        }
    }
    Ok(rows)
}

/// What a client caches to predict windows (every server's layout, as a fresh pipeline client
/// fetches them after the first run), per million keys, against the servers' data: their keys
/// and values (16 bytes a live key) and, for spawned servers, FINEdex's heap estimate.
pub fn model_cache_note(addrs: &[String], servers: &[Server]) -> Result<String, WireError> {
    let mut client = Client::connect(addrs, Mode::Pipeline, Duration::from_secs(5))?;
    client.fetch_layouts()?;
    let bytes = client.cached_model_bytes();
    let (models, regions) = client.cached_models();
    let mut note = format!(
        "client model cache: {bytes} bytes ({models} models in {regions} regions over {} servers)",
        addrs.len()
    );
    if !servers.is_empty() {
        let stats: Vec<_> = servers.iter().map(|s| s.index().stats()).collect();
        let keys: u64 = stats.iter().map(|s| s.live_trained + s.bin_entries).sum();
        let heap: u64 = stats.iter().map(|s| s.heap_bytes).sum();
        let data = keys * 16;
        let per_million = if keys == 0 {
            0.0
        } else {
            bytes as f64 * 1e6 / keys as f64
        };
        note.push_str(&format!(
            "; {keys} keys on the servers: {per_million:.0} bytes per million keys; the servers' \
             keys and values {data} bytes ({:.4}% of them), FINEdex's heap estimate {heap} bytes",
            if data == 0 {
                0.0
            } else {
                bytes as f64 * 100.0 / data as f64
            }
        ));
    }
    Ok(note)
}

/// One delaying relay per server address when `delay_us > 0`, else none.
fn relays_for(addrs: &[String], delay_us: u64) -> Result<Vec<Relay>, WireError> {
    if delay_us == 0 {
        return Ok(Vec::new());
    }
    addrs
        .iter()
        .map(|a| {
            let target = std::net::ToSocketAddrs::to_socket_addrs(a.as_str())
                .map_err(WireError::Io)?
                .next()
                .ok_or_else(|| WireError::ShardMap {
                    detail: format!("{a}: no address"),
                })?;
            Relay::start(target, Duration::from_micros(delay_us)).map_err(WireError::Io)
        })
        .collect()
}

/// Client threads of a run: `--clients` times `--threads`.
pub(crate) fn client_threads(cfg: &BenchConfig) -> u64 {
    u64::from(cfg.clients.max(1)) * u64::from(cfg.threads.max(1))
}

fn connect_clients(
    cfg: &BenchConfig,
    addrs: &[String],
    mode: Mode,
) -> Result<Vec<Client>, WireError> {
    (0..client_threads(cfg))
        .map(|_| Client::connect(addrs, mode, Duration::from_secs(5)))
        .collect()
}

/// Runs workload `w` with one thread per target in `clients`; rows named `mode`.
pub(crate) fn run_one<T: Target + Send + 'static>(
    cfg: &BenchConfig,
    clients: Vec<T>,
    w: BenchWorkload,
    mode: &'static str,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Row>, WireError> {
    let threads = clients.len().max(1) as u64;
    let per_thread = cfg.ops / threads;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(t, client)| {
            let done = Arc::clone(&done);
            let (records, seed) = (cfg.records, cfg.seed ^ (t as u64).wrapping_mul(0x9e37));
            let lane = (t as u64, threads);
            std::thread::spawn(move || drive(client, w, records, per_thread, seed, lane, &done))
        })
        .collect();
    let total = per_thread * threads;
    let mut last = Instant::now();
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            progress(&format!(
                "{} {}: {}/{} ops",
                mode,
                w.name(),
                done.load(Ordering::Relaxed),
                total
            ));
        }
    }
    let mut all = Samples::default();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| WireError::malformed("a client thread panicked"))??;
        for (into, from) in all.ns.iter_mut().zip(&s.ns) {
            into.merge(from);
        }
        for (into, from) in all.round_trips.iter_mut().zip(s.round_trips) {
            *into += from;
        }
        all.wrong += s.wrong;
        all.finished = all.finished.max(s.finished);
        if all.first_wrong.is_none() {
            all.first_wrong = s.first_wrong;
        }
    }
    // Timed to the last thread's end (the progress loop above polls every 50 ms).
    let secs = all
        .finished
        .map_or(0.0, |t| t.duration_since(started).as_secs_f64())
        .max(1e-9);
    if let Some(first) = &all.first_wrong {
        progress(&format!("wrong answer: {first}"));
    }
    Ok(rows_of(mode, w, &all, secs))
}

fn rows_of(mode: &'static str, w: BenchWorkload, s: &Samples, secs: f64) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut every = Latencies::default();
    for h in &s.ns {
        every.merge(h);
    }
    let rt_all: u64 = s.round_trips.iter().sum();
    let mut push = |op: &'static str, ns: &Latencies, rt: u64, wrong: u64| {
        let n = ns.0.len();
        if n == 0 {
            return;
        }
        let pct = |q: f64| ns.0.value_at_quantile(q) as f64 / 1_000.0;
        rows.push(Row {
            mode,
            workload: w.name(),
            op,
            ops: n,
            kops_per_s: n as f64 / secs / 1_000.0,
            p50_us: pct(0.5),
            p99_us: pct(0.99),
            round_trips_per_op: rt as f64 / n as f64,
            wrong,
        });
    };
    push("all", &every, rt_all, s.wrong);
    for (i, kind) in KINDS.iter().enumerate() {
        if let Some(ns) = s.ns.get(i) {
            push(kind, ns, s.round_trips.get(i).copied().unwrap_or(0), 0);
        }
    }
    rows
}

/// The next op of one client thread: YCSB's, or for `insert` the thread's next fresh record
/// (`lane`: this thread's index and the thread count, so threads never insert the same one).
fn next_op(g: &mut Generator, w: BenchWorkload, records: u64, lane: (u64, u64), i: u64) -> Op {
    match w {
        BenchWorkload::Insert => Op::Insert(records + lane.0 + i * lane.1),
        _ => g.next_op(),
    }
}

fn drive<T: Target>(
    mut c: T,
    w: BenchWorkload,
    records: u64,
    ops: u64,
    seed: u64,
    lane: (u64, u64),
    done: &AtomicU64,
) -> Result<Samples, WireError> {
    let ycsb = match w {
        BenchWorkload::Ycsb(y) => y,
        _ => Workload::A,
    };
    let mut g = Generator::new(ycsb, records, None, seed)
        .map_err(|e| WireError::malformed(format!("workload: {e}")))?;
    let mut s = Samples::default();
    for i in 0..ops {
        let op = next_op(&mut g, w, records, lane, i);
        let rt0 = c.round_trips();
        let t0 = Instant::now();
        let (kind, ok) = match op {
            Op::Read(r) => {
                let k = record_key(r);
                (0, c.get(k)? == Some(value_of(k)))
            }
            Op::Update(r) => {
                let k = record_key(r);
                (1, c.update_ok(k, value_of(k))?)
            }
            Op::Insert(r) => {
                let k = record_key(r);
                (2, c.insert_ok(k, value_of(k))?)
            }
            Op::Scan { start, len } => {
                let k = record_key(start);
                let got = c.range(k, u64::MAX, len)?;
                let ok = got.first().is_some_and(|e| e.0 == k)
                    && got.iter().all(|&(a, b)| b == value_of(a));
                (3, ok)
            }
            Op::ReadModifyWrite(r) => {
                let k = record_key(r);
                let read = c.get(k)?;
                let updated = c.update_ok(k, value_of(k))?;
                (4, read == Some(value_of(k)) && updated)
            }
        };
        let ns = t0.elapsed().as_nanos() as u64;
        if let Some(v) = s.ns.get_mut(kind) {
            v.record(ns);
        }
        if let Some(rt) = s.round_trips.get_mut(kind) {
            *rt += c.round_trips() - rt0;
        }
        if !ok {
            s.wrong += 1;
            if s.first_wrong.is_none() {
                s.first_wrong = Some(format!("{op:?} in {}", w.name()));
            }
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
    s.finished = Some(Instant::now());
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_shards_cover_u64_and_split_the_records() {
        for k in 1..=4u32 {
            let ranges = shard_ranges(k);
            assert_eq!(ranges.first().map(|r| r.0), Some(0));
            assert_eq!(ranges.last().map(|r| r.1), Some(u64::MAX));
            for pair in ranges.windows(2) {
                if let [a, b] = pair {
                    assert_eq!(a.1.checked_add(1), Some(b.0), "{ranges:?}");
                }
            }
            let records = 10_000u64;
            for &(lo, hi) in &ranges {
                let n = preload_entries(records, lo, hi).len() as u64;
                let even = records / u64::from(k);
                assert!(
                    n > even * 8 / 10 && n < even * 12 / 10,
                    "k={k}: {n} in {lo}-{hi}"
                );
            }
        }
    }
}
