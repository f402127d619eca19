//! [`ConcurrentIndex`]: one trait for a concurrent ordered u64 -> u64 index, and the names of the
//! implementations `lidb bench concurrent` runs behind it ([`IndexKind`], [`build`]).
//!
//! Threads: every method takes `&self` and may be called from any number of threads at once
//! (`Send + Sync`). What a peer guarantees when two threads write the SAME key at once is the
//! peer's own contract (see `peers.rs`); the benchmark never does that for inserts (each thread
//! inserts its own keys), and its concurrent updates write the value a key always has.

use super::delta::LiDelta;
use super::fine::FinePeer;
use super::peers::{BTreeRwLock, CongeePeer, SccTree, SkipMapPeer};
use super::updatable::Updatable;

/// A concurrent ordered map of u64 keys to u64 values.
pub trait ConcurrentIndex: Send + Sync {
    /// Inserts `key`, or overwrites its value; the old value.
    fn insert(&self, key: u64, value: u64) -> Option<u64>;
    /// Overwrites the value of `key` only if present; the old value (`None`: absent, no change).
    fn update(&self, key: u64, value: u64) -> Option<u64>;
    /// The value of `key`.
    fn get(&self, key: u64) -> Option<u64>;
    /// Removes `key`; its old value.
    fn remove(&self, key: u64) -> Option<u64>;
    /// Appends to `out` up to `limit` entries with keys `>= from`, in key order.
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>);
    /// Whether several threads may use it at once (a `false` peer runs at one thread only).
    fn concurrent(&self) -> bool {
        true
    }
    /// What the index reports of its own structure (one walk of it, between phases, untimed);
    /// nothing by default.
    fn footprint(&self) -> Footprint {
        Footprint::default()
    }
    /// Retrainings since the build, for a learned index that retrains (cheap: the timeline
    /// polls it while workers run).
    fn retrains(&self) -> Option<Retrains> {
        None
    }
}

/// What an index reports of its own structure; `None` where it cannot.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Footprint {
    /// Heap bytes of the whole index.
    pub heap_bytes: Option<u64>,
    /// Bytes of the learned models alone (what a client caches to route requests).
    pub model_bytes: Option<u64>,
    /// The share of level-bin slots in use that hold an entry (FINEdex; the paper reports about
    /// 82%); `None` without bins in use.
    pub bin_load_factor: Option<f64>,
}

/// Retrainings of a learned index since its build (FINEdex's two granularities).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Retrains {
    pub level_bin: u64,
    pub level_bin_ms: f64,
    pub model: u64,
    pub model_ms: f64,
}

/// The implementations, by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// lidb_fine::FineIndex with a background `Retrainer`.
    Finedex,
    /// `RwLock<BTreeMap>`: the floor.
    BTreeRwLock,
    /// crossbeam-skiplist's `SkipMap` (values `AtomicU64`, updated in place).
    SkipMap,
    /// scc's `TreeIndex` (a B+-tree with immutable entries; updates are upserts).
    SccTree,
    /// congee's concurrent adaptive radix tree.
    Congee,
    /// The paper's delta-buffer design from lidb parts: PGM over the loaded array + a SkipMap.
    LiDelta,
    /// lidb_updatable::Alex behind a `RwLock` (a single-writer structure; see `updatable.rs`).
    Alex,
    /// lidb_updatable::Lipp behind a `RwLock`.
    Lipp,
    /// lidb_updatable::Dili behind a `RwLock`.
    Dili,
}

impl IndexKind {
    /// Every implementation, in the order `--index all` runs them.
    pub const ALL: [IndexKind; 9] = [
        IndexKind::Finedex,
        IndexKind::BTreeRwLock,
        IndexKind::SkipMap,
        IndexKind::SccTree,
        IndexKind::Congee,
        IndexKind::LiDelta,
        IndexKind::Alex,
        IndexKind::Lipp,
        IndexKind::Dili,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Finedex => "finedex",
            IndexKind::BTreeRwLock => "btree-rwlock",
            IndexKind::SkipMap => "skipmap",
            IndexKind::SccTree => "scc-tree",
            IndexKind::Congee => "congee",
            IndexKind::LiDelta => "li+delta",
            IndexKind::Alex => "alex",
            IndexKind::Lipp => "lipp",
            IndexKind::Dili => "dili",
        }
    }

    /// Parses a comma-separated list of names, or "all".
    pub fn parse_list(text: &str) -> Result<Vec<IndexKind>, String> {
        if text.trim() == "all" {
            return Ok(IndexKind::ALL.to_vec());
        }
        text.split(',')
            .map(|n| {
                let n = n.trim();
                IndexKind::ALL
                    .into_iter()
                    .find(|k| k.name() == n)
                    .ok_or_else(|| {
                        let known: Vec<&str> = IndexKind::ALL.iter().map(|k| k.name()).collect();
                        format!("unknown index '{n}'; known: {}, all", known.join(", "))
                    })
            })
            .collect()
    }
}

/// Builds `kind` over `entries` (keys strictly increasing), the bulk-loaded data.
pub fn build(kind: IndexKind, entries: &[(u64, u64)]) -> Result<Box<dyn ConcurrentIndex>, String> {
    Ok(match kind {
        IndexKind::Finedex => Box::new(FinePeer::bulk_load(entries)?),
        IndexKind::BTreeRwLock => Box::new(BTreeRwLock::bulk_load(entries)),
        IndexKind::SkipMap => Box::new(SkipMapPeer::bulk_load(entries)),
        IndexKind::SccTree => Box::new(SccTree::bulk_load(entries)),
        IndexKind::Congee => Box::new(CongeePeer::bulk_load(entries)),
        IndexKind::LiDelta => Box::new(LiDelta::bulk_load(entries)?),
        IndexKind::Alex => Box::new(Updatable::<lidb_updatable::Alex>::bulk_load(entries)?),
        IndexKind::Lipp => Box::new(Updatable::<lidb_updatable::Lipp>::bulk_load(entries)?),
        IndexKind::Dili => Box::new(Updatable::<lidb_updatable::Dili>::bulk_load(entries)?),
    })
}
