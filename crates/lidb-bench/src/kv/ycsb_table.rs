//! The table of `lidb bench ycsb` for people (its JSON rows are [`super::ycsb::YcsbRow`] as
//! they are). Pure; any thread.

use super::scaling;
use super::ycsb::Report;

impl Report {
    /// The rows for people: throughput, scaling and latency per (engine, threads, phase, op)
    /// with the device multiples, then Table 1's space split and the read split, then memory
    /// and device reads, per (engine, threads, phase).
    pub fn table(&self) -> String {
        let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |x| format!("{x:.digits$}"));
        let ops: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.engine.clone(),
                    r.threads.to_string(),
                    format!("P{}", r.phase),
                    r.op.clone(),
                    r.ops.to_string(),
                    format!("{:.1}", r.kops_per_s),
                    scaling::cell(r.scaling),
                    format!("{:.1}", r.p50_us),
                    format!("{:.1}", r.mean_us),
                    format!("{:.1}", r.p99_us),
                    format!("{:.1}", r.p999_us),
                    opt(r.device.p50_x_device, 2),
                    opt(r.device.mean_x_device, 2),
                    opt(r.device.p50_x_device_typical, 2),
                ]
            })
            .collect();
        let per_phase = || self.rows.iter().filter(|r| r.op == "all");
        let space: Vec<Vec<String>> = per_phase()
            .map(|r| {
                vec![
                    r.engine.clone(),
                    r.threads.to_string(),
                    format!("P{}", r.phase),
                    r.lsm_bytes.to_string(),
                    r.key_list_bytes.to_string(),
                    r.model_bytes.to_string(),
                    r.vlog_bytes.to_string(),
                    r.reads_lsm.to_string(),
                    r.reads_tier.to_string(),
                    r.gcs.to_string(),
                ]
            })
            .collect();
        let memory: Vec<Vec<String>> = per_phase()
            .map(|r| {
                vec![
                    r.engine.clone(),
                    r.threads.to_string(),
                    format!("P{}", r.phase),
                    r.index_bytes.to_string(),
                    r.filter_bytes.to_string(),
                    r.cache_bytes.to_string(),
                    r.memory_bytes.to_string(),
                    r.memtable_bytes.to_string(),
                    r.budget_bytes.map_or("-".into(), |b| b.to_string()),
                    r.budget.clone(),
                    opt(r.device_reads_per_op, 3),
                    opt(r.device_bytes_per_read, 0),
                    opt(r.write_amp, 2),
                    opt(r.space_amp, 2),
                ]
            })
            .collect();
        let mut out = crate::table::render(
            &[
                "engine",
                "threads",
                "phase",
                "op",
                "ops",
                "kops/s",
                "scaling",
                "p50_us",
                "mean_us",
                "p99_us",
                "p999_us",
                "p50_x_dev4k",
                "mean_x_dev4k",
                "p50_x_dev_typ",
            ],
            &ops,
        );
        out.push('\n');
        out.push_str(&crate::table::render(
            &[
                "engine",
                "threads",
                "phase",
                "lsm_bytes",
                "key_list_bytes",
                "model_bytes",
                "vlog_bytes",
                "reads_lsm",
                "reads_tier",
                "gcs",
            ],
            &space,
        ));
        out.push('\n');
        out.push_str(&crate::table::render(
            &[
                "engine",
                "threads",
                "phase",
                "index_bytes",
                "filter_bytes",
                "cache_bytes",
                "memory_bytes",
                "memtable_bytes",
                "budget_bytes",
                "budget",
                "dev_reads/op",
                "bytes/dev_read",
                "write_amp",
                "space_amp",
            ],
            &memory,
        ));
        out
    }
}
