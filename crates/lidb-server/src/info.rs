//! INFO: `# Section` headers and `field:value` lines, as Redis prints them. Sections: server,
//! clients, stats, persistence, memory (the engine's bytes in memory split by role as the engine
//! reports them, their total as `used_memory`, and the process's resident set), disk (the
//! engine's bytes on disk, split as the engine reports them) and lidb (the engine's read split
//! and notes). The text is a verbatim string in RESP3, a bulk string in RESP2, as Redis sends
//! it. Called on the engine pool.

use bytes::Bytes;
use lidb_engines::{MemorySplit, ReadSplit, Space};

use crate::commands::Reply;
use crate::state::Shared;

const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "stats",
    "persistence",
    "memory",
    "disk",
    "lidb",
];

fn section(shared: &Shared, name: &str, out: &mut String) {
    let c = &shared.counters;
    let lines: Vec<(String, String)> = match name {
        "server" => vec![
            ("lidb_version".into(), env!("CARGO_PKG_VERSION").into()),
            ("redis_mode".into(), "standalone".into()),
            ("engine".into(), shared.engine.name().into()),
            ("tcp_listen".into(), shared.settings.listen.clone()),
            ("process_id".into(), std::process::id().to_string()),
            (
                "uptime_in_seconds".into(),
                shared.started.elapsed().as_secs().to_string(),
            ),
        ],
        "clients" => vec![(
            "connected_clients".into(),
            Shared::count(&c.connections_open).to_string(),
        )],
        "stats" => vec![
            (
                "total_connections_received".into(),
                Shared::count(&c.connections_received).to_string(),
            ),
            (
                "rejected_connections".into(),
                Shared::count(&c.connections_rejected).to_string(),
            ),
            (
                "total_commands_processed".into(),
                c.commands_processed.get().to_string(),
            ),
            (
                "acl_access_denied_auth".into(),
                Shared::count(&c.auth_failures).to_string(),
            ),
            (
                "reads_answered_in_memory".into(),
                c.memory_reads.get().to_string(),
            ),
            (
                "writes_answered_on_worker".into(),
                c.worker_writes.get().to_string(),
            ),
        ],
        "persistence" => vec![
            (
                "aof_enabled".into(),
                u8::from(shared.settings.sync).to_string(),
            ),
            ("sync_every_write".into(), shared.settings.sync.to_string()),
        ],
        "memory" => {
            let m = shared.engine.memory();
            let MemorySplit {
                index_bytes,
                filter_bytes,
                cache_bytes,
                memtable_bytes,
                data_bytes,
            } = m;
            let mut v = vec![
                ("used_memory".into(), m.total_bytes().to_string()),
                ("engine_index_bytes".into(), index_bytes.to_string()),
                ("engine_filter_bytes".into(), filter_bytes.to_string()),
                ("engine_cache_bytes".into(), cache_bytes.to_string()),
                ("engine_memtable_bytes".into(), memtable_bytes.to_string()),
                ("engine_data_bytes".into(), data_bytes.to_string()),
            ];
            if let Some(rss) = resident_bytes() {
                v.push(("used_memory_rss".into(), rss.to_string()));
            }
            v
        }
        "disk" => {
            let Space {
                lsm_bytes,
                key_list_bytes,
                model_bytes,
                vlog_bytes,
            } = shared.engine.space();
            vec![
                ("lsm_bytes".into(), lsm_bytes.to_string()),
                ("key_list_bytes".into(), key_list_bytes.to_string()),
                ("model_bytes".into(), model_bytes.to_string()),
                ("vlog_bytes".into(), vlog_bytes.to_string()),
            ]
        }
        _ => {
            let ReadSplit {
                from_lsm,
                from_tier,
                gcs,
            } = shared.engine.read_split();
            let parts = EngineParts::of(shared);
            let mut v = Vec::new();
            if parts.lsm {
                v.push(("reads_from_lsm".into(), from_lsm.to_string()));
            }
            if parts.tier {
                v.push(("reads_from_tier".into(), from_tier.to_string()));
                v.push(("gcs".into(), gcs.to_string()));
            }
            for (i, note) in shared.engine.notes().into_iter().enumerate() {
                v.push((format!("note{i}"), note.replace(['\r', '\n'], " ")));
            }
            v
        }
    };
    let mut title = name.to_string();
    if let Some(first) = title.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    out.push_str(&format!("# {title}\r\n"));
    for (k, v) in lines {
        out.push_str(&format!("{k}:{v}\r\n"));
    }
    out.push_str("\r\n");
}

/// INFO [section ...]: all sections for none, "all", "default" or "everything".
pub fn info(shared: &Shared, asked: &[Bytes]) -> Reply {
    let asked: Vec<String> = asked
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = asked.is_empty()
        || asked
            .iter()
            .any(|a| matches!(a.as_str(), "all" | "default" | "everything"));
    let mut out = String::new();
    for name in SECTIONS {
        if all || asked.iter().any(|a| a == name) {
            section(shared, name, &mut out);
        }
    }
    Reply::Verbatim(out.into())
}

/// The process's resident set in bytes (Linux `/proc/self/status`, `VmRSS`), `None` elsewhere.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Which parts of the read split an engine has, for INFO and the metrics page alike: reads
/// from an LSM for the LSM engines, the tier and its GCs for the tiered ones (finedex, the
/// trees and rocksdb have neither).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineParts {
    pub lsm: bool,
    pub tier: bool,
}

impl EngineParts {
    pub fn of(shared: &Shared) -> EngineParts {
        let kind = lidb_engines::EngineKind::parse(shared.engine.name()).ok();
        EngineParts {
            lsm: kind.is_some_and(|k| k.shape() == lidb_engines::Shape::Lsm),
            tier: kind.and_then(lidb_engines::EngineKind::tiering).is_some(),
        }
    }
}
