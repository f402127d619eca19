//! `--metrics-listen`: a scrape over a plain socket after a few commands through the `redis`
//! client (counters moved by what was sent, a cumulative histogram whose count is the commands
//! timed, the engine's memory gauges), 404 elsewhere, bad requests answered or closed, and
//! protected mode on the metrics address.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lidb_engines::{self as engines, EngineConfig};
use lidb_server::{Server, ServerConfig, ServerError};
use support::{TestServer, start_with};

fn with_metrics() -> TestServer {
    start_with(
        "lsm",
        ServerConfig {
            metrics_listen: Some("127.0.0.1:0".into()),
            ..ServerConfig::default()
        },
    )
}

/// Sends `request` (write errors ignored: the server may close first) and reads until the
/// server closes or five seconds pass; the text that came back.
fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(request);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The body of a `GET /metrics`, checked to be a 200 in the text format.
fn scrape(addr: SocketAddr) -> String {
    let text = http(addr, b"GET /metrics HTTP/1.1\r\nHost: lidb\r\n\r\n");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP head");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_string()
}

/// Sample lines as `name{labels}` to value; checks every family has its HELP and TYPE.
fn samples(body: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').expect("name value");
        let family = name.split('{').next().unwrap();
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| family.strip_suffix(s))
            .filter(|b| body.contains(&format!("# TYPE {b} histogram")))
            .unwrap_or(family);
        assert!(body.contains(&format!("# HELP {base} ")), "no HELP: {base}");
        assert!(body.contains(&format!("# TYPE {base} ")), "no TYPE: {base}");
        out.insert(name.to_string(), value.parse().expect("a number"));
    }
    out
}

fn delta(before: &HashMap<String, f64>, after: &HashMap<String, f64>, name: &str) -> f64 {
    after[name] - before.get(name).copied().unwrap_or(0.0)
}

#[test]
fn a_scrape_counts_the_commands_sent() {
    let server = with_metrics();
    let metrics = server.handle.as_ref().unwrap().metrics_addr().unwrap();
    // Connect first: whatever the client sends on connecting is counted before the first scrape.
    let mut con = server.client();
    let before = samples(&scrape(metrics));
    for i in 0..3 {
        redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg("v")
            .query::<()>(&mut con)
            .unwrap();
    }
    let v: Option<String> = redis::cmd("GET").arg("k1").query(&mut con).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let v: Option<String> = redis::cmd("GET").arg("nope").query(&mut con).unwrap();
    assert_eq!(v, None);
    let n: i64 = redis::cmd("DEL").arg("k0").query(&mut con).unwrap();
    assert_eq!(n, 1);
    assert!(redis::cmd("NOSUCHCOMMAND").query::<()>(&mut con).is_err());
    let body = scrape(metrics);
    let after = samples(&body);

    let cmd = |c: &str| format!("lidb_commands_total{{command=\"{c}\"}}");
    assert_eq!(delta(&before, &after, &cmd("set")), 3.0);
    assert_eq!(delta(&before, &after, &cmd("get")), 2.0);
    assert_eq!(delta(&before, &after, &cmd("del")), 1.0);
    assert_eq!(delta(&before, &after, &cmd("other")), 1.0);
    assert_eq!(delta(&before, &after, "lidb_errors_total"), 1.0);
    assert_eq!(
        delta(&before, &after, "lidb_command_duration_seconds_count"),
        7.0
    );
    assert!(after["lidb_connections"] >= 1.0);
    assert!(after["lidb_connections_total"] >= 1.0);

    // Buckets in order, cumulative, +Inf last and equal to the count, which is every command.
    let buckets: Vec<(String, f64)> = body
        .lines()
        .filter_map(|l| l.strip_prefix("lidb_command_duration_seconds_bucket{le=\""))
        .map(|l| {
            let (le, rest) = l.split_once("\"}").unwrap();
            (le.to_string(), rest.trim().parse().unwrap())
        })
        .collect();
    assert_eq!(buckets.len(), 10);
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
    assert_eq!(buckets.last().unwrap().0, "+Inf");
    let count = after["lidb_command_duration_seconds_count"];
    assert_eq!(buckets.last().unwrap().1, count);
    let total: f64 = ["get", "set", "del", "other"]
        .iter()
        .map(|c| after[&cmd(c)])
        .sum();
    assert_eq!(total, count);
    assert!(after["lidb_command_duration_seconds_sum"] > 0.0);

    let mut memory = 0.0;
    for part in ["index", "filter", "cache", "memtable", "data"] {
        let name = format!("lidb_engine_memory_bytes{{part=\"{part}\"}}");
        assert!(after.contains_key(&name), "no {name}");
        memory += after[&name];
    }
    // The writes are held somewhere in memory (the memtable, for lsm).
    assert!(memory > 0.0, "{body}");
    assert!(after.contains_key("lidb_engine_reads_from_lsm_total"));
    drop(con);
    server.stop();
}

#[test]
fn other_paths_and_bad_requests() {
    let server = with_metrics();
    let metrics = server.handle.as_ref().unwrap().metrics_addr().unwrap();
    let other = http(metrics, b"GET /other HTTP/1.1\r\n\r\n");
    assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
    let post = http(metrics, b"POST /metrics HTTP/1.1\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 404 "), "{post}");
    let garbage = http(metrics, b"\x00\x01 not http\r\n\r\n");
    assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    // A head that never ends: closed unanswered once past the bound.
    let huge = vec![b'a'; 64 << 10];
    assert_eq!(http(metrics, &huge), "");
    // The responder survived them all.
    assert!(scrape(metrics).contains("lidb_commands_total"));
    server.stop();
}

#[test]
fn protected_mode_covers_the_metrics_address() {
    let dir = lidb_testkit::Scratch::new("server-metrics");
    let engine = engines::open("lsm", &EngineConfig::new(dir.to_path_buf())).unwrap();
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        metrics_listen: Some("0.0.0.0:0".into()),
        ..ServerConfig::default()
    };
    let bound = Server::bind(config, engine).map(drop);
    match bound {
        Err(e @ ServerError::Unprotected { .. }) => {
            let line = e.to_string();
            assert!(line.contains("0.0.0.0:0") && !line.contains('\n'), "{line}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
