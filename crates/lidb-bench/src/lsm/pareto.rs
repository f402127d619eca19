//! Pareto (papers' section 5.1, Figure 7): per (index, boundary), the memory of the indexes and
//! filters against the latency and cost of point lookups of existing keys.
//!
//! One load per engine setup; configurations switch indexes with `Db::reindex`. Each pass is
//! preceded by a warm-up of other keys; then `lookups` uniform existing keys are timed one by one.

use lidb_lsm::Db;
use serde::Serialize;

use super::load::{Engine, granularity_name};
use super::measure::{self, Figures, Label};
use super::{
    Config, Error, IndexChoice, TableRow, Use, WorkDir, each_config, uniform_lookups, warmup_count,
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
    #[serde(flatten)]
    pub figures: Figures,
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
            "lookup_us_mean",
            "lookup_us_p99",
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
        vec![
            self.index.clone(),
            self.boundary.to_string(),
            super::load::format_size(self.sst_size_bytes),
            self.granularity.clone(),
            self.index_bytes.to_string(),
            self.filter_bytes.to_string(),
            format!("{:.2}", f.lookup_us_mean),
            format!("{:.2}", f.lookup_us_p99),
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
        figures: Figures::of(&samples),
    })
}
