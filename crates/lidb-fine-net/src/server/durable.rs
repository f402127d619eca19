//! A durable server: every write is logged in a FineStore (docs/format/finestore-log.md, its
//! checkpoints) before it is applied to the served index and acknowledged; a restart rebuilds
//! the index from the store, so its recovered entries become trained data again.
//!
//! Threads: any connection thread calls [`Durable::write`]. Keys are the store's 8-byte
//! big-endian images (order-preserving), values 8 bytes little-endian.
//!
//! Invariants: the writes of one key are serialised by its stripe lock, so the store's log and
//! the index apply them in the same order; a write is in the index only after the store
//! accepted it (with `sync`, after it is synced); a refused store write changes nothing and is
//! answered as an error.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use lidb_fine::{BinAnswer, BinOp, FineIndex, FineStore, FineStoreOptions, TrainedRegion};

use crate::error::WireError;

/// Stripes of the per-key write lock.
const STRIPES: usize = 1024;

/// The store behind a durable server.
#[derive(Debug)]
pub(crate) struct Durable {
    store: FineStore,
    stripes: Box<[Mutex<()>]>,
}

fn store_err(e: lidb_storage::Error) -> WireError {
    WireError::Store(e)
}

impl Durable {
    /// Opens (or creates) the store in `dir` with `opts` and builds the index over its entries
    /// (with `opts.index`).
    pub fn open(
        dir: &Path,
        opts: FineStoreOptions,
    ) -> Result<(Durable, Arc<FineIndex>), WireError> {
        let cfg = opts.index.clone();
        let store = FineStore::open(dir, opts).map_err(store_err)?;
        let mut entries = Vec::new();
        for (k, v) in store.scan(&[], None, usize::MAX) {
            let (Ok(k), Ok(v)) = (
                <[u8; 8]>::try_from(k.as_slice()),
                <[u8; 8]>::try_from(v.as_slice()),
            ) else {
                return Err(WireError::malformed(format!(
                    "store in {} holds an entry that is not an 8-byte key and value",
                    dir.display()
                )));
            };
            entries.push((u64::from_be_bytes(k), u64::from_le_bytes(v)));
        }
        let ix = FineIndex::bulk_load(&entries, cfg)
            .map_err(|e| WireError::malformed(format!("rebuilding the index: {e}")))?;
        let stripes = (0..STRIPES).map(|_| Mutex::new(())).collect();
        Ok((Durable { store, stripes }, Arc::new(ix)))
    }

    /// Logs, then applies, a write (`op` is not Search), starting at `at` when given.
    pub fn write(
        &self,
        ix: &FineIndex,
        at: Option<(&TrainedRegion, u64)>,
        key: u64,
        op: BinOp,
    ) -> Result<BinAnswer, WireError> {
        let stripe = self
            .stripes
            .get((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize % STRIPES);
        let _g = stripe.map(|m| m.lock().unwrap_or_else(PoisonError::into_inner));
        let current = ix.get(key);
        let next = match op {
            BinOp::Insert(v) => Some(Some(v)),
            BinOp::Update(v) => current.map(|_| Some(v)),
            BinOp::Remove => current.map(|_| None),
            _ => None,
        };
        let Some(next) = next else {
            return Ok(BinAnswer {
                value: current,
                at_address: true,
            });
        };
        let k = key.to_be_bytes();
        match next {
            Some(v) => self.store.put(&k, &v.to_le_bytes()).map_err(store_err)?,
            None => {
                self.store.delete(&k).map_err(store_err)?;
            }
        }
        let apply = match next {
            Some(v) => BinOp::Insert(v),
            None => BinOp::Remove,
        };
        Ok(match at {
            Some((r, pos)) => ix.at_bin(r, pos, key, apply),
            None => BinAnswer {
                value: match apply {
                    BinOp::Insert(v) => ix.insert(key, v),
                    _ => ix.remove(key),
                },
                at_address: false,
            },
        })
    }

    /// Writes the log's buffered records to its file.
    pub fn flush(&self) -> Result<(), WireError> {
        self.store.flush().map_err(store_err)
    }

    /// A new checkpoint of every live entry and an empty log.
    pub fn checkpoint(&self) -> Result<(), WireError> {
        self.store.checkpoint().map_err(store_err)
    }
}
