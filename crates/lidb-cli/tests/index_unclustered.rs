//! End-to-end tests of the unclustered indexes (alex, lipp, dili, lits) under `lidb index`: the
//! same interfaces and the same external checks as every family. `query` answers the exact
//! lower-bound position as `[q, q + 1)` (or `[n, n]` past the end), checked against binary search
//! over keys with duplicate runs and the extremes of the domain; `stats` reports the structure
//! and heap bytes; `bench` gives one checked row each beside binary search.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use lidb_testkit::Scratch;
use serde_json::Value;

const UNCLUSTERED: [&str; 4] = ["alex", "lipp", "dili", "lits"];

/// Sorted keys with duplicate runs (i * i / 3 repeats near 0; every 97th key three times) and
/// the top of the domain.
fn keys_with_duplicates() -> Vec<u64> {
    let mut keys: Vec<u64> = (0..4_000u64)
        .flat_map(|i| {
            let k = i * i / 3 + (1 << 40);
            if i % 97 == 0 { vec![k, k, k] } else { vec![k] }
        })
        .collect();
    keys.extend([u64::MAX - 1, u64::MAX, u64::MAX]);
    keys
}

#[test]
fn query_answers_the_exact_lower_bound_one_position_wide() {
    let dir = Scratch::new("uncl-query");
    let data = dir.join("keys.sosd");
    let queries = dir.join("queries.sosd");
    let keys = keys_with_duplicates();
    lidb_data::sosd::write_u64(&data, &keys).unwrap();
    let mut qs: Vec<u64> = vec![0, 1, 1 << 40, u64::MAX, u64::MAX - 1, u64::MAX - 2];
    qs.extend(keys.iter().step_by(13).flat_map(|&k| [k, k + 1, k - 1]));
    lidb_data::sosd::write_u64(&queries, &qs).unwrap();
    let n = keys.len() as u64;
    for name in UNCLUSTERED {
        // With and without --boundary: an unclustered index accepts and ignores it.
        for boundary in [None, Some("8")] {
            let out = dir.join(format!("{name}.bin"));
            let mut args = vec![
                "index",
                "query",
                "--data",
                data.to_str().unwrap(),
                "--index",
                name,
                "--queries",
                queries.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ];
            if let Some(b) = boundary {
                args.extend(["--boundary", b]);
            }
            let o = support::lidb(&args, "");
            assert!(o.status.success(), "{name}: {}", stderr(&o));
            let bytes = std::fs::read(&out).unwrap();
            assert_eq!(bytes.len(), 16 * qs.len(), "{name}");
            for (i, &q) in qs.iter().enumerate() {
                let lo = u64::from_le_bytes(bytes[16 * i..16 * i + 8].try_into().unwrap());
                let hi = u64::from_le_bytes(bytes[16 * i + 8..16 * i + 16].try_into().unwrap());
                let b = lidb_index::Bound { lo, hi };
                let want = lidb_index::lower_bound(&keys, q);
                assert!(lidb_index::bound::holds(&keys, q, b), "{name} q={q} {b:?}");
                assert_eq!(lo, want, "{name} q={q}");
                let want_hi = if want == n { n } else { want + 1 };
                assert_eq!(hi, want_hi, "{name} q={q}");
            }
        }
    }
}

#[test]
fn stats_reports_structure_and_heap_bytes() {
    for name in UNCLUSTERED {
        let o = support::lidb(
            &[
                "index",
                "stats",
                "--data",
                "synthetic:clustered:5K",
                "--index",
                name,
                "--json",
            ],
            "",
        );
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let v: Value = serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim()).unwrap();
        assert_eq!(v["index"], name);
        assert_eq!(v["boundary"], 1, "{v}");
        assert_eq!(v["keys"], 5_000, "{v}");
        let distinct = v["distinct_keys"].as_u64().unwrap();
        assert!(distinct > 0 && distinct <= 5_000, "{v}");
        // The keys and positions they hold: at least 16 bytes per distinct key.
        assert!(v["size_bytes"].as_u64().unwrap() >= 16 * distinct, "{v}");
        assert!(v["models"].as_u64().unwrap() >= 1, "{v}");
        for f in [
            "nodes",
            "inner_nodes",
            "leaf_nodes",
            "depth_max",
            "depth_avg",
        ] {
            assert!(v.get(f).is_some(), "{name}: no {f} in {v}");
        }
    }
}

#[test]
fn bench_runs_them_beside_binary_search_one_row_each() {
    let o = support::lidb(
        &[
            "index",
            "bench",
            "--data",
            "synthetic:clustered:20K",
            "--index",
            "binary,alex,lipp,dili,lits",
            "--boundary",
            "8,32",
            "--queries",
            "2000",
            "--rounds",
            "1",
            "--json",
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("lits over 8-byte big-endian keys"));
    let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r["index"].as_str().unwrap()).collect();
    assert_eq!(names, ["binary", "binary", "alex", "lipp", "dili", "lits"]);
    for r in rows.iter().filter(|r| r["index"] != "binary") {
        assert_eq!(r["boundary"], 1, "{r}");
        assert_eq!(r["keys"], 20_000, "{r}");
        assert_eq!(r["bound_width_mean"].as_f64(), Some(1.0), "{r}");
        assert!(r["size_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(r["lookup_ns_mean"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["build_ns_per_key"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn a_family_still_needs_its_boundary_and_names_are_checked() {
    let o = support::lidb(
        &[
            "index",
            "stats",
            "--data",
            "synthetic:normal:1K",
            "--index",
            "pgm",
        ],
        "",
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--boundary is required for index pgm"));
    let o = support::lidb(
        &[
            "index",
            "stats",
            "--data",
            "synthetic:normal:1K",
            "--index",
            "alex",
            "--boundary",
            "1",
        ],
        "",
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("boundary 1 is below the minimum 2"));
    let o = support::lidb(
        &[
            "index",
            "stats",
            "--data",
            "synthetic:normal:1K",
            "--index",
            "art",
            "--boundary",
            "8",
        ],
        "",
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("unknown index \"art\"") && e.contains("lits"),
        "{e}"
    );
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bench_over_text_keys_runs_binary_and_lits_and_refuses_the_others() {
    let dir = Scratch::new("uncl-text");
    let data = dir.join("words.txt");
    // Unsorted, with a duplicate, an empty key and non-ASCII bytes: the bench sorts and
    // deduplicates them.
    let mut words: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("key:{:06}", (i * 7919) % 3000).into_bytes())
        .collect();
    words.extend([
        b"key:000001".to_vec(),
        Vec::new(),
        "w\u{e9}rd".as_bytes().to_vec(),
    ]);
    lidb_data::text::write_keys(&data, &words).unwrap();
    let spec = format!("text:{}", data.to_str().unwrap());
    let o = support::lidb(
        &[
            "index",
            "bench",
            "--data",
            &spec,
            "--queries",
            "500",
            "--rounds",
            "1",
            "--json",
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r["index"].as_str().unwrap()).collect();
    assert_eq!(names, ["binary", "lits"]);
    for row in &rows {
        assert_eq!(row["keys"], 3002, "{row}");
        assert!(row["get_ns_mean"].as_f64().unwrap() > 0.0, "{row}");
    }
    let o = support::lidb(
        &["index", "bench", "--data", &spec, "--index", "lits,alex"],
        "",
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("binary and lits"), "{}", stderr(&o));
}
