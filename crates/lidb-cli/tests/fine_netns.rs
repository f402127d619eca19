//! `lidb fine serve` and `lidb fine bench` across a real network boundary: two network
//! namespaces joined by a veth pair, the server in one, the bench client in the other, talking
//! over the veth addresses. Gets of trained data must still take <= 1.05 round trips
//! and every answer must be right. Where `tc qdisc ... netem` works, both veth ends get a
//! 100 us delay and the test also checks that the round trip, not server CPU, sets the get
//! latency; where it does not (no sch_netem module), it says so and runs without delay.
//!
//! Needs root and `ip netns`; otherwise it prints "skipped: <reason>" and passes. Namespace
//! and link names carry the process id; a Drop guard deletes the namespaces (and with them
//! the veth pair) even when an assertion fails; the bench client runs under `timeout 120`, the
//! server until the guard kills it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

/// Deletes the two namespaces (which removes the veth pair) on drop.
struct Netns {
    server_ns: String,
    client_ns: String,
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.server_ns, &self.client_ns] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
        }
    }
}

/// Kills the server process on drop.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ip(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

const SERVER_IP: &str = "10.231.0.1";
const CLIENT_IP: &str = "10.231.0.2";

/// Two namespaces with a veth pair, addresses and links up; Err is the reason to skip.
fn setup() -> Result<Netns, String> {
    let pid = std::process::id();
    let ns = Netns {
        server_ns: format!("lidb-fs-{pid}"),
        client_ns: format!("lidb-fc-{pid}"),
    };
    let (vs, vc) = (format!("lfs{pid}"), format!("lfc{pid}"));
    ip(&["netns", "add", &ns.server_ns])?;
    ip(&["netns", "add", &ns.client_ns])?;
    ip(&["link", "add", &vs, "type", "veth", "peer", "name", &vc])?;
    ip(&["link", "set", &vs, "netns", &ns.server_ns])?;
    ip(&["link", "set", &vc, "netns", &ns.client_ns])?;
    for (n, dev, addr) in [
        (&ns.server_ns, &vs, SERVER_IP),
        (&ns.client_ns, &vc, CLIENT_IP),
    ] {
        ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
        ip(&["-n", n, "link", "set", dev, "up"])?;
        ip(&["-n", n, "link", "set", "lo", "up"])?;
    }
    Ok(ns)
}

/// Adds 100 us netem delay on `dev` in `ns`; Err is tc's complaint.
fn netem(ns: &str, dev: &str) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "tc", "qdisc", "add", "dev", dev])
        .args(["root", "netem", "delay", "100us"])
        .output()
        .map_err(|e| format!("tc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

#[test]
fn fine_bench_across_a_veth_pair_between_namespaces() {
    let ns = match setup() {
        Ok(ns) => ns,
        Err(reason) => {
            println!("skipped: {reason} (needs root and ip netns)");
            return;
        }
    };
    let pid = std::process::id();
    let delayed = match netem(&ns.server_ns, &format!("lfs{pid}"))
        .and_then(|()| netem(&ns.client_ns, &format!("lfc{pid}")))
    {
        Ok(()) => {
            println!("tc netem: 100 us delay on both veth ends");
            true
        }
        Err(e) => {
            println!("tc netem unavailable ({e}): running across the veth pair without delay");
            false
        }
    };
    let lidb = env!("CARGO_BIN_EXE_lidb");
    let listen = format!("{SERVER_IP}:7400");
    let mut child = Command::new("ip")
        // `ip netns exec` execs the command, so the child is the server itself and the guard's
        // kill reaches it (a `timeout` wrapper would not pass SIGKILL on).
        .args(["netns", "exec", &ns.server_ns, lidb])
        .args([
            "fine",
            "serve",
            "--listen",
            &listen,
            "--preload-ycsb",
            "5000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Served(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("listening on {listen}"));
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.client_ns, "timeout", "120", lidb])
        .args(["fine", "bench", "--servers", &listen])
        .args(["--records", "5000", "--ops", "4000", "--threads", "2"])
        .args([
            "--workload",
            "c,a",
            "--mode",
            "pipeline,on-server",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    for mode in ["pipeline", "on-server"] {
        for w in ["a", "c"] {
            let all = rows
                .iter()
                .find(|r| r["mode"] == mode && r["workload"] == w && r["op"] == "all")
                .unwrap_or_else(|| panic!("no row for {mode} {w}: {rows:?}"));
            assert_eq!(all["wrong"], 0, "{all}");
            assert_eq!(all["ops"], 4000, "{all}");
        }
    }
    let c_read = rows
        .iter()
        .find(|r| r["mode"] == "pipeline" && r["workload"] == "c" && r["op"] == "read")
        .unwrap();
    let rt = c_read["round_trips_per_op"].as_f64().unwrap();
    assert!(
        rt <= 1.05,
        "{rt} round trips per trained get: {c_read}\n{stderr}"
    );
    if delayed {
        // 100 us each way: a one-round-trip get cannot finish in under 200 us, however idle
        // the server's CPU is.
        let p50 = c_read["p50_us"].as_f64().unwrap();
        assert!(p50 >= 200.0, "p50 {p50} us under 2 x 100 us netem delay");
    }
    drop(server);
    drop(ns);
}
