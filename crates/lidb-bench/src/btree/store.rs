//! [`PagedStore`]: the one trait the LearnedStore experiments drive. A paged ordered store maps
//! u64 keys to byte values through pages that live in a pool (or cache) of bounded size in front
//! of a file; the experiments bulk-load it, read and write it, count its device reads and make
//! its pool cold.
//!
//! Who calls it: the experiment runners of [`crate::btree`], from one thread at a time (the
//! trait asks for `Send + Sync` so an engine can be moved to and shared with worker threads
//! later). Contract every implementation keeps (checked by lidb-peers' `tests/btree_peers.rs`
//! against a `BTreeMap`):
//! 1. After `bulk_load` of sorted distinct keys, `get` of each returns its value; keys order as
//!    u64 (peers store them big-endian).
//! 2. `put` inserts or overwrites, `delete` returns whether the key was there; both are visible
//!    to the next `get` (durability is not measured here).
//! 3. `device_reads` never decreases; it counts reads that reached the device (or, where an
//!    engine cannot count them, an estimate named by `device_reads_source`).
//! 4. After `reopen_cold` the pool holds no page of the tree (the OS page cache neither, where
//!    the store reads through it), and the data is unchanged.

use std::fmt;

/// What a store operation failed with: the store's own error, as one line.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The file system or device failed.
    Io(std::io::Error),
    /// The engine reported an error; `engine` names it.
    Engine { engine: String, detail: String },
    /// The engine does not offer this operation (e.g. the paper's inner-node miss simulation).
    Unsupported { engine: String, what: String },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "{e}"),
            StoreError::Engine { engine, detail } => write!(f, "{engine}: {detail}"),
            StoreError::Unsupported { engine, what } => {
                write!(f, "{engine} does not support {what}")
            }
        }
    }
}

impl std::error::Error for StoreError {}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Io(e)
    }
}

/// A paged ordered key-value store under test (see the module doc for the contract).
pub trait PagedStore: Send + Sync {
    /// The engine's name in rows: "learnedstore", "btree", "redb", "lmdb", ...
    fn name(&self) -> &str;

    /// Loads sorted, distinct `(key, value)` pairs into an empty store.
    fn bulk_load(
        &mut self,
        records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
    ) -> Result<(), StoreError>;

    /// Copies the value of `key` into `out` (cleared first); false if the key is absent.
    fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError>;

    /// Inserts or overwrites `key`.
    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError>;

    /// Removes `key`; false if it was absent.
    fn delete(&mut self, key: u64) -> Result<bool, StoreError>;

    /// Reads from the device so far (see [`PagedStore::device_reads_source`]).
    fn device_reads(&self) -> u64;

    /// How `device_reads` is counted, for the row's notes: "engine" when the engine counts its
    /// own page reads.
    fn device_reads_source(&self) -> &'static str {
        "engine"
    }

    /// The memory the store may cache pages in, in bytes.
    fn pool_bytes(&self) -> u64;

    /// Empties the pool (and the OS page cache of the store's files where it reads through
    /// it), typically by closing and reopening; the data stays.
    fn reopen_cold(&mut self) -> Result<(), StoreError>;

    /// The paper's simulation of a partly resident tree (section III): from now on each inner
    /// node a lookup passes is treated as evicted with `probability`, and re-read from the
    /// device. `probability` 0 turns it off. Engines without the hook keep this default.
    fn simulate_inner_miss(&mut self, probability: f64) -> Result<(), StoreError> {
        let _ = probability;
        Err(StoreError::Unsupported {
            engine: self.name().to_string(),
            what: "the simulated inner-node miss (--inner-miss)".to_string(),
        })
    }

    /// What a reader of the rows must know about how this store ran (fallbacks, caps that
    /// could not be applied). Printed once per engine as notes.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}
