//! What the CLI damage and repair tests share: running `lidb` with some input, and a store whose
//! writer was killed with its writes only in its log.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `lidb ARGS` with `input` on stdin and returns what it printed and its status.
pub fn lidb(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A child that fails its open exits without reading: a broken pipe is its answer, not ours.
    if let Err(e) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing to lidb: {e}"
        );
    }
    child.wait_with_output().unwrap()
}

/// `lidb kv --engine ENGINE --db DIR EXTRA...` with `input` on stdin.
pub fn lidb_kv(dir: &Path, engine: &str, extra: &[&str], input: &str) -> Output {
    let d = dir.to_str().unwrap();
    let mut args = vec!["kv", "--engine", engine, "--db", d];
    args.extend_from_slice(extra);
    lidb(&args, input)
}

/// Writes 200 puts (100 keys `k000`.. `k099`, values `value-{round}-{i}` for rounds 1 and 2)
/// through a `lidb kv --sync` child, then kills it: its log holds every record, with no clean
/// close to flush them into tables.
pub fn write_and_kill(dir: &Path, engine: &str) {
    let d = dir.to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["kv", "--engine", engine, "--sync", "--db", d])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for round in 1..=2 {
        for i in 0..100 {
            writeln!(stdin, "put k{i:03} value-{round}-{i}").unwrap();
            stdin.flush().unwrap();
            assert_eq!(lines.next().unwrap().unwrap(), "OK");
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
