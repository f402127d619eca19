//! The paper's four experiments as functions from a [`Config`] to rows. Pure of the CLI: engines
//! come from an [`OpenStore`] function, output is a [`Report`].
//!
//! Runs on the calling thread, engine after engine, each in a fresh directory
//! `<dir>/<engine>-<phase>` with the same seeded keys and operations, so rows of one run compare;
//! an engine's directories are removed once its rows are taken, unless `keep`. Timed lookups
//! fan out to scoped threads ([`measure::lookups`]).
//! - memory: load, look every key up once (untimed warm-up), then `ops` timed random lookups at
//!   each thread count of `threads` in turn, over the same loaded store (lookups change
//!   nothing, so every count's row compares; each count looks up the same seeded keys).
//! - partial: load with a pool smaller than the records, `ops / 10` untimed random lookups to
//!   reach the steady state of the replacement, then `ops` timed ones at each thread count.
//!   Where the engine has the hook, a second store with everything resident runs the paper's
//!   simulation (each inner node missed with probability `inner_miss`), at each thread count:
//!   its rows have `simulated: true`.
//! - cold: load, `reopen_cold`, then random lookups for `cold_seconds`, counted per interval;
//!   `time_to_90_s` is the end of the first interval at 90% of the peak interval.
//! - writes: for each of insert100 (100% inserts), ycsb-a (50%) and ycsb-b (5%; the rest are
//!   lookups of loaded keys): a fresh store loaded with the first half of a seeded shuffle of the
//!   keys, then `ops` operations inserting keys of the other half. (The paper's YCSB-A/B write
//!   new keys, not updates: its Table IV calls them 50% and 5% insert.)

use indicatif::ProgressBar;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::Error;
use super::config::{Config, Experiment, value_for};
use super::engines::{OpenStore, StoreSetup};
use super::measure::{self, WriteMix};
use super::rows::Row;
use super::store::{PagedStore, StoreError};
use crate::progress;

/// Rows and the notes a reader needs beside them (fallbacks, caps not applied, simulations).
#[derive(Debug, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Report {
    fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }
}

/// The write workloads of Table IV: name and share of inserts.
pub const WRITE_MIXES: [(&str, f64); 3] = [("insert100", 1.0), ("ycsb-a", 0.5), ("ycsb-b", 0.05)];

/// Fraction of the peak for the startup time.
pub const PEAK_FRACTION: f64 = 0.9;

/// Runs `cfg.experiment` on every engine of `cfg`, opening each with `open`.
pub fn run(cfg: &Config, open: OpenStore<'_>) -> Result<Report, Error> {
    cfg.check()?;
    let mut report = Report::default();
    for engine in &cfg.engines {
        match cfg.experiment {
            Experiment::Memory => memory(cfg, engine, open, &mut report)?,
            Experiment::Partial => partial(cfg, engine, open, &mut report)?,
            Experiment::Cold => cold(cfg, engine, open, &mut report)?,
            Experiment::Writes => writes(cfg, engine, open, &mut report)?,
        }
        if !cfg.keep {
            cfg.remove_engine_dirs(engine)
                .map_err(|e| Error::store(engine)(StoreError::Io(e)))?;
        }
    }
    crate::kv::scaling::fill(&mut report.rows);
    Ok(report)
}

fn bar(cfg: &Config, len: u64, what: String) -> ProgressBar {
    if cfg.progress {
        progress::bar(len, &what)
    } else {
        ProgressBar::hidden()
    }
}

/// A fresh store `engine` with `pool_bytes`, in `<dir>/<engine>-<phase>`, loaded with `keys`.
fn loaded_store(
    cfg: &Config,
    engine: &str,
    phase: &str,
    pool_bytes: u64,
    keys: &[u64],
    open: OpenStore<'_>,
    report: &mut Report,
) -> Result<Box<dyn PagedStore>, Error> {
    let setup = StoreSetup {
        dir: cfg.engine_dir(engine, phase),
        pool_bytes,
        data_bytes: cfg.data.data_bytes(),
    };
    let mut store = open(engine, &setup)?;
    let size = cfg.data.value_size;
    let b = bar(cfg, keys.len() as u64, format!("{engine}: load"));
    let mut records = keys.iter().enumerate().map(|(i, &k)| {
        if i % 4096 == 0 {
            b.inc(4096);
        }
        (k, value_for(k, 0, size))
    });
    store
        .bulk_load(&mut records)
        .map_err(Error::store(engine))?;
    b.finish_and_clear();
    for note in store.notes() {
        report.note(note);
    }
    Ok(store)
}

fn row(cfg: &Config, store: &dyn PagedStore, op: &str, m: &measure::Measured) -> Row {
    Row::new(
        cfg,
        store.name(),
        op,
        m,
        store.pool_bytes(),
        store.device_reads_source(),
    )
}

fn timed_lookups(
    cfg: &Config,
    store: &dyn PagedStore,
    ops: u64,
    salt: u64,
    threads: usize,
    what: &str,
) -> Result<measure::Measured, Error> {
    let b = bar(cfg, ops, format!("{}: {what} ({threads}t)", store.name()));
    let m = measure::lookups(
        store,
        &cfg.data.keys,
        cfg.data.value_size,
        ops,
        cfg.seed ^ salt,
        threads,
        &b,
    )?;
    b.finish_and_clear();
    Ok(m)
}

/// `ops` timed lookups at each thread count of `cfg`, one "read" row each (`simulated` marks
/// the paper's simulation).
fn lookup_rows(
    cfg: &Config,
    store: &dyn PagedStore,
    salt: u64,
    simulated: bool,
    report: &mut Report,
) -> Result<(), Error> {
    let what = if simulated {
        "simulated lookups"
    } else {
        "lookups"
    };
    for &threads in &cfg.threads {
        let m = timed_lookups(cfg, store, cfg.ops, salt, threads, what)?;
        let mut r = row(cfg, store, "read", &m);
        r.threads = threads;
        r.simulated = simulated;
        report.rows.push(r);
    }
    Ok(())
}

fn memory(
    cfg: &Config,
    engine: &str,
    open: OpenStore<'_>,
    report: &mut Report,
) -> Result<(), Error> {
    let keys = &cfg.data.keys;
    let store = loaded_store(cfg, engine, "memory", cfg.pool_bytes(), keys, open, report)?;
    let b = bar(cfg, keys.len() as u64, format!("{engine}: warm"));
    measure::warm(&*store, keys, cfg.data.value_size, &b)?;
    b.finish_and_clear();
    lookup_rows(cfg, &*store, 0x11, false, report)
}

fn partial(
    cfg: &Config,
    engine: &str,
    open: OpenStore<'_>,
    report: &mut Report,
) -> Result<(), Error> {
    let keys = &cfg.data.keys;
    let store = loaded_store(cfg, engine, "partial", cfg.pool_bytes(), keys, open, report)?;
    timed_lookups(cfg, &*store, (cfg.ops / 10).max(1), 0x21, 1, "warm-up")?;
    lookup_rows(cfg, &*store, 0x22, false, report)?;
    drop(store);
    if cfg.inner_miss > 0.0 {
        simulated_partial(cfg, engine, open, report)?;
    }
    Ok(())
}

/// The paper's simulation: everything resident, inner nodes missed with `cfg.inner_miss`.
fn simulated_partial(
    cfg: &Config,
    engine: &str,
    open: OpenStore<'_>,
    report: &mut Report,
) -> Result<(), Error> {
    let data = cfg.data.data_bytes();
    let pool = data * 2 + (16 << 20);
    let setup = StoreSetup {
        dir: cfg.engine_dir(engine, "simulated"),
        pool_bytes: pool,
        data_bytes: data,
    };
    // Ask first, so an engine without the hook is not loaded for nothing.
    let mut probe = open(engine, &setup)?;
    match probe.simulate_inner_miss(0.0) {
        Ok(()) => {}
        Err(StoreError::Unsupported { .. }) => {
            report.note(format!(
                "{engine}: no simulated row: it has no hook for the paper's simulated \
                 inner-node miss (p={})",
                cfg.inner_miss
            ));
            return Ok(());
        }
        Err(e) => return Err(Error::store(engine)(e)),
    }
    drop(probe);
    let keys = &cfg.data.keys;
    let mut store = loaded_store(cfg, engine, "simulated", pool, keys, open, report)?;
    let b = bar(cfg, keys.len() as u64, format!("{engine}: warm"));
    measure::warm(&*store, keys, cfg.data.value_size, &b)?;
    b.finish_and_clear();
    store
        .simulate_inner_miss(cfg.inner_miss)
        .map_err(Error::store(engine))?;
    lookup_rows(cfg, &*store, 0x23, true, report)?;
    report.note(format!(
        "rows marked simulated: everything resident, each inner node treated as evicted with \
         probability {} (the paper's section III simulation), not a real eviction",
        cfg.inner_miss
    ));
    Ok(())
}

fn cold(cfg: &Config, engine: &str, open: OpenStore<'_>, report: &mut Report) -> Result<(), Error> {
    let keys = &cfg.data.keys;
    let mut store = loaded_store(cfg, engine, "cold", cfg.pool_bytes(), keys, open, report)?;
    store.reopen_cold().map_err(Error::store(engine))?;
    let interval_s = cfg.interval_ms as f64 / 1e3;
    let b = bar(
        cfg,
        cfg.cold_seconds.ceil() as u64,
        format!("{engine}: cold lookups (s)"),
    );
    let series = measure::cold_lookups(
        &*store,
        keys,
        cfg.data.value_size,
        cfg.cold_seconds,
        interval_s,
        cfg.seed ^ 0x31,
        &b,
    )?;
    b.finish_and_clear();
    let mut r = row(cfg, &*store, "read", &series.measured);
    r.time_to_90_s =
        measure::time_to_fraction_of_peak(&series.per_interval, interval_s, PEAK_FRACTION);
    r.series_kops = series
        .per_interval
        .iter()
        .map(|&n| n as f64 / interval_s / 1e3)
        .collect();
    report.rows.push(r);
    Ok(())
}

/// The keys of `writes`: the loaded half (sorted) and the rest in seeded insert order.
pub fn split_for_writes(keys: &[u64], loaded: u64, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut shuffled = keys.to_vec();
    shuffled.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0x41));
    let cut = usize::try_from(loaded)
        .unwrap_or(usize::MAX)
        .min(shuffled.len());
    let new_keys = shuffled.split_off(cut);
    shuffled.sort_unstable();
    (shuffled, new_keys)
}

fn writes(
    cfg: &Config,
    engine: &str,
    open: OpenStore<'_>,
    report: &mut Report,
) -> Result<(), Error> {
    let (loaded, new_keys) = split_for_writes(&cfg.data.keys, cfg.loaded_records(), cfg.seed);
    for (op, insert_fraction) in WRITE_MIXES {
        let mut store = loaded_store(cfg, engine, op, cfg.pool_bytes(), &loaded, open, report)?;
        let b = bar(cfg, cfg.ops, format!("{engine}: {op}"));
        let mix = WriteMix {
            loaded: &loaded,
            new_keys: &new_keys,
            insert_fraction,
            value_size: cfg.data.value_size,
            ops: cfg.ops,
            seed: cfg.seed ^ 0x42,
        };
        let m = measure::write_mix(&mut *store, &mix, &b)?;
        b.finish_and_clear();
        report.rows.push(row(cfg, &*store, op, &m));
    }
    Ok(())
}
