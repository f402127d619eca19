//! Read overhead per level: which source answered each point lookup (memtable or level L), and the
//! latency and reads of the lookups answered there, for uniform and for zipfian key choice.
//!
//! Zipfian choice is YCSB's scrambled Zipfian (theta 0.99) over the loaded keys' positions, so hot
//! keys are scattered over the key space. The database is shared across configurations as in
//! `pareto` (re-indexed, not reloaded).

use std::collections::BTreeMap;

use lidb_data::zipf::{ScrambledZipfian, ZIPFIAN_CONSTANT};
use lidb_lsm::Source;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::measure::{self, Figures, Label, Sample};
use super::{Config, Error, TableRow, Use, WorkDir, each_config, uniform_lookups, warmup_count};

/// Lookups of one configuration and key choice answered by one source. JSON names.
#[derive(Debug, Clone, Serialize)]
pub struct LevelRow {
    pub index: String,
    pub boundary: u64,
    /// "uniform" or "zipfian".
    pub distribution: String,
    /// "memtable", "L0", "L1", ...
    pub level: String,
    /// Share of the pass's lookups answered here.
    pub share: f64,
    #[serde(flatten)]
    pub figures: Figures,
}

impl TableRow for LevelRow {
    fn header() -> &'static [&'static str] {
        &[
            "index",
            "boundary",
            "distribution",
            "level",
            "lookups",
            "share_%",
            "lookup_us_mean",
            "lookup_us_p99",
            "reads/lookup",
            "bytes_read/lookup",
            "tables/lookup",
            "io_us",
        ]
    }

    fn cells(&self) -> Vec<String> {
        let f = &self.figures;
        vec![
            self.index.clone(),
            self.boundary.to_string(),
            self.distribution.clone(),
            self.level.clone(),
            f.lookups.to_string(),
            format!("{:.1}", self.share * 100.0),
            format!("{:.2}", f.lookup_us_mean),
            format!("{:.2}", f.lookup_us_p99),
            format!("{:.3}", f.reads_per_lookup),
            format!("{:.0}", f.bytes_read_per_lookup),
            format!("{:.2}", f.tables_probed_per_lookup),
            format!("{:.3}", f.io_us),
        ]
    }
}

/// `n` loaded keys chosen by a scrambled Zipfian over their positions.
pub fn zipfian_lookups(keys: &[u64], n: usize, seed: u64) -> Result<Vec<u64>, Error> {
    let Some(last) = keys.len().checked_sub(1) else {
        return Ok(Vec::new());
    };
    let mut z = ScrambledZipfian::new(0, last as u64, ZIPFIAN_CONSTANT)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Ok((0..n)
        .filter_map(|_| keys.get(z.next_value(&mut rng) as usize).copied())
        .collect())
}

fn source_name(s: Source) -> String {
    match s {
        Source::Memtable => "memtable".into(),
        Source::Level(l) => format!("L{l}"),
        Source::Nowhere => "nowhere".into(),
    }
}

/// Sort order of sources: memtable, L0, L1, ..., nowhere.
fn source_rank(s: Source) -> u64 {
    match s {
        Source::Memtable => 0,
        Source::Level(l) => 1 + u64::from(l),
        Source::Nowhere => u64::MAX,
    }
}

pub fn run(cfg: &Config, work: &WorkDir, notes: &mut Vec<String>) -> Result<Vec<LevelRow>, Error> {
    let warm = uniform_lookups(cfg, warmup_count(cfg.lookups), 0x5741_524D);
    let passes = [
        ("uniform", uniform_lookups(cfg, cfg.lookups, 0x4C4F_4F4B)),
        (
            "zipfian",
            zipfian_lookups(&cfg.data.keys, cfg.lookups, cfg.data.seed ^ 0x5A49_5046)?,
        ),
    ];
    let (ks, vs) = (cfg.data.key_size, cfg.data.value_size);
    let per_config = each_config(
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
            let mut rows = Vec::new();
            for (dist, keys) in &passes {
                measure::lookups(db, &warm, ks, vs, label, None)?;
                let show = format!("{} B={b} {dist}", name);
                let samples =
                    measure::lookups(db, keys, ks, vs, label, cfg.progress.then_some(&show))?;
                let mut by_source: BTreeMap<u64, (Source, Vec<Sample>)> = BTreeMap::new();
                for s in &samples {
                    by_source
                        .entry(source_rank(s.source))
                        .or_insert_with(|| (s.source, Vec::new()))
                        .1
                        .push(*s);
                }
                for (source, group) in by_source.values() {
                    rows.push(LevelRow {
                        index: name.clone(),
                        boundary: b,
                        distribution: (*dist).to_string(),
                        level: source_name(*source),
                        share: group.len() as f64 / samples.len().max(1) as f64,
                        figures: Figures::of(group),
                    });
                }
            }
            Ok(rows)
        },
    )?;
    Ok(per_config.into_iter().flatten().collect())
}
