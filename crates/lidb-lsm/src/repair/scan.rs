//! Phase 1 of a repair: read every table and WAL of the directory. A table that opens and whose
//! every entry reads with its checksum is kept; one that does not is moved to `lost/`. A WAL
//! gives its intact prefix (the records before its first bad record, and before the first
//! record that does not decode as a batch); the bytes after the cut are copied to `lost/`.
//! Nothing here removes or rewrites a file the database may still need.

use std::path::Path;
use std::sync::Arc;

use crate::memtable::MemTable;
use crate::options::Options;
use crate::repair::report::{RepairReport, SetAside, WalSetAside};
use crate::table::reader::Table;
use crate::types::SortedIter;
use lidb_storage::Storage;
use lidb_storage::error::Result;
use lidb_storage::log::{LOG_HEADER_BYTES, RECORD_HEADER_BYTES, read_log};
use lidb_storage::report::{LOST_DIR, save_lost};

/// The number of `name` if it is `{digits}{suffix}`.
pub(crate) fn numbered(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A table that read cleanly.
pub(crate) struct KeptTable {
    pub number: u64,
    pub table: Arc<Table>,
}

/// Opens table `number` and reads every entry; the error says why it cannot be kept.
fn read_table(storage: &dyn Storage, dir: &Path, number: u64, opts: &Options) -> Result<KeptTable> {
    let path = dir.join(format!("{number:06}.sst"));
    let mode = crate::db::output::read_mode_for(opts);
    let table = Arc::new(Table::open(storage, &path, number, mode, None)?);
    let mut it = table.iter();
    it.seek_to_first()?;
    while it.valid() {
        it.next()?;
    }
    Ok(KeptTable { number, table })
}

/// Keeps every table that reads cleanly; moves the others to `lost/`.
pub(crate) fn scan_tables(
    storage: &dyn Storage,
    dir: &Path,
    names: &[String],
    opts: &Options,
    report: &mut RepairReport,
) -> Result<Vec<KeptTable>> {
    let mut numbers: Vec<u64> = names.iter().filter_map(|n| numbered(n, ".sst")).collect();
    numbers.sort_unstable();
    let mut kept = Vec::new();
    for number in numbers {
        let name = format!("{number:06}.sst");
        match read_table(storage, dir, number, opts) {
            Ok(t) => {
                report.tables_kept.push((name, t.table.entries()));
                kept.push(t);
            }
            Err(e) => {
                let lost = dir.join(LOST_DIR);
                storage.create_dir_all(&lost)?;
                let to = lost.join(&name);
                storage.rename(&dir.join(&name), &to)?;
                storage.sync_dir(&lost)?;
                storage.sync_dir(dir)?;
                report.tables_set_aside.push(SetAside {
                    file: name,
                    saved_as: to.display().to_string(),
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(kept)
}

/// Reads the intact prefix of every WAL into one memtable (entries keep their sequence numbers,
/// so the merge orders them against the tables); saves each WAL's bytes after its cut to
/// `lost/`. Returns the memtable and the WAL numbers read.
pub(crate) fn scan_wals(
    storage: &dyn Storage,
    dir: &Path,
    names: &[String],
    report: &mut RepairReport,
) -> Result<(Arc<MemTable>, Vec<u64>)> {
    let mut numbers: Vec<u64> = names.iter().filter_map(|n| numbered(n, ".log")).collect();
    numbers.sort_unstable();
    let mem = Arc::new(MemTable::new());
    for &number in &numbers {
        let name = format!("{number:06}.log");
        let path = dir.join(&name);
        let size = storage.file_size(&path)?;
        let (records, mut cut, mut reason) = match read_log(storage, &path) {
            Ok(c) => {
                let reason = c.bad_tail.as_ref().map(|t| t.detail.clone());
                (c.records, c.valid_len, reason)
            }
            Err(e) => (Vec::new(), 0, Some(e.to_string())),
        };
        let mut offset = LOG_HEADER_BYTES;
        for rec in &records {
            match crate::batch::decode(rec) {
                Ok((seq, ops)) => {
                    for (i, op) in ops.iter().enumerate() {
                        mem.insert(seq + i as u64, op.kind, &op.key, &op.value);
                    }
                    let last = seq + (ops.len() as u64).saturating_sub(1);
                    report.last_sequence = report.last_sequence.max(last);
                    report.wal_records += 1;
                    offset += RECORD_HEADER_BYTES + rec.len() as u64;
                }
                Err(d) => {
                    cut = offset;
                    reason = Some(format!("record at offset {offset} is not a batch: {d}"));
                    break;
                }
            }
        }
        if cut < size {
            let saved = save_lost(storage, dir, &path, cut)?;
            report.wal_set_aside.push(WalSetAside {
                file: name,
                offset: cut,
                bytes: size - cut,
                saved_as: saved.display().to_string(),
                reason: reason.unwrap_or_else(|| "bytes after the last intact record".into()),
            });
        }
    }
    Ok((mem, numbers))
}
