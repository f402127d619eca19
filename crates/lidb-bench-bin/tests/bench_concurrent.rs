//! End-to-end tests of `bench concurrent` in the `lidb-bench` binary (the one with the peers and
//! the counting allocator): a tiny run of every index over workloads a and
//! insert at 1 and 2 threads gives JSON lines with the documented fields and nonzero throughput
//! for every (index, workload, threads); the updatable peers (alex, lipp, dili) run every
//! operation type and report their own memory; a data set too small names its shortfall. The skew
//! workload gives insert and read rows per hotspot ratio, the timeline's intervals add up to each
//! phase's operations, and bad --hotspot / --timeline-ms values are refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `lidb-bench ARGS`.
fn lidb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb-bench"))
        .args(args)
        .output()
        .expect("run lidb-bench")
}

const FIELDS: [&str; 8] = [
    "index",
    "concurrent",
    "workload",
    "threads",
    "op",
    "kops_per_s",
    "p50_us",
    "p99_us",
];

#[test]
fn every_index_runs_a_and_insert_at_one_and_two_threads() {
    let out = lidb(&[
        "bench",
        "concurrent",
        "--index",
        "all",
        "--workload",
        "a,insert",
        "--threads",
        "1,2",
        "--records",
        "3000",
        "--ops",
        "2000",
        "--data",
        "synthetic:lognormal:10K",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("cores="), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut runs = BTreeSet::new();
    for line in stdout.lines() {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for f in FIELDS.iter().chain(&["bytes_per_key"]) {
            assert!(row.get(f).is_some(), "no {f} in {line}");
        }
        assert!(row["kops_per_s"].as_f64().unwrap() > 0.0, "{line}");
        assert_eq!(row["errors"].as_u64(), Some(0), "{line}");
        // This binary installs the counting allocator: every bulk load is counted.
        assert!(
            row["counted_bytes_per_key"].as_f64().unwrap() > 0.0,
            "{line}"
        );
        assert!(!stderr.contains("no counting allocator"), "{stderr}");
        if row["op"] == "all" {
            runs.insert((
                row["index"].as_str().unwrap().to_string(),
                row["workload"].as_str().unwrap().to_string(),
                row["threads"].as_u64().unwrap(),
            ));
        }
    }
    for i in INDEXES {
        for w in ["a", "insert"] {
            for t in [1, 2] {
                assert!(
                    runs.contains(&(i.to_string(), w.to_string(), t)),
                    "{i} {w} {t}"
                );
            }
        }
    }
}

#[test]
fn a_data_set_too_small_names_the_shortfall() {
    let out = lidb(&[
        "bench",
        "concurrent",
        "--index",
        "finedex",
        "--workload",
        "insert",
        "--records",
        "900",
        "--ops",
        "500",
        "--data",
        "synthetic:lognormal:1K",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("short"), "{stderr}");
}

const INDEXES: [&str; 9] = [
    "finedex",
    "btree-rwlock",
    "skipmap",
    "scc-tree",
    "congee",
    "li+delta",
    "alex",
    "lipp",
    "dili",
];

/// The updatable learned indexes behind their RwLock: every operation type (e: scans, f:
/// read-modify-write, d: inserts and latest reads) checked at 1 and 2 threads, with memory from
/// their own `size_bytes()` after the load and at the end.
#[test]
fn updatable_peers_run_every_operation_with_their_own_memory_report() {
    let out = lidb(&[
        "bench",
        "concurrent",
        "--index",
        "alex,lipp,dili",
        "--workload",
        "d,e,f",
        "--threads",
        "1,2",
        "--records",
        "3000",
        "--ops",
        "1000",
        "--data",
        "synthetic:lognormal:10K",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("single-writer"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut runs = BTreeSet::new();
    for line in stdout.lines() {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(row["errors"].as_u64(), Some(0), "{line}");
        assert_eq!(row["concurrent"], true, "{line}");
        assert_eq!(row["bytes_source"], "index", "{line}");
        assert!(row["bytes_per_key"].as_f64().unwrap() >= 16.0, "{line}");
        assert!(row["end_bytes_per_key"].as_f64().unwrap() > 0.0, "{line}");
        runs.insert((
            row["index"].as_str().unwrap().to_string(),
            row["workload"].as_str().unwrap().to_string(),
            row["threads"].as_u64().unwrap(),
        ));
    }
    for i in ["alex", "lipp", "dili"] {
        for w in ["d", "e", "f"] {
            for t in [1, 2] {
                assert!(runs.contains(&(i.into(), w.into(), t)), "{i} {w} {t}");
            }
        }
    }
}

#[test]
fn skew_with_a_timeline_gives_insert_and_read_rows_per_hotspot() {
    let out = lidb(&[
        "bench",
        "concurrent",
        "--workload",
        "skew",
        "--hotspot",
        "0.05,1",
        "--threads",
        "1,2",
        "--records",
        "3000",
        "--ops",
        "2000",
        "--data",
        "synthetic:lognormal:10K",
        "--timeline-ms",
        "1",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("hotspot=0.05,1"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    // (index, hotspot, threads, op) -> ops, from result rows and summed from timeline rows.
    let mut results = BTreeMap::new();
    let mut timeline = BTreeMap::new();
    for line in stdout.lines() {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let key = (
            row["index"].as_str().unwrap().to_string(),
            row["hotspot"].to_string(),
            row["threads"].as_u64().unwrap(),
            row["op"].as_str().unwrap().to_string(),
        );
        assert_eq!(row["workload"], "skew", "{line}");
        match row["row"].as_str() {
            Some("result") => {
                for f in FIELDS.iter().chain(&["hot_lo", "hot_hi", "build_ms"]) {
                    assert!(row.get(f).is_some(), "no {f} in {line}");
                }
                assert_eq!(row["errors"].as_u64(), Some(0), "{line}");
                let finedex = row["index"] == "finedex";
                assert_eq!(row["model_bytes"].is_u64(), finedex, "{line}");
                results.insert(key, row["ops"].as_u64().unwrap());
            }
            Some("timeline") => {
                for f in ["interval", "t_ms", "kops_per_s", "model_retrains"] {
                    assert!(row.get(f).is_some(), "no {f} in {line}");
                }
                *timeline.entry(key).or_insert(0) += row["ops"].as_u64().unwrap();
            }
            _ => panic!("no row kind: {line}"),
        }
    }
    for i in INDEXES {
        for h in ["0.05", "1.0"] {
            for t in [1, 2] {
                for op in ["insert", "read"] {
                    let key = (i.to_string(), h.to_string(), t, op.to_string());
                    assert_eq!(results.get(&key), Some(&2000), "{key:?}");
                    // No errors: the intervals add up to the checked operations.
                    assert_eq!(timeline.get(&key), Some(&2000), "{key:?}");
                }
            }
        }
    }
}

fn refused(extra: &[&str]) -> String {
    let mut args = vec![
        "bench",
        "concurrent",
        "--index",
        "btree-rwlock",
        "--threads",
        "1",
        "--records",
        "900",
        "--ops",
        "500",
        "--data",
        "synthetic:uniform_dense:2K",
    ];
    args.extend_from_slice(extra);
    let out = lidb(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{extra:?} was accepted: {stderr}");
    stderr
}

#[test]
fn bad_hotspots_and_timelines_are_refused() {
    for bad in ["0", "1.5", "abc", "0.1,-1"] {
        let e = refused(&["--workload", "skew", "--hotspot", bad]);
        assert!(
            e.contains("--hotspot") && e.contains("(0, 1]"),
            "{bad}: {e}"
        );
    }
    let e = refused(&["--workload", "c", "--hotspot", "0.1"]);
    assert!(e.contains("only to --workload skew"), "{e}");
    let e = refused(&["--workload", "skew", "--timeline-ms", "0"]);
    assert!(e.contains("--timeline-ms"), "{e}");
}

#[test]
fn a_hot_window_too_small_names_the_shortfall() {
    // 900 of 2000 consecutive keys loaded: a window of 1% holds about 11 keys that are not.
    let e = refused(&["--workload", "skew", "--hotspot", "0.01"]);
    assert!(e.contains("--hotspot 0.01") && e.contains("short"), "{e}");
}
