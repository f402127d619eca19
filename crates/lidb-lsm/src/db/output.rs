//! Writing tables: the options a table of a level gets, and opening a finished table as a handle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use std::path::Path;

use crate::db::state::{Shared, TableHandle, table_path};
use crate::options::{Granularity, IndexKind, Options};
use crate::table::builder::TableOptions;
use crate::table::reader::Table;
use crate::types::TableMeta;
use lidb_storage::cache::PageCache;
use lidb_storage::error::{Result, corruption};
use lidb_storage::{ReadMode, Storage};

/// Table options for a table written into `level`: no per-table index where a level model
/// covers the level.
pub(crate) fn table_options(s: &Shared, level: usize) -> TableOptions {
    table_options_for(&s.opts, level)
}

pub(crate) fn table_options_for(opts: &Options, level: usize) -> TableOptions {
    let per_table = opts.granularity == Granularity::Table || level == 0;
    TableOptions {
        max_window_bytes: opts.max_window_bytes,
        index: per_table.then(|| (opts.index.family, opts.index.params_at(level))),
        bloom_bits_per_key: opts.bloom_bits_per_key,
        kind: if per_table {
            opts.index.kind
        } else {
            IndexKind::Clustered
        },
    }
}

pub(crate) fn read_mode(s: &Shared) -> ReadMode {
    read_mode_for(&s.opts)
}

pub(crate) fn read_mode_for(opts: &Options) -> ReadMode {
    if opts.direct_io {
        ReadMode::Direct
    } else {
        ReadMode::Buffered
    }
}

/// Opens table `meta` as a shared handle.
pub(crate) fn open_handle(s: &Shared, meta: TableMeta) -> Result<Arc<TableHandle>> {
    open_handle_in(&s.storage, &s.dir, read_mode(s), &s.cache, meta)
}

/// Opens table `meta` of `dir` as a shared handle (recovery opens tables before `Shared` exists).
pub(crate) fn open_handle_in(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    mode: ReadMode,
    cache: &Arc<PageCache>,
    meta: TableMeta,
) -> Result<Arc<TableHandle>> {
    let path = table_path(dir, meta.number);
    if !storage.exists(&path) {
        return Err(corruption(
            &path,
            "the manifest names this table, but the file is missing",
        ));
    }
    let table = Table::open(
        &**storage,
        &path,
        meta.number,
        mode,
        Some(Arc::clone(cache)),
    )?;
    Ok(Arc::new(TableHandle {
        table: Arc::new(table),
        meta,
        path,
        storage: Arc::clone(storage),
        obsolete: AtomicBool::new(false),
        cache: Arc::clone(cache),
    }))
}
