//! Every engine option through every command that opens an engine (`lidb kv`, `lidb serve`,
//! `lidb repair`, and `lidb fine serve`, which serves finedex only), for every engine of lidb:
//! each is either accepted or refused with one line that names the option. Which engines read which option is written out here by hand, apart
//! from the table the CLI keeps, so a change to either shows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

const ENGINES: [&str; 7] = [
    "lsm",
    "learnedkv",
    "lsm+",
    "lsm+tier",
    "finedex",
    "learnedstore",
    "btree",
];
const LSM: [&str; 4] = ["lsm", "learnedkv", "lsm+", "lsm+tier"];
const TREE: [&str; 2] = ["learnedstore", "btree"];

/// Each engine option with a value other than its default, and the engines that read it.
fn options() -> Vec<(&'static str, Option<&'static str>, Vec<&'static str>)> {
    let lsm_tree: Vec<&str> = LSM.iter().chain(TREE.iter()).copied().collect();
    let logged: Vec<&str> = ["finedex"].iter().chain(TREE.iter()).copied().collect();
    vec![
        ("--sync", None, ENGINES.to_vec()),
        ("--recovery-mode", Some("absolute"), ENGINES.to_vec()),
        ("--direct-io", None, lsm_tree),
        ("--write-buffer", Some("32MiB"), LSM.to_vec()),
        ("--block-cache", Some("4MiB"), LSM.to_vec()),
        ("--index", Some("rmi"), LSM.to_vec()),
        ("--index", Some("alex"), LSM.to_vec()),
        ("--index", Some("pgm+keys"), LSM.to_vec()),
        ("--boundary", Some("32"), LSM.to_vec()),
        ("--sst-size", Some("8MiB"), LSM.to_vec()),
        ("--convert-at-lsm-bytes", Some("256MiB"), vec!["learnedkv"]),
        ("--convert-at-lsm-levels", Some("3"), vec!["learnedkv"]),
        (
            "--scan-gc",
            Some("0"),
            vec!["learnedkv", "lsm+", "lsm+tier"],
        ),
        ("--checkpoint-log-bytes", Some("1MiB"), logged),
        ("--pool", Some("4MiB"), TREE.to_vec()),
        ("--page-size", Some("8KiB"), TREE.to_vec()),
        ("--learned", Some("off"), vec!["learnedstore"]),
        ("--leaf-model", Some("pgm/16"), vec!["learnedstore"]),
    ]
}

/// `lidb repair` uses only these of the engine options.
const REPAIR_USES: [&str; 3] = ["--index", "--boundary", "--sst-size"];

/// Runs `lidb CMD --db DIR --engine ENGINE OPT [VALUE]` and returns its stderr: for `kv` with
/// empty input (it opens, answers nothing, closes), for `serve` until it listens (then it is
/// killed) or exits, for `repair` to its end.
fn run(cmd: &str, dir: &Path, engine: &str, opt: &str, value: Option<&str>) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lidb"));
    c.args([cmd, "--engine", engine, opt])
        .args(value)
        .arg("--db")
        .arg(dir);
    if cmd == "serve" {
        c.args(["--listen", "127.0.0.1:0"]);
    }
    stderr_of(c, cmd == "serve").0
}

/// Runs `c` and returns its stderr and its first line of stdout; a server (`until_listening`)
/// is killed once it printed that line (or exited).
fn stderr_of(mut c: Command, until_listening: bool) -> (String, String) {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    if until_listening {
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let _ = child.kill();
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    child.wait().unwrap();
    (err, line)
}

/// One refusal line naming `opt`, or none.
fn refused(err: &str, opt: &str) -> bool {
    let refusal: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("which would ignore it"))
        .collect();
    match refusal.as_slice() {
        [] => false,
        [line] => {
            assert!(line.contains(opt), "refusal names another option: {err}");
            assert_eq!(err.lines().count(), 1, "a refusal is one line: {err}");
            true
        }
        _ => panic!("more than one refusal: {err}"),
    }
}

#[test]
fn every_option_is_accepted_or_refused_in_one_line_by_every_command() {
    let root = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for cmd in ["kv", "serve", "repair"] {
        for engine in ENGINES {
            for (i, (opt, value, readers)) in options().into_iter().enumerate() {
                let dir = root.path().join(format!("{cmd}-{engine}-{i}"));
                // repair needs an existing store; an empty directory is one it refuses or
                // rebuilds, after the options were checked.
                std::fs::create_dir_all(&dir).unwrap();
                let reads = readers.contains(&engine);
                let accepted = if cmd == "repair" {
                    reads && REPAIR_USES.contains(&opt)
                } else {
                    reads
                };
                let err = run(cmd, &dir, engine, opt, value);
                assert_eq!(
                    refused(&err, opt),
                    !accepted,
                    "lidb {cmd} --engine {engine} {opt} {value:?}: stderr {err}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 3 * 7 * 18);
}

/// `lidb CMD OPT nosuch --db DIR` must exit 2 with every one of `names` in its error.
fn refusal_lists(cmd: &str, opt: &str, names: &[&str], dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args([cmd, opt, "nosuch", "--db"])
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{cmd} {opt}: {err}");
    for name in names {
        assert!(err.contains(name), "{cmd} {opt}: {name} missing from {err}");
    }
}

#[test]
fn a_wrong_engine_or_index_lists_every_name() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = [
        "fp", "pgm", "rs", "rmi", "plex", "lpa", "alex", "lipp", "dili", "lits",
    ];
    for cmd in ["kv", "serve", "repair"] {
        refusal_lists(cmd, "--index", &indexes, dir.path());
        refusal_lists(cmd, "--engine", &ENGINES, dir.path());
    }
}

/// `lidb fine serve` uses only these of the engine options (its durable FineStore's).
const FINE_SERVE_USES: [&str; 3] = ["--sync", "--recovery-mode", "--checkpoint-log-bytes"];

/// `lidb fine serve --dir DIR --listen 127.0.0.1:0 ARGS`: its stderr, and whether it listened
/// (then it is killed).
fn fine_serve(dir: &Path, args: &[&str]) -> (String, bool) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lidb"));
    c.args(["fine", "serve", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .args(args);
    let (err, line) = stderr_of(c, true);
    (err, line.starts_with("listening on "))
}

#[test]
fn fine_serve_takes_the_options_of_its_durable_store_and_refuses_the_rest() {
    let root = tempfile::tempdir().unwrap();
    for (i, (opt, value, _)) in options().into_iter().enumerate() {
        let dir = root.path().join(format!("fine-{i}"));
        let args: Vec<&str> = std::iter::once(opt).chain(value).collect();
        let (err, listened) = fine_serve(&dir, &args);
        let accepted = FINE_SERVE_USES.contains(&opt);
        assert_eq!(refused(&err, opt), !accepted, "fine serve {args:?}: {err}");
        assert_eq!(listened, accepted, "fine serve {args:?}: {err}");
    }
    let (err, listened) = fine_serve(&root.path().join("finedex"), &["--engine", "finedex"]);
    assert!(listened, "{err}");
    let (err, listened) = fine_serve(&root.path().join("lsm"), &["--engine", "lsm"]);
    assert!(!listened && err.contains("finedex only"), "{err}");
}
