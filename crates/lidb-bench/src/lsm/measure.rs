//! Timed, checked point lookups on an open database, and the figures the experiments report from
//! them. One thread; every lookup's value is compared with `value_of(key)`, so a wrong answer
//! stops the run instead of looking fast.

use std::time::Instant;

use lidb_lsm::{Db, ReadStats, Source};
use serde::Serialize;

use super::Error;
use super::load::{KeySize, value_of};
use crate::kv::hist::Histogram;
use crate::progress;

/// One lookup: its latency, what it cost, where it was answered.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub us: f64,
    pub stats: ReadStats,
    pub source: Source,
}

/// Who is being measured, for error messages.
#[derive(Debug, Clone, Copy)]
pub struct Label<'a> {
    pub index: &'a str,
    pub boundary: u64,
}

/// Looks up every key of `keys` (all present in the database) and checks each value.
pub fn lookups(
    db: &Db,
    keys: &[u64],
    key_size: KeySize,
    value_size: u32,
    label: Label<'_>,
    show: Option<&str>,
) -> Result<Vec<Sample>, Error> {
    let bar = show.map(|what| progress::bar(keys.len() as u64, what));
    let (mut k, mut want) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(keys.len());
    for (i, &key) in keys.iter().enumerate() {
        key_size.render(key, &mut k);
        value_of(key, value_size, &mut want);
        let t = Instant::now();
        let traced = db.get_traced(&k)?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        check(key, traced.value.as_deref(), &want, label)?;
        out.push(Sample {
            us,
            stats: traced.stats,
            source: traced.source,
        });
        if let Some(bar) = &bar
            && i % 1024 == 0
        {
            bar.set_position(i as u64);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(out)
}

/// Fails unless `got` is `want`.
pub fn check(key: u64, got: Option<&[u8]>, want: &[u8], label: Label<'_>) -> Result<(), Error> {
    if got == Some(want) {
        return Ok(());
    }
    Err(Error::WrongValue {
        index: label.index.to_string(),
        boundary: label.boundary,
        key,
        detail: match got {
            None => "the key was not found".into(),
            Some(v) => format!(
                "got a {}-byte value that differs from the one stored",
                v.len()
            ),
        },
    })
}

/// Per-lookup averages of a set of samples. Field names are JSON names.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Figures {
    pub lookups: u64,
    pub lookup_us_mean: f64,
    pub lookup_us_p50: f64,
    pub lookup_us_p99: f64,
    /// Physical reads per lookup (page-cache misses of the engine's own cache).
    pub reads_per_lookup: f64,
    pub bytes_read_per_lookup: f64,
    pub tables_probed_per_lookup: f64,
    pub filter_negatives_per_lookup: f64,
    pub cache_hits_per_lookup: f64,
    /// The papers' breakdown, microseconds per lookup.
    pub table_lookup_us: f64,
    pub predict_us: f64,
    pub io_us: f64,
    pub search_us: f64,
}

impl Figures {
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Figures {
        let mut total = ReadStats::default();
        let mut us: Vec<f64> = Vec::new();
        for s in samples {
            total.add(&s.stats);
            us.push(s.us);
        }
        let n = us.len() as f64;
        let per = |v: f64| if us.is_empty() { 0.0 } else { v / n };
        let per_us = |d: std::time::Duration| per(d.as_secs_f64() * 1e6);
        Figures {
            lookups: us.len() as u64,
            lookup_us_mean: per(us.iter().sum()),
            reads_per_lookup: per(total.data_reads as f64),
            bytes_read_per_lookup: per(total.bytes_read as f64),
            tables_probed_per_lookup: per(total.tables_probed as f64),
            filter_negatives_per_lookup: per(total.filter_negatives as f64),
            cache_hits_per_lookup: per(total.cache_hits as f64),
            table_lookup_us: per_us(total.table_lookup_time),
            predict_us: per_us(total.predict_time),
            io_us: per_us(total.io_time),
            search_us: per_us(total.search_time),
            lookup_us_p50: Histogram::of_us(&us).percentile_us(50.0),
            lookup_us_p99: Histogram::of_us(&us).percentile_us(99.0),
        }
    }
}
