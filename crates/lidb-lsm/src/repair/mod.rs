//! Offline repair of a database that does not open (`lidb repair`, modelled on RocksDB's
//! RepairDB): rebuild the manifest from what reads cleanly, set aside what does not.
//!
//! ```text
//! 1 scan:   every table read whole (checksums)  ──► kept, or moved to lost/{name}
//!           every WAL's intact prefix           ──► kept; bytes after the cut copied to
//!                                                   lost/{name}@{offset}
//!           old MANIFEST-* and CURRENT          ──► copied to lost/{name}@0
//! 2 merge:  kept tables + WAL records, newest sequence per key, deletions dropped ──► new tables
//!           at the bottom level (and its level model), synced
//! 3 commit: new empty WAL, sync dir; new manifest (one snapshot edit) and CURRENT, atomically
//! 4 clean:  remove the merged tables and WALs, old manifests and level models
//! ```
//!
//! Caller: one thread, with no engine open on the directory (repair takes its lock).
//!
//! Invariants:
//! - Nothing is removed before the new `CURRENT` is durable, and nothing unmerged is ever
//!   removed: an unreadable table is renamed into `lost/`, bytes a WAL cut drops and old manifests
//!   are copied there first. A crash before step 3 leaves the directory as it was plus orphan
//!   tables (which a clean open sweeps and a second repair merges again without harm: versions
//!   keep their sequence numbers); a crash after it leaves the repaired database.
//! - Every WAL's intact records are kept, also those of a WAL after a damaged one (repair salvages
//!   what reads; it does not enforce the prefix rule of an open).
//! - Limit: a deletion whose table was lost cannot hide an older version of its key that a kept
//!   table holds (RocksDB's RepairDB shares this).

mod merge;
mod report;
mod scan;

use std::path::Path;
use std::sync::Arc;

pub use report::{RepairReport, SetAside, WalSetAside};

use crate::manifest::{CURRENT, CURRENT_TMP, Manifest, VersionEdit, parse_manifest_name};
use crate::options::Options;
use crate::types::SortedIter;
use lidb_storage::Storage;
use lidb_storage::error::Result;
use lidb_storage::log::LogWriter;
use lidb_storage::report::save_lost;
use merge::{BOTTOM, write_merged};
use scan::{numbered, scan_tables, scan_wals};

/// Repairs the database in `dir` (see the module documentation). `opts` gives the index kind,
/// granularity and table size of the tables written. Errors are I/O errors (or a held lock);
/// damage is never an error here, it is set aside and reported.
pub fn repair_db(storage: &Arc<dyn Storage>, dir: &Path, opts: &Options) -> Result<RepairReport> {
    opts.validate()?;
    let _lock = storage.lock(&dir.join("LOCK"))?;
    let mut report = RepairReport::default();
    let names = storage.list(dir)?;
    let mut next = first_free_number(&names);

    let kept = scan_tables(&**storage, dir, &names, opts, &mut report)?;
    let (mem, wals) = scan_wals(&**storage, dir, &names, &mut report)?;
    for name in &names {
        if name == CURRENT || parse_manifest_name(name).is_some() {
            save_lost(&**storage, dir, &dir.join(name), 0)?;
            report.manifests_set_aside.push(name.clone());
        }
    }

    let mut sources: Vec<Box<dyn SortedIter>> = Vec::new();
    let (mut max_key, mut max_value) = (mem.max_key_len(), mem.max_value_len());
    for t in &kept {
        max_key = max_key.max(t.table.max_key_len());
        max_value = max_value.max(t.table.max_value_len());
        report.last_sequence = report.last_sequence.max(t.table.seq_range().1);
        sources.push(Box::new(t.table.iter()));
    }
    sources.push(Box::new(mem.iter(u64::MAX)));
    let written = write_merged(storage, dir, opts, sources, (max_key, max_value), &mut next)?;
    report.deletions_dropped = written.deletions_dropped;
    report.tables_written = written
        .tables
        .iter()
        .map(|m| (format!("{:06}.sst", m.number), m.entries))
        .collect();

    // The WAL the new manifest names exists, durably, before the manifest.
    let wal_number = next;
    let manifest_number = next + 1;
    next += 2;
    let wal_path = dir.join(format!("{wal_number:06}.log"));
    let mut wal = LogWriter::new(storage.create(&wal_path)?, wal_path);
    wal.sync()?;
    storage.sync_dir(dir)?;
    let snapshot = VersionEdit {
        log_number: Some(wal_number),
        next_file_number: Some(next),
        last_sequence: Some(report.last_sequence),
        added: written
            .tables
            .iter()
            .map(|m| (BOTTOM as u32, m.clone()))
            .collect(),
        removed: Vec::new(),
        level_index: written
            .level_index
            .map(|n| vec![(BOTTOM as u32, Some(n))])
            .unwrap_or_default(),
    };
    drop(Manifest::create(
        Arc::clone(storage),
        dir,
        manifest_number,
        &snapshot,
    )?);

    // The new CURRENT is durable: the inputs are merged (or saved in lost/) and can go.
    let written_numbers: Vec<u64> = written.tables.iter().map(|m| m.number).collect();
    let keep_model = written.level_index;
    for name in &names {
        let stale = if let Some(n) = numbered(name, ".sst") {
            kept.iter().any(|t| t.number == n) && !written_numbers.contains(&n)
        } else if let Some(n) = numbered(name, ".log") {
            wals.contains(&n) && n != wal_number
        } else if let Some(n) = numbered(name, ".lvl") {
            Some(n) != keep_model
        } else {
            parse_manifest_name(name).is_some_and(|n| n != manifest_number) || name == CURRENT_TMP
        };
        // `Manifest::create` already removed the manifest the old CURRENT named.
        if stale && storage.exists(&dir.join(name)) {
            storage.remove(&dir.join(name))?;
        }
    }
    storage.sync_dir(dir)?;
    Ok(report)
}

/// A file number past every numbered file of the directory.
fn first_free_number(names: &[String]) -> u64 {
    names
        .iter()
        .filter_map(|n| {
            parse_manifest_name(n)
                .or_else(|| numbered(n, ".sst"))
                .or_else(|| numbered(n, ".log"))
                .or_else(|| numbered(n, ".lvl"))
        })
        .max()
        .map_or(2, |n| n + 1)
}
