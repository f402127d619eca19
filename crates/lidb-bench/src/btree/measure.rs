//! The timed loops of the experiments: point lookups, a write mix, and lookups binned by time
//! from a cold start; plus [`time_to_fraction_of_peak`], the paper's startup time.
//!
//! Runs on the calling thread; [`lookups`] fans out to scoped worker threads that share the
//! store (`PagedStore` is `Sync`, lookups take `&self`).
//!
//! Every operation is timed on its own (into a [`Histogram`]); throughput is the operations over
//! the wall time of the same loop, so it includes the timer's cost (about 20-40 ns per
//! operation, small next to a B-tree lookup). Every value read is checked against its key; a
//! wrong or missing value stops the run with [`Error::WrongValue`].

use std::time::Instant;

use indicatif::ProgressBar;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Error;
use super::config::{value_for, value_matches};
pub use super::rows::Measured;
use super::store::PagedStore;
use crate::kv::hist::Histogram;

/// Progress is advanced every this many operations.
const TICK: u64 = 1024;

fn nanos(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One checked lookup of an existing key.
fn lookup(
    store: &dyn PagedStore,
    key: u64,
    value_size: u32,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let found = store.get(key, out).map_err(Error::store(store.name()))?;
    if !found || !value_matches(key, out, value_size) {
        return Err(Error::WrongValue {
            engine: store.name().to_string(),
            key,
            detail: if found {
                format!("a value of {} bytes not made for this key", out.len())
            } else {
                "missing".to_string()
            },
        });
    }
    Ok(())
}

/// Looks up each of `keys` once, in order, untimed (to warm a pool).
pub fn warm(
    store: &dyn PagedStore,
    keys: &[u64],
    value_size: u32,
    bar: &ProgressBar,
) -> Result<(), Error> {
    let mut out = Vec::new();
    for (i, &key) in keys.iter().enumerate() {
        lookup(store, key, value_size, &mut out)?;
        if (i as u64).is_multiple_of(TICK) {
            bar.inc(TICK);
        }
    }
    Ok(())
}

/// `ops` uniform random lookups of `keys` (seeded), each timed, split over `threads` scoped
/// workers sharing `store` (worker i takes the i-th contiguous share of the one seeded sequence,
/// so every thread count looks up the same keys); throughput is over the wall time of all.
pub fn lookups(
    store: &dyn PagedStore,
    keys: &[u64],
    value_size: u32,
    ops: u64,
    seed: u64,
    threads: usize,
    bar: &ProgressBar,
) -> Result<Measured, Error> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let picks: Vec<u64> = (0..ops)
        .filter_map(|_| keys.get(rng.gen_range(0..keys.len())).copied())
        .collect();
    let share = picks.len().div_ceil(threads.max(1)).max(1);
    let reads_before = store.device_reads();
    let start = Instant::now();
    let results: Vec<Result<Histogram, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = picks
            .chunks(share)
            .map(|chunk| s.spawn(move || timed_share(store, chunk, value_size, bar)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Invalid("a lookup thread panicked".into())))
            })
            .collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut hist = Histogram::new();
    for r in results {
        hist.merge(&r?);
    }
    Ok(Measured {
        ops: picks.len() as u64,
        seconds,
        reads: store.device_reads().saturating_sub(reads_before),
        hist,
    })
}

/// One worker of [`lookups`]: its share of the keys, each looked up, checked and timed.
fn timed_share(
    store: &dyn PagedStore,
    keys: &[u64],
    value_size: u32,
    bar: &ProgressBar,
) -> Result<Histogram, Error> {
    let mut hist = Histogram::new();
    let mut out = Vec::new();
    for (i, &key) in keys.iter().enumerate() {
        let t = Instant::now();
        lookup(store, key, value_size, &mut out)?;
        hist.record(nanos(t));
        if (i as u64).is_multiple_of(TICK) {
            bar.inc(TICK);
        }
    }
    Ok(hist)
}

/// A write mix (see [`write_mix`]).
#[derive(Debug, Clone, Copy)]
pub struct WriteMix<'a> {
    /// Keys already in the store, read by the lookups.
    pub loaded: &'a [u64],
    /// Keys not in the store, inserted in this order.
    pub new_keys: &'a [u64],
    pub insert_fraction: f64,
    pub value_size: u32,
    pub ops: u64,
    pub seed: u64,
}

/// `mix.ops` operations, each an insert of the next new key with probability
/// `insert_fraction`, else a lookup of a uniform random loaded key (seeded), each timed.
pub fn write_mix(
    store: &mut dyn PagedStore,
    mix: &WriteMix<'_>,
    bar: &ProgressBar,
) -> Result<Measured, Error> {
    let WriteMix {
        loaded,
        new_keys,
        insert_fraction,
        value_size,
        ops,
        seed,
    } = *mix;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inserts = new_keys.iter();
    let mut hist = Histogram::new();
    let mut out = Vec::new();
    let reads_before = store.device_reads();
    let start = Instant::now();
    let mut done = 0u64;
    while done < ops {
        let insert = rng.gen_bool(insert_fraction.clamp(0.0, 1.0));
        let read_key = loaded.get(rng.gen_range(0..loaded.len().max(1))).copied();
        let t = Instant::now();
        match (insert, inserts.next(), read_key) {
            (true, Some(&key), _) => {
                let value = value_for(key, 1, value_size);
                store.put(key, &value).map_err(Error::store(store.name()))?;
            }
            (_, _, Some(key)) => lookup(&*store, key, value_size, &mut out)?,
            _ => break,
        }
        hist.record(nanos(t));
        done += 1;
        if done.is_multiple_of(TICK) {
            bar.inc(TICK);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Measured {
        ops: done,
        seconds,
        reads: store.device_reads().saturating_sub(reads_before),
        hist,
    })
}

/// Lookups from a cold pool, binned by time: what [`cold_lookups`] returns.
#[derive(Debug)]
pub struct ColdSeries {
    pub measured: Measured,
    /// Operations completed in each interval from the start.
    pub per_interval: Vec<u64>,
    pub interval_s: f64,
}

/// Uniform random lookups of `keys` (seeded) for `seconds`, counting completions per
/// `interval_s`.
pub fn cold_lookups(
    store: &dyn PagedStore,
    keys: &[u64],
    value_size: u32,
    seconds: f64,
    interval_s: f64,
    seed: u64,
    bar: &ProgressBar,
) -> Result<ColdSeries, Error> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let bins = (seconds / interval_s).ceil().max(1.0) as usize;
    let mut per_interval = vec![0u64; bins];
    let mut hist = Histogram::new();
    let mut out = Vec::new();
    let reads_before = store.device_reads();
    let start = Instant::now();
    let mut ops = 0u64;
    loop {
        let now = start.elapsed().as_secs_f64();
        let bin = (now / interval_s) as usize;
        let Some(count) = per_interval.get_mut(bin) else {
            break;
        };
        let Some(&key) = keys.get(rng.gen_range(0..keys.len())) else {
            break;
        };
        let t = Instant::now();
        lookup(store, key, value_size, &mut out)?;
        hist.record(nanos(t));
        *count += 1;
        ops += 1;
        if ops.is_multiple_of(TICK) {
            bar.set_position(now as u64);
        }
    }
    let measured = Measured {
        ops,
        seconds: start.elapsed().as_secs_f64(),
        reads: store.device_reads().saturating_sub(reads_before),
        hist,
    };
    Ok(ColdSeries {
        measured,
        per_interval,
        interval_s,
    })
}

/// The paper's startup time: the end of the first interval whose count reaches `fraction` of
/// the peak interval's, in seconds from the start; `None` if nothing completed.
pub fn time_to_fraction_of_peak(
    per_interval: &[u64],
    interval_s: f64,
    fraction: f64,
) -> Option<f64> {
    let peak = per_interval.iter().copied().max().filter(|&p| p > 0)? as f64;
    per_interval
        .iter()
        .position(|&c| c as f64 >= fraction * peak)
        .map(|i| (i + 1) as f64 * interval_s)
}
