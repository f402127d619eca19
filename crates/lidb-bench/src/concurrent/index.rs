//! [`ConcurrentIndex`]: one trait for a concurrent ordered u64 -> u64 index, and the names of the
//! implementations `lidb bench concurrent` runs behind it ([`IndexKind`], [`build`]): lidb's own
//! here, the third-party peers registered by the binary that links them (lidb-peers).
//!
//! Threads: every method takes `&self` and may be called from any number of threads at once
//! (`Send + Sync`). What a peer guarantees when two threads write the SAME key at once is the
//! peer's own contract (see lidb-peers); the benchmark never does that for inserts (each thread
//! inserts its own keys), and its concurrent updates write the value a key always has.

use super::fine::FinePeer;
use super::rwlock::BTreeRwLock;
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

/// How an implementation is built over the bulk-loaded entries (keys strictly increasing).
pub type BuildFn = fn(&[(u64, u64)]) -> Result<Box<dyn ConcurrentIndex>, String>;

/// An implementation by its command-line name, and how to build it. lidb's own are the
/// constants below ([`IndexKind::OWN`]); a binary that links more (lidb-peers' congee, scc,
/// crossbeam-skiplist and li+delta) registers them through [`crate::peers::Peers`]. Two kinds are
/// equal when their names are.
#[derive(Clone, Copy)]
pub struct IndexKind {
    name: &'static str,
    build: BuildFn,
}

impl std::fmt::Debug for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for IndexKind {
    fn eq(&self, other: &IndexKind) -> bool {
        self.name == other.name
    }
}

impl Eq for IndexKind {}

impl IndexKind {
    /// lidb_fine::FineIndex with a background `Retrainer`.
    pub const FINEDEX: IndexKind =
        IndexKind::new("finedex", |e| Ok(Box::new(FinePeer::bulk_load(e)?)));
    /// `RwLock<BTreeMap>`: the floor.
    pub const BTREE_RWLOCK: IndexKind =
        IndexKind::new("btree-rwlock", |e| Ok(Box::new(BTreeRwLock::bulk_load(e))));
    /// lidb_updatable::Alex behind a `RwLock` (a single-writer structure; see `updatable.rs`).
    pub const ALEX: IndexKind = IndexKind::new("alex", |e| {
        Ok(Box::new(Updatable::<lidb_updatable::Alex>::bulk_load(e)?))
    });
    /// lidb_updatable::Lipp behind a `RwLock`.
    pub const LIPP: IndexKind = IndexKind::new("lipp", |e| {
        Ok(Box::new(Updatable::<lidb_updatable::Lipp>::bulk_load(e)?))
    });
    /// lidb_updatable::Dili behind a `RwLock`.
    pub const DILI: IndexKind = IndexKind::new("dili", |e| {
        Ok(Box::new(Updatable::<lidb_updatable::Dili>::bulk_load(e)?))
    });

    /// lidb's own implementations, in the order `--index all` runs them (the registered peers
    /// follow them).
    pub const OWN: [IndexKind; 5] = [
        IndexKind::FINEDEX,
        IndexKind::BTREE_RWLOCK,
        IndexKind::ALEX,
        IndexKind::LIPP,
        IndexKind::DILI,
    ];

    /// An implementation named `name` (the name in rows and in `--index`).
    pub const fn new(name: &'static str, build: BuildFn) -> IndexKind {
        IndexKind { name, build }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Builds this implementation over `entries` (keys strictly increasing).
    pub fn build(self, entries: &[(u64, u64)]) -> Result<Box<dyn ConcurrentIndex>, String> {
        (self.build)(entries)
    }

    /// Parses a comma-separated list of names of `known`, or "all" (every one of `known`).
    pub fn parse_list(text: &str, known: &[IndexKind]) -> Result<Vec<IndexKind>, String> {
        if text.trim() == "all" {
            return Ok(known.to_vec());
        }
        text.split(',')
            .map(|n| {
                let n = n.trim();
                known
                    .iter()
                    .copied()
                    .find(|k| k.name() == n)
                    .ok_or_else(|| {
                        let names: Vec<&str> = known.iter().map(|k| k.name()).collect();
                        format!("unknown index '{n}'; known: {}, all", names.join(", "))
                    })
            })
            .collect()
    }
}

/// Builds `kind` over `entries` (keys strictly increasing), the bulk-loaded data.
pub fn build(kind: IndexKind, entries: &[(u64, u64)]) -> Result<Box<dyn ConcurrentIndex>, String> {
    kind.build(entries)
}
