//! YCSB workloads A-F (papers' section 5.6, Figure 13) on the loaded database, per
//! (index, boundary): latency per operation type and throughput.
//!
//! The operations come from `lidb_data::ycsb::Generator` over record numbers. Record r below the
//! loaded count is the r-th smallest loaded key; an inserted record (r at or beyond the count)
//! gets a new key inside a gap between two loaded keys chosen by hashing r (or, where no gap is
//! free, an existing key, which makes the insert an overwrite). Keys are rendered and valued like
//! the load's, and an update writes the key's same value again, so every read is still checked.
//! Each configuration runs on a fresh copy of the load, since workloads write.

use std::time::Instant;

use lidb_data::zipf::fnvhash64;
use lidb_data::{Generator, Op};
use lidb_lsm::Db;
use serde::Serialize;

use super::load::value_of;
use super::measure::{self, Label, check};
use super::{Config, Error, TableRow, Use, WorkDir, each_config, uniform_lookups, warmup_count};
use crate::kv::hist::Histogram;
use crate::progress;

/// Operations of one type (or "all") of one configuration. JSON names.
#[derive(Debug, Clone, Serialize)]
pub struct YcsbRow {
    pub index: String,
    pub boundary: u64,
    pub workload: String,
    /// "read", "update", "insert", "scan", "rmw" or "all".
    pub op: String,
    pub ops: u64,
    pub op_us_mean: f64,
    pub op_us_p99: f64,
    /// Operations of this type per second of the whole run, in thousands.
    pub kops_per_s: f64,
}

impl TableRow for YcsbRow {
    fn header() -> &'static [&'static str] {
        &[
            "index",
            "boundary",
            "workload",
            "op",
            "ops",
            "op_us_mean",
            "op_us_p99",
            "kops/s",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.index.clone(),
            self.boundary.to_string(),
            self.workload.clone(),
            self.op.clone(),
            self.ops.to_string(),
            format!("{:.2}", self.op_us_mean),
            format!("{:.2}", self.op_us_p99),
            format!("{:.1}", self.kops_per_s),
        ]
    }
}

/// The key of record `r` (see the module doc); `keys` sorted, not empty.
pub fn record_key(keys: &[u64], r: u64) -> u64 {
    let n = keys.len() as u64;
    if r < n {
        return keys.get(r as usize).copied().unwrap_or_default();
    }
    let h = fnvhash64(r);
    let i = (h % n.saturating_sub(1).max(1)) as usize;
    let (Some(&lo), hi) = (keys.get(i), keys.get(i + 1).copied()) else {
        return h;
    };
    match hi {
        Some(hi) if hi - lo > 1 => lo + 1 + (h >> 17) % (hi - lo - 1),
        _ => lo,
    }
}

const OPS: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];

pub fn run(cfg: &Config, work: &WorkDir, notes: &mut Vec<String>) -> Result<Vec<YcsbRow>, Error> {
    if cfg.data.keys.is_empty() {
        return Err(Error::Invalid("no keys loaded".into()));
    }
    notes.push(format!(
        "workload {}: {} operations per configuration, each on a fresh copy of the load",
        cfg.workload, cfg.ops
    ));
    let warm = uniform_lookups(cfg, warmup_count(cfg.ops), 0x5741_524D);
    let per_config = each_config(
        cfg,
        work,
        cfg.engine,
        Use::Writes,
        notes,
        |db, family, b| {
            let name = family.name();
            let label = Label {
                index: &name,
                boundary: b,
            };
            measure::lookups(
                db,
                &warm,
                cfg.data.key_size,
                cfg.data.value_size,
                label,
                None,
            )?;
            run_ops(cfg, db, label)
        },
    )?;
    Ok(per_config.into_iter().flatten().collect())
}

fn run_ops(cfg: &Config, db: &Db, label: Label<'_>) -> Result<Vec<YcsbRow>, Error> {
    let keys = &cfg.data.keys;
    let (ks, vs) = (cfg.data.key_size, cfg.data.value_size);
    let mut generator = Generator::new(cfg.workload, keys.len() as u64, None, cfg.data.seed)?;
    let bar = cfg.progress.then(|| {
        progress::bar(
            cfg.ops as u64,
            &format!("{} B={} ycsb", label.index, label.boundary),
        )
    });
    let mut times: [Vec<f64>; 5] = Default::default();
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for i in 0..cfg.ops {
        let op = generator.next_op();
        let (kind, record) = match op {
            Op::Read(r) => (0, r),
            Op::Update(r) => (1, r),
            Op::Insert(r) => (2, r),
            Op::Scan { start, .. } => (3, start),
            Op::ReadModifyWrite(r) => (4, r),
        };
        let key = record_key(keys, record);
        ks.render(key, &mut k);
        value_of(key, vs, &mut v);
        let t = Instant::now();
        match op {
            Op::Read(_) => check(key, db.get(&k)?.as_deref(), &v, label)?,
            Op::Update(_) | Op::Insert(_) => db.put(&k, &v)?,
            Op::Scan { len, .. } => {
                let mut it = db.scan(&k, None)?;
                let mut n = 0u32;
                while it.valid() && n < len {
                    n += 1;
                    it.next()?;
                }
            }
            Op::ReadModifyWrite(_) => {
                let got = db.get(&k)?;
                check(key, got.as_deref(), &v, label)?;
                db.put(&k, &v)?;
            }
        }
        let us = t.elapsed().as_secs_f64() * 1e6;
        if let Some(slot) = times.get_mut(kind) {
            slot.push(us);
        }
        if let Some(bar) = &bar
            && i % 1024 == 0
        {
            bar.set_position(i as u64);
        }
    }
    let wall_s = started.elapsed().as_secs_f64().max(1e-9);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let row = |op: &str, samples: &mut Vec<f64>| YcsbRow {
        index: label.index.to_string(),
        boundary: label.boundary,
        workload: cfg.workload.name().to_string(),
        op: op.to_string(),
        ops: samples.len() as u64,
        op_us_mean: samples.iter().sum::<f64>() / samples.len().max(1) as f64,
        op_us_p99: Histogram::of_us(samples).percentile_us(99.0),
        kops_per_s: samples.len() as f64 / wall_s / 1e3,
    };
    let mut rows = Vec::new();
    let mut all: Vec<f64> = times.iter().flatten().copied().collect();
    for (name, samples) in OPS.iter().zip(times.iter_mut()) {
        if !samples.is_empty() {
            rows.push(row(name, samples));
        }
    }
    rows.push(row("all", &mut all));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn inserted_records_land_between_loaded_keys() {
        let keys: Vec<u64> = (0..100u64).map(|i| i * 1000).collect();
        for r in 0..100 {
            assert_eq!(super::record_key(&keys, r), r * 1000);
        }
        for r in 100..1000 {
            let k = super::record_key(&keys, r);
            assert!(k < 99_000, "{k}");
            assert_eq!(k, super::record_key(&keys, r));
        }
    }
}
