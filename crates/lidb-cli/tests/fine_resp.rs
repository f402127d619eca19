//! The two deployments of FineStore across machines as processes: `lidb serve --engine finedex
//! --fine-listen`
//! (one shard over RESP and fine-wire from one index and one log: a write over either protocol
//! is read back over the other, also after a kill and restart under --sync; bad keys and keys
//! outside the shard are errors), and `lidb fine bench --mode twemproxy` (the shards over RESP
//! behind nutcracker; skipped, saying so, where nutcracker is not installed).
//!
//! Every server listens on 127.0.0.1 with port 0; children are killed on drop; every wait is
//! bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lidb_fine_net::{Client, Mode, WireError};
use lidb_testkit::Scratch;

/// A `lidb serve` child with its RESP and fine-wire addresses.
struct Shard {
    child: Child,
    resp: String,
    fine: String,
}

impl Drop for Shard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `lidb serve --engine finedex --fine-listen 127.0.0.1:0 --sync` on `dir`; reads the
/// two address lines.
fn serve(dir: &Path, shard: &str) -> Shard {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["serve", "--engine", "finedex", "--listen", "127.0.0.1:0"])
        .args(["--fine-listen", "127.0.0.1:0", "--shard", shard, "--sync"])
        .arg("--db")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = |prefix: &str| {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        l.trim()
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("line {l:?}, want {prefix:?}"))
            .to_string()
    };
    let resp = line("listening on ");
    let fine = line("fine-wire listening on ");
    Shard { child, resp, fine }
}

fn resp(addr: &str) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

fn fine(addr: &str, mode: Mode) -> Client {
    Client::connect(&[addr.to_string()], mode, Duration::from_secs(5)).unwrap()
}

/// The error text of a RESP command that must fail.
fn resp_error(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => panic!("{args:?} answered {v:?}, want an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_shard_serves_the_same_data_over_resp_and_fine_wire() {
    let scratch = Scratch::new("fine-resp-both");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let mut shard = serve(&dir, "0-1000000");
    let mut r = resp(&shard.resp);
    // RESP writes, fine-wire reads (both client modes).
    let () = redis::cmd("SET").arg("42").arg("7").query(&mut r).unwrap();
    for mode in [Mode::OnServer, Mode::Pipeline] {
        assert_eq!(
            fine(&shard.fine, mode).get(42).unwrap(),
            Some(7),
            "{mode:?}"
        );
    }
    // fine-wire writes, RESP reads.
    let mut f = fine(&shard.fine, Mode::Pipeline);
    assert_eq!(f.insert(1000, 9).unwrap(), None);
    assert_eq!(f.update(42, 8).unwrap(), Some(7));
    let got: Option<String> = redis::cmd("GET").arg("1000").query(&mut r).unwrap();
    assert_eq!(got.as_deref(), Some("9"));
    let got: Option<String> = redis::cmd("GET").arg("42").query(&mut r).unwrap();
    assert_eq!(got.as_deref(), Some("8"));
    let deleted: u64 = redis::cmd("DEL").arg("1000").query(&mut r).unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(f.get(1000).unwrap(), None);
    // Keys in numeric order over SCAN's walk.
    let () = redis::cmd("SET").arg("9").arg("1").query(&mut r).unwrap();
    let n: u64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(n, 2);

    // Bad keys and values, keys of other shards: clear errors, the connection stays usable.
    let e = resp_error(&mut r, &["SET", "abc", "1"]);
    assert!(e.contains("key \"abc\" is not a u64"), "{e}");
    let e = resp_error(&mut r, &["SET", "5", "x"]);
    assert!(e.contains("value \"x\" is not a u64"), "{e}");
    let e = resp_error(&mut r, &["GET", "042"]);
    assert!(e.contains("not a u64"), "{e}");
    let e = resp_error(&mut r, &["SET", "18446744073709551616", "1"]);
    assert!(e.contains("not a u64"), "{e}");
    let e = resp_error(&mut r, &["SET", "2000000", "1"]);
    assert!(e.contains("outside this shard's range 0-1000000"), "{e}");
    match fine(&shard.fine, Mode::OnServer).get(2_000_000) {
        Err(WireError::NoShard { .. } | WireError::WrongShard { .. }) => {}
        other => panic!("fine-wire get outside the shard: {other:?}"),
    }
    let got: Option<String> = redis::cmd("GET").arg("9").query(&mut r).unwrap();
    assert_eq!(got.as_deref(), Some("1"));

    // One log: a kill under --sync loses neither protocol's acknowledged writes.
    drop(r);
    drop(f);
    shard.child.kill().unwrap();
    shard.child.wait().unwrap();
    let shard = serve(&dir, "0-1000000");
    let mut r = resp(&shard.resp);
    let got: Option<String> = redis::cmd("GET").arg("42").query(&mut r).unwrap();
    assert_eq!(got.as_deref(), Some("8"));
    assert_eq!(fine(&shard.fine, Mode::Pipeline).get(9).unwrap(), Some(1));
    assert_eq!(fine(&shard.fine, Mode::OnServer).get(1000).unwrap(), None);
    drop(shard);
}

#[test]
fn fine_listen_and_shard_are_refused_where_they_do_not_apply() {
    let scratch = Scratch::new("fine-resp-usage");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let d = dir.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--engine", "lsm", "--fine-listen", "127.0.0.1:0"],
            "needs --engine finedex",
        ),
        (
            vec!["--engine", "finedex", "--shard", "0-10"],
            "--shard needs",
        ),
        (
            vec![
                "--engine",
                "finedex",
                "--fine-listen",
                "127.0.0.1:0",
                "--shard",
                "9-1",
            ],
            "--shard: \"9-1\"",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
            .args(["serve", "--listen", "127.0.0.1:0", "--db", d])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["fine", "bench", "--spawn-servers", "2", "--records", "2K"])
        .args(["--ops", "2K", "--json"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn fine_bench_twemproxy_drives_the_same_workloads_through_nutcracker() {
    if lidb_fine_net::twemproxy::find_binary().is_none() {
        eprintln!("skipped: nutcracker not installed (apt-get install -y nutcracker)");
        return;
    }
    let out = bench(&["--workload", "c,a", "--mode", "pipeline,twemproxy"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for w in ["c", "a"] {
        for mode in ["pipeline", "twemproxy"] {
            let all = rows
                .iter()
                .find(|r| r["mode"] == mode && r["workload"] == w && r["op"] == "all")
                .unwrap_or_else(|| panic!("no {mode} {w} row in {stdout}"));
            assert_eq!(all["ops"], 2000, "{all}");
            assert_eq!(all["wrong"], 0, "{all}");
            if mode == "twemproxy" {
                // GET and SET: one round trip each, through the proxy.
                assert_eq!(all["round_trips_per_op"].as_f64(), Some(1.0), "{all}");
            }
        }
    }
    let updates = rows
        .iter()
        .find(|r| r["mode"] == "twemproxy" && r["workload"] == "a" && r["op"] == "update")
        .unwrap_or_else(|| panic!("no twemproxy update row in {stdout}"));
    assert!(updates["ops"].as_u64().unwrap() > 0);

    // Hash sharding has no range scans: E is refused before anything starts.
    let out = bench(&["--workload", "e", "--mode", "twemproxy"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no range scans"), "{err}");
}
