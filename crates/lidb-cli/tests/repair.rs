//! `lidb repair` as a user meets it: a store written by a killed `lidb kv`, a byte in
//! the middle of its log flipped, the next open fails; `lidb repair` prints what it kept and set
//! aside and exits 0, and the next `lidb kv` serves every key (its last value, an earlier one, or
//! nothing where the report says data was set aside), never an error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::path::{Path, PathBuf};

use lidb_testkit::Scratch;
use support::{lidb, write_and_kill};

/// The largest file of `dir` (not recursing) ending in `suffix`.
fn biggest(dir: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}

fn repair_makes_a_damaged_store_open(engine: &str) {
    let scratch = Scratch::new(&format!("repair-cli-{}", engine.replace('+', "p")));
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    write_and_kill(&dir, engine);
    let log = if engine == "lsm" || engine == "learnedstore" {
        biggest(&dir, ".log")
    } else if engine == "finedex" {
        dir.join("log-000001")
    } else {
        biggest(&dir, ".vlog")
    };
    let mut bytes = std::fs::read(&log).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let d = dir.to_str().unwrap();

    let out = lidb(&["kv", "--engine", engine, "--db", d], "get k000\n");
    assert!(!out.status.success(), "{engine}: the damaged store opened");

    let out = lidb(&["repair", "--engine", engine, "--db", d], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{engine}: repair failed: {stderr}");
    assert!(
        stdout.contains("kept") && stdout.contains("set aside"),
        "{engine}: {stdout}"
    );
    assert!(dir.join("lost").is_dir(), "{engine}: nothing in lost/");

    let gets: String = (0..100).map(|i| format!("get k{i:03}\n")).collect();
    let out = lidb(&["kv", "--engine", engine, "--db", d], &gets);
    let served = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = served.lines().collect();
    assert_eq!(lines.len(), 100, "{engine}: {served}");
    let mut served_values = 0;
    for (i, line) in lines.iter().enumerate() {
        let ok =
            *line == "(nil)" || *line == format!("value-1-{i}") || *line == format!("value-2-{i}");
        assert!(
            ok,
            "{engine}: key {i} answered {line}\nrepair said:\n{stdout}"
        );
        served_values += u32::from(*line != "(nil)");
    }
    assert!(
        served_values > 0,
        "{engine}: no key kept a value:\n{stdout}"
    );
}

#[test]
fn lidb_repair_makes_a_damaged_lsm_store_open() {
    repair_makes_a_damaged_store_open("lsm");
}

#[test]
fn lidb_repair_makes_a_damaged_learnedkv_store_open() {
    repair_makes_a_damaged_store_open("learnedkv");
}

#[test]
fn lidb_repair_makes_a_damaged_lsm_plus_store_open() {
    repair_makes_a_damaged_store_open("lsm+");
}

#[test]
fn lidb_repair_makes_a_damaged_lsm_tier_store_open() {
    repair_makes_a_damaged_store_open("lsm+tier");
}

#[test]
fn lidb_repair_makes_a_damaged_finedex_store_open() {
    repair_makes_a_damaged_store_open("finedex");
}

#[test]
fn lidb_repair_makes_a_damaged_learnedstore_open() {
    repair_makes_a_damaged_store_open("learnedstore");
}

#[test]
fn lidb_repair_refuses_another_engine_with_a_clear_error() {
    let scratch = Scratch::new("repair-cli-engine");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let d = dir.to_str().unwrap();
    let out = lidb(&["kv", "--engine", "learnedkv", "--db", d], "put a b\n");
    assert!(out.status.success());
    for engine in ["lsm+", "lsm"] {
        let out = lidb(&["repair", "--engine", engine, "--db", d], "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{engine}: {stderr}");
        assert!(stderr.contains("learnedkv"), "{engine}: {stderr}");
    }
    let out = lidb(&["repair", "--engine", "finedex", "--db", d], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "finedex: {stderr}");
    assert!(stderr.contains("holds no FineStore"), "finedex: {stderr}");
    // And the other way round: a FineStore is not repaired as an LSM.
    let fine = dir.join("fine");
    let f = fine.to_str().unwrap();
    let out = lidb(&["kv", "--engine", "finedex", "--db", f], "put a b\n");
    assert!(out.status.success());
    let out = lidb(&["repair", "--engine", "lsm", "--db", f], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "lsm on finedex: {stderr}");
    assert!(stderr.contains("finedex"), "lsm on finedex: {stderr}");
}
