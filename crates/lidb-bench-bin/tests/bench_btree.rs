//! End-to-end tests of `bench btree` in the `lidb-bench` binary (the one with the peers): a tiny run of each experiment over every engine
//! (learnedstore, btree, redb, lmdb) gives JSON rows with the issue's field names, one per engine
//! (three per engine for writes), and bad options fail with one-line errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;

const FIELDS: [&str; 11] = [
    "experiment",
    "data",
    "engine",
    "op",
    "kops_per_s",
    "mean_us",
    "p50_us",
    "p99_us",
    "reads_per_op",
    "seed",
    "pool_bytes",
];

fn lidb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb-bench"))
        .args(args)
        .output()
        .expect("run lidb-bench")
}

fn run(experiment: &str, extra: &[&str]) -> Vec<Value> {
    // Each call gets a directory of its own, removed when the call ends (also by a panic).
    let dir = Scratch::new(&format!("bench-btree-{experiment}"));
    let d = dir.display().to_string();
    let mut args = vec![
        "bench",
        "btree",
        "--experiment",
        experiment,
        "--data",
        "synthetic:piecewise:4K",
        "--ops",
        "1K",
        "--seconds",
        "0.4",
        "--interval-ms",
        "100",
        "--json",
        "--dir",
        &d,
    ];
    args.extend_from_slice(extra);
    let out = lidb(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{experiment}: {stderr}");
    assert!(
        stderr.contains("seed=42"),
        "config line on stderr: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("the scratch directory")
        .map(|e| e.map(|e| e.file_name()))
        .collect();
    assert!(left.is_empty(), "{experiment} left files behind: {left:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect()
}

#[test]
fn every_experiment_gives_rows_with_the_issue_fields() {
    for (experiment, per_engine) in [("memory", 1), ("partial", 1), ("cold", 1), ("writes", 3)] {
        let rows = run(experiment, &[]);
        // partial adds the paper's simulated row (inner nodes missed with probability 0.01 on
        // a resident store) for the engines with the hook: learnedstore and btree.
        let simulated = rows
            .iter()
            .filter(|r| r.get("simulated") == Some(&serde_json::Value::Bool(true)))
            .count();
        let want_simulated = if experiment == "partial" { 2 } else { 0 };
        assert_eq!(simulated, want_simulated, "{experiment}: {rows:?}");
        assert_eq!(
            rows.len(),
            4 * per_engine + simulated,
            "{experiment}: {rows:?}"
        );
        for row in &rows {
            for field in FIELDS {
                assert!(
                    row.get(field).is_some(),
                    "{experiment}: {field} missing in {row}"
                );
            }
            assert_eq!(row["experiment"], experiment);
            assert_eq!(
                row.get("time_to_90_s").is_some(),
                experiment == "cold",
                "{row}"
            );
        }
        let engines: Vec<&str> = rows.iter().filter_map(|r| r["engine"].as_str()).collect();
        for engine in ["learnedstore", "btree", "redb", "lmdb"] {
            assert!(engines.contains(&engine), "{engine} missing: {engines:?}");
        }
    }
}

#[test]
fn a_sweep_of_leaf_models_runs_in_one_command() {
    let engines = "learnedstore:rs/16,learnedstore:pgm/64,btree";
    let rows = run("memory", &["--engine", engines]);
    let names: Vec<&str> = rows.iter().filter_map(|r| r["engine"].as_str()).collect();
    assert_eq!(names, engines.split(',').collect::<Vec<_>>(), "{rows:?}");
    for row in &rows {
        assert!(row["kops_per_s"].as_f64().is_some_and(|k| k > 0.0), "{row}");
    }
}

#[test]
fn bad_options_are_one_line_errors() {
    for (args, want) in [
        (vec!["--experiment", "warm"], "unknown experiment"),
        (
            vec!["--engine", "learnedstore,nosuch"],
            "unknown engine 'nosuch'",
        ),
        (vec!["--engine", "nosuch"], "unknown engine"),
        (
            vec!["--engine", "learnedstore:rs/1"],
            "the error bound is at least 2",
        ),
        (vec!["--engine", "learnedstore:nope/16"], "unknown index"),
        (vec!["--pool", "12XB"], "--pool"),
        (
            vec!["--experiment", "partial", "--pool", "1GiB"],
            "smaller than the tree",
        ),
        (vec!["--value-size", "4"], "--value-size"),
    ] {
        let mut all = vec!["bench", "btree", "--data", "synthetic:randomgen:1K"];
        all.extend(args.iter().copied());
        let out = lidb(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}
