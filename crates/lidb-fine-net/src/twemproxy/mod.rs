//! The baseline deployment of `lidb fine bench --mode twemproxy`: the same shards, each also
//! serving RESP (lidb-server over [`ShardEngine`]), behind nutcracker (twemproxy) with hash
//! sharding, driven by the same workload code, keys, ops and threads as the fine-wire modes
//! (`bench::run_one`), through a minimal RESP client: GET and SET, 1 round trip per op.
//!
//! Path of an op: client -> nutcracker -> shard (two network hops). With `delay_us` the delaying
//! relay sits on the client -> nutcracker hop only; nutcracker -> shard stays plain loopback.
//!
//! Refused: YCSB E (twemproxy hashes keys over its servers, so it has no range scans), and
//! external servers (the shards must be spawned, so their RESP faces are known).
//!
//! Threads: the caller's, plus what the shards, lidb-server runtimes, the relay and the client
//! threads of `run_one` own; nutcracker is a child process, killed when the run ends.

mod nutcracker;
mod resp_client;

use std::sync::Arc;
use std::time::Duration;

use lidb_data::ycsb::Workload;

pub use nutcracker::{Nutcracker, config_text, find_binary};
pub use resp_client::{RespClient, RespReply};

use crate::bench::{self, BenchConfig, BenchWorkload, Row};
use crate::client::Mode;
use crate::error::WireError;
use crate::relay::Relay;
use crate::resp_shard::ShardEngine;
use crate::server::Server;

/// The rows' mode name.
pub const MODE_NAME: &str = "twemproxy";

/// Why `w` cannot run through twemproxy, if it cannot.
pub fn refusal(w: BenchWorkload) -> Option<String> {
    (w == BenchWorkload::Ycsb(Workload::E)).then(|| {
        "workload e: twemproxy hashes keys over its servers (ketama), so it has no range \
         scans; run e in the fine-wire modes only"
            .to_string()
    })
}

/// Runs every workload of `cfg` through nutcracker over `cfg.spawn_servers` spawned shards.
pub fn run(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>, WireError> {
    if cfg.spawn_servers == 0 {
        return Err(WireError::malformed(
            "--mode twemproxy needs --spawn-servers K (it starts the shards' RESP faces)",
        ));
    }
    if let Some(why) = cfg.workloads.iter().find_map(|&w| refusal(w)) {
        return Err(WireError::malformed(why));
    }
    let mut rows = Vec::new();
    for &w in &cfg.workloads {
        rows.extend(run_workload(cfg, w, progress)?);
    }
    Ok(rows)
}

/// Starts a RESP face (lidb-server on 127.0.0.1, its own runtime) over each shard.
fn resp_faces(shards: Vec<Server>) -> Result<Vec<lidb_server::ServerHandle>, WireError> {
    shards
        .into_iter()
        .map(|shard| {
            let config = lidb_server::ServerConfig {
                listen: "127.0.0.1:0".into(),
                ..lidb_server::ServerConfig::default()
            };
            lidb_server::Server::bind(config, Box::new(ShardEngine::new(shard, None)))
                .map(lidb_server::Server::spawn)
                .map_err(|e| WireError::malformed(format!("RESP face of a shard: {e}")))
        })
        .collect()
}

fn stop_faces(faces: Vec<lidb_server::ServerHandle>) {
    for f in faces {
        let _ = f.stop();
    }
}

/// Which records nutcracker sends to which shard: hash sharding decides, not ranges, so the
/// records are SET once through a nutcracker over empty shards (pipelined, untimed) and each
/// shard's entries read back. Nutcracker's ketama hashes the server names (`shard0`..), not
/// their addresses, so the timed run's nutcracker, over new shards, routes every key alike;
/// the run's checked reads would fail otherwise.
fn partition(cfg: &BenchConfig) -> Result<Vec<Vec<(u64, u64)>>, WireError> {
    let mut shards = Vec::new();
    let mut indexes = Vec::new();
    for _ in 0..cfg.spawn_servers {
        let s = bench::spawn_shard(cfg, Mode::Pipeline, (0, u64::MAX), &[])?;
        indexes.push(Arc::clone(s.index()));
        shards.push(s);
    }
    let faces = resp_faces(shards)?;
    let addrs: Vec<_> = faces.iter().map(lidb_server::ServerHandle::addr).collect();
    let loaded = (|| {
        let proxy = Nutcracker::start(&addrs)?;
        let mut c = RespClient::connect(&proxy.addr().to_string(), Duration::from_secs(5))?;
        let entries = bench::preload_entries(cfg.records, 0, u64::MAX);
        for batch in entries.chunks(LOAD_BATCH) {
            c.set_many(batch)?;
        }
        Ok::<(), WireError>(())
    })();
    stop_faces(faces);
    loaded?;
    Ok(indexes
        .iter()
        .map(|ix| ix.range(0, u64::MAX, usize::MAX))
        .collect())
}

/// SETs per pipelined batch of the untimed load.
const LOAD_BATCH: usize = 256;

fn run_workload(
    cfg: &BenchConfig,
    w: BenchWorkload,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Row>, WireError> {
    progress(&format!(
        "twemproxy {}: loading {} records through nutcracker to learn its partition",
        w.name(),
        cfg.records
    ));
    let parts = partition(cfg)?;
    // Bulk-loaded, retraining every 5 ms, as the fine-wire modes' shards; every shard takes
    // any key (nutcracker, not a range, decides where a key lives).
    let shards = parts
        .iter()
        .map(|entries| bench::spawn_shard(cfg, Mode::Pipeline, (0, u64::MAX), entries))
        .collect::<Result<Vec<_>, _>>()?;
    let faces = resp_faces(shards)?;
    let addrs: Vec<_> = faces.iter().map(lidb_server::ServerHandle::addr).collect();
    let rows = (|| {
        let proxy = Nutcracker::start(&addrs)?;
        let relay = if cfg.delay_us > 0 {
            Some(Relay::start(
                proxy.addr(),
                Duration::from_micros(cfg.delay_us),
            )?)
        } else {
            None
        };
        let entry = relay.as_ref().map_or(proxy.addr(), Relay::addr).to_string();
        progress(&format!(
            "twemproxy {}: nutcracker on {} over RESP shards {addrs:?} holding {:?} records",
            w.name(),
            proxy.addr(),
            parts.iter().map(Vec::len).collect::<Vec<_>>()
        ));
        let clients = (0..bench::client_threads(cfg))
            .map(|_| RespClient::connect(&entry, Duration::from_secs(5)))
            .collect::<Result<Vec<_>, _>>()?;
        bench::run_one(cfg, clients, w, MODE_NAME, progress)
    })();
    stop_faces(faces);
    rows
}
