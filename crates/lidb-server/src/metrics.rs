//! `--metrics-listen`: the server's counters in Prometheus's text exposition format (version
//! 0.0.4), served by a minimal HTTP/1.1 responder: `GET /metrics` gets `200`, any other request
//! line `404`, a request line longer than [`MAX_REQUEST_BYTES`] or one not complete within
//! [`READ_TIMEOUT`] is closed unanswered (`400` when it is complete but not HTTP).
//!
//! Two halves: [`CommandMetrics`], bumped on the request path by whichever thread ran the command
//! (engine pool or async worker), and [`render`] plus [`serve`], on the server's runtime. Every
//! request-path counter is a [`Counter`]: a command writes its own thread's shard only, so no
//! lock or shared cache line is on the request path. The counts INFO already shows (connections,
//! the engine's memory and read split) are read from where INFO reads them, not counted twice.
//!
//! Invariants:
//! 1. Every command that reaches `commands::execute`, a plain-SET group or the memory-read
//!    prefix is counted once in `lidb_commands_total` under its name (get, set, del or other)
//!    and timed once into the histogram, so the histogram's `_count` is the sum of
//!    `lidb_commands_total`. Without `--metrics-listen` nothing is timed or counted here
//!    (`Settings::metrics`): the request path then reads no clock for metrics.
//! 2. Buckets are stored per interval and summed when rendered, so the rendered buckets are
//!    cumulative and the `+Inf` bucket equals `_count` in any one scrape.
//! 3. The responder never runs an engine call on an async worker: rendering runs in
//!    `spawn_blocking`.

use std::sync::Arc;
use std::time::Duration;

use lidb_engines::MemorySplit;
use lidb_sync::Counter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::state::Shared;

/// Upper bounds of the latency buckets, in microseconds (`+Inf` follows).
pub const BUCKETS_MICROS: [u64; 9] = [10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000];

/// The command names counted on their own; the rest are `other`.
const NAMES: [&str; 4] = ["get", "set", "del", "other"];

/// The longest request head read before the connection is closed.
pub const MAX_REQUEST_BYTES: usize = 8 << 10;

/// How long a scrape may take to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Request-path counters: per command name, errors, and the latency histogram.
#[derive(Debug, Default)]
pub struct CommandMetrics {
    commands: [Counter; 4],
    errors: Counter,
    /// Per interval: `buckets[i]` counts latencies in `(BUCKETS_MICROS[i-1], BUCKETS_MICROS[i]]`,
    /// the last one those above every bound.
    buckets: [Counter; 10],
    sum_nanos: Counter,
}

impl CommandMetrics {
    /// Counts one command named `name` (any case) that took `elapsed` and failed if `error`.
    pub fn record(&self, name: &[u8], elapsed: Duration, error: bool) {
        let slot = NAMES
            .iter()
            .take(3)
            .position(|n| name.eq_ignore_ascii_case(n.as_bytes()))
            .unwrap_or(3);
        self.record_many(slot, 1, elapsed, error);
    }

    /// Counts `n` plain SETs written together in `elapsed`, each timed as its share.
    pub fn record_sets(&self, n: u64, elapsed: Duration, error: bool) {
        self.record_many(
            1,
            n,
            elapsed / u32::try_from(n.max(1)).unwrap_or(u32::MAX),
            error,
        );
    }

    fn record_many(&self, slot: usize, n: u64, each: Duration, error: bool) {
        if let Some(c) = self.commands.get(slot) {
            c.add(n);
        }
        if error {
            self.errors.add(n);
        }
        let nanos = u64::try_from(each.as_nanos()).unwrap_or(u64::MAX);
        // Prometheus's `le`: a latency equal to a bound is in that bound's bucket.
        let bucket = BUCKETS_MICROS
            .iter()
            .position(|&b| nanos <= b * 1000)
            .unwrap_or(BUCKETS_MICROS.len());
        if let Some(b) = self.buckets.get(bucket) {
            b.add(n);
        }
        self.sum_nanos.add(nanos.saturating_mul(n));
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
}

/// A family of one unlabelled sample: its HELP and TYPE lines and its value.
fn scalar(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    family(out, name, kind, help);
    out.push_str(&format!("{name} {value}\n"));
}

/// The exposition text of `shared`'s counters. Calls the engine (memory, read split): run it
/// off the async workers.
pub fn render(shared: &Shared) -> String {
    let c = &shared.counters;
    let m = &c.metrics;
    let mut out = String::new();
    family(
        &mut out,
        "lidb_commands_total",
        "counter",
        "Commands run, by name.",
    );
    for (name, counter) in NAMES.iter().zip(&m.commands) {
        out.push_str(&format!(
            "lidb_commands_total{{command=\"{name}\"}} {}\n",
            counter.get()
        ));
    }
    scalar(
        &mut out,
        "lidb_errors_total",
        "counter",
        "Commands answered with an error.",
        m.errors.get(),
    );
    scalar(
        &mut out,
        "lidb_connections",
        "gauge",
        "Client connections open now.",
        Shared::count(&c.connections_open),
    );
    scalar(
        &mut out,
        "lidb_connections_total",
        "counter",
        "Client connections accepted.",
        Shared::count(&c.connections_received),
    );
    family(
        &mut out,
        "lidb_command_duration_seconds",
        "histogram",
        "Time to run one command on the server (a pipelined SET group: its share).",
    );
    let counts: Vec<u64> = m.buckets.iter().map(Counter::get).collect();
    let mut cumulative = 0u64;
    for (i, n) in counts.iter().enumerate() {
        cumulative += n;
        let le = BUCKETS_MICROS
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |b| format!("{}", *b as f64 / 1e6));
        out.push_str(&format!(
            "lidb_command_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}\n"
        ));
    }
    out.push_str(&format!(
        "lidb_command_duration_seconds_sum {}\n",
        m.sum_nanos.get() as f64 / 1e9
    ));
    out.push_str(&format!(
        "lidb_command_duration_seconds_count {cumulative}\n"
    ));
    let MemorySplit {
        index_bytes,
        filter_bytes,
        cache_bytes,
        memtable_bytes,
        data_bytes,
    } = shared.engine.memory();
    family(
        &mut out,
        "lidb_engine_memory_bytes",
        "gauge",
        "The engine's bytes in memory, by part.",
    );
    for (part, bytes) in [
        ("index", index_bytes),
        ("filter", filter_bytes),
        ("cache", cache_bytes),
        ("memtable", memtable_bytes),
        ("data", data_bytes),
    ] {
        out.push_str(&format!(
            "lidb_engine_memory_bytes{{part=\"{part}\"}} {bytes}\n"
        ));
    }
    let split = shared.engine.read_split();
    let parts = crate::info::EngineParts::of(shared);
    if parts.lsm {
        scalar(
            &mut out,
            "lidb_engine_reads_from_lsm_total",
            "counter",
            "Reads the LSM answered.",
            split.from_lsm,
        );
    }
    if parts.tier {
        scalar(
            &mut out,
            "lidb_engine_reads_from_tier_total",
            "counter",
            "Reads the tier answered.",
            split.from_tier,
        );
        scalar(
            &mut out,
            "lidb_engine_gcs_total",
            "counter",
            "Garbage collections of the tier.",
            split.gcs,
        );
    }
    out
}

/// Answers scrapes on `listener` until the task is aborted.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tokio::spawn(answer(stream, Arc::clone(&shared)));
    }
}

/// One scrape: reads the request head, answers, closes.
async fn answer(mut stream: TcpStream, shared: Arc<Shared>) {
    let Ok(Some(line)) = tokio::time::timeout(READ_TIMEOUT, request_line(&mut stream)).await else {
        return;
    };
    let mut parts = line.split(' ');
    let (status, body) = match (parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics"), Some(v)) if v.starts_with("HTTP/") => {
            let text = tokio::task::spawn_blocking(move || render(&shared)).await;
            match text {
                Ok(text) => ("200 OK", text),
                Err(_) => ("500 Internal Server Error", "render failed\n".into()),
            }
        }
        (Some(_), Some(_), Some(v)) if v.starts_with("HTTP/") => {
            ("404 Not Found", "not found\n".into())
        }
        _ => ("400 Bad Request", "bad request\n".into()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The request line, once the whole head (up to the blank line) has come; `None` if the peer
/// closed first or the head passed [`MAX_REQUEST_BYTES`].
async fn request_line(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_REQUEST_BYTES {
            return None;
        }
        head.extend_from_slice(buf.get(..n)?);
    }
    let end = head.iter().position(|&b| b == b'\r')?;
    Some(String::from_utf8_lossy(head.get(..end)?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket_counts(m: &CommandMetrics) -> Vec<u64> {
        m.buckets.iter().map(Counter::get).collect()
    }

    #[test]
    fn a_latency_on_a_bound_is_in_that_bound_and_names_fold_to_other() {
        let m = CommandMetrics::default();
        m.record(b"GET", Duration::from_micros(10), false);
        m.record(b"get", Duration::from_nanos(10_001), false);
        m.record(b"HSET", Duration::from_millis(200), true);
        let counts = bucket_counts(&m);
        assert_eq!(counts.first(), Some(&1));
        assert_eq!(counts.get(1), Some(&1));
        assert_eq!(counts.last(), Some(&1));
        assert_eq!(counts.iter().sum::<u64>(), 3);
        assert_eq!(m.commands.first().map(Counter::get), Some(2));
        assert_eq!(m.commands.get(3).map(Counter::get), Some(1));
        assert_eq!(m.errors.get(), 1);
        assert_eq!(m.sum_nanos.get(), 10_000 + 10_001 + 200_000_000);
    }

    #[test]
    fn a_set_group_charges_each_set_its_share() {
        let m = CommandMetrics::default();
        m.record_sets(4, Duration::from_micros(400), false);
        assert_eq!(m.commands.get(1).map(Counter::get), Some(4));
        // 100 us each: the 100 us bucket, the third.
        assert_eq!(bucket_counts(&m).get(2), Some(&4));
        assert_eq!(m.sum_nanos.get(), 400_000);
    }
}
