//! `lidb bench scan`: the LearnedKV paper's Experiment 6. Load the records, `gc()` (which moves
//! every record into learnedkv's tier), then range scans of about `scan_bytes` each: once with no
//! updates, once after N/2 updates of random records (Set 1) and once after N (Set 2).
//!
//! Runs on the calling thread. Invariants:
//! 1. A scan reads the key range `[sorted[i], sorted[i + len])` of the sorted loaded keys, with
//!    `len = scan_bytes / (key_size + value_size)` records, through the engine's scan with an end
//!    key (no entry limit); updates change no key, so every scan must return exactly `len`
//!    entries (fewer at the top of the key space), and every entry's value is checked.
//! 2. Scan starts and updated records are seeded and the same for every engine and set.
//! 3. Set 2 continues Set 1: N/2 more updates after Set 1's scans, N since the load in all
//!    (scans change nothing, so this equals a fresh load with N updates, save when background
//!    GC happens to run).

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::ycsb::load;
use super::{Common, Error, RunDir, describe_engine, ratio};
use crate::engines::{self, DeviceReads, Engine};
use crate::progress;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub common: Common,
    pub record_count: u64,
    /// Scans per set.
    pub scans: u64,
    /// Bytes of keys and values each scan should read (the paper's ~500 KB).
    pub scan_bytes: u64,
}

/// One (engine, set). JSON names.
#[derive(Debug, Clone, Serialize)]
pub struct ScanRow {
    pub engine: String,
    /// "no_updates", "updates_0.5N" or "updates_N".
    pub phase: String,
    pub scans: u64,
    pub scans_per_s: f64,
    /// Bytes of keys and values returned, per second, in 10^6.
    pub mb_per_s: f64,
    pub entries_per_scan: f64,
    /// Storage reads per scan (cache misses that went to a file; rocksdb: its statistics' file
    /// reads), where the engine counts them: machine-independent beside `scans_per_s`.
    pub device_reads_per_scan: Option<f64>,
    /// Kilobytes (10^3) those reads moved per scan, where the engine counts bytes.
    pub device_kb_per_scan: Option<f64>,
}

/// Rows and notes.
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: Vec<ScanRow>,
    pub notes: Vec<String>,
}

const SETS: [&str; 3] = ["no_updates", "updates_0.5N", "updates_N"];

impl Config {
    /// Records per scan range.
    pub fn range_len(&self) -> u64 {
        let record = u64::from(self.common.records.key_size + self.common.records.value_size);
        (self.scan_bytes / record).max(1)
    }

    pub fn describe(&self) -> String {
        let c = &self.common;
        format!(
            "# lidb bench scan: engines={} records={} scans={} scan_bytes={} range_len={} \
             records sets=no_updates,updates_0.5N,updates_N (zipfian 0.99 updates, Set 2 \
             continues Set 1) keys={} key_size={} value_size={} seed={} {}",
            c.engines.join(","),
            self.record_count,
            self.scans,
            self.scan_bytes,
            self.range_len(),
            c.key_source,
            c.records.key_size,
            c.records.value_size,
            c.seed,
            describe_engine(&c.engine),
        )
    }
}

pub fn run(cfg: &Config) -> Result<Report, Error> {
    let c = &cfg.common;
    c.check_engines()?;
    let n = cfg.record_count;
    let len = cfg.range_len();
    if n == 0 || cfg.scans == 0 {
        return Err(Error::Invalid(
            "--records and --scans must be at least 1".into(),
        ));
    }
    if let Some(cap) = c.records.capacity()
        && cap < n
    {
        return Err(Error::Invalid(format!(
            "--records {n} is more than the dataset's {cap} distinct keys"
        )));
    }
    let mut sorted = (0..n)
        .map(|r| c.records.key(r))
        .collect::<Result<Vec<u64>, _>>()?;
    sorted.sort_unstable();
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed ^ 0x5343_414E);
    let last_start = n.saturating_sub(len);
    let starts: Vec<u64> = (0..cfg.scans)
        .map(|_| rng.gen_range(0..=last_start))
        .collect();
    // Updated records follow YCSB's scrambled zipfian (theta 0.99), the LearnedKV paper's
    // default request distribution: updates concentrate on a hot set, as in its Experiment 6.
    let mut zipf = lidb_data::zipf::ScrambledZipfian::new(0, n.saturating_sub(1), 0.99)
        .map_err(|e| Error::Invalid(format!("zipfian over {n} records: {e}")))?;
    let updates: Vec<u64> = (0..n).map(|_| zipf.next_value(&mut rng)).collect();
    let run_dir = RunDir::new(&c.dir, c.keep)?;
    let mut notes = vec![format!(
        "engine directories under {}; every engine runs gc() after the load",
        run_dir.root().display()
    )];
    let mut rows = Vec::new();
    for name in &c.engines {
        let dir = run_dir.engine_dir(name);
        let engine = engines::open(
            name,
            &engines::EngineConfig {
                dir: dir.clone(),
                ..c.engine.clone()
            },
        )?;
        let (_, load_s) = load(engine.as_ref(), &c.records, n, c.progress)?;
        let t = Instant::now();
        engine.gc()?;
        notes.push(format!(
            "{name}: loaded in {load_s:.1} s, gc() in {:.1} s",
            t.elapsed().as_secs_f64()
        ));
        let half = updates.len() / 2;
        let batches: [&[u64]; 3] = [&[], updates.get(..half).unwrap_or(&[]), {
            updates.get(half..).unwrap_or(&[])
        }];
        for (set, (phase, batch)) in SETS.iter().zip(batches).enumerate() {
            if !batch.is_empty() {
                let s = update(engine.as_ref(), cfg, batch, set as u64)?;
                notes.push(format!(
                    "{name}: {} updates before {phase} in {s:.1} s ({:.1} kops/s)",
                    batch.len(),
                    batch.len() as f64 / s.max(1e-9) / 1e3
                ));
            }
            rows.push(scans(engine.as_ref(), cfg, &sorted, &starts, phase)?);
        }
        notes.extend(engine.notes().into_iter().map(|n| format!("{name}: {n}")));
        drop(engine);
        run_dir.release(&dir)?;
    }
    if let Some(base) = c.engines.first() {
        for e in c.engines.iter().skip(1) {
            let per_set: Vec<String> = SETS
                .iter()
                .map(|set| {
                    let of = |engine: &str| {
                        rows.iter()
                            .find(|r| r.engine == engine && r.phase == *set)
                            .map_or(0.0, |r| r.scans_per_s)
                    };
                    format!("{set} {}", ratio(of(e), of(base)))
                })
                .collect();
            notes.push(format!(
                "ratio {e}/{base} scans/s (same run): {}",
                per_set.join(", ")
            ));
        }
    }
    Ok(Report { rows, notes })
}

/// Writes a new version of each record of `batch`; returns the seconds it took.
fn update(engine: &dyn Engine, cfg: &Config, batch: &[u64], set: u64) -> Result<f64, Error> {
    let records = &cfg.common.records;
    let bar = cfg.common.progress.then(|| {
        progress::bar(
            batch.len() as u64,
            &format!("{} updates {set}", engine.name()),
        )
    });
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for (i, &r) in batch.iter().enumerate() {
        let key = records.key(r)?;
        records.render(key, &mut k);
        records.value(key, (set << 56) | (i as u64 + 1), &mut v);
        engine.put(&k, &v)?;
        if let Some(bar) = &bar
            && i % 1024 == 0
        {
            bar.set_position(i as u64);
        }
    }
    let s = started.elapsed().as_secs_f64();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(s)
}

/// The scans of one set (invariant 1).
fn scans(
    engine: &dyn Engine,
    cfg: &Config,
    sorted: &[u64],
    starts: &[u64],
    phase: &str,
) -> Result<ScanRow, Error> {
    let records = &cfg.common.records;
    let len = cfg.range_len();
    let bar = cfg.common.progress.then(|| {
        progress::bar(
            starts.len() as u64,
            &format!("{} scans {phase}", engine.name()),
        )
    });
    let wrong = |key: u64, detail: String| Error::WrongValue {
        engine: engine.name().to_string(),
        key,
        detail,
    };
    let (mut lo, mut hi, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    let (mut entries, mut bytes) = (0u64, 0u64);
    let reads_before = engine.device_reads();
    let started = Instant::now();
    for (i, &start) in starts.iter().enumerate() {
        let first = sorted.get(start as usize).copied().unwrap_or_default();
        records.render(first, &mut lo);
        let end = sorted.get((start + len) as usize).copied();
        if let Some(e) = end {
            records.render(e, &mut hi);
        }
        let mut bad: Option<Error> = None;
        let got = engine.scan(&lo, end.map(|_| hi.as_slice()), usize::MAX, &mut |k, v| {
            bytes += (k.len() + v.len()) as u64;
            if bad.is_some() {
                return;
            }
            let checked = records
                .parse(k)
                .ok_or_else(|| format!("a scan returned a {}-byte key not ours", k.len()))
                .and_then(|key| {
                    records
                        .check_value(key, v, &mut scratch)
                        .map_err(|d| format!("key {key}: {d}"))
                });
            if let Err(d) = checked {
                bad = Some(wrong(first, d));
            }
        })?;
        if let Some(e) = bad {
            return Err(e);
        }
        let want = len.min(sorted.len() as u64 - start);
        if got as u64 != want {
            return Err(wrong(
                first,
                format!("the scan from this key returned {got} entries, expected {want}"),
            ));
        }
        entries += got as u64;
        if let Some(bar) = &bar
            && i % 16 == 0
        {
            bar.set_position(i as u64);
        }
    }
    let s = started.elapsed().as_secs_f64().max(1e-9);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let count = starts.len() as u64;
    let per_scan = |n: u64| n as f64 / count.max(1) as f64;
    let reads = engine
        .device_reads()
        .zip(reads_before)
        .map(|(now, before)| DeviceReads {
            reads: now.reads.saturating_sub(before.reads),
            bytes: now
                .bytes
                .zip(before.bytes)
                .map(|(n, b)| n.saturating_sub(b)),
        });
    Ok(ScanRow {
        engine: engine.name().to_string(),
        phase: phase.to_string(),
        scans: count,
        scans_per_s: count as f64 / s,
        mb_per_s: bytes as f64 / s / 1e6,
        entries_per_scan: entries as f64 / count.max(1) as f64,
        device_reads_per_scan: reads.map(|r| per_scan(r.reads)),
        device_kb_per_scan: reads.and_then(|r| r.bytes).map(|b| per_scan(b) / 1e3),
    })
}

impl Report {
    pub fn table(&self) -> String {
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.engine.clone(),
                    r.phase.clone(),
                    r.scans.to_string(),
                    format!("{:.1}", r.scans_per_s),
                    format!("{:.1}", r.mb_per_s),
                    format!("{:.1}", r.entries_per_scan),
                    r.device_reads_per_scan
                        .map_or_else(|| "-".into(), |v| format!("{v:.1}")),
                    r.device_kb_per_scan
                        .map_or_else(|| "-".into(), |v| format!("{v:.1}")),
                ]
            })
            .collect();
        crate::table::render(
            &[
                "engine",
                "phase",
                "scans",
                "scans/s",
                "MB/s",
                "entries/scan",
                "reads/scan",
                "KB read/scan",
            ],
            &cells,
        )
    }
}
