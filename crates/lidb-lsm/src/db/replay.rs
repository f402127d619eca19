//! Replaying the WALs at open (phase 1: reads only): every WAL the manifest does not cover, oldest
//! first, into one memtable. Each bad tail is classified (`tail::classify`) and the recovery mode
//! decides whether it is cut or fails the open; the first cut drops every later WAL too, and a
//! batch `Options::replay_filter` rejects is cut like a torn tail, so what is replayed stays a
//! prefix of the writes. The cuts are carried out by the open's phase 2 (recover.rs).

use std::path::Path;
use std::sync::Arc;

use crate::batch::BatchOp;
use crate::db::state::RecoveryReport;
use crate::memtable::MemTable;
use crate::options::Options;
use lidb_storage::Storage;
use lidb_storage::error::{Result, corruption};
use lidb_storage::log::{LOG_HEADER_BYTES, RECORD_HEADER_BYTES, read_log};
use lidb_storage::report::{CutKind, LogCut, refused};
use lidb_storage::tail::TailKind;

/// Why `Options::replay_filter` rejects a batch (its first rejected entry), if it does.
fn rejected(opts: &Options, ops: &[BatchOp]) -> Option<String> {
    let filter = opts.replay_filter.as_ref()?;
    ops.iter()
        .find_map(|op| filter.check(op.kind, &op.key, &op.value).err())
}

/// A cut decided in phase 1 and carried out in phase 2.
pub(crate) struct PendingCut {
    pub cut: LogCut,
    /// Whether the dropped bytes are saved under `lost/` first (damage, and what follows it).
    pub save: bool,
}

/// What replaying the WALs produced.
pub(crate) struct Replayed {
    pub mem: Arc<MemTable>,
    pub cuts: Vec<PendingCut>,
}

/// Replays the WALs numbered from `log_number` on into a memtable, raising `last_sequence` to the
/// last sequence replayed (phase 1 of an open: reads only).
pub(crate) fn replay_wals(
    storage: &dyn Storage,
    dir: &Path,
    opts: &Options,
    log_number: u64,
    last_sequence: &mut u64,
    report: &mut RecoveryReport,
) -> Result<Replayed> {
    let mut wals: Vec<u64> = storage
        .list(dir)?
        .iter()
        .filter_map(|n| n.strip_suffix(".log")?.parse().ok())
        .filter(|&n| n >= log_number)
        .collect();
    wals.sort_unstable();
    let mem = Arc::new(MemTable::new());
    let mut cuts: Vec<PendingCut> = Vec::new();
    // Set by the first cut: every later WAL is dropped whole, so the replay stays a prefix.
    let mut after: Option<(String, bool)> = None;
    for (i, &n) in wals.iter().enumerate() {
        let path = dir.join(format!("{n:06}.log"));
        let contents = read_log(storage, &path)?;
        if let Some((why, save)) = &after {
            let bytes = storage.file_size(&path)?;
            if bytes > 0 {
                let cut = LogCut {
                    file: path,
                    offset: 0,
                    bytes,
                    records: contents.records.len() as u64,
                    kind: CutKind::AfterCut,
                    detail: why.clone(),
                };
                cuts.push(PendingCut { cut, save: *save });
            }
            continue;
        }
        let mut offset = LOG_HEADER_BYTES;
        for (r, rec) in contents.records.iter().enumerate() {
            let (seq, ops) = crate::batch::decode(rec).map_err(|d| corruption(&path, d))?;
            if let Some(why) = rejected(opts, &ops) {
                let detail = format!("replay filter rejected the batch at offset {offset}: {why}");
                let cut = LogCut {
                    file: path.clone(),
                    offset,
                    bytes: storage.file_size(&path)?.saturating_sub(offset),
                    records: (contents.records.len() - r) as u64,
                    kind: CutKind::ReplayFilter,
                    detail: detail.clone(),
                };
                cuts.push(PendingCut { cut, save: false });
                after = Some((format!("{} was cut: {detail}", path.display()), false));
                break;
            }
            for (i, op) in ops.iter().enumerate() {
                mem.insert(seq + i as u64, op.kind, &op.key, &op.value);
            }
            let last = seq + (ops.len() as u64).saturating_sub(1);
            *last_sequence = (*last_sequence).max(last);
            report.wal_records_replayed += 1;
            offset += RECORD_HEADER_BYTES + rec.len() as u64;
        }
        if after.is_some() {
            continue;
        }
        let Some(mut t) = contents.bad_tail else {
            continue;
        };
        // A memtable switch syncs the old WAL before the new one takes writes, so only the last
        // WAL holding records can have a torn tail.
        if t.kind == TailKind::Torn
            && later_wal_has_records(storage, dir, wals.get(i + 1..).unwrap_or_default())?
        {
            t.kind = TailKind::Damage;
            t.detail = format!(
                "{}; but a later WAL holds records, so it is damage",
                t.detail
            );
        }
        if !opts.recovery_mode.allows(t.kind) {
            return Err(refused(&path, &t, opts.recovery_mode));
        }
        let save = t.kind == TailKind::Damage;
        let cut = LogCut::of_tail(path.clone(), &t);
        after = Some((format!("{} was cut: {}", path.display(), t.detail), save));
        cuts.push(PendingCut { cut, save });
    }
    Ok(Replayed { mem, cuts })
}

fn later_wal_has_records(storage: &dyn Storage, dir: &Path, later: &[u64]) -> Result<bool> {
    for &n in later {
        if !read_log(storage, &dir.join(format!("{n:06}.log")))?
            .records
            .is_empty()
        {
            return Ok(true);
        }
    }
    Ok(false)
}
