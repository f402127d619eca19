//! `lidb fine serve` as processes on 127.0.0.1: a shard killed with SIGKILL under `--sync` in
//! the middle of a client's writes and restarted from its log on the same port and directory
//! (the client reconnects, refreshes and loses no acknowledged write; checked against a
//! BTreeMap), and `lidb fine bench` against two shard processes (JSON rows, every answer
//! checked), and `--delay-us` through the bench's relays. Every loop is bounded; failures print
//! the seed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lidb_fine_net::{Client, Mode};
use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fine_serve(listen: &str, extra: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["fine", "serve", "--listen", listen])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line {line:?}"))
        .to_string();
    Served { child, addr }
}

fn durable(dir: &Path, listen: &str) -> Served {
    fine_serve(listen, &["--dir", dir.to_str().unwrap(), "--sync"])
}

/// Kills `server`, restarts it from its log in `dir` on `addr`, and reads every pair back through
/// a fresh client (returned for further checks).
fn restart_and_read_all(
    mut server: Served,
    dir: &Path,
    addr: &str,
) -> (Served, Client, Vec<(u64, u64)>) {
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let server = durable(dir, addr);
    let mut client = Client::connect(
        std::slice::from_ref(&server.addr),
        Mode::Pipeline,
        Duration::from_secs(5),
    )
    .unwrap();
    let all = client.range(0, u64::MAX, 65_536).unwrap();
    (server, client, all)
}

#[test]
fn a_killed_shard_restarted_from_its_log_loses_no_acknowledged_write() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = Scratch::new("fine-kill");
    let mut server = durable(&dir, "127.0.0.1:0");
    let addr = server.addr.clone();
    let mut c = Client::connect(
        std::slice::from_ref(&addr),
        Mode::Pipeline,
        Duration::from_secs(20),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let kill_at = rng.gen_range(100..400u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..600u64 {
        assert!(Instant::now() < deadline, "seed {seed}: too slow");
        if i == kill_at {
            server.child.kill().unwrap();
            server.child.wait().unwrap();
            // Restarted on the same port and directory while the client keeps going: its next
            // call reconnects (retrying for up to 20 s).
            server = durable(&dir, &addr);
        }
        let k = rng.gen_range(0..2_000u64);
        match rng.gen_range(0..4) {
            0 => assert_eq!(
                c.remove(k).unwrap(),
                model.remove(&k),
                "seed {seed}: remove {k}"
            ),
            1 => assert_eq!(
                c.get(k).unwrap(),
                model.get(&k).copied(),
                "seed {seed}: get {k}"
            ),
            _ => assert_eq!(
                c.insert(k, i).unwrap(),
                model.insert(k, i),
                "seed {seed}: insert {k}"
            ),
        }
    }
    assert!(c.stats().reconnects >= 1, "seed {seed}: {:?}", c.stats());
    // And once more, cold: every acknowledged write is in the log.
    let (server, mut fresh, all) = restart_and_read_all(server, &dir, &addr);
    let want: Vec<(u64, u64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(all, want, "seed {seed}");
    for (k, v) in &model {
        assert_eq!(fresh.get(*k).unwrap(), Some(*v), "seed {seed}: get {k}");
    }
    drop(server);
}

#[test]
fn fine_bench_drives_two_shard_processes_and_checks_every_answer() {
    let half = u64::MAX / 2;
    let (ra, rb) = (format!("0-{half}"), format!("{}-{}", half + 1, u64::MAX));
    let a = fine_serve("127.0.0.1:0", &["--range", &ra, "--preload-ycsb", "2000"]);
    let b = fine_serve("127.0.0.1:0", &["--range", &rb, "--preload-ycsb", "2000"]);
    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["fine", "bench", "--servers"])
        .arg(format!("{},{}", a.addr, b.addr))
        .args(["--records", "2000", "--ops", "2000", "--threads", "2"])
        .args([
            "--workload",
            "a,c",
            "--mode",
            "pipeline,on-server,on-client",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for mode in ["pipeline", "on-server", "on-client"] {
        for w in ["a", "c"] {
            let all = rows
                .iter()
                .find(|r| r["mode"] == mode && r["workload"] == w && r["op"] == "all")
                .unwrap_or_else(|| panic!("no row for {mode} {w}: {rows:?}"));
            for field in ["kops_per_s", "p50_us", "p99_us", "round_trips_per_op"] {
                assert!(all[field].as_f64().unwrap() > 0.0, "{field} of {all}");
            }
            assert_eq!(all["wrong"], 0);
        }
    }
    // Preloaded (bulk-loaded): gets of loaded records read trained data in one round trip.
    let c_read = rows
        .iter()
        .find(|r| r["mode"] == "pipeline" && r["workload"] == "c" && r["op"] == "read")
        .unwrap();
    assert!(
        c_read["round_trips_per_op"].as_f64().unwrap() <= 1.05,
        "{c_read}\n{stderr}"
    );
    // On-client: the client reads the model before the window, so at least 2.
    let on_client = rows
        .iter()
        .find(|r| r["mode"] == "on-client" && r["workload"] == "c" && r["op"] == "read")
        .unwrap();
    assert!(
        on_client["round_trips_per_op"].as_f64().unwrap() >= 2.0,
        "{on_client}\n{stderr}"
    );
    // Bad usage is one line and a non-zero exit.
    let bad = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args([
            "fine",
            "bench",
            "--mode",
            "on-nowhere",
            "--spawn-servers",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--mode"));
}

#[test]
fn fine_bench_spawns_shards_for_the_insert_workload_in_pipeline_and_locks_modes() {
    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["fine", "bench", "--spawn-servers", "2", "--records", "1000"])
        .args([
            "--ops",
            "1000",
            "--workload",
            "insert,c",
            "--mode",
            "pipeline,locks",
        ])
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rt = |mode: &str, w: &str| {
        let row = rows
            .iter()
            .find(|r| r["mode"] == mode && r["workload"] == w && r["op"] == "all")
            .unwrap_or_else(|| panic!("no row {mode} {w}: {rows:?}"));
        assert_eq!(row["wrong"], 0, "{row}");
        row["round_trips_per_op"].as_f64().unwrap()
    };
    // An insert reads its window, then sends the op to the bin; locks adds LOCK and UNLOCK.
    assert!((rt("pipeline", "insert") - 2.0).abs() < 0.05, "{rows:?}");
    assert!((rt("locks", "insert") - 4.0).abs() < 0.05, "{rows:?}");
    assert!(rt("pipeline", "c") <= 1.05, "{rows:?}");
    // The client's model cache against the servers' data, measured once per run.
    let note = stderr
        .lines()
        .find(|l| l.starts_with("# client model cache: "))
        .unwrap_or_else(|| panic!("no model cache note: {stderr}"));
    let bytes: u64 = note
        .trim_start_matches("# client model cache: ")
        .split(' ')
        .next()
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    // 1,000 records and the workload's inserts over two shards: at least one model each, and
    // far less than the 16 bytes a key of the servers' data.
    assert!(bytes > 0 && bytes < 16 * 1000, "{note}");
    assert!(note.contains("bytes per million keys"), "{note}");
}

/// One client thread of the kill test: ops on keys `k % 2 == t`; an op whose call had to
/// reconnect may have been applied before the kill and sent again, so its reported old value
/// may be its own first application's (the state is checked exactly either way).
fn writer_run(
    addr: &str,
    t: u64,
    seed: u64,
    ops: &std::sync::atomic::AtomicU64,
) -> (BTreeMap<u64, u64>, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ t);
    let mut c =
        Client::connect(&[addr.to_string()], Mode::Pipeline, Duration::from_secs(20)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..400u64 {
        let k = rng.gen_range(0..1_000u64) * 2 + t;
        let v = (i << 1) | t;
        let before = c.stats().reconnects;
        if rng.gen_range(0..4) == 0 {
            let got = c.remove(k).unwrap();
            let want = model.remove(&k);
            let resent = c.stats().reconnects > before;
            assert!(
                got == want || (resent && got.is_none()),
                "seed {seed}: remove {k}: {got:?} {want:?}"
            );
        } else {
            let got = c.insert(k, v).unwrap();
            let want = model.insert(k, v);
            let resent = c.stats().reconnects > before;
            assert!(
                got == want || (resent && got == Some(v)),
                "seed {seed}: insert {k}: {got:?} {want:?}"
            );
        }
        ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    (model, c.stats().reconnects)
}

#[test]
fn clients_running_through_a_shard_kill_and_restart_lose_no_acknowledged_write() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let dir = Scratch::new("fine-kill2");
    let mut server = durable(&dir, "127.0.0.1:0");
    let addr = server.addr.clone();
    let ops = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let (addr, ops) = (addr.clone(), std::sync::Arc::clone(&ops));
            std::thread::spawn(move || writer_run(&addr, t, seed, &ops))
        })
        .collect();
    // Kill while both clients are in the middle of their runs.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ops.load(std::sync::atomic::Ordering::Relaxed) < 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    server = durable(&dir, &addr);
    let mut model = BTreeMap::new();
    let mut reconnects = 0;
    for h in threads {
        let (m, r) = h.join().unwrap();
        model.extend(m);
        reconnects += r;
    }
    // Normally both clients run through the kill; at least one surely does (the kill comes after
    // 200 of their 800 operations).
    assert!(
        reconnects >= 1,
        "seed {seed}: no client ran through the kill"
    );
    let (server, _client, all) = restart_and_read_all(server, &dir, &addr);
    let want: Vec<(u64, u64)> = model.into_iter().collect();
    assert_eq!(all, want, "seed {seed}");
    drop(server);
}

#[test]
fn fine_bench_delay_us_adds_the_delay_to_every_round_trip() {
    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["fine", "bench", "--spawn-servers", "1", "--records", "500"])
        .args(["--ops", "200", "--threads", "1", "--workload", "c"])
        .args([
            "--mode",
            "pipeline,on-server",
            "--delay-us",
            "1000",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("relay delaying 1000 us"), "{stderr}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for mode in ["pipeline", "on-server"] {
        let read = rows
            .iter()
            .find(|r| r["mode"] == mode && r["op"] == "read")
            .unwrap_or_else(|| panic!("no read row for {mode}: {rows:?}"));
        assert_eq!(read["wrong"], 0, "{read}");
        assert_eq!(read["delay_us"], 1000, "{read}");
        // One round trip per get, 1 ms each way through the relay.
        assert!(
            read["round_trips_per_op"].as_f64().unwrap() <= 1.05,
            "{read}"
        );
        assert!(read["p50_us"].as_f64().unwrap() >= 2000.0, "{read}");
    }
}
