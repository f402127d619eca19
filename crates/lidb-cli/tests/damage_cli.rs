//! Damage through the CLI, as a user meets it: a `lidb kv` child writes and is killed,
//! a byte in the middle of its log is flipped, and the next `lidb kv` must fail loudly (exit
//! non-zero, the file and offset on stderr, no file changed); `--recovery-mode point-in-time`
//! serves the prefix and prints what it dropped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lidb_testkit::Scratch;
use support::{lidb_kv, write_and_kill};

fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with("LOCK") {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The log holding the writes: the newest WAL (lsm) or the active value log (learnedkv).
fn log_of(dir: &Path, engine: &str) -> PathBuf {
    let suffix = if engine == "lsm" { ".log" } else { ".vlog" };
    files(dir)
        .into_iter()
        .filter(|(p, b)| p.to_string_lossy().ends_with(suffix) && b.len() > 1000)
        .map(|(p, _)| p)
        .max()
        .unwrap()
}

fn damaged_log_is_loud(engine: &str) {
    let scratch = Scratch::new(&format!("damage-cli-{engine}"));
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    write_and_kill(&dir, engine);
    let log = log_of(&dir, engine);
    let mut bytes = std::fs::read(&log).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let before = files(&dir);

    let out = lidb_kv(&dir, engine, &[], "get k000\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{engine}: the open succeeded: {stderr}"
    );
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains("corruption") && stderr.contains(&name) && stderr.contains("offset"),
        "{engine}: {stderr}"
    );
    assert!(
        files(&dir) == before,
        "{engine}: the failed open changed files"
    );

    let out = lidb_kv(
        &dir,
        engine,
        &["--recovery-mode", "point-in-time"],
        "get k000\nget k099\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{engine}: {stderr}");
    assert!(
        stderr.contains("recovery:") && stderr.contains("damage cut"),
        "{engine}: {stderr}"
    );
    assert!(stdout.starts_with("value-"), "{engine}: {stdout}");
    assert!(
        dir.join("lost").is_dir()
            || files(&dir)
                .keys()
                .any(|p| p.to_string_lossy().contains("/lost/"))
    );
    // The cut is permanent and the store is clean again: the default mode opens it silently.
    let out = lidb_kv(&dir, engine, &[], "get k000\n");
    assert!(
        out.status.success(),
        "{engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_flipped_bit_mid_wal_fails_lidb_kv_and_point_in_time_serves_the_prefix() {
    damaged_log_is_loud("lsm");
}

#[test]
fn a_flipped_bit_mid_value_log_fails_lidb_kv_and_point_in_time_serves_the_prefix() {
    damaged_log_is_loud("learnedkv");
}

#[test]
fn an_unknown_recovery_mode_is_a_clear_error() {
    let scratch = Scratch::new("damage-cli-mode");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let out = lidb_kv(&dir, "lsm", &["--recovery-mode", "lenient"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("point-in-time") && stderr.contains("lenient"),
        "{stderr}"
    );
}

/// finedex (FineStore): the same loud failure naming the log and offset; point-in-time serves
/// the prefix, prints the cut and saves the cut bytes under lost/.
#[test]
fn a_flipped_bit_mid_finedex_log_fails_lidb_kv_and_point_in_time_serves_the_prefix() {
    let scratch = Scratch::new("damage-cli-finedex");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    write_and_kill(&dir, "finedex");
    let log = dir.join("log-000001");
    let mut bytes = std::fs::read(&log).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let before = files(&dir);

    let out = lidb_kv(&dir, "finedex", &[], "get k000\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the open succeeded: {stderr}");
    assert!(
        stderr.contains("corruption") && stderr.contains("log-000001") && stderr.contains("offset"),
        "{stderr}"
    );
    assert!(files(&dir) == before, "the failed open changed files");

    let pit = ["--recovery-mode", "point-in-time"];
    let out = lidb_kv(&dir, "finedex", &pit, "get k000\nget k099\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("recovery:") && stderr.contains("damage"),
        "{stderr}"
    );
    assert!(stdout.starts_with("value-"), "{stdout}");
    assert!(
        dir.join("lost").is_dir(),
        "the cut bytes were not saved to lost/"
    );
    let out = lidb_kv(&dir, "finedex", &[], "get k000\n");
    assert!(out.status.success() && out.stderr.is_empty());
}

/// finedex closed cleanly (stdin ended), then its log cut by a few bytes: not a torn tail to cut
/// in silence but damage naming the log; point-in-time serves the intact prefix and reports it.
#[test]
fn a_finedex_log_shortened_after_a_clean_close_fails_lidb_kv() {
    let scratch = Scratch::new("damage-cli-closed");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let puts: String = (0..20)
        .map(|i| format!("put k{i:03} value-{i}\n"))
        .collect();
    let out = lidb_kv(&dir, "finedex", &[], &puts);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = dir.join("log-000001");
    let len = std::fs::metadata(&log).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 3).unwrap();
    drop(f);
    let before = files(&dir);

    let out = lidb_kv(&dir, "finedex", &[], "get k000\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the open succeeded: {stderr}");
    assert!(
        stderr.contains("log-000001") && stderr.contains("closed cleanly"),
        "{stderr}"
    );
    assert!(files(&dir) == before, "the failed open changed files");

    let pit = ["--recovery-mode", "point-in-time"];
    let out = lidb_kv(&dir, "finedex", &pit, "get k000\nget k019\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("recovery:") && stderr.contains("damage"),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "value-0\n(nil)\n");
    assert!(dir.join("lost").is_dir(), "the cut bytes were not saved");
}
