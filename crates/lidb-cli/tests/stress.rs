//! `lidb stress` as a process: `--serve` drives `lidb serve` over the Redis protocol, SIGKILLs it
//! every second or so, restarts it and reads every key back; the run must pass with no mismatch
//! and the kills must have happened, with the server's writes synced and (`--no-sync`) not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use lidb_testkit::Scratch;
use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The number after `name=` in the summary line.
fn field(summary: &str, name: &str) -> u64 {
    summary
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {summary:?}"))
        .parse()
        .unwrap()
}

#[test]
fn serve_under_kills_loses_no_acknowledged_write() {
    serve_under_kills("stress-serve", &[]);
}

/// Without --sync the server writes SETs on its async workers, and lsm's WAL appends reach the
/// operating system before each acknowledgement: a SIGKILL must still lose none of them.
#[test]
fn serve_without_sync_under_kills_loses_no_acknowledged_write() {
    serve_under_kills("stress-serve-nosync", &["--no-sync"]);
}

#[test]
fn no_sync_is_refused_where_a_kill_could_lose_what_it_acknowledged() {
    let base = Scratch::new("stress-nosync-refused");
    for args in [
        &["--engine", "lsm"][..],
        &["--engine", "finedex", "--serve"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
            .args(["stress", "--no-sync", "--duration", "1s", "--db"])
            .arg(base.join("db"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("--no-sync: only with --serve and --engine lsm"),
            "{stderr}"
        );
    }
}

/// `lidb stress --serve --engine lsm` with `extra` options, SIGKILLing the server every second:
/// the run must pass, with kills, and every restart must read every key back.
fn serve_under_kills(scratch: &str, extra: &[&str]) {
    let base = Scratch::new(scratch);
    let (out, err) = (base.join("stdout"), base.join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["stress", "--serve", "--engine", "lsm", "--threads", "4"])
        .args(["--keys", "500", "--duration", "6s", "--kill-every", "1s"])
        .args(extra)
        .args(["--seed", "7", "--db"])
        .arg(base.join("db"))
        .stdout(Stdio::from(File::create(&out).unwrap()))
        .stderr(Stdio::from(File::create(&err).unwrap()))
        .spawn()
        .unwrap();
    // The run lasts 6 s; a debug build under load gets ample room, but never forever.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("lidb stress --serve ran past 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("stress: engine="))
        .unwrap_or_else(|| panic!("no summary; stdout {stdout:?} stderr {stderr:?}"))
        .to_string();
    assert!(
        status.success(),
        "exit {status}; summary {summary}; stderr {stderr}"
    );
    assert!(summary.contains("engine=serve:lsm"), "{summary}");
    assert_eq!(field(&summary, "mismatches"), 0, "{summary}");
    assert!(summary.ends_with(" PASSED"), "{summary}");
    assert!(field(&summary, "kills") >= 2, "{summary}");
    // Every restart read every key back.
    assert!(
        field(&summary, "verified_keys") >= 500 * (field(&summary, "kills") + 1),
        "{summary}"
    );
}
