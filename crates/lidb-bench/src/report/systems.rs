//! One [`Spec`] per system of the results page: its row's fixed text (claim, link) and the
//! function from the rows of its experiment file to its figure, peer, ratio and verdict. Pure;
//! any thread.
//!
//! Invariants: every ratio is lidb over the peer from rows of the one file given (throughput
//! over throughput, or peer time over lidb time), so above 1.0 is lidb ahead; a file without the
//! rows a ratio needs gives `None` (the old row is kept) rather than a made-up figure.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Figure, ratio_text};

/// A system of the results page.
#[derive(Debug)]
pub struct Spec {
    /// The first cell, which keys the row (as written on the page).
    pub system: &'static str,
    /// The experiment file's stem in the input directory.
    pub file: &'static str,
    pub claim: &'static str,
    /// The "where" cell: the dated log's page for this system.
    pub link: &'static str,
    pub compute: fn(&[Value]) -> Option<Figure>,
}

/// Every system the renderer can rerun, in the page's order.
pub const SPECS: &[Spec] = &[
    Spec {
        system: "learned indexes, in memory",
        file: "index",
        claim: "a learned index finds a key faster than binary search, in a fraction of the memory",
        link: "[index-library](docs/bench-log/01-index-library.md)",
        compute: index,
    },
    Spec {
        system: "LSM with learned tables",
        file: "ycsb",
        claim: "learned table indexes read as fast at a fraction of the index memory",
        link: "[device-limit](docs/bench-log/08-device-limit.md)",
        compute: lsm,
    },
    Spec {
        system: "LearnedKV",
        file: "ycsb",
        claim: "reads and writes faster than RocksDB and than RocksDB+",
        link: "[learnedkv](docs/bench-log/03-learnedkv.md)",
        compute: learnedkv,
    },
    Spec {
        system: "FINEdex",
        file: "finedex",
        claim: "ahead of the concurrent peers at every thread count",
        link: "[finedex-finestore](docs/bench-log/05-finedex-finestore.md)",
        compute: finedex,
    },
    Spec {
        system: "LearnedStore",
        file: "learnedstore",
        claim: "the learned leaf path beats the tree walk, 1.25x to 2.29x (five-level trees of 200M keys)",
        link: "[learnedstore](docs/bench-log/07-learnedstore.md)",
        compute: learnedstore,
    },
    Spec {
        system: "`lidb serve`",
        file: "serve",
        claim: "as a Redis replacement, near Redis's throughput",
        link: "[serve-vs-redis](docs/bench-log/06-serve-vs-redis.md)",
        compute: serve,
    },
    Spec {
        system: "reliability",
        file: "stress",
        claim: "no acknowledged write lost under kills and faults",
        link: "[reliability](docs/bench-log/11-reliability.md)",
        compute: stress,
    },
];

fn text<'a>(row: &'a Value, field: &str) -> Option<&'a str> {
    row.get(field)?.as_str()
}

fn num(row: &Value, field: &str) -> Option<f64> {
    row.get(field)?.as_f64()
}

fn verdict(ratios: &[f64], target: f64) -> String {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    if min >= target {
        "yes".to_string()
    } else {
        format!("no (target {})", ratio_text(target))
    }
}

fn range_text(ratios: &[f64]) -> String {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if ratio_text(min) == ratio_text(max) {
        ratio_text(min)
    } else {
        format!("{} to {}", ratio_text(min), ratio_text(max))
    }
}

/// The boundary the index row reads: 16 where binary search has it, else binary's first.
pub fn index_boundary(rows: &[Value]) -> Option<u64> {
    let bs: Vec<u64> = rows
        .iter()
        .filter(|r| text(r, "index") == Some("binary"))
        .filter_map(|r| r.get("boundary")?.as_u64())
        .collect();
    if bs.contains(&16) {
        Some(16)
    } else {
        bs.first().copied()
    }
}

/// (family, bytes per key, lookup ns) at `boundary`, in row order.
pub fn index_points(rows: &[Value], boundary: u64) -> Vec<(String, f64, f64)> {
    rows.iter()
        .filter(|r| r.get("boundary").and_then(Value::as_u64) == Some(boundary))
        .filter_map(|r| {
            let keys = num(r, "keys")?.max(1.0);
            Some((
                text(r, "index")?.to_string(),
                num(r, "size_bytes")? / keys,
                num(r, "lookup_ns_mean")?,
            ))
        })
        .collect()
}

/// Learned families against binary search's lookup time and pgm against fence pointers' size,
/// at one boundary of one `lidb index bench` run.
fn index(rows: &[Value]) -> Option<Figure> {
    let b = index_boundary(rows)?;
    let points = index_points(rows, b);
    let get = |name: &str| points.iter().find(|p| p.0 == name);
    let binary_ns = get("binary")?.2;
    let mut parts = Vec::new();
    let mut ratios = Vec::new();
    for fam in ["rs", "rmi", "lpa", "pgm", "plex"] {
        if let Some(p) = get(fam).filter(|p| p.2 > 0.0) {
            parts.push(format!("{fam} {}", ratio_text(p.2 / binary_ns)));
            ratios.push(binary_ns / p.2);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    let keys = rows
        .iter()
        .find_map(|r| r.get("keys")?.as_u64())
        .unwrap_or(0);
    let mut figure = format!(
        "B = {b}, {keys} keys: {} binary search's lookup time",
        parts.join(", ")
    );
    let mut peer = "binary search".to_string();
    if let (Some(pgm), Some(fp)) = (get("pgm"), get("fp").filter(|p| p.1 > 0.0)) {
        figure.push_str(&format!(
            "; pgm {} fence pointers' size",
            ratio_text(pgm.1 / fp.1)
        ));
        peer.push_str(", fence pointers");
    }
    Some(Figure {
        figure,
        peer,
        ratio: format!("{} faster", range_text(&ratios)),
        met: verdict(&ratios, 1.0),
    })
}

/// kops/s of the op "all" rows of the last phase, per engine, at the fewest threads present.
pub fn ycsb_kops(rows: &[Value]) -> BTreeMap<String, f64> {
    let all: Vec<&Value> = rows
        .iter()
        .filter(|r| text(r, "op") == Some("all") && r.get("phase").is_some())
        .collect();
    let threads = all
        .iter()
        .filter_map(|r| num(r, "threads"))
        .fold(f64::INFINITY, f64::min);
    let mut best: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for r in all.iter().filter(|r| num(r, "threads") == Some(threads)) {
        let (Some(e), Some(p), Some(k)) = (
            text(r, "engine"),
            r.get("phase").and_then(Value::as_u64),
            num(r, "kops_per_s"),
        ) else {
            continue;
        };
        let slot = best.entry(e.to_string()).or_insert((p, k));
        if p >= slot.0 {
            *slot = (p, k);
        }
    }
    best.into_iter().map(|(e, (_, k))| (e, k)).collect()
}

fn workload_name(rows: &[Value]) -> String {
    rows.iter()
        .find_map(|r| text(r, "workload"))
        .unwrap_or("?")
        .to_uppercase()
}

/// `engine` with the version its rows record, if any ("rocksdb 11.8.1").
fn engine_label(rows: &[Value], engine: &str) -> String {
    rows.iter()
        .filter(|r| text(r, "engine") == Some(engine))
        .find_map(|r| text(r, "engine_version"))
        .map_or_else(|| engine.to_string(), |v| format!("{engine} {v}"))
}

/// `engine` against each of `peers` present in one YCSB run.
fn ycsb_against(rows: &[Value], engine: &str, peers: &[&str], target: f64) -> Option<Figure> {
    let kops = ycsb_kops(rows);
    let mine = *kops.get(engine)?;
    let present: Vec<(&str, f64)> = peers
        .iter()
        .filter_map(|p| Some((*p, *kops.get(*p)?)))
        .collect();
    if present.is_empty() || mine <= 0.0 {
        return None;
    }
    let present: Vec<(String, f64)> = present
        .into_iter()
        .map(|(p, k)| (engine_label(rows, p), k))
        .collect();
    let mut figure = format!("YCSB {}: {engine} {mine:.1} kops/s", workload_name(rows));
    for (p, k) in &present {
        figure.push_str(&format!(", {p} {k:.1}"));
    }
    let ratios: Vec<f64> = present.iter().map(|(_, k)| mine / k).collect();
    let ratio = present
        .iter()
        .zip(&ratios)
        .map(|((p, _), r)| format!("{} {p}", ratio_text(*r)))
        .collect::<Vec<_>>()
        .join(", ");
    Some(Figure {
        figure,
        peer: present
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        ratio,
        met: verdict(&ratios, target),
    })
}

/// lsm against RocksDB where the build had it, else against lsm+ (lidb's RocksDB-like LSM).
fn lsm(rows: &[Value]) -> Option<Figure> {
    let has_rocks = ycsb_kops(rows).contains_key("rocksdb");
    ycsb_against(
        rows,
        "lsm",
        if has_rocks { &["rocksdb"] } else { &["lsm+"] },
        1.0,
    )
}

fn learnedkv(rows: &[Value]) -> Option<Figure> {
    ycsb_against(rows, "learnedkv", &["rocksdb", "lsm+"], 1.0)
}

/// (workload, threads, index, kops/s) of the `bench concurrent` result rows of op "all".
pub fn concurrent_points(rows: &[Value]) -> Vec<(String, u64, String, f64)> {
    rows.iter()
        .filter(|r| text(r, "row") == Some("result") && text(r, "op") == Some("all"))
        .filter_map(|r| {
            Some((
                text(r, "workload")?.to_string(),
                r.get("threads")?.as_u64()?,
                text(r, "index")?.to_string(),
                num(r, "kops_per_s")?,
            ))
        })
        .collect()
}

/// finedex against li+delta and congee per (workload, threads) of one `bench concurrent` run.
fn finedex(rows: &[Value]) -> Option<Figure> {
    let points = concurrent_points(rows);
    let mut figures = Vec::new();
    let mut cells = Vec::new();
    let mut ratios = Vec::new();
    let mut peers: Vec<&str> = Vec::new();
    for (w, t, _, mine) in points.iter().filter(|p| p.2 == "finedex") {
        let mut here = Vec::new();
        for peer in ["li+delta", "congee"] {
            let found = points
                .iter()
                .find(|p| &p.0 == w && p.1 == *t && p.2 == peer && p.3 > 0.0);
            if let Some(p) = found {
                here.push(format!("{} {peer}", ratio_text(mine / p.3)));
                ratios.push(mine / p.3);
                if !peers.contains(&peer) {
                    peers.push(peer);
                }
            }
        }
        if !here.is_empty() {
            figures.push(format!(
                "{w} at {t} thread{} {mine:.0} kops/s",
                if *t == 1 { "" } else { "s" }
            ));
            cells.push(format!("{w}/{t}t: {}", here.join(", ")));
        }
    }
    if ratios.is_empty() {
        return None;
    }
    Some(Figure {
        figure: format!("finedex {}", figures.join("; ")),
        peer: peers.join(", "),
        ratio: cells.join("; "),
        met: verdict(&ratios, 1.0),
    })
}

/// learnedstore against btree (the same tree without the learned path) per data set.
fn learnedstore(rows: &[Value]) -> Option<Figure> {
    let reads: Vec<&Value> = rows
        .iter()
        .filter(|r| text(r, "op") == Some("read"))
        .collect();
    let mut figures = Vec::new();
    let mut ratios = Vec::new();
    for r in reads
        .iter()
        .filter(|r| text(r, "engine") == Some("learnedstore"))
    {
        let (data, threads, mine) = (text(r, "data"), num(r, "threads"), num(r, "kops_per_s")?);
        let peer = reads.iter().find(|p| {
            text(p, "engine") == Some("btree")
                && text(p, "data") == data
                && num(p, "threads") == threads
        });
        if let Some(k) = peer.and_then(|p| num(p, "kops_per_s")).filter(|k| *k > 0.0) {
            figures.push(format!(
                "{}: {mine:.0} against {k:.0} kops/s",
                data.unwrap_or("?")
            ));
            ratios.push(mine / k);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    Some(Figure {
        figure: format!("read-only, {}", figures.join("; ")),
        peer: "btree (the same tree without the path)".to_string(),
        ratio: range_text(&ratios),
        met: verdict(&ratios, 1.25),
    })
}

/// lidb serve against redis-server per redis-benchmark test, at the fewest threads present.
fn serve(rows: &[Value]) -> Option<Figure> {
    let serve: Vec<&Value> = rows
        .iter()
        .filter(|r| text(r, "bench") == Some("serve"))
        .collect();
    let threads = serve
        .iter()
        .filter_map(|r| num(r, "threads"))
        .fold(f64::INFINITY, f64::min);
    let field = |engine: &str, test: &str, name: &str| {
        serve.iter().find_map(|r| {
            (text(r, "engine") == Some(engine)
                && text(r, "workload") == Some(test)
                && num(r, "threads") == Some(threads))
            .then(|| num(r, name))
            .flatten()
        })
    };
    let mut figures = Vec::new();
    let mut ratios = Vec::new();
    for test in ["set", "get"] {
        let (Some(l), Some(r)) = (
            field("lidb", test, "kops_per_s"),
            field("redis", test, "kops_per_s").filter(|k| *k > 0.0),
        ) else {
            continue;
        };
        // Rounds taking turns (scripts/report.sh) give the median of their per-round ratios,
        // steadier than the ratio of the two medians on a shared machine.
        let ratio = field("lidb", test, "ratio_to_redis").unwrap_or(l / r);
        figures.push(format!(
            "{} {} Redis ({l:.0} against {r:.0} kops/s)",
            test.to_uppercase(),
            ratio_text(ratio)
        ));
        ratios.push(ratio);
    }
    if ratios.is_empty() {
        return None;
    }
    Some(Figure {
        figure: format!("{} (lsm, loopback, pipelined)", figures.join(", ")),
        peer: "redis-server".to_string(),
        ratio: range_text(&ratios),
        met: verdict(&ratios, 0.9),
    })
}

/// Every engine's completed operations, kills and mismatches from `lidb stress` summaries.
fn stress(rows: &[Value]) -> Option<Figure> {
    let mut parts = Vec::new();
    let mut mismatches = 0.0;
    for r in rows.iter().filter(|r| text(r, "bench") == Some("stress")) {
        let m = num(r, "mismatches")?;
        mismatches += m;
        parts.push(format!(
            "{} {} operations, {} kills, {m} mismatches",
            text(r, "engine")?,
            num(r, "operations")?,
            num(r, "kills").unwrap_or(0.0)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    Some(Figure {
        figure: parts.join("; "),
        peer: "(the expected state)".to_string(),
        ratio: "-".to_string(),
        met: if mismatches == 0.0 { "yes" } else { "no" }.to_string(),
    })
}
