//! Writing tables: the options a table of a level gets, and opening a finished table as a handle.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::db::state::{Shared, TableHandle};
use crate::error::Result;
use crate::options::{Granularity, Options};
use crate::storage::ReadMode;
use crate::table::builder::TableOptions;
use crate::table::reader::Table;
use crate::types::TableMeta;

/// Table options for a table written into `level`: no per-table index where a level model
/// covers the level.
pub(crate) fn table_options(s: &Shared, level: usize) -> TableOptions {
    table_options_for(&s.opts, level)
}

pub(crate) fn table_options_for(opts: &Options, level: usize) -> TableOptions {
    let per_table = opts.granularity == Granularity::Table || level == 0;
    TableOptions {
        index: per_table.then(|| (opts.index.family, opts.index.params_at(level))),
        bloom_bits_per_key: opts.bloom_bits_per_key,
    }
}

pub(crate) fn read_mode(s: &Shared) -> ReadMode {
    if s.opts.direct_io {
        ReadMode::Direct
    } else {
        ReadMode::Buffered
    }
}

/// Opens table `meta` as a shared handle.
pub(crate) fn open_handle(s: &Shared, meta: TableMeta) -> Result<Arc<TableHandle>> {
    let path = s.table_path(meta.number);
    let table = Table::open(
        &*s.storage,
        &path,
        meta.number,
        read_mode(s),
        Some(Arc::clone(&s.cache)),
    )?;
    Ok(Arc::new(TableHandle {
        table: Arc::new(table),
        meta,
        path,
        storage: Arc::clone(&s.storage),
        obsolete: AtomicBool::new(false),
        cache: Arc::clone(&s.cache),
    }))
}
