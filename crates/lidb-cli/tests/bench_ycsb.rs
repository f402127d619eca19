//! End-to-end tests of `lidb bench ycsb` and `lidb bench scan`: tiny runs over lidb's five
//! engines give JSON rows with exactly the documented names, every (engine, phase, op) present,
//! and engine-name mistakes fail with one-line errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;

const ENGINES: [&str; 5] = ["lsm", "learnedkv", "lsm+", "lsm+tier", "finedex"];

const YCSB_FIELDS: [&str; 39] = [
    "engine",
    "workload",
    "distribution",
    "engine_version",
    "threads",
    "scaling",
    "phase",
    "op",
    "ops",
    "kops_per_s",
    "p50_us",
    "p99_us",
    "p999_us",
    "lsm_bytes",
    "key_list_bytes",
    "model_bytes",
    "vlog_bytes",
    "write_amp",
    "space_amp",
    "reads_lsm",
    "reads_tier",
    "gcs",
    "mean_us",
    "device_reads_per_op",
    "device_bytes_per_read",
    "memory_bytes",
    "index_bytes",
    "filter_bytes",
    "cache_bytes",
    "memtable_bytes",
    "budget_bytes",
    "budget",
    "device_p50_us",
    "device_mean_us",
    "p50_x_device",
    "mean_x_device",
    "typical_read_bytes",
    "device_typical_p50_us",
    "p50_x_device_typical",
];

const SCAN_FIELDS: [&str; 8] = [
    "engine",
    "phase",
    "scans",
    "scans_per_s",
    "mb_per_s",
    "entries_per_scan",
    "device_reads_per_scan",
    "device_kb_per_scan",
];

fn lidb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(args)
        .output()
        .expect("run lidb")
}

/// Runs `lidb` with `args` plus `--json --dir <scratch>`; returns the rows and stderr.
fn rows(name: &str, args: &[&str]) -> (Vec<Value>, String) {
    let dir = Scratch::new(&format!("bench-ycsb-{name}"));
    let mut all: Vec<&str> = args.to_vec();
    let d = dir.display().to_string();
    all.extend(["--json", "--dir", &d]);
    // The device probe writes a 256 MiB file: only the test of the device columns runs it.
    if args.get(1) == Some(&"ycsb") && !args.contains(&"--device-probe-reads") {
        all.extend(["--device-probe-reads", "0"]);
    }
    let o = lidb(&all);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "lidb {all:?} failed: {err}");
    let rows = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "engine directories left behind"
    );
    (rows, err)
}

fn fields(row: &Value) -> BTreeSet<String> {
    row.as_object().unwrap().keys().cloned().collect()
}

fn ycsb(workload: &str, expected_ops: &[&str]) {
    let (rows, err) = rows(
        &format!("ycsb-{workload}"),
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm,learnedkv,lsm+,lsm+tier,finedex",
            "--workload",
            workload,
            "--records",
            "2000",
            "--ops-per-phase",
            "2000",
            "--value-size",
            "100",
        ],
    );
    assert!(err.contains("seed=42"), "config line on stderr: {err}");
    let want: BTreeSet<String> = YCSB_FIELDS.iter().map(|s| s.to_string()).collect();
    for row in &rows {
        assert_eq!(fields(row), want, "{row}");
        assert!(row["kops_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p50_us"].as_f64().unwrap() <= row["p99_us"].as_f64().unwrap());
        assert!(row["p99_us"].as_f64().unwrap() <= row["p999_us"].as_f64().unwrap());
    }
    for engine in ENGINES {
        let has = |phase: u64, op: &str| {
            rows.iter()
                .any(|r| r["engine"] == engine && r["phase"] == phase && r["op"] == op)
        };
        assert!(has(0, "insert") && has(0, "all"), "{engine} P0");
        for phase in 1..=3 {
            for op in expected_ops.iter().chain(&["all"]) {
                assert!(has(phase, op), "{engine} phase {phase} op {op}");
            }
            let all = rows
                .iter()
                .find(|r| r["engine"] == engine && r["phase"] == phase && r["op"] == "all")
                .unwrap();
            assert_eq!(all["ops"], 2000, "{all}");
        }
    }
    assert!(err.contains("ratio learnedkv/lsm"), "{err}");
}

#[test]
fn ycsb_a_rows_cover_every_engine_phase_and_op() {
    ycsb("a", &["read", "update"]);
}

#[test]
fn ycsb_e_scans_and_inserts() {
    ycsb("e", &["scan", "insert"]);
}

#[test]
fn ycsb_c_builds_the_tier_and_reads_from_it() {
    let (rows, err) = rows(
        "ycsb-c",
        &[
            "bench",
            "ycsb",
            "--engine",
            "learnedkv",
            "--workload",
            "c",
            "--records",
            "2000",
            "--ops-per-phase",
            "1000",
            "--phases",
            "1",
            "--value-size",
            "100",
            "--threads",
            "2",
        ],
    );
    assert!(err.contains("gc() after P0"), "{err}");
    let p1 = rows
        .iter()
        .find(|r| r["phase"] == 1 && r["op"] == "all")
        .unwrap();
    assert!(p1["key_list_bytes"].as_u64().unwrap() > 0, "{p1}");
    assert_eq!(p1["reads_tier"], 1000, "{p1}");
    assert!(p1["gcs"].as_u64().unwrap() >= 1, "{p1}");
}

#[test]
fn scan_rows_for_every_set() {
    let (rows, _) = rows(
        "scan",
        &[
            "bench",
            "scan",
            "--engine",
            "lsm,learnedkv,lsm+,lsm+tier,finedex",
            "--records",
            "3000",
            "--scans",
            "20",
            "--value-size",
            "100",
            "--scan-bytes",
            "10800",
        ],
    );
    let want: BTreeSet<String> = SCAN_FIELDS.iter().map(|s| s.to_string()).collect();
    assert_eq!(rows.len(), 15);
    for engine in ENGINES {
        for phase in ["no_updates", "updates_0.5N", "updates_N"] {
            let row = rows
                .iter()
                .find(|r| r["engine"] == engine && r["phase"] == phase)
                .unwrap_or_else(|| panic!("{engine} {phase}"));
            assert_eq!(fields(row), want, "{row}");
            assert_eq!(row["entries_per_scan"], 100.0, "{row}");
            assert!(row["scans_per_s"].as_f64().unwrap() > 0.0, "{row}");
            // finedex reads no file on a scan; the others count their reads.
            let reads = &row["device_reads_per_scan"];
            if engine == "finedex" {
                assert!(reads.is_null(), "{row}");
            } else {
                assert!(reads.as_f64().is_some_and(|r| r >= 0.0), "{row}");
            }
            // learnedkv's updated values are read from its value log, one read a span.
            if engine == "learnedkv" && phase == "updates_N" {
                assert!(reads.as_f64().unwrap() > 0.0, "{row}");
                assert!(row["device_kb_per_scan"].as_f64().unwrap() > 0.0, "{row}");
            }
        }
    }
}

fn one_line_error(args: &[&str], needle: &str) {
    // A directory per call: tests run in parallel threads of one process, and a shared one let
    // calls interfere (CI once saw an entry in the directory one call expected empty).
    let dir = Scratch::new("bench-ycsb-err");
    let d = dir.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--dir", &d, "--records", "100", "--value-size", "100"]);
    let o = lidb(&all);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn unknown_engine_is_a_one_line_error() {
    one_line_error(
        &["bench", "ycsb", "--engine", "lsm,leveldb"],
        "unknown engine \"leveldb\"",
    );
    one_line_error(&["bench", "scan", "--engine", "nope"], "unknown engine");
}

#[test]
#[cfg_attr(feature = "rocksdb", ignore = "rocksdb is built in")]
fn rocksdb_without_the_feature_is_not_built_in() {
    one_line_error(
        &["bench", "ycsb", "--engine", "rocksdb,learnedkv"],
        "not built in",
    );
}

#[test]
fn ycsb_c_settles_by_conversion_or_not_at_all() {
    let args = |settle: &'static str| {
        vec![
            "bench",
            "ycsb",
            "--engine",
            "learnedkv",
            "--workload",
            "c",
            "--records",
            "2000",
            "--ops-per-phase",
            "500",
            "--phases",
            "1",
            "--value-size",
            "100",
            "--settle",
            settle,
        ]
    };
    let p1 = |rows: &[Value]| {
        rows.iter()
            .find(|r| r["phase"] == 1 && r["op"] == "all")
            .unwrap()
            .clone()
    };
    // A conversion builds the tier without a GC: every read is the tier's.
    let (converted, err) = rows("ycsb-c-convert", &args("convert"));
    assert!(err.contains("learnedkv: convert() after P0"), "{err}");
    let row = p1(&converted);
    assert!(row["key_list_bytes"].as_u64().unwrap() > 0, "{row}");
    assert_eq!(
        (row["reads_tier"].clone(), row["gcs"].clone()),
        (500.into(), 0.into()),
        "{row}"
    );
    // Without settling, the load's LSM answers every read.
    let (unsettled, _) = rows("ycsb-c-none", &args("none"));
    let row = p1(&unsettled);
    assert_eq!(row["key_list_bytes"], 0, "{row}");
    assert_eq!(row["reads_lsm"], 500, "{row}");
    one_line_error(
        &["bench", "ycsb", "--workload", "c", "--settle", "later"],
        "expected gc, convert or none",
    );
    one_line_error(
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm",
            "--workload",
            "c",
            "--settle",
            "convert",
        ],
        "no conversion",
    );
}

/// `--engine finedex,lsm`: finedex's rows carry its log and checkpoint bytes, its notes name the
/// options it ignores and its index memory, a read-only workload's gc is its checkpoint, and
/// convert is refused.
#[test]
fn ycsb_finedex_beside_lsm() {
    let (rows, err) = rows(
        "ycsb-finedex",
        &[
            "bench",
            "ycsb",
            "--engine",
            "finedex,lsm",
            "--workload",
            "c",
            "--records",
            "2000",
            "--ops-per-phase",
            "1000",
            "--phases",
            "1",
            "--value-size",
            "100",
            "--threads",
            "2",
            "--memtable",
            "1MiB",
        ],
    );
    let p1 = rows
        .iter()
        .find(|r| r["engine"] == "finedex" && r["phase"] == 1 && r["op"] == "all")
        .unwrap();
    assert_eq!(p1["ops"], 1000, "{p1}");
    // After the checkpoint the files hold one copy of the 2000 records.
    assert!(p1["vlog_bytes"].as_u64().unwrap() > 2000 * 100, "{p1}");
    assert_eq!(
        (p1["lsm_bytes"].as_u64(), p1["gcs"].as_u64()),
        (Some(0), Some(0)),
        "{p1}"
    );
    for needle in [
        "finedex: gc() after P0",
        "finedex: index heap",
        "ratio lsm/finedex",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // --memtable is lsm's; finedex says it ignores it.
    let ignored = err
        .lines()
        .find(|l| l.contains("finedex: an in-memory index with a log"))
        .unwrap_or_else(|| panic!("no note of ignored options: {err}"));
    assert!(
        ignored.contains("memtable=1MiB") && ignored.contains("do not apply and are ignored"),
        "{ignored}"
    );
    assert!(!err.contains("lsm: an in-memory index"), "{err}");
    one_line_error(
        &[
            "bench",
            "ycsb",
            "--engine",
            "finedex",
            "--workload",
            "c",
            "--settle",
            "convert",
        ],
        "engine finedex has no conversion",
    );
}

/// `--engine learnedstore,btree,lsm`: LearnedStore with its learned path on and off runs every
/// phase; its rows carry the page file in lsm_bytes, its notes name the options it ignores and
/// the pool it ran with (--pool, here equal to --cache plus --memtable), a read-only workload's
/// gc is its checkpoint.
#[test]
fn ycsb_learnedstore_and_btree_beside_lsm() {
    let (rows, err) = rows(
        "ycsb-learnedstore",
        &[
            "bench",
            "ycsb",
            "--engine",
            "learnedstore,btree,lsm",
            "--workload",
            "c",
            "--records",
            "2000",
            "--ops-per-phase",
            "1000",
            "--phases",
            "1",
            "--value-size",
            "100",
            "--memtable",
            "1MiB",
            "--cache",
            "1MiB",
            "--pool",
            "2MiB",
            "--row-cache",
            "0.5",
        ],
    );
    assert!(
        err.contains("pool=2MiB row_cache=0.5 page_size=4096"),
        "config line: {err}"
    );
    for engine in ["learnedstore", "btree"] {
        let p1 = rows
            .iter()
            .find(|r| r["engine"] == engine && r["phase"] == 1 && r["op"] == "all")
            .unwrap_or_else(|| panic!("{engine}: no P1 row: {rows:?}"));
        assert_eq!(p1["ops"], 1000, "{p1}");
        // After the checkpoint the page file holds the 2000 records.
        assert!(p1["lsm_bytes"].as_u64().unwrap() > 2000 * 100, "{p1}");
        for needle in [
            format!("{engine}: gc() after P0"),
            format!("{engine}: a buffer-managed B+-tree under a write-ahead log"),
            "memtable=1MiB cache=1MiB".to_string(),
            "pool=2MiB row_cache_share=0.5 page_size=4096".to_string(),
            // Half the pool's 2 MiB is the row cache, which the zipfian gets hit.
            "of 1048576 bytes (".to_string(),
        ] {
            assert!(err.contains(&needle), "{needle}: {err}");
        }
        let rows_note = err
            .lines()
            .find(|l| l.contains(&format!("note: {engine}: pool ")))
            .unwrap_or_else(|| panic!("{engine}: no pool note: {err}"));
        assert!(!rows_note.contains("(0 hits,"), "{rows_note}");
    }
    assert!(err.contains("ratio btree/learnedstore"), "{err}");
}

/// `--memory`: lsm fits index + filters + cache into the budget and says so in every read
/// phase's row, learnedkv reports that its resident part alone is over it; the device probe runs in the same invocation
/// and every row carries its figures and the multiples (or a note says the file system refused
/// O_DIRECT); lsm counts its device reads.
#[test]
fn ycsb_memory_budget_and_device_columns() {
    let budget: u64 = 1 << 20;
    let (rows, err) = rows(
        "ycsb-memory",
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm,learnedkv",
            "--workload",
            "c",
            "--records",
            "3000",
            "--ops-per-phase",
            "1000",
            "--phases",
            "1",
            "--value-size",
            "1000",
            "--memory",
            "1MiB",
            "--device-probe-reads",
            "50",
        ],
    );
    assert!(err.contains("memory=1MiB"), "config line: {err}");
    let probed = !err.contains("no device multiples");
    for row in &rows {
        assert_eq!(row["budget_bytes"], budget, "{row}");
        if probed {
            assert!(row["device_p50_us"].as_f64().unwrap() > 0.0, "{row}");
            let x = row["p50_x_device"].as_f64().unwrap();
            let want = row["p50_us"].as_f64().unwrap() / row["device_p50_us"].as_f64().unwrap();
            assert!((x - want).abs() < 1e-9, "{row}");
        }
    }
    let p1 = |engine: &str| {
        rows.iter()
            .find(|r| r["engine"] == engine && r["phase"] == 1 && r["op"] == "all")
            .unwrap()
            .clone()
    };
    let lsm = p1("lsm");
    assert_eq!(lsm["budget"], "fits", "{lsm}");
    let memory = lsm["memory_bytes"].as_u64().unwrap();
    assert!(memory <= budget, "{lsm}");
    assert_eq!(
        memory,
        lsm["index_bytes"].as_u64().unwrap()
            + lsm["filter_bytes"].as_u64().unwrap()
            + lsm["cache_bytes"].as_u64().unwrap()
    );
    // 3 MB of values through a cache under 1 MiB: reads reach the device.
    assert!(lsm["device_reads_per_op"].as_f64().unwrap() > 0.1, "{lsm}");
    assert!(
        lsm["device_bytes_per_read"].as_f64().unwrap() >= 1000.0,
        "{lsm}"
    );
    // learnedkv fits its one cache too: after the gc() of workload C its every-key Bloom is
    // sized by the keys written (2 x 64K keys at the least, 160 KiB), so it fits 1 MiB.
    let kv = p1("learnedkv");
    assert_eq!(kv["budget"], "fits", "{kv}");
    let memory = kv["memory_bytes"].as_u64().unwrap();
    assert!(memory <= budget, "{kv}");
    assert_eq!(
        memory,
        kv["index_bytes"].as_u64().unwrap()
            + kv["filter_bytes"].as_u64().unwrap()
            + kv["cache_bytes"].as_u64().unwrap(),
        "{kv}"
    );
    // Its reads are counted too (value-log records, tables, key list and svlog).
    assert!(kv["device_reads_per_op"].as_f64().unwrap() > 0.5, "{kv}");
}

/// The matrix in one command: two workloads by two distributions give rows for each cell (named
/// by "workload" and "distribution"), a summary line per engine with a ratio per cell over the
/// first engine, and a heat map with one coloured cell per ratio.
#[test]
fn ycsb_matrix_of_workloads_and_distributions_with_a_summary_and_heat_map() {
    let out = Scratch::new("bench-ycsb-matrix-out");
    let svg = out.join("heat.svg");
    let svg_arg = svg.display().to_string();
    let (rows, err) = rows(
        "matrix",
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm,learnedkv",
            "--workload",
            "a,c",
            "--distribution",
            "uniform,zipfian",
            "--records",
            "2000",
            "--ops-per-phase",
            "1000",
            "--phases",
            "1",
            "--memtable",
            "256KiB",
            "--value-size",
            "100",
            "--heatmap",
            &svg_arg,
        ],
    );
    let mut cells = BTreeSet::new();
    for r in &rows {
        cells.insert((
            r["workload"].as_str().unwrap().to_string(),
            r["distribution"].as_str().unwrap().to_string(),
        ));
    }
    let want: BTreeSet<(String, String)> = [
        ("a", "uniform"),
        ("a", "zipfian:0.99"),
        ("c", "uniform"),
        ("c", "zipfian:0.99"),
    ]
    .iter()
    .map(|(w, d)| (w.to_string(), d.to_string()))
    .collect();
    assert_eq!(cells, want);
    let summary = err
        .lines()
        .find(|l| l.trim_start().starts_with("learnedkv"))
        .unwrap_or_else(|| panic!("no summary line for learnedkv: {err}"));
    let ratios: Vec<f64> = summary
        .split_whitespace()
        .skip(2)
        .map(|c| {
            c.parse()
                .unwrap_or_else(|e| panic!("{c}: {e} in {summary}"))
        })
        .collect();
    assert_eq!(ratios.len(), 4, "{summary}");
    assert!(ratios.iter().all(|r| *r > 0.0), "{summary}");
    let heat = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(heat.matches(r#"class="cell""#).count(), 4, "{heat}");
}

#[test]
fn a_heat_map_needs_two_engines() {
    one_line_error(
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm",
            "--heatmap",
            "/nonexistent/h.svg",
        ],
        "--heatmap compares engines",
    );
}
