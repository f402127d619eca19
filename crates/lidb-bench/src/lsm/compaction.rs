//! Compaction overhead (papers' section 5.4, Figure 11, Observation 5): a write-only load per
//! (index, boundary), and how the engine's compaction time splits into reading inputs, merging,
//! writing outputs, training models and writing index blocks.
//!
//! Every configuration loads afresh (never reused: the load is what is measured), with
//! compactions inline, so every index pays for exactly the same flushes and merges; flushes
//! train models too, and their time is included in the split. An unclustered index (alex, lipp,
//! dili, lits) is trained when its new table opens, from the mapped-keys block; that build
//! counts as training too (`Table::unclustered_build_time`).

use std::time::Duration;

use lidb_lsm::DbStats;
use serde::Serialize;

use super::load::{self, human_size};
use super::{Config, Error, TableRow, WorkDir, index_options};

/// One configuration's load. Field names are the JSON names; times in seconds.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionRow {
    pub index: String,
    pub boundary: u64,
    pub keys: u64,
    pub load_s: f64,
    pub flushes: u64,
    pub compactions: u64,
    /// read + merge + write + train + index_write.
    pub compaction_s: f64,
    pub read_s: f64,
    pub merge_s: f64,
    pub write_s: f64,
    pub train_s: f64,
    pub index_write_s: f64,
    /// (train + index_write) / compaction.
    pub learning_share: f64,
    pub stall_s: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub index_bytes: u64,
}

impl TableRow for CompactionRow {
    fn header() -> &'static [&'static str] {
        &[
            "index",
            "boundary",
            "load_s",
            "flushes",
            "compactions",
            "compaction_s",
            "read_s",
            "merge_s",
            "write_s",
            "train_s",
            "index_write_s",
            "learning_%",
            "stall_s",
            "written",
            "index_bytes",
        ]
    }

    fn cells(&self) -> Vec<String> {
        let s = |v: f64| format!("{v:.3}");
        vec![
            self.index.clone(),
            self.boundary.to_string(),
            s(self.load_s),
            self.flushes.to_string(),
            self.compactions.to_string(),
            s(self.compaction_s),
            s(self.read_s),
            s(self.merge_s),
            s(self.write_s),
            s(self.train_s),
            s(self.index_write_s),
            format!("{:.1}", self.learning_share * 100.0),
            s(self.stall_s),
            human_size(self.bytes_written),
            self.index_bytes.to_string(),
        ]
    }
}

pub fn run(
    cfg: &Config,
    work: &WorkDir,
    notes: &mut Vec<String>,
) -> Result<Vec<CompactionRow>, Error> {
    notes.push(
        "each configuration is a fresh write-only load (no lookups), compactions inline".into(),
    );
    let mut rows = Vec::new();
    for (family, b) in cfg.configurations() {
        let dir = work.path(&format!("compaction-{}-{b}", family.name()));
        load::wipe(&dir)?;
        let started = std::time::Instant::now();
        let db = load::load(
            &dir,
            &cfg.data,
            cfg.engine.options(index_options(family, b)),
            cfg.progress,
        )?;
        let load_s = started.elapsed().as_secs_f64();
        let stats = db.stats();
        let index_bytes = db.memory_usage().index_bytes;
        db.close()?;
        // Never reused: the directory has no marker, so remove it now (wipe refuses non-empty
        // unmarked directories).
        std::fs::remove_dir_all(&dir).map_err(load::io_err(&dir))?;
        rows.push(row(
            &family.name(),
            b,
            cfg.data.keys.len() as u64,
            load_s,
            &stats,
            index_bytes,
        ));
    }
    Ok(rows)
}

fn row(
    index: &str,
    boundary: u64,
    keys: u64,
    load_s: f64,
    st: &DbStats,
    index_bytes: u64,
) -> CompactionRow {
    let c = &st.compaction;
    let secs = Duration::as_secs_f64;
    let total = c.read_time + c.merge_time + c.write_time + c.train_time + c.index_write_time;
    let learning = c.train_time + c.index_write_time;
    CompactionRow {
        index: index.to_string(),
        boundary,
        keys,
        load_s,
        flushes: c.flushes,
        compactions: c.compactions,
        compaction_s: secs(&total),
        read_s: secs(&c.read_time),
        merge_s: secs(&c.merge_time),
        write_s: secs(&c.write_time),
        train_s: secs(&c.train_time),
        index_write_s: secs(&c.index_write_time),
        learning_share: if total.is_zero() {
            0.0
        } else {
            secs(&learning) / secs(&total)
        },
        stall_s: secs(&c.stall_time),
        bytes_read: c.bytes_read,
        bytes_written: c.bytes_written,
        index_bytes,
    }
}
