//! Flush: an immutable memtable becomes one L0 table; the manifest records it and moves the log
//! number past the memtable's WAL, which is then deleted. `Options::before_flush` runs first, so
//! an embedding store can make durable whatever the memtable's entries refer to.
//!
//! Failure: a flush that fails (the hook, writing or syncing the table or the directory, or the
//! manifest edit) installs nothing: the memtable stays immutable with its WAL, and the manifest
//! names the table only if its edit was logged, which happens after the table's sync succeeded.
//! It also stops writes (`Shared::set_bg_error`) until the database is reopened, whichever
//! thread flushed: a failed fsync may have dropped pages that a retry would report durable
//! (PostgreSQL's and RocksDB's rule), and a failed manifest sync leaves the manifest writer
//! poisoned, so no later flush or compaction could be recorded anyway. Reads go on.

use std::path::Path;
use std::sync::Arc;

use crate::db::output::{open_handle, table_options, table_options_for};
use crate::db::state::{Shared, SuperVersion, lock, table_path};
use crate::db::write::switch_memtable;
use crate::manifest::VersionEdit;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table::builder::TableBuilder;
use crate::table::builder::{BuiltTable, TableOptions};
use crate::types::SortedIter;
use crate::types::TableMeta;
use lidb_storage::Storage;
use lidb_storage::error::{Result, corruption};

/// Makes the memtable immutable (if it holds anything) and flushes every immutable memtable.
pub(crate) fn flush_all(s: &Arc<Shared>) -> Result<()> {
    {
        let mut w = lock(&s.write);
        if !s.current().mem.is_empty() {
            switch_memtable(s, &mut w)?;
        }
    }
    flush_immutables(s)
}

/// Flushes immutable memtables, oldest first, until none is left.
pub(crate) fn flush_immutables(s: &Shared) -> Result<()> {
    let _one_at_a_time = lock(&s.flush_lock);
    while let Some((mem, wal)) = s.current().imm.last().cloned() {
        // Whoever flushes (background thread, `Db::flush`, a stalled writer), a failure stops
        // writes: see the module documentation.
        flush_one(s, &mem, wal).inspect_err(|e| s.set_bg_error(e))?;
    }
    Ok(())
}

/// Writes the newest version of every key of `mem` (deletions included) as table `number`.
fn build_l0(
    storage: &dyn Storage,
    dir: &Path,
    number: u64,
    mem: &Arc<MemTable>,
    opts: TableOptions,
) -> Result<BuiltTable> {
    let mut b = TableBuilder::new(
        storage,
        &table_path(dir, number),
        number,
        mem.max_key_len(),
        mem.max_value_len(),
        opts,
    )?;
    let mut it = mem.iter(u64::MAX);
    it.seek_to_first()?;
    while it.valid() {
        b.add(it.key(), it.seq(), it.kind(), it.value())?;
        it.next()?;
    }
    b.finish()
}

/// The L0 table of a memtable replayed at open (no engine running yet).
pub(crate) fn write_l0_table(
    storage: &dyn Storage,
    dir: &Path,
    number: u64,
    mem: &Arc<MemTable>,
    opts: &Options,
) -> Result<TableMeta> {
    before_flush(opts)?;
    Ok(build_l0(storage, dir, number, mem, table_options_for(opts, 0))?.meta)
}

/// The embedding store's hook, before a memtable's entries go to a durable table.
fn before_flush(opts: &Options) -> Result<()> {
    match &opts.before_flush {
        Some(hook) => hook.call(),
        None => Ok(()),
    }
}

fn flush_one(s: &Shared, mem: &Arc<MemTable>, wal: u64) -> Result<()> {
    let mut added = Vec::new();
    let mut timings = None;
    if !mem.is_empty() {
        // An error leaves `mem` among the immutable memtables and its WAL in place.
        before_flush(&s.opts)?;
        let number = lock(&s.manifest).new_file_number();
        let built = build_l0(&*s.storage, &s.dir, number, mem, table_options(s, 0))?;
        s.storage.sync_dir(&s.dir)?;
        timings = Some(built.timings);
        added.push((0u32, open_handle(s, built.meta)?));
    }
    {
        let mut m = lock(&s.manifest);
        let sv = s.current();
        // The oldest WAL still needed: the other immutable memtables' and the live one's.
        let log_number = sv
            .imm
            .iter()
            .filter(|(t, _)| !Arc::ptr_eq(t, mem))
            .map(|&(_, n)| n)
            .chain([sv.mem_wal])
            .min()
            .unwrap_or(sv.mem_wal);
        let edit = VersionEdit {
            log_number: Some(log_number),
            next_file_number: Some(m.next_file_number),
            last_sequence: Some(s.last_seq.load(std::sync::atomic::Ordering::SeqCst)),
            added: added.iter().map(|(l, h)| (*l, h.meta.clone())).collect(),
            ..VersionEdit::default()
        };
        m.manifest.log_edit(&edit)?;
        let mut failed = None;
        s.update(|sv| match sv.tables.apply(&added, &[], &[]) {
            Ok(tables) => SuperVersion {
                mem: Arc::clone(&sv.mem),
                mem_wal: sv.mem_wal,
                imm: sv
                    .imm
                    .iter()
                    .filter(|(t, _)| !Arc::ptr_eq(t, mem))
                    .cloned()
                    .collect(),
                tables: Arc::new(tables),
            },
            Err(e) => {
                failed = Some(e);
                sv.clone()
            }
        });
        if let Some(e) = failed {
            return Err(corruption(
                &s.dir,
                format!("flush produced an invalid version: {e}"),
            ));
        }
    }
    let _ = s.storage.remove(&s.wal_path(wal));
    let mut st = lock(&s.compaction_stats);
    st.flushes += 1;
    if let (Some(t), Some((_, h))) = (timings, added.first()) {
        st.bytes_written += h.meta.file_size;
        st.write_time += t.write;
        // An unclustered index is trained when the table opens (from its mapped-keys block).
        st.train_time += t.train + h.table.unclustered_build_time();
        st.index_write_time += t.index_write;
    }
    drop(st);
    s.notify();
    Ok(())
}
