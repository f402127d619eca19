//! SSTables: fixed-width slots, a Bloom filter, a learned index block of any lidb-index family,
//! a meta block and a footer (docs/format/sstable.md), plus the page cache their readers share.
//!
//! - `format`: constants and pure encoders/decoders shared by reader and writer.
//! - `builder`: `TableBuilder` (flush and compaction threads) and `TableOptions`.
//! - `reader`: `Table` (immutable once open; any thread), point lookups.
//! - `iter`: `TableIter`, seek with the index then sequential chunks.
//! - `filter`: `BloomFilter`. `cache`: `PageCache` (thread-safe LRU of pages).
//! - `reindex` (here): rewrite a closed table's tail with another index configuration.

pub mod builder;
pub mod cache;
pub mod filter;
pub mod format;
pub mod iter;
pub mod reader;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use builder::{BuildTimings, BuiltTable, TableBuilder, TableOptions};
pub use cache::PageCache;
pub use filter::BloomFilter;
pub use iter::TableIter;
pub use reader::{Found, Table};

use crate::error::Result;
use crate::storage::{ReadMode, Storage};
use crate::types::SortedIter;

/// Replaces the filter, index, meta block and footer of the closed table at `path` with ones
/// built under `opts`, keeping its entries, number and slot width. Used by benchmarks to try other
/// index configurations on the same data.
///
/// `Storage` has no way to append to an existing file yet, so this streams the entries (checking
/// every slot) into a new file `path.reindex`, which gets the new tail, is synced, and replaces
/// `path` by an atomic rename (then the directory is synced). The data region is thus rewritten;
/// `timings.write` includes that copy. With `Storage::open_append` it would truncate after the
/// data region and append only the tail. Readers holding the old table keep reading the old file;
/// callers with a page cache must `remove_table` the number afterwards.
pub fn reindex(storage: &dyn Storage, path: &Path, opts: TableOptions) -> Result<BuiltTable> {
    let table = Arc::new(Table::open_inner(
        storage,
        path,
        None,
        ReadMode::Buffered,
        None,
    )?);
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".reindex");
    let tmp = PathBuf::from(tmp_name);
    let mut builder = TableBuilder::new(
        storage,
        &tmp,
        table.number(),
        table.max_key_len(),
        table.max_value_len(),
        opts,
    )?;
    let mut it = table.iter();
    it.seek_to_first()?;
    while it.valid() {
        builder.add(it.key(), it.seq(), it.kind(), it.value())?;
        it.next()?;
    }
    let built = builder.finish()?;
    drop(it);
    drop(table);
    storage.rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        storage.sync_dir(dir)?;
    }
    Ok(built)
}
