//! The lean `lidb` links no benchmark peer: a `bench concurrent` or `bench btree` run that names
//! one is handed to the `lidb-bench` binary with the same arguments, or fails with one line
//! saying where the peer lives and how to build it. `LIDB_BENCH_BIN` (see `lidb_cli::handoff`)
//! points the lookup at an absent path or at a stand-in script that prints what it was given.
//! Without the peers, `--index all` runs lidb's own indexes and says so, and an index that does
//! not report its memory gets no figure rather than a wrong one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;

fn lidb(bench_bin: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(args)
        .env(lidb_cli::handoff::ENV, bench_bin)
        .env_remove(lidb_cli::handoff::HANDED_ENV)
        .output()
        .unwrap()
}

/// A `lidb-bench` path that does not exist: a name inside an empty scratch directory.
fn absent(dir: &Scratch) -> PathBuf {
    dir.join("lidb-bench")
}

/// A stand-in `lidb-bench` that prints its arguments and whether it was handed the run, then
/// exits 7; in a directory of its own, removed by the caller.
fn stand_in(dir: &Scratch) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("lidb-bench");
    std::fs::write(
        &path,
        "#!/bin/sh\necho \"handed: $*\"\necho \"by: ${LIDB_HANDED_ON_BY:+lidb}\"\nexit 7\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn one_line_error(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for want in [
        what,
        "lidb-bench",
        "cargo build --release -p lidb-bench-bin",
    ] {
        assert!(stderr.contains(want), "{stderr:?} lacks {want:?}");
    }
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_peer_without_lidb_bench_is_a_one_line_error() {
    let dir = Scratch::new("no-bench");
    let out = lidb(
        &absent(&dir),
        &["bench", "concurrent", "--index", "finedex,congee"],
    );
    one_line_error(&out, "--index congee");
    let out = lidb(
        &absent(&dir),
        &["bench", "btree", "--engine", "learnedstore,redb"],
    );
    one_line_error(&out, "--engine redb");
}

#[test]
fn a_peer_run_is_handed_to_lidb_bench_with_the_same_arguments() {
    let dir = Scratch::new("bench-stand-in");
    let bench = stand_in(&dir);
    for args in [
        &["bench", "concurrent", "--index", "congee", "--threads", "1"][..],
        &["bench", "concurrent", "--index", "all"],
        &["bench", "btree", "--engine", "lmdb", "--experiment", "cold"],
    ] {
        let out = lidb(&bench, args);
        assert_eq!(out.status.code(), Some(7), "{args:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout, format!("handed: {}\nby: lidb\n", args.join(" ")));
    }
    // A typo is not a peer: the ordinary error, and no handoff.
    let out = lidb(&bench, &["bench", "concurrent", "--index", "congeee"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown index 'congeee'"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn all_without_the_peers_runs_lidbs_own_and_says_so() {
    let dir = Scratch::new("no-bench");
    let out = lidb(
        &absent(&dir),
        &[
            "bench",
            "concurrent",
            "--index",
            "all",
            "--workload",
            "c",
            "--threads",
            "1",
            "--records",
            "2000",
            "--ops",
            "2000",
            "--data",
            "synthetic:lognormal:10K",
            "--json",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("not in this run"), "{stderr}");
    assert!(stderr.contains("no counting allocator"), "{stderr}");
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let indexes: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["index"].as_str().unwrap()).collect();
    assert_eq!(
        indexes,
        ["alex", "btree-rwlock", "dili", "finedex", "lipp"].into()
    );
    for r in &rows {
        // No counting allocator: no counted figure, and btree-rwlock (no report of its own) none.
        assert!(
            r.get("counted_bytes_per_key").is_some_and(Value::is_null),
            "{r}"
        );
        if r["index"] == "btree-rwlock" {
            assert!(
                r["bytes_per_key"].is_null() && r["bytes_source"] == "n/a",
                "{r}"
            );
        }
    }
}
