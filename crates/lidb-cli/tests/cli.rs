//! End-to-end tests of the `lidb` binary: the exact interfaces later checks call, and the promise
//! that every error is one line on stderr with a non-zero exit and no panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;

fn lidb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(args)
        .output()
        .expect("run lidb")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Asserts a failed run: non-zero exit, one stderr line naming `needle`, no panic.
fn assert_one_line_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err:?}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bench_json_rows_have_exactly_the_documented_fields() {
    let o = lidb(&[
        "index",
        "bench",
        "--data",
        "synthetic:uniform_sparse:20K",
        "--index",
        "fp,binary",
        "--boundary",
        "8,32",
        "--queries",
        "2000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4);
    let mut fields: Vec<&str> = rows[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "bits_per_key",
            "bound_width_mean",
            "boundary",
            "build_ns_per_key",
            "get_ns_mean",
            "index",
            "keys",
            "lookup_ns_mean",
            "lookup_ns_p99",
            "segments",
            "size_bytes",
        ]
    );
    assert_eq!(rows[0]["index"], "fp");
    assert_eq!(rows[0]["boundary"], 8);
    assert_eq!(rows[0]["keys"], 20_000);
    assert_eq!(rows[0]["segments"], 2_500);
    // The seed and configuration go to stderr in JSON mode.
    assert!(stderr(&o).contains("seed=42"), "{}", stderr(&o));
}

/// Rows come one index at a time by default and all at once with --interleave: the same rows,
/// in the same order, with the same deterministic columns.
#[test]
fn bench_groups_by_index_or_interleaves_all_with_the_same_rows() {
    let run = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec![
            "index",
            "bench",
            "--data",
            "synthetic:lognormal:20K",
            "--index",
            "pgm,binary,alex",
            "--boundary",
            "8,32",
            "--queries",
            "2000",
            "--rounds",
            "2",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = lidb(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (grouped, interleaved) = (run(&[]), run(&["--interleave"]));
    let fixed = |rows: &[Value]| -> Vec<(String, u64, u64, u64)> {
        rows.iter()
            .map(|r| {
                (
                    r["index"].as_str().unwrap().to_string(),
                    r["boundary"].as_u64().unwrap(),
                    r["segments"].as_u64().unwrap(),
                    r["size_bytes"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(fixed(&grouped), fixed(&interleaved));
    let names: Vec<&str> = grouped
        .iter()
        .map(|r| r["index"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pgm", "pgm", "binary", "binary", "alex"]);
}

#[test]
fn bench_table_names_every_column() {
    let o = lidb(&[
        "index",
        "bench",
        "--data",
        "synthetic:normal:5K",
        "--index",
        "fp",
        "--boundary",
        "16",
        "--queries",
        "500",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("# lidb index bench: data=synthetic:normal:5K keys=5000"),
        "{out}"
    );
    for col in [
        "segments",
        "size_bytes",
        "bits_per_key",
        "lookup_ns_p99",
        "bound_width_mean",
    ] {
        assert!(out.contains(col), "{col} missing: {out}");
    }
}

#[test]
fn query_writes_lo_hi_pairs_that_hold_the_answer() {
    let dir = Scratch::new("cli-query");
    let data = dir.join("keys.sosd");
    let queries = dir.join("queries.sosd");
    let out = dir.join("out.bin");
    let keys: Vec<u64> = (0..5_000u64).map(|i| i * i / 3).collect();
    lidb_data::sosd::write_u64(&data, &keys).unwrap();
    let qs: Vec<u64> = vec![u64::MAX, 0, 7, 1_000_000, 3, 24_000_000, 5];
    lidb_data::sosd::write_u64(&queries, &qs).unwrap();
    let o = lidb(&[
        "index",
        "query",
        "--data",
        p(&data),
        "--index",
        "fp",
        "--boundary",
        "8",
        "--queries",
        p(&queries),
        "--out",
        p(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len(), 16 * qs.len());
    for (i, &q) in qs.iter().enumerate() {
        let lo = u64::from_le_bytes(bytes[16 * i..16 * i + 8].try_into().unwrap());
        let hi = u64::from_le_bytes(bytes[16 * i + 8..16 * i + 16].try_into().unwrap());
        let b = lidb_index::Bound { lo, hi };
        assert!(
            lidb_index::bound::holds(&keys, q, b) && b.width() <= 8,
            "q={q} {b:?}"
        );
    }
}

#[test]
fn stats_reports_size_and_structure_as_one_json_object() {
    let o = lidb(&[
        "index",
        "stats",
        "--data",
        "synthetic:lognormal:20K",
        "--index",
        "fp",
        "--boundary",
        "16",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["index"], "fp");
    assert_eq!(v["size_bytes"], 36 + 8 + 8 * 1250);
}

#[test]
fn gen_then_info_describes_the_file() {
    let dir = Scratch::new("cli-gen");
    let out = dir.join("k.zst");
    let o = lidb(&[
        "data",
        "gen",
        "synthetic:clustered:3000",
        "--out",
        p(&out),
        "--seed",
        "5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = lidb(&["data", "info", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info = stdout(&o);
    assert!(info.contains("count: 3000"), "{info}");
    assert!(info.contains("sorted: yes"), "{info}");
    // clustered always has duplicate runs longer than 100
    let run: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("longest_duplicate_run: "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(run > 100, "{info}");
}

#[test]
fn errors_are_one_line_and_non_zero() {
    let dir = Scratch::new("cli-errors");
    let missing = dir.join("missing.sosd");
    let o = lidb(&[
        "index",
        "stats",
        "--data",
        p(&missing),
        "--index",
        "fp",
        "--boundary",
        "4",
    ]);
    assert_one_line_error(&o, "missing.sosd");

    let bad_header = dir.join("bad.sosd");
    let mut bytes = 100u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(&7u64.to_le_bytes());
    std::fs::write(&bad_header, &bytes).unwrap();
    let o = lidb(&[
        "index",
        "stats",
        "--data",
        p(&bad_header),
        "--index",
        "fp",
        "--boundary",
        "4",
    ]);
    assert_one_line_error(&o, "bad.sosd");

    let unsorted = dir.join("unsorted.sosd");
    let mut bytes = 3u64.to_le_bytes().to_vec();
    for k in [5u64, 9, 2] {
        bytes.extend_from_slice(&k.to_le_bytes());
    }
    std::fs::write(&unsorted, &bytes).unwrap();
    let o = lidb(&[
        "index",
        "stats",
        "--data",
        p(&unsorted),
        "--index",
        "fp",
        "--boundary",
        "4",
    ]);
    assert_one_line_error(&o, "position 2");

    let o = lidb(&[
        "index",
        "bench",
        "--data",
        "synthetic:normal:1K",
        "--index",
        "btree",
    ]);
    assert_one_line_error(&o, "unknown index \"btree\"");
    let o = lidb(&[
        "index",
        "bench",
        "--data",
        "synthetic:normal:1K",
        "--boundary",
        "16,1",
    ]);
    assert_one_line_error(&o, "boundary 1");
    let o = lidb(&["index", "bench", "--data", "synthetic:nope:1K"]);
    assert_one_line_error(&o, "nope");
    let o = lidb(&["data", "info", p(&missing)]);
    assert_one_line_error(&o, "missing.sosd");
}

/// Runs `lidb kv` with `args`, feeding it `input` on stdin.
fn kv_session(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .arg("kv")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lidb kv");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().expect("lidb kv")
}

#[test]
fn kv_convert_answers_ok_and_the_tier_serves_reads() {
    let dir = Scratch::new("cli-kv-convert");
    let db = dir.join("db");
    let o = kv_session(
        &[
            "--engine",
            "learnedkv",
            "--db",
            p(&db),
            "--write-buffer",
            "64KiB",
        ],
        "put a 1\nput b 2\ngc\nput b 3\ndel a\nput c 4\nconvert\nget a\nget b\nget c\nscan a z\nstats\n",
    );
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..12],
        [
            "OK", "OK", "OK", "OK", "OK", "OK", "OK", "(nil)", "3", "4", "b 3", "c 4"
        ],
        "{out}"
    );
    assert_eq!(lines[12], "(end)", "{out}");
    let stats: Value = serde_json::from_str(lines[13]).unwrap();
    assert_eq!(stats["conversions"], 1, "{stats}");
    assert_eq!(stats["gcs"], 1, "{stats}");

    // The LSM engine has no conversion; threshold flags are learnedkv's.
    let o = kv_session(
        &["--engine", "lsm", "--db", p(&dir.join("lsm"))],
        "convert\n",
    );
    assert!(
        stdout(&o).starts_with("ERR convert is a command of learnedkv"),
        "{}",
        stdout(&o)
    );
    let o = kv_session(
        &[
            "--engine",
            "lsm+",
            "--db",
            p(&dir.join("plus")),
            "--convert-at-lsm-levels",
            "3",
        ],
        "",
    );
    assert_one_line_error(&o, "--convert-at-lsm-levels");
    let o = kv_session(
        &[
            "--engine",
            "learnedkv",
            "--db",
            p(&db),
            "--convert-at-lsm-bytes",
            "1MiB",
        ],
        "get b\n",
    );
    assert_eq!(stdout(&o), "3\n");
}

/// finedex refuses the options only the LSM engines read (they would be ignored), naming the
/// option and the engine; the same options left to their defaults, and the options finedex
/// reads, are accepted. An LSM engine still takes them.
#[test]
fn finedex_refuses_the_options_it_would_ignore() {
    let dir = Scratch::new("cli-finedex-opts");
    let p = |d: &std::path::Path| d.to_str().unwrap().to_string();
    let fine = p(&dir.join("fine"));
    for extra in [
        &["--write-buffer", "1MiB"][..],
        &["--direct-io"],
        &["--sst-size", "64MiB"],
        &["--index", "pgm"],
        &["--boundary", "16"],
        &["--convert-at-lsm-bytes", "0"],
    ] {
        let mut args = vec!["--engine", "finedex", "--db", &fine];
        args.extend_from_slice(extra);
        let o = kv_session(&args, "");
        assert_one_line_error(&o, extra[0]);
        assert!(stderr(&o).contains("finedex"), "{}", stderr(&o));
        if ["--sst-size", "--index", "--boundary"].contains(&extra[0]) {
            std::fs::create_dir_all(&fine).unwrap();
            let o = Command::new(env!("CARGO_BIN_EXE_lidb"))
                .args(["repair", "--engine", "finedex", "--db", &fine])
                .args(extra)
                .output()
                .unwrap();
            assert_one_line_error(&o, extra[0]);
            assert!(stderr(&o).contains("finedex"), "{}", stderr(&o));
        }
    }
    let o = kv_session(
        &[
            "--engine",
            "finedex",
            "--db",
            &fine,
            "--sync",
            "--recovery-mode",
            "point-in-time",
        ],
        "put a 1\nget a\n",
    );
    assert_eq!(stdout(&o), "OK\n1\n", "{}", stderr(&o));
    let o = kv_session(
        &[
            "--engine",
            "lsm",
            "--db",
            &p(&dir.join("lsm")),
            "--write-buffer",
            "1MiB",
            "--direct-io",
        ],
        "put a 1\nget a\n",
    );
    assert_eq!(stdout(&o), "OK\n1\n", "{}", stderr(&o));
}

/// `--checkpoint-log-bytes` reaches FineStore: with 1KiB, 2000 puts (about 60 KiB of log) leave
/// a checkpoint the store made by itself (without a `checkpoint` command) and a log below 1KiB
/// (`close` lets a due checkpoint finish), and a second session finds every value; with 0 no
/// checkpoint file appears and the log holds every write. The LSM engines refuse the option.
#[test]
fn finedex_checkpoints_by_itself_at_checkpoint_log_bytes() {
    let dir = Scratch::new("cli-kv-finedex-autockpt");
    let names = |db: &Path| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(db)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, e.metadata().unwrap().len())
            })
            .collect();
        v.sort();
        v
    };
    let puts: String = (0..2000).map(|i| format!("put k{i} value{i}\n")).collect();
    for (threshold, checkpoints) in [("1KiB", true), ("0", false)] {
        let db = dir.join(format!("fine-{threshold}"));
        let args = [
            "--engine",
            "finedex",
            "--db",
            p(&db),
            "--checkpoint-log-bytes",
            threshold,
        ];
        let o = kv_session(&args, &puts);
        assert_eq!(stdout(&o), "OK\n".repeat(2000), "{}", stderr(&o));
        let files = names(&db);
        let log_bytes: u64 = files
            .iter()
            .filter(|(n, _)| n.starts_with("log-"))
            .map(|(_, len)| len)
            .sum();
        let has_checkpoint = files.iter().any(|(n, _)| n.starts_with("checkpoint-"));
        assert_eq!(has_checkpoint, checkpoints, "{threshold}: {files:?}");
        if checkpoints {
            assert!(log_bytes < 1 << 10, "{threshold}: {files:?}");
        } else {
            assert!(log_bytes > 40 << 10, "{threshold}: {files:?}");
        }
        let o = kv_session(&args, "get k0\nget k1999\n");
        assert_eq!(stdout(&o), "value0\nvalue1999\n", "{}", stderr(&o));
    }
    let o = kv_session(
        &[
            "--engine",
            "lsm",
            "--db",
            p(&dir.join("lsm")),
            "--checkpoint-log-bytes",
            "1MiB",
        ],
        "",
    );
    assert_one_line_error(&o, "--checkpoint-log-bytes");
    assert!(stderr(&o).contains("finedex"), "{}", stderr(&o));
}
