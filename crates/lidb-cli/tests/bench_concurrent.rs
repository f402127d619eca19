//! End-to-end tests of `lidb bench concurrent`: a tiny run of every index over workloads a and
//! insert at 1 and 2 threads gives JSON lines with the documented fields and nonzero throughput
//! for every (index, workload, threads); a data set too small names its shortfall.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeSet;

use serde_json::Value;

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
    let out = support::lidb(
        &[
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
        ],
        "",
    );
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
        if row["op"] == "all" {
            runs.insert((
                row["index"].as_str().unwrap().to_string(),
                row["workload"].as_str().unwrap().to_string(),
                row["threads"].as_u64().unwrap(),
            ));
        }
    }
    let indexes = [
        "finedex",
        "btree-rwlock",
        "skipmap",
        "scc-tree",
        "congee",
        "li+delta",
    ];
    for i in indexes {
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
    let out = support::lidb(
        &[
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
        ],
        "",
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("short"), "{stderr}");
}
