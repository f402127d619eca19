//! Range lookups (papers' section 5.2, Figure 9, Observation 4): the seek (creating the iterator
//! at a start key: a learned-index seek in every sorted run) versus the scan (reading `range_len`
//! entries in order), per (index, boundary).
//!
//! Start keys are uniform existing keys. Each range is checked after its timing: it must hold
//! `min(range_len, keys from the start to the end)` entries, its last key must be the expected
//! one and that key's value the one loaded.

use std::time::Instant;

use lidb_lsm::Db;
use serde::Serialize;

use super::load::value_of;
use super::measure::{Label, check};
use super::{Config, Error, TableRow, Use, WorkDir, each_config, uniform_lookups, warmup_count};
use crate::kv::hist::Histogram;
use crate::progress;

/// One configuration's range lookups. JSON names; times in microseconds per range.
#[derive(Debug, Clone, Serialize)]
pub struct RangeRow {
    pub index: String,
    pub boundary: u64,
    pub range_len: u64,
    pub ranges: u64,
    pub seek_us_mean: f64,
    pub seek_us_p99: f64,
    pub scan_us_mean: f64,
    pub range_us_mean: f64,
    /// Entries read per second of scanning (seek excluded).
    pub entries_per_s: f64,
}

impl TableRow for RangeRow {
    fn header() -> &'static [&'static str] {
        &[
            "index",
            "boundary",
            "range_len",
            "ranges",
            "seek_us_mean",
            "seek_us_p99",
            "scan_us_mean",
            "range_us_mean",
            "entries/s",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.index.clone(),
            self.boundary.to_string(),
            self.range_len.to_string(),
            self.ranges.to_string(),
            format!("{:.2}", self.seek_us_mean),
            format!("{:.2}", self.seek_us_p99),
            format!("{:.2}", self.scan_us_mean),
            format!("{:.2}", self.range_us_mean),
            format!("{:.0}", self.entries_per_s),
        ]
    }
}

pub fn run(cfg: &Config, work: &WorkDir, notes: &mut Vec<String>) -> Result<Vec<RangeRow>, Error> {
    let warm = uniform_lookups(cfg, warmup_count(cfg.lookups), 0x5741_524D);
    let starts = uniform_lookups(cfg, cfg.lookups, 0x5241_4E47);
    each_config(
        cfg,
        work,
        cfg.engine,
        Use::ReadOnly,
        notes,
        |db, family, b| {
            let name = family.name();
            let label = Label {
                index: &name,
                boundary: b,
            };
            ranges(cfg, db, &warm, label, None)?;
            let show = format!("{} B={b} ranges", name);
            let (seek, scan, entries) =
                ranges(cfg, db, &starts, label, cfg.progress.then_some(&show))?;
            let n = seek.len().max(1) as f64;
            let scan_total: f64 = scan.iter().sum();
            let seek_mean = seek.iter().sum::<f64>() / n;
            Ok(RangeRow {
                index: name.clone(),
                boundary: b,
                range_len: cfg.range_len as u64,
                ranges: seek.len() as u64,
                seek_us_mean: seek_mean,
                seek_us_p99: Histogram::of_us(&seek).percentile_us(99.0),
                scan_us_mean: scan_total / n,
                range_us_mean: seek_mean + scan_total / n,
                entries_per_s: if scan_total > 0.0 {
                    entries as f64 / (scan_total / 1e6)
                } else {
                    0.0
                },
            })
        },
    )
}

/// Times every range; returns seek and scan microseconds per range and the entries read.
fn ranges(
    cfg: &Config,
    db: &Db,
    starts: &[u64],
    label: Label<'_>,
    show: Option<&str>,
) -> Result<(Vec<f64>, Vec<f64>, u64), Error> {
    let bar = show.map(|what| progress::bar(starts.len() as u64, what));
    let keys = &cfg.data.keys;
    let (ks, vs) = (cfg.data.key_size, cfg.data.value_size);
    let len = cfg.range_len.max(1);
    let (mut seek, mut scan) = (Vec::with_capacity(starts.len()), Vec::new());
    let mut entries = 0u64;
    let (mut k, mut want) = (Vec::new(), Vec::new());
    for (i, &start) in starts.iter().enumerate() {
        ks.render(start, &mut k);
        let t0 = Instant::now();
        let mut it = db.scan(&k, None)?;
        let mut count = 0usize;
        if it.valid() {
            count = 1;
        }
        let t1 = Instant::now();
        while count > 0 && count < len {
            it.next()?;
            if !it.valid() {
                break;
            }
            count += 1;
        }
        let t2 = Instant::now();
        seek.push((t1 - t0).as_secs_f64() * 1e6);
        scan.push((t2 - t1).as_secs_f64() * 1e6);
        entries += count as u64;
        // Check: count, last key, its value.
        let first = keys.partition_point(|&x| x < start);
        let expect_count = len.min(keys.len() - first);
        let last = first + count.max(1) - 1;
        let want_key = keys.get(last).copied();
        // A range cut short by the end of the keys leaves the iterator exhausted.
        let got_key = if it.valid() {
            ks.parse_key(it.key())
        } else {
            want_key
        };
        if count != expect_count || got_key != want_key {
            return Err(Error::WrongValue {
                index: label.index.to_string(),
                boundary: label.boundary,
                key: start,
                detail: format!(
                    "a range of {len} from this key read {count} entries ending at {got_key:?}; \
                     expected {expect_count} ending at {want_key:?}"
                ),
            });
        }
        if let Some(last_key) = got_key.filter(|_| it.valid()) {
            value_of(last_key, vs, &mut want);
            check(last_key, Some(it.value()), &want, label)?;
        }
        if let Some(bar) = &bar
            && i % 256 == 0
        {
            bar.set_position(i as u64);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok((seek, scan, entries))
}
