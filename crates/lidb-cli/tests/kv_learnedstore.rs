//! `lidb kv --engine learnedstore|btree`: the line protocol of the other engines plus
//! `checkpoint`, what a reopen keeps, and the options: those only LearnedStore reads refused
//! elsewhere, those it would ignore refused to it, bad values as one-line errors. (The SIGKILL
//! test under `--sync` is in kv_crash.rs, beside the other engines'; `lidb serve` in serve.rs.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::process::{Command, Output};

use lidb_testkit::Scratch;
use serde_json::Value;
use support::lidb;

fn kv(engine: &str, db: &std::path::Path, extra: &[&str], input: &str) -> Output {
    let db = db.to_str().unwrap();
    let mut args = vec!["kv", "--engine", engine, "--db", db];
    args.extend_from_slice(extra);
    lidb(&args, input)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failed run: non-zero exit, one stderr line naming every `needle`, no panic.
fn assert_one_line_error(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err:?}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// Every command of the protocol on both engines, `checkpoint` included; the LSM and tiered
/// commands answer an ERR line and the session goes on; a second session finds the data (after
/// a clean close, and after a checkpoint followed by more writes).
#[test]
fn the_line_protocol_and_checkpoint_on_both_engines_and_a_reopen_keeps_the_data() {
    for engine in ["learnedstore", "btree"] {
        let dir = Scratch::new(&format!("cli-tree-protocol-{engine}"));
        let db = dir.join("db");
        let extra = ["--pool", "256KiB", "--sync"];
        let puts: String = (0..300)
            .map(|i| format!("put k{i:03} v{i}\\x20x\n"))
            .collect();
        let input = format!(
            "{puts}get k007\ndel k007\nget k007\nscan k010 k013\nscan k100 k200 2\nflush\n\
             checkpoint\nput k500 after\ncompact\ngc\nconvert\nstats\n"
        );
        let o = kv(engine, &db, &extra, &input);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        let out = stdout(&o);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[..300].iter().all(|l| *l == "OK"), "{engine}: {out}");
        assert_eq!(
            lines[300..314],
            [
                "v7\\x20x",
                "OK",
                "(nil)",
                "k010 v10\\x20x",
                "k011 v11\\x20x",
                "k012 v12\\x20x",
                "(end)",
                "k100 v100\\x20x",
                "k101 v101\\x20x",
                "(end)",
                "OK",
                "OK",
                "OK",
                "ERR compact is a command of the LSM engines; finedex, learnedstore and btree \
                 have checkpoint",
            ],
            "{engine}: {out}"
        );
        assert!(lines[314].starts_with("ERR gc is a command"), "{out}");
        assert!(lines[315].starts_with("ERR convert is a command"), "{out}");
        let stats: Value = serde_json::from_str(lines[316]).unwrap();
        assert_eq!(stats["pool_frames"], 64, "{engine}: {stats}");
        assert!(stats["device_writes"].as_u64().unwrap() > 0, "{stats}");

        let o = kv(
            engine,
            &db,
            &extra,
            "get k000\nget k007\nget k299\nget k500\n",
        );
        assert_eq!(
            stdout(&o),
            "v0\\x20x\n(nil)\nv299\\x20x\nafter\n",
            "{engine}: {}",
            stderr(&o)
        );
    }
}

/// Options only LearnedStore reads are refused to the other engines, the LSM options are refused
/// to it, --learned to btree (which is learnedstore with it off); options it reads are taken;
/// bad values are one-line errors; `lidb repair` says what to do instead.
#[test]
fn options_it_would_ignore_and_bad_values_are_one_line_errors() {
    let dir = Scratch::new("cli-tree-options");
    let tree = dir.join("tree");
    for (engine, extra, needles) in [
        (
            "lsm",
            &["--pool", "1MiB"][..],
            &["--pool", "learnedstore and btree", "not lsm"][..],
        ),
        (
            "finedex",
            &["--page-size", "8KiB"],
            &["--page-size", "not finedex"],
        ),
        ("lsm", &["--learned", "off"], &["--learned", "not lsm"]),
        (
            "btree",
            &["--learned", "on"],
            &["--learned", "btree is learnedstore with --learned off"],
        ),
        (
            "learnedstore",
            &["--write-buffer", "1MiB"],
            &["--write-buffer", "LSM engines", "not learnedstore"],
        ),
        ("btree", &["--index", "pgm"], &["--index", "not btree"]),
        (
            "learnedstore",
            &["--convert-at-lsm-levels", "2"],
            &["--convert-at-lsm-levels"],
        ),
        ("learnedstore", &["--page-size", "3000"], &["page size"]),
        (
            "btree",
            &["--leaf-model", "pgm/16"],
            &["--leaf-model", "not btree"],
        ),
        ("learnedstore", &["--leaf-model", "rs/1"], &["at least 2"]),
        (
            "learnedstore",
            &["--leaf-model", "nope"],
            &["unknown index"],
        ),
    ] {
        let o = kv(engine, &tree, extra, "");
        assert_one_line_error(&o, needles);
    }
    let o = kv(
        "learnedstore",
        &tree,
        &[
            "--pool",
            "1MiB",
            "--page-size",
            "8KiB",
            "--learned",
            "off",
            "--checkpoint-log-bytes",
            "1MiB",
            "--recovery-mode",
            "point-in-time",
        ],
        "put a 1\nget a\n",
    );
    assert_eq!(stdout(&o), "OK\n1\n", "{}", stderr(&o));
    let o = kv("btree", &tree, &["--page-size", "8KiB"], "get a\n");
    assert_eq!(stdout(&o), "1\n", "{}", stderr(&o));
    let o = kv(
        "learnedstore",
        &tree,
        &["--page-size", "8KiB", "--leaf-model", "pgm/16"],
        "put b 2\nget a\nget b\n",
    );
    assert_eq!(stdout(&o), "OK\n1\n2\n", "{}", stderr(&o));
    for engine in ["learnedstore", "btree"] {
        // The repair of an intact store: it reads the page size (8 KiB) from the file, keeps
        // every write and says what it did; the store opens after.
        let o = Command::new(env!("CARGO_BIN_EXE_lidb"))
            .args(["repair", "--engine", engine, "--db", tree.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(
            text.contains("repair: the logs are intact"),
            "{engine}: {text}"
        );
        assert!(
            text.contains("learned mapping table rebuilt"),
            "{engine}: {text}"
        );
        let o = kv(engine, &tree, &["--page-size", "8KiB"], "get a\n");
        assert_eq!(stdout(&o), "1\n", "{engine}: {}", stderr(&o));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["repair", "--engine", "lsm", "--db", tree.to_str().unwrap()])
        .output()
        .unwrap();
    assert_one_line_error(&o, &["holds a LearnedStore"]);
    let o = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args([
            "serve",
            "--engine",
            "lsm",
            "--pool",
            "1MiB",
            "--db",
            dir.join("served").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_one_line_error(&o, &["--pool", "not lsm"]);
}
