//! Index granularity (papers' section 5.5, Figure 12, Observation 6): index memory and lookup
//! latency for table sizes 8 to 128 MiB and for one model per level.
//!
//! One load per table size (the write buffer stays the same, so levels have the same targets);
//! configurations re-index it. Level models are built by compaction, so level granularity loads
//! once per configuration, with the run's table size. When the run's sizes were scaled to a small
//! data set, the table sizes are scaled by the same factor (noted in the report).

use lidb_lsm::Granularity;

use super::load::{Engine, PAPER_SST_BYTES, format_size};
use super::pareto::{LookupRow, lookup_rows};
use super::{Config, Error, WorkDir};

/// The papers' table sizes, in MiB.
pub const PAPER_SST_MIB: [u64; 5] = [8, 16, 32, 64, 128];
/// The smallest table the engine accepts.
const MIN_SST_BYTES: u64 = 16 << 10;

/// The table sizes of the experiment: the papers' ones, scaled by `sst / 64 MiB` if `scaled`.
pub fn table_sizes(engine: &Engine) -> Vec<u64> {
    let mut sizes: Vec<u64> = PAPER_SST_MIB
        .iter()
        .map(|mib| {
            let paper = mib << 20;
            if engine.scaled {
                (paper / (PAPER_SST_BYTES / engine.sst_size_bytes.max(1)).max(1)).max(MIN_SST_BYTES)
            } else {
                paper
            }
        })
        .collect();
    sizes.dedup();
    sizes
}

pub fn run(cfg: &Config, work: &WorkDir, notes: &mut Vec<String>) -> Result<Vec<LookupRow>, Error> {
    let sizes = table_sizes(&cfg.engine);
    let names: Vec<String> = sizes.iter().map(|&s| format_size(s)).collect();
    notes.push(format!(
        "table sizes {} (papers: 8..128MiB{}), then level granularity with {} tables",
        names.join(","),
        if cfg.engine.scaled {
            ", scaled like the run's table size"
        } else {
            ""
        },
        format_size(cfg.engine.sst_size_bytes)
    ));
    let mut rows = Vec::new();
    for sst in sizes {
        let engine = Engine {
            sst_size_bytes: sst,
            granularity: Granularity::Table,
            ..cfg.engine
        };
        rows.extend(lookup_rows(cfg, work, engine, notes)?);
    }
    let level = Engine {
        granularity: Granularity::Level,
        ..cfg.engine
    };
    rows.extend(lookup_rows(cfg, work, level, notes)?);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sizes_scale_with_the_run() {
        let e = Engine::resolve(200 << 20, None, None, Granularity::Table, false);
        assert_eq!(
            table_sizes(&e),
            vec![64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20]
        );
        let e = Engine::resolve(1 << 20, None, None, Granularity::Table, false);
        assert_eq!(
            table_sizes(&e),
            vec![16 << 10, 32 << 10, 64 << 10, 128 << 10]
        );
        let e = Engine::resolve(200 << 20, Some(4 << 20), None, Granularity::Table, false);
        assert_eq!(
            table_sizes(&e),
            vec![8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20]
        );
    }
}
