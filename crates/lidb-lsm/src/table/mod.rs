//! SSTables: fixed-width slots, a Bloom filter, a learned index block of any lidb-index family,
//! a meta block and a footer (docs/format/sstable.md). Their readers share a page cache
//! (lidb-storage's `cache`).
//!
//! - `format`: constants and pure encoders/decoders shared by reader and writer.
//! - `builder`: `TableBuilder` (flush and compaction threads) and `TableOptions`.
//! - `reader`: `Table` (immutable once open; any thread), point lookups.
//! - `iter`: `TableIter`, seek with the index then sequential chunks.
//! - `mapped`: the mapped-keys block and the slot indexes rebuilt from it (retained images,
//!   or an unclustered ALEX, LIPP, DILI or LITS).
//! - `window` (private): point lookups through the cache at page granularity (clipped windows,
//!   only the answering page cached).
//! - `filter`: `BloomFilter`.
//! - `reindex` (here): rewrite a closed table's tail with another index configuration.

pub mod builder;
pub mod filter;
pub mod format;
pub mod iter;
pub mod mapped;
pub mod reader;
mod window;

use std::path::Path;
use std::sync::Arc;

pub use builder::{BuildTimings, BuiltTable, TableBuilder, TableOptions, capped_boundary};
pub use filter::BloomFilter;
pub use iter::TableIter;
pub use lidb_storage::cache::PageCache;
pub use reader::{Found, Table};

use crate::types::SortedIter;
use lidb_storage::error::Result;
use lidb_storage::{ReadMode, Storage};

/// Replaces the filter, index, meta block and footer of the closed table at `path` with ones
/// built under `opts`, keeping its entries, number and slot width. Used by benchmarks to try other
/// index configurations on the same data.
///
/// It reads every entry once (checking every slot), truncates the file after its data region and
/// appends the new tail: the data region is not rewritten. Not crash-safe (a crash in between
/// leaves a table without a footer, which then fails to open with Corruption), so it is for
/// closed databases only (`lidb bench lsm` re-indexing a loaded database). Callers with a page
/// cache must `remove_table` the number afterwards.
pub fn reindex(storage: &dyn Storage, path: &Path, opts: TableOptions) -> Result<BuiltTable> {
    // Read what the tail is computed from: every entry's key, sequence, kind and value size.
    let table = Arc::new(Table::open_inner(
        storage,
        path,
        None,
        ReadMode::Buffered,
        None,
    )?);
    let (number, max_key_len, max_value_len) =
        (table.number(), table.max_key_len(), table.max_value_len());
    let data_len = table.entries() * table.slot_width();
    let mut entries = Vec::new();
    let mut it = table.iter();
    it.seek_to_first()?;
    while it.valid() {
        entries.push((
            it.key().to_vec(),
            it.seq(),
            it.kind(),
            it.value().len() as u64,
        ));
        it.next()?;
    }
    drop(it);
    drop(table);
    // Cut the old tail off and write the new one after the untouched data region.
    storage.truncate(path, data_len)?;
    let file = storage.open_append(path)?;
    let mut builder = TableBuilder::for_tail(file, path, number, max_key_len, max_value_len, opts)?;
    for (key, seq, kind, value_len) in &entries {
        builder.replay(key, *seq, *kind, *value_len)?;
    }
    builder.finish()
}
