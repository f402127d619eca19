//! A boundary B per level under an index-memory budget (the LSM study's future work:
//! upper levels are small and read more often per entry, so a small B there costs little memory).
//!
//! The experiment (`--experiment level-plan --index-memory SIZE`), on one table-granularity load:
//! 1. Observe: for each candidate B of `--boundary`, re-index every level with B, then time the
//!    same uniform lookups of existing keys. Per level L it records, measured: the index bytes
//!    of L's tables, the device reads per lookup spent on lookups answered at L, and their bytes
//!    per read.
//! 2. Plan ([`plan`]): the B of each level minimising the expected device time per lookup,
//!    sum over L of reads_L(B_L) x t(bytes_per_read_L(B_L)), subject to the index bytes summed over
//!    the levels being at most the budget. t is the device's own latency (QD1, O_DIRECT) probed in
//!    the run: the 4 KiB p50, plus the 16 KiB p50's increase per further page (p50s: a shared
//!    device's means swing with its stalls); without a probe the cost is counted in pages.
//! 3. Apply: re-index with the plan (`IndexOptions::level_boundaries`) and time the same lookups.
//!    Rows give every uniform B and the plan, with their index bytes and whether they fit.
//!
//! Reads of a lookup are charged to the level that answered it; a filter false positive at an
//! upper level (10-bit Bloom: about 1%) is charged to the answering level. Runs on the calling
//! thread. The option is an experiment, off by default: no engine default changes with it.

use lidb_lsm::{Db, IndexOptions, Source};
use serde::Serialize;

use super::load::{self, Engine};
use super::measure::{self, Figures, Label, Sample};
use super::{
    Config, Error, IndexChoice, TableRow, WorkDir, fit_budget, index_options, table_load_id,
    uniform_lookups, warmup_count,
};
use crate::device::{self, PAGE_BYTES, ProbeFile};

/// One level's measured figures under one boundary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub boundary: u64,
    pub index_bytes: u64,
    /// Device reads per lookup (of all lookups) spent on lookups this level answered.
    pub reads_per_lookup: f64,
    /// Bytes per device read of those reads (0 when there were none).
    pub bytes_per_read: f64,
}

/// Expected device time of one read of `bytes`: `first_us` for the first page, `next_us` per
/// further page (fractional pages count by their share).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadCost {
    pub first_us: f64,
    pub next_us: f64,
    /// "device" (probed in this run) or "pages" (no probe: every page costs 1).
    pub unit: &'static str,
}

impl ReadCost {
    /// Cost counted in pages read.
    pub const PAGES: ReadCost = ReadCost {
        first_us: 1.0,
        next_us: 1.0,
        unit: "pages",
    };

    pub fn of_read(&self, bytes: f64) -> f64 {
        let pages = (bytes / PAGE_BYTES as f64).max(1.0);
        self.first_us + (pages - 1.0) * self.next_us
    }

    /// The expected cost per lookup of one level at one candidate.
    pub fn of(&self, c: &Candidate) -> f64 {
        if c.reads_per_lookup == 0.0 {
            0.0
        } else {
            c.reads_per_lookup * self.of_read(c.bytes_per_read)
        }
    }
}

/// A boundary per level and what it costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub boundaries: Vec<u64>,
    pub index_bytes: u64,
    /// Expected device cost per lookup ([`ReadCost`] units).
    pub cost: f64,
}

/// The cheapest choice of one candidate per level whose index bytes sum to at most `budget`;
/// `None` when even the smallest index of every level exceeds it (or a level has no
/// candidate). Exact: a dynamic program over the levels keeping the Pareto frontier of
/// (index bytes, cost) of partial plans.
pub fn plan(levels: &[Vec<Candidate>], budget: u64, cost: ReadCost) -> Option<Plan> {
    let mut frontier = vec![Plan {
        boundaries: Vec::new(),
        index_bytes: 0,
        cost: 0.0,
    }];
    for level in levels {
        let mut next: Vec<Plan> = frontier
            .iter()
            .flat_map(|p| {
                level.iter().filter_map(move |c| {
                    let index_bytes = p.index_bytes.checked_add(c.index_bytes)?;
                    (index_bytes <= budget).then(|| Plan {
                        boundaries: [p.boundaries.as_slice(), &[c.boundary]].concat(),
                        index_bytes,
                        cost: p.cost + cost.of(c),
                    })
                })
            })
            .collect();
        // Keep a partial plan only if no plan of at most its memory costs less or the same.
        next.sort_by(|a, b| {
            a.index_bytes
                .cmp(&b.index_bytes)
                .then(a.cost.total_cmp(&b.cost))
        });
        let mut best = f64::INFINITY;
        next.retain(|p| {
            let keep = p.cost < best;
            best = best.min(p.cost);
            keep
        });
        if next.is_empty() {
            return None;
        }
        frontier = next;
    }
    frontier
        .into_iter()
        .min_by(|a, b| a.cost.total_cmp(&b.cost))
}

/// One configuration's lookups: a uniform B or the plan. JSON names.
#[derive(Debug, Clone, Serialize)]
pub struct PlanRow {
    pub index: String,
    /// The boundary of the last (largest) level, as every `bench lsm` row names one.
    pub boundary: u64,
    /// "uniform" or "plan".
    pub config: String,
    /// The boundary of each level, L0 first.
    pub boundaries: Vec<u64>,
    pub index_bytes: u64,
    pub index_budget_bytes: u64,
    pub within_budget: bool,
    /// Expected device cost per lookup from the observed per-level figures.
    pub predicted_cost: f64,
    pub cost_unit: String,
    #[serde(flatten)]
    pub figures: Figures,
}

impl TableRow for PlanRow {
    fn header() -> &'static [&'static str] {
        &[
            "index",
            "config",
            "B per level",
            "index_bytes",
            "fits",
            "predicted",
            "lookup_us_p50",
            "lookup_us_mean",
            "reads/lookup",
            "bytes_read/lookup",
        ]
    }

    fn cells(&self) -> Vec<String> {
        let f = &self.figures;
        vec![
            self.index.clone(),
            self.config.clone(),
            boundaries_name(&self.boundaries),
            self.index_bytes.to_string(),
            if self.within_budget { "yes" } else { "no" }.into(),
            format!("{:.1} {}", self.predicted_cost, self.cost_unit),
            format!("{:.2}", f.lookup_us_p50),
            format!("{:.2}", f.lookup_us_mean),
            format!("{:.3}", f.reads_per_lookup),
            format!("{:.0}", f.bytes_read_per_lookup),
        ]
    }
}

fn boundaries_name(b: &[u64]) -> String {
    b.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// Per level (L0 first, up to the last level holding entries): the candidate figures of
/// lookups answered there.
fn observe(db: &Db, b: u64, samples: &[Sample]) -> Vec<Candidate> {
    let mut levels = db.stats().levels;
    levels.truncate(live_levels(db));
    let n = samples.len().max(1) as f64;
    levels
        .iter()
        .map(|l| {
            let (reads, bytes) = samples
                .iter()
                .filter(|s| s.source == Source::Level(l.level))
                .fold((0u64, 0u64), |(r, by), s| {
                    (r + s.stats.data_reads, by + s.stats.bytes_read)
                });
            Candidate {
                boundary: b,
                index_bytes: l.index_bytes,
                reads_per_lookup: reads as f64 / n,
                bytes_per_read: if reads == 0 {
                    0.0
                } else {
                    bytes as f64 / reads as f64
                },
            }
        })
        .collect()
}

/// The device's cost model, probed in `dir` (4 KiB and 16 KiB means), or pages without a probe.
fn read_cost(cfg: &Config, dir: &std::path::Path, notes: &mut Vec<String>) -> ReadCost {
    if cfg.device_probe_reads == 0 || !cfg.engine.direct_io {
        notes.push("level plan: cost counted in pages read (no device probe: it needs --direct-io and --device-probe-reads > 0)".into());
        return ReadCost::PAGES;
    }
    let probed = ProbeFile::create(dir, device::PROBE_FILE_BYTES).and_then(|f| {
        let one = f.probe(PAGE_BYTES, cfg.device_probe_reads, cfg.data.seed)?;
        let four = f.probe(4 * PAGE_BYTES, cfg.device_probe_reads, cfg.data.seed ^ 1)?;
        Ok((one, four))
    });
    match probed {
        Ok((one, four)) => {
            notes.push(format!(
                "level plan: device cost model from {} and {}",
                one.describe(),
                four.describe()
            ));
            ReadCost {
                first_us: one.p50_us,
                next_us: ((four.p50_us - one.p50_us) / 3.0).max(0.0),
                unit: "us",
            }
        }
        Err(e) => {
            notes.push(format!(
                "level plan: device probe failed ({e}); cost counted in pages read"
            ));
            ReadCost::PAGES
        }
    }
}

pub fn run(cfg: &Config, work: &WorkDir, notes: &mut Vec<String>) -> Result<Vec<PlanRow>, Error> {
    let (family, budget) = check(cfg)?;
    let engine: Engine = cfg.engine;
    let cost = read_cost(cfg, &work.root, notes);
    let warm = uniform_lookups(cfg, warmup_count(cfg.lookups), 0x5741_524D);
    let timed = uniform_lookups(cfg, cfg.lookups, 0x4C4F_4F4B);
    let (name, what) = table_load_id(cfg, engine);
    let dir = work.path(&name);
    let first = index_options(family, cfg.boundaries.first().copied().unwrap_or(16));
    let loaded = load::open_or_load(
        &dir,
        &cfg.data,
        engine.options(first.clone()),
        &what,
        cfg.progress,
    )?;
    let mut indexed = (!loaded.reused).then_some(first);
    let mut db = loaded.db;
    let mut rows = Vec::new();
    let mut per_b: Vec<Vec<Candidate>> = Vec::new();
    let index = family.name();
    for &b in &cfg.boundaries {
        let idx = index_options(family, b);
        let (d, samples) = pass(cfg, db, &mut indexed, idx, &warm, &timed, notes)?;
        db = d;
        let observed = observe(&db, b, &samples);
        let index_bytes = observed.iter().map(|c| c.index_bytes).sum();
        rows.push(PlanRow {
            index: index.clone(),
            boundary: b,
            config: "uniform".into(),
            boundaries: vec![b; observed.len()],
            index_bytes,
            index_budget_bytes: budget,
            within_budget: index_bytes <= budget,
            predicted_cost: observed.iter().map(|c| cost.of(c)).sum(),
            cost_unit: cost.unit.into(),
            figures: Figures::of(&samples),
        });
        per_b.push(observed);
    }
    let levels = transpose(&per_b);
    for (l, cands) in levels.iter().enumerate() {
        notes.push(format!("level plan: L{l}: {}", describe_level(cands)));
    }
    let Some(chosen) = plan(&levels, budget, cost) else {
        notes.push(format!(
            "level plan: no choice of --boundary fits an index budget of {} bytes",
            budget
        ));
        drop(db);
        work.release(&dir)?;
        return Ok(rows);
    };
    let mut idx = index_options(family, chosen.boundaries.last().copied().unwrap_or(16));
    idx.level_boundaries = chosen.boundaries.iter().map(|&b| Some(b)).collect();
    let (db, samples) = pass(cfg, db, &mut indexed, idx, &warm, &timed, notes)?;
    let index_bytes = db.stats().levels.iter().map(|l| l.index_bytes).sum();
    rows.push(PlanRow {
        index,
        boundary: chosen.boundaries.last().copied().unwrap_or(0),
        config: "plan".into(),
        boundaries: chosen.boundaries,
        index_bytes,
        index_budget_bytes: budget,
        within_budget: index_bytes <= budget,
        predicted_cost: chosen.cost,
        cost_unit: cost.unit.into(),
        figures: Figures::of(&samples),
    });
    drop(db);
    work.release(&dir)?;
    Ok(rows)
}

/// The experiment's preconditions: one clustered family, table granularity, a budget.
fn check(cfg: &Config) -> Result<(IndexChoice, u64), Error> {
    let [family] = cfg.families.as_slice() else {
        return Err(Error::Invalid(
            "--experiment level-plan takes exactly one --index".into(),
        ));
    };
    if family.kind != lidb_lsm::IndexKind::Clustered {
        return Err(Error::Invalid(format!(
            "--experiment level-plan: {} is not a clustered family",
            family.name()
        )));
    }
    if cfg.engine.granularity != lidb_lsm::Granularity::Table {
        return Err(Error::Invalid(
            "--experiment level-plan needs --granularity table".into(),
        ));
    }
    let Some(budget) = cfg.index_memory_bytes else {
        return Err(Error::Invalid(
            "--experiment level-plan needs --index-memory SIZE (the index budget to plan for)"
                .into(),
        ));
    };
    Ok((*family, budget))
}

/// Re-indexes `db` with `idx` (unless it holds it), fits the memory budget, warms up and times
/// `timed`.
fn pass(
    cfg: &Config,
    mut db: Db,
    indexed: &mut Option<IndexOptions>,
    idx: IndexOptions,
    warm: &[u64],
    timed: &[u64],
    notes: &mut Vec<String>,
) -> Result<(Db, Vec<Sample>), Error> {
    if indexed.as_ref() != Some(&idx) {
        db = db.reindex(idx.clone())?;
        *indexed = Some(idx.clone());
    }
    let what = format!(
        "{} B per level {}",
        idx.family.name(),
        boundaries_name(
            &(0..live_levels(&db))
                .map(|l| idx.boundary_at(l))
                .collect::<Vec<_>>()
        )
    );
    fit_budget(&db, cfg.engine, &what, notes);
    let label = Label {
        index: &what,
        boundary: idx.params.boundary,
    };
    let (ks, vs) = (cfg.data.key_size, cfg.data.value_size);
    measure::lookups(&db, warm, ks, vs, label, None)?;
    let samples = measure::lookups(&db, timed, ks, vs, label, cfg.progress.then_some(&what))?;
    Ok((db, samples))
}

/// Levels up to the last one holding entries.
fn live_levels(db: &Db) -> usize {
    let levels = db.stats().levels;
    levels
        .iter()
        .rposition(|l| l.entries > 0)
        .map_or(0, |i| i + 1)
}

/// `per_b[i][l]` (boundary i, level l) as `[l][i]`.
fn transpose(per_b: &[Vec<Candidate>]) -> Vec<Vec<Candidate>> {
    let levels = per_b.iter().map(Vec::len).max().unwrap_or(0);
    (0..levels)
        .map(|l| per_b.iter().filter_map(|cs| cs.get(l).copied()).collect())
        .collect()
}

fn describe_level(cands: &[Candidate]) -> String {
    cands
        .iter()
        .map(|c| {
            format!(
                "B={} index {} B, {:.3} reads/lookup of {:.0} B",
                c.boundary, c.index_bytes, c.reads_per_lookup, c.bytes_per_read
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn cand(boundary: u64, index_bytes: u64, reads: f64, bytes: f64) -> Candidate {
        Candidate {
            boundary,
            index_bytes,
            reads_per_lookup: reads,
            bytes_per_read: bytes,
        }
    }

    /// Every combination, the slow way.
    fn brute_force(levels: &[Vec<Candidate>], budget: u64, cost: ReadCost) -> Option<f64> {
        let mut best: Option<f64> = None;
        let total: usize = levels.iter().map(Vec::len).product();
        for mut code in 0..total {
            let (mut mem, mut c) = (0u64, 0.0);
            for level in levels {
                let cand = level.get(code % level.len())?;
                code /= level.len();
                mem += cand.index_bytes;
                c += cost.of(cand);
            }
            if mem <= budget && best.is_none_or(|b| c < b) {
                best = Some(c);
            }
        }
        best
    }

    #[test]
    fn the_plan_matches_brute_force_and_keeps_the_budget() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for case in 0..300 {
            let levels: Vec<Vec<Candidate>> = (0..rng.gen_range(1..5))
                .map(|_| {
                    (0..rng.gen_range(1..5))
                        .map(|i| {
                            cand(
                                2 << i,
                                rng.gen_range(0..10_000),
                                rng.gen_range(0.0..1.0),
                                rng.gen_range(4096.0..40_000.0),
                            )
                        })
                        .collect()
                })
                .collect();
            let budget = rng.gen_range(0..25_000);
            let cost = ReadCost {
                first_us: 60.0,
                next_us: 8.0,
                unit: "us",
            };
            let got = plan(&levels, budget, cost);
            let want = brute_force(&levels, budget, cost);
            match (&got, want) {
                (None, None) => {}
                (Some(p), Some(w)) => {
                    assert!((p.cost - w).abs() < 1e-9, "case {case}: {} vs {w}", p.cost);
                    assert!(p.index_bytes <= budget, "case {case}");
                    assert_eq!(p.boundaries.len(), levels.len(), "case {case}");
                    let (mem, c) =
                        p.boundaries
                            .iter()
                            .zip(&levels)
                            .fold((0u64, 0.0), |(m, c), (b, level)| {
                                let Some(x) = level.iter().find(|x| x.boundary == *b) else {
                                    panic!("case {case}: B={b} is not a candidate");
                                };
                                (m + x.index_bytes, c + cost.of(x))
                            });
                    assert_eq!(mem, p.index_bytes, "case {case}");
                    assert!((c - p.cost).abs() < 1e-9, "case {case}");
                }
                _ => panic!("case {case}: plan {got:?}, brute force {want:?}"),
            }
        }
    }

    #[test]
    fn a_small_hot_level_gets_the_small_boundary() {
        // L1: small and read often; L2: large and read less. The budget affords B = 2 at one
        // level only: it must go where it saves the most per byte, L1.
        let levels = vec![
            vec![cand(2, 1_000, 0.5, 5_800.0), cand(16, 100, 0.5, 19_000.0)],
            vec![
                cand(2, 20_000, 0.3, 5_800.0),
                cand(16, 2_000, 0.3, 19_000.0),
            ],
        ];
        let cost = ReadCost {
            first_us: 60.0,
            next_us: 8.0,
            unit: "us",
        };
        let chosen = |budget| plan(&levels, budget, cost).map(|p| (p.boundaries, p.index_bytes));
        assert_eq!(chosen(5_000), Some((vec![2, 16], 3_000)));
        assert_eq!(chosen(2_099), None);
        assert_eq!(chosen(21_000), Some((vec![2, 2], 21_000)));
    }

    #[test]
    fn a_level_never_read_costs_nothing_at_any_boundary() {
        let c = cand(2, 10, 0.0, 0.0);
        assert_eq!(ReadCost::PAGES.of(&c), 0.0);
        assert_eq!(ReadCost::PAGES.of_read(100.0), 1.0);
        assert_eq!(ReadCost::PAGES.of_read(3.0 * 4096.0), 3.0);
    }
}
