//! End-to-end tests of `lidb bench lsm`: every experiment runs with tiny parameters, its JSON rows
//! carry the documented names, and options fail with one-line errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;

fn lidb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(args)
        .output()
        .expect("run lidb")
}

/// Runs `lidb bench lsm --json` with the tiny data set, options in `extra` (pairs of option and
/// value) replacing or adding to the defaults; returns the rows and stderr.
fn run_rows(extra: &[&str]) -> (Vec<Value>, String) {
    let mut opts: Vec<(&str, &str)> = vec![
        ("--data", "synthetic:uniform_sparse:20K"),
        ("--keys", "5000"),
        ("--value-size", "100"),
        ("--lookups", "500"),
        ("--index", "fp,pgm"),
        ("--boundary", "16"),
        // The device probe writes a 256 MiB file: only the test of the device columns runs it.
        ("--device-probe-reads", "0"),
    ];
    for pair in extra.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        match opts.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => opts.push((name, value)),
        }
    }
    let mut args = vec!["bench", "lsm", "--json"];
    for (n, v) in opts {
        args.extend([n, v]);
    }
    let o = lidb(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "lidb {args:?} failed: {err}");
    let rows = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (rows, err)
}

fn num(row: &Value, name: &str) -> f64 {
    row[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} missing in {row}"))
}

fn has_fields(row: &Value, names: &[&str]) {
    for n in names {
        assert!(row.get(n).is_some(), "{n} missing in {row}");
    }
    assert!(
        row["index"].is_string() && row["boundary"].is_u64(),
        "{row}"
    );
}

#[test]
fn pareto_reports_memory_and_on_disk_lookups_and_plots() {
    let dir = Scratch::new("bench-lsm-pareto");
    let svg = dir.join("pareto.svg");
    let db = dir.join("db");
    // 20K entries of 1 KB: 20 MB, beyond the 8 MiB cache, so lookups read from disk.
    let args = [
        "--keys",
        "20000",
        "--value-size",
        "1000",
        "--index",
        "fp,pgm,rmi",
        "--boundary",
        "16,64",
        "--db",
        db.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ];
    let (rows, err) = run_rows(&args);
    assert!(
        err.contains("seed=42") && err.contains("keys=20000"),
        "{err}"
    );
    assert_eq!(rows.len(), 6);
    for r in &rows {
        has_fields(
            r,
            &[
                "index_bytes",
                "filter_bytes",
                "lookup_us_mean",
                "lookup_us_p99",
                "reads_per_lookup",
                "bytes_read_per_lookup",
                "table_lookup_us",
                "predict_us",
                "io_us",
                "search_us",
            ],
        );
        let reads = num(r, "reads_per_lookup");
        assert!(reads.is_finite() && reads > 0.0, "{r}");
        assert!(num(r, "bytes_read_per_lookup") > 0.0 && num(r, "index_bytes") > 0.0);
        assert!(num(r, "lookup_us_p99") >= num(r, "lookup_us_mean") * 0.5);
    }
    let fp16 = rows
        .iter()
        .find(|r| r["index"] == "fp" && r["boundary"] == 16);
    let fp64 = rows
        .iter()
        .find(|r| r["index"] == "fp" && r["boundary"] == 64);
    assert!(num(fp16.unwrap(), "index_bytes") > num(fp64.unwrap(), "index_bytes"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches(r#"<path class="series""#).count(), 3);
    // A second run reuses the database in --db and measures the same index sizes.
    let (again, err) = run_rows(&args);
    assert!(err.contains("reused"), "{err}");
    let sizes = |rs: &[Value]| rs.iter().map(|r| num(r, "index_bytes")).collect::<Vec<_>>();
    assert_eq!(sizes(&rows), sizes(&again));
}

#[test]
fn granularity_covers_table_sizes_and_level_models() {
    let (rows, err) = run_rows(&["--experiment", "granularity"]);
    assert!(err.contains("table sizes"), "{err}");
    let level: Vec<_> = rows
        .iter()
        .filter(|r| r["granularity"] == "level")
        .collect();
    assert_eq!(level.len(), 2);
    assert!(rows.len() > 4);
    for r in &rows {
        has_fields(r, &["sst_size_bytes", "index_bytes", "lookup_us_mean"]);
    }
}

#[test]
fn compaction_splits_the_time_of_a_write_only_load() {
    let (rows, _) = run_rows(&["--experiment", "compaction"]);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        has_fields(
            r,
            &[
                "compaction_s",
                "read_s",
                "merge_s",
                "write_s",
                "train_s",
                "index_write_s",
                "learning_share",
                "bytes_written",
            ],
        );
        assert!(num(r, "compaction_s") > 0.0 && num(r, "bytes_written") > 0.0);
        let share = num(r, "learning_share");
        assert!((0.0..=1.0).contains(&share), "{r}");
    }
}

#[test]
fn levels_account_for_every_lookup() {
    let (rows, _) = run_rows(&["--experiment", "levels"]);
    for dist in ["uniform", "zipfian"] {
        for index in ["fp", "pgm"] {
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| r["distribution"] == dist && r["index"] == index)
                .collect();
            let lookups: f64 = mine.iter().map(|r| num(r, "lookups")).sum();
            assert_eq!(lookups, 500.0, "{dist} {index}");
            for r in mine {
                has_fields(r, &["level", "share", "lookup_us_mean", "reads_per_lookup"]);
            }
        }
    }
}

/// The per-level plan: one row per uniform B and a plan row; the plan's measured index bytes fit
/// the budget, and a budget between the uniform B = 2 and B = 16 indexes is not met by B = 2.
#[test]
fn level_plan_fits_the_index_budget() {
    let (probe, _) = run_rows(&["--index", "pgm", "--boundary", "2,16"]);
    let (b2, b16) = (num(&probe[0], "index_bytes"), num(&probe[1], "index_bytes"));
    assert!(b16 < b2, "{probe:?}");
    let budget = ((b2 + b16) / 2.0) as u64;
    let (rows, err) = run_rows(&[
        "--experiment",
        "level-plan",
        "--index",
        "pgm",
        "--boundary",
        "2,4,16",
        "--index-memory",
        &budget.to_string(),
    ]);
    assert!(err.contains("level plan: L0"), "{err}");
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        has_fields(
            r,
            &[
                "config",
                "boundaries",
                "index_bytes",
                "within_budget",
                "predicted_cost",
            ],
        );
        assert_eq!(num(r, "lookups"), 500.0, "{r}");
    }
    assert_eq!(rows[0]["within_budget"], false, "{rows:?}");
    let plan = &rows[3];
    assert_eq!(plan["config"], "plan");
    assert!(num(plan, "index_bytes") <= budget as f64, "{plan}");
    assert_eq!(plan["within_budget"], true);
    let o = lidb(&[
        "bench",
        "lsm",
        "--experiment",
        "level-plan",
        "--index",
        "pgm",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--index-memory"));
}

/// The LSM study's Figure 5 kinds and its mapped-keys variant, over variable-length keys: every
/// lookup and seek is checked by the bench itself; the unclustered structures and the retained
/// images cost more memory than the model alone (Observation 3).
#[test]
fn unclustered_and_mapped_keys_run_on_variable_length_keys() {
    let kinds = ["pgm", "pgm+keys", "alex", "lipp", "dili", "lits"];
    let index = kinds.join(",");
    for experiment in ["pareto", "range"] {
        let (rows, err) = run_rows(&[
            "--experiment",
            experiment,
            "--index",
            &index,
            "--key-size",
            "8..24",
            "--range-len",
            "10",
        ]);
        assert!(err.contains("key_size=8..24"), "{err}");
        assert_eq!(rows.len(), kinds.len(), "{rows:?}");
        if experiment == "pareto" {
            let bytes = |name: &str| {
                num(
                    rows.iter().find(|r| r["index"] == name).unwrap(),
                    "index_bytes",
                )
            };
            for k in &kinds[1..] {
                assert!(bytes(k) > bytes("pgm"), "{k}: {rows:?}");
            }
        }
    }
}

#[test]
fn range_times_seek_and_scan() {
    let (rows, _) = run_rows(&["--experiment", "range", "--range-len", "10"]);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        has_fields(r, &["seek_us_mean", "scan_us_mean", "entries_per_s"]);
        assert_eq!(num(r, "range_len"), 10.0);
        assert!(num(r, "entries_per_s") > 0.0);
    }
}

#[test]
fn ycsb_reports_each_operation_type() {
    for (workload, ops) in [("a", ["read", "update"]), ("e", ["scan", "insert"])] {
        let (rows, _) = run_rows(&[
            "--experiment",
            "ycsb",
            "--workload",
            workload,
            "--ops",
            "500",
        ]);
        for index in ["fp", "pgm"] {
            for op in ops.iter().chain(&["all"]) {
                let r = rows.iter().find(|r| r["index"] == index && r["op"] == *op);
                let r = r.unwrap_or_else(|| panic!("no {op} row for {index} in {rows:?}"));
                has_fields(r, &["op_us_mean", "op_us_p99", "kops_per_s", "workload"]);
            }
            let all = rows
                .iter()
                .find(|r| r["index"] == index && r["op"] == "all");
            assert_eq!(num(all.unwrap(), "ops"), 500.0);
        }
    }
}

#[test]
fn bad_options_fail_with_one_line() {
    for (args, needle) in [
        (vec!["--sst-size", "2MiB"], "--sst-size"),
        (vec!["--sst-size", "64XB"], "--sst-size"),
        (vec!["--key-size", "10"], "--key-size"),
        (vec!["--key-size", "4..24"], "--key-size"),
        (vec!["--index", "pgm+nothing"], "--index"),
        (vec!["--index", "alex", "--granularity", "level"], "alex"),
        (vec!["--boundary", "1"], "--boundary"),
        (
            vec!["--experiment", "compaction", "--plot", "x.svg"],
            "--plot",
        ),
        (vec!["--workload", "g"], "workload"),
    ] {
        let mut all = vec!["bench", "lsm", "--data", "synthetic:uniform_sparse:1K"];
        all.extend(args);
        let o = lidb(&all);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success(), "{all:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle) && !err.contains("panicked"), "{err}");
    }
}

/// `--memory`: after the load every configuration's cache gets what its index and filters leave
/// of the budget (capacity + index + filters = budget), or none with the excess reported when
/// they alone exceed it; the device probe runs in the same invocation and each row carries the
/// multiples (or a note says the file system refused O_DIRECT).
#[test]
fn pareto_under_a_memory_budget_with_device_multiples() {
    let budget: f64 = (1u64 << 20) as f64;
    let (rows, err) = run_rows(&[
        "--keys",
        "5000",
        "--value-size",
        "1000",
        "--index",
        "pgm",
        "--boundary",
        "2,16",
        "--memory",
        "1MiB",
        "--device-probe-reads",
        "50",
    ]);
    assert!(err.contains("memory=1MiB"), "{err}");
    assert!(
        err.contains("memory budget: resident index+filter"),
        "{err}"
    );
    assert_eq!(rows.len(), 2);
    let probed = !err.contains("no device multiples");
    for r in &rows {
        assert_eq!(num(r, "budget_bytes"), budget, "{r}");
        assert_eq!(num(r, "over_budget_bytes"), 0.0, "{r}");
        let charged =
            num(r, "cache_capacity_bytes") + num(r, "index_bytes") + num(r, "filter_bytes");
        assert_eq!(charged, budget, "{r}");
        assert!(num(r, "lookup_us_p50") > 0.0, "{r}");
        if probed {
            let want = num(r, "lookup_us_p50") / num(r, "device_p50_us");
            assert!((num(r, "p50_x_device") - want).abs() < 1e-9, "{r}");
        }
    }
    // A budget below the indexes and filters: no cache, the excess in the row.
    let (over, err) = run_rows(&[
        "--keys",
        "5000",
        "--index",
        "pgm",
        "--boundary",
        "2",
        "--memory",
        "4KiB",
    ]);
    assert!(err.contains("OVER BUDGET"), "{err}");
    let r = &over[0];
    assert_eq!(num(r, "cache_capacity_bytes"), 0.0, "{r}");
    let excess = num(r, "index_bytes") + num(r, "filter_bytes") - 4096.0;
    assert_eq!(num(r, "over_budget_bytes"), excess, "{r}");
}
