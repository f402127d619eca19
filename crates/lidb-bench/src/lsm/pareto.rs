//! Pareto (papers' section 5.1, Figure 7): per (index, boundary), the memory of the indexes and
//! filters against the latency and cost of point lookups of existing keys.
//!
//! One load per engine setup; configurations switch indexes with `Db::reindex`. Each pass is
//! preceded by a warm-up of other keys; then `lookups` uniform existing keys are timed one by one.

use lidb_lsm::Db;
use serde::Serialize;

use crate::device::DeviceMultiples;
use crate::device_limit::DeviceRow;

use super::load::{Engine, granularity_name};
use super::measure::{self, Figures, Label};
use super::{
    Config, Error, Fit, IndexChoice, TableRow, Use, WorkDir, each_config, fit_budget,
    uniform_lookups, warmup_count,
};

/// One configuration's point lookups. Field names are the JSON names.
#[derive(Debug, Clone, Serialize)]
pub struct LookupRow {
    pub index: String,
    pub boundary: u64,
    pub sst_size_bytes: u64,
    pub granularity: String,
    pub keys: u64,
    /// Index bytes of every live table (and level model).
    pub index_bytes: u64,
    pub filter_bytes: u64,
    /// How the configuration took `--memory` (None and zeros without it).
    #[serde(flatten)]
    pub fit: Fit,
    #[serde(flatten)]
    pub figures: Figures,
    /// p50 and mean against the device's own reads (same run; None without a probe).
    #[serde(flatten)]
    pub device: DeviceMultiples,
}

impl DeviceRow for LookupRow {
    fn config(&self) -> String {
        format!(
            "{} B={} sst={} {}",
            self.index, self.boundary, self.sst_size_bytes, self.granularity
        )
    }
    fn typical_read_bytes(&self) -> Option<f64> {
        let f = &self.figures;
        (f.reads_per_lookup > 0.0).then(|| f.bytes_read_per_lookup / f.reads_per_lookup)
    }
    fn latency_us(&self) -> (f64, f64) {
        (self.figures.lookup_us_p50, self.figures.lookup_us_mean)
    }
    fn set_device(&mut self, device: DeviceMultiples) {
        self.device = device;
    }
}

impl TableRow for LookupRow {
    fn header() -> &'static [&'static str] {
        &[
            "index",
            "boundary",
            "sst_size",
            "gran",
            "index_bytes",
            "filter_bytes",
            "cache_cap",
            "over_budget",
            "lookup_us_p50",
            "lookup_us_mean",
            "lookup_us_p99",
            "p50_x_dev4k",
            "mean_x_dev4k",
            "reads/lookup",
            "bytes_read/lookup",
            "tables/lookup",
            "table_lookup_us",
            "predict_us",
            "io_us",
            "search_us",
        ]
    }

    fn cells(&self) -> Vec<String> {
        let f = &self.figures;
        let opt = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}"));
        vec![
            self.index.clone(),
            self.boundary.to_string(),
            super::load::format_size(self.sst_size_bytes),
            self.granularity.clone(),
            self.index_bytes.to_string(),
            self.filter_bytes.to_string(),
            self.fit
                .budget_bytes
                .map_or("-".into(), |_| self.fit.cache_capacity_bytes.to_string()),
            self.fit
                .budget_bytes
                .map_or("-".into(), |_| self.fit.over_budget_bytes.to_string()),
            format!("{:.2}", f.lookup_us_p50),
            format!("{:.2}", f.lookup_us_mean),
            format!("{:.2}", f.lookup_us_p99),
            opt(self.device.p50_x_device),
            opt(self.device.mean_x_device),
            format!("{:.3}", f.reads_per_lookup),
            format!("{:.0}", f.bytes_read_per_lookup),
            format!("{:.2}", f.tables_probed_per_lookup),
            format!("{:.3}", f.table_lookup_us),
            format!("{:.3}", f.predict_us),
            format!("{:.3}", f.io_us),
            format!("{:.3}", f.search_us),
        ]
    }
}

pub fn run(cfg: &Config, work: &WorkDir, notes: &mut Vec<String>) -> Result<Vec<LookupRow>, Error> {
    lookup_rows(cfg, work, cfg.engine, notes)
}

/// Lookup rows of every configuration of `cfg` on databases built with `engine`.
pub fn lookup_rows(
    cfg: &Config,
    work: &WorkDir,
    engine: Engine,
    notes: &mut Vec<String>,
) -> Result<Vec<LookupRow>, Error> {
    let warm = uniform_lookups(cfg, warmup_count(cfg.lookups), 0x5741_524D);
    let timed = uniform_lookups(cfg, cfg.lookups, 0x4C4F_4F4B);
    each_config(cfg, work, engine, Use::ReadOnly, notes, |db, family, b| {
        measure_config(cfg, db, engine, family, b, &warm, &timed)
    })
}

fn measure_config(
    cfg: &Config,
    db: &Db,
    engine: Engine,
    family: IndexChoice,
    boundary: u64,
    warm: &[u64],
    timed: &[u64],
) -> Result<LookupRow, Error> {
    let name = family.name();
    let label = Label {
        index: &name,
        boundary,
    };
    let (ks, vs) = (cfg.data.key_size, cfg.data.value_size);
    // each_config fitted the database to the budget already; this reads the fit for the row.
    let fit = fit_budget(db, engine, &name, &mut Vec::new());
    measure::lookups(db, warm, ks, vs, label, None)?;
    let show = format!("{} B={boundary}", name);
    let samples = measure::lookups(db, timed, ks, vs, label, cfg.progress.then_some(&show))?;
    let mem = db.memory_usage();
    Ok(LookupRow {
        index: name.clone(),
        boundary,
        sst_size_bytes: engine.sst_size_bytes,
        granularity: granularity_name(engine.granularity).to_string(),
        keys: cfg.data.keys.len() as u64,
        index_bytes: mem.index_bytes,
        filter_bytes: mem.filter_bytes,
        fit,
        figures: Figures::of(&samples),
        device: DeviceMultiples::default(),
    })
}
