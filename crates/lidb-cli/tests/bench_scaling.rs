//! End-to-end tests of the thread-count lists: `lidb bench ycsb --threads 1,2` gives one row per
//! (engine, thread count, phase, op) with `threads` and `scaling` (1.0 at one thread), for a
//! workload with writes (a fresh load per count) and for read-only c (one load); `lidb bench
//! btree --threads 1,2` the same for its lookups; bad lists are refused with one line by every
//! benchmark that takes one; `lidb bench plot-scaling` draws their rows as one SVG.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;

/// Runs `lidb ARGS` as this package built it: `--index all` and `--engine all` are not handed to
/// a `lidb-bench` beside it (`LIDB_BENCH_BIN` points at nothing; see `lidb_cli::handoff`), so a
/// stale `lidb-bench` in the target directory never answers for `lidb`.
fn lidb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(args)
        .env(lidb_cli::handoff::ENV, "/nonexistent/lidb-bench")
        .output()
        .expect("run lidb")
}

/// Runs lidb with `args` and `--json --dir DIR`; the JSON rows of stdout.
fn rows(name: &str, args: &[&str]) -> Vec<Value> {
    let dir = Scratch::new(&format!("scaling-{name}"));
    let d = dir.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--json", "--dir", &d]);
    let o = lidb(&all);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "lidb {all:?} failed: {err}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn ycsb(workload: &str) -> Vec<Value> {
    rows(
        &format!("ycsb-{workload}"),
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm,finedex",
            "--workload",
            workload,
            "--records",
            "2000",
            "--ops-per-phase",
            "2000",
            "--phases",
            "2",
            "--value-size",
            "100",
            "--device-probe-reads",
            "0",
            "--threads",
            "1,2",
        ],
    )
}

/// Every (engine, threads, phase >= 1, op "all") row once, ops and scaling as documented.
fn check_thread_rows(rows: &[Value], engines: &[&str], phases: u64, key: &str) {
    for engine in engines {
        for phase in 1..=phases {
            let at = |threads: u64| -> Vec<&Value> {
                rows.iter()
                    .filter(|r| {
                        r[key] == *engine
                            && r["threads"] == threads
                            && r.get("phase").is_none_or(|p| *p == phase)
                            && (r["op"] == "all" || r["op"] == "read" && r.get("phase").is_none())
                    })
                    .collect()
            };
            let (one, two) = (at(1), at(2));
            assert_eq!(
                (one.len(), two.len()),
                (1, 1),
                "{engine} P{phase}: {rows:?}"
            );
            let (one, two) = (one[0], two[0]);
            assert_eq!(one["scaling"].as_f64(), Some(1.0), "{one}");
            let want = two["kops_per_s"].as_f64().unwrap() / one["kops_per_s"].as_f64().unwrap();
            let got = two["scaling"].as_f64().unwrap();
            assert!((got - want).abs() < 1e-9 * want.max(1.0), "{two} vs {one}");
            assert_eq!(
                one["ops"], two["ops"],
                "every count runs the same operations"
            );
        }
    }
}

#[test]
fn ycsb_a_loads_per_thread_count_and_gives_scaling() {
    let rows = ycsb("a");
    check_thread_rows(&rows, &["lsm", "finedex"], 2, "engine");
    for r in &rows {
        assert_eq!(r["workload"], "a", "{r}");
        assert!(r["threads"] == 1 || r["threads"] == 2, "{r}");
    }
    // A workload with writes loads each engine once per thread count.
    let loads = rows.iter().filter(|r| r["phase"] == 0 && r["op"] == "all");
    let loads: Vec<(String, u64)> = loads
        .map(|r| {
            (
                r["engine"].as_str().unwrap().to_string(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [("lsm", 1), ("lsm", 2), ("finedex", 1), ("finedex", 2)]
        .iter()
        .map(|(e, t)| (e.to_string(), *t))
        .collect();
    assert_eq!(loads, want);
    assert!(
        rows.iter()
            .filter(|r| r["phase"] == 0)
            .all(|r| r["scaling"].is_null())
    );
}

#[test]
fn ycsb_c_loads_once_and_runs_every_thread_count_over_it() {
    let rows = ycsb("c");
    check_thread_rows(&rows, &["lsm", "finedex"], 2, "engine");
    let loads = rows
        .iter()
        .filter(|r| r["phase"] == 0 && r["op"] == "all")
        .count();
    assert_eq!(loads, 2, "one load per engine");
}

#[test]
fn ycsb_without_one_thread_has_no_scaling() {
    let rows = rows(
        "ycsb-no-one",
        &[
            "bench",
            "ycsb",
            "--engine",
            "lsm",
            "--workload",
            "c",
            "--records",
            "1000",
            "--ops-per-phase",
            "1000",
            "--phases",
            "1",
            "--value-size",
            "100",
            "--device-probe-reads",
            "0",
            "--threads",
            "2",
        ],
    );
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["threads"], 2, "{r}");
        assert!(r["scaling"].is_null(), "{r}");
    }
}

#[test]
fn btree_lookups_at_each_thread_count() {
    let rows = rows(
        "btree",
        &[
            "bench",
            "btree",
            "--experiment",
            "memory",
            "--engine",
            "btree,learnedstore",
            "--data",
            "synthetic:randomgen:4K",
            "--ops",
            "2K",
            "--threads",
            "1,2",
        ],
    );
    assert_eq!(rows.len(), 4, "{rows:?}");
    check_thread_rows(&rows, &["btree", "learnedstore"], 1, "engine");
}

fn one_line_error(args: &[&str], needle: &str) {
    let o = lidb(args);
    assert!(!o.status.success(), "{args:?} succeeded");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn bad_thread_lists_are_refused_with_one_line() {
    let dir = Scratch::new("scaling-refused");
    let d = dir.display().to_string();
    for (list, why) in [
        ("1,0", "0 is out of range"),
        ("1,2,1", "1 twice"),
        ("1,,2", "an empty item"),
        ("two", "\"two\" is not a whole number"),
    ] {
        for bench in ["ycsb", "btree"] {
            one_line_error(&["bench", bench, "--threads", list, "--dir", &d], why);
        }
        one_line_error(&["bench", "concurrent", "--threads", list], why);
    }
    one_line_error(
        &[
            "bench",
            "ycsb",
            "--threads",
            "1,300",
            "--dir",
            &d,
            "--records",
            "10",
        ],
        "1 to 255",
    );
    one_line_error(
        &[
            "bench",
            "btree",
            "--experiment",
            "writes",
            "--threads",
            "1,2",
            "--dir",
            &d,
        ],
        "writes runs on one thread",
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing left behind"
    );
}

#[test]
fn plot_scaling_draws_one_series_per_engine() {
    let dir = Scratch::new("scaling-plot");
    let input = dir.join("rows.jsonl");
    let output = dir.join("scaling.svg");
    let mut text = String::new();
    for r in ycsb("c") {
        text.push_str(&format!("{r}\n"));
    }
    std::fs::write(&input, text).unwrap();
    let (i, o) = (input.display().to_string(), output.display().to_string());
    let out = lidb(&["bench", "plot-scaling", "--input", &i, "--output", &o]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("# ycsb c (kops/s)") && summary.contains("finedex"),
        "{summary}"
    );
    let svg = std::fs::read_to_string(&output).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert_eq!(svg.matches(r#"<g class="panel">"#).count(), 1);
    assert_eq!(svg.matches(r#"<path class="series""#).count(), 2);
    std::fs::write(&input, "{\"threads\": 1}\nnot json\n").unwrap();
    one_line_error(
        &["bench", "plot-scaling", "--input", &i, "--output", &o],
        "line 2: not JSON",
    );
}
