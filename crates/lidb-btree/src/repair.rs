//! Offline repair of a LearnedStore directory ([`LearnedStore::repair`]): what a store that does
//! not open normally can get back without an expert.
//!
//! Steps:
//! 1. open in the `point-in-time` recovery mode: a damaged tail of the last log is cut at the
//!    last good record, the bytes from the bad record on saved to `lost/{log}@{offset}` first
//!    (a torn tail is cut as on any open);
//! 2. rebuild the learned mapping table and its model from the tree (`Tree::leaf_parents`), the
//!    checkpoint's blob, loaded or not, set aside;
//! 3. checkpoint (the fresh blob is saved, the replayed log emptied) and close cleanly.
//!
//! Not repaired, reported as the open's `Corruption`: damage in a log before the last (records
//! after it in later logs; no recovery mode cuts it), an LSN gap, a page file whose both header
//! copies or whose checkpoint's pages are damaged.
//!
//! Callers: `lidb repair --engine learnedstore` and tests; one thread, the store not open
//! elsewhere (the open takes the directory's lock).

use std::path::Path;

use lidb_storage::tail::RecoveryMode;

use crate::engine::{LearnedStore, LearnedStoreOptions, PAGE_FILE_NAME};
use crate::error::{Result, io_err};
use crate::learned::LearnedSource;
use crate::store::WalRecovery;

/// What [`LearnedStore::repair`] found and did.
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The point-in-time open's recovery report (what was cut, where the bytes went).
    pub wal: WalRecovery,
    /// Where the table served at the repair's open came from (the blob, or why not).
    pub learned_before: LearnedSource,
    /// Slots of the table rebuilt from the tree and saved.
    pub slots: u64,
}

impl std::fmt::Display for RepairReport {
    /// One `repair: ...` line per step (the recovery's cut lines first).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.wal)?;
        match (&self.wal.cut, &self.wal.cut_log) {
            (Some(t), Some(log)) => {
                writeln!(
                    f,
                    "repair: {}: kept the {} records before offset {}; set aside {} bytes ({} \
                     intact records after the damage){}",
                    log.display(),
                    self.wal.records_replayed,
                    t.offset,
                    t.bytes,
                    t.records_after,
                    self.wal
                        .lost
                        .as_ref()
                        .map(|p| format!(" in {}", p.display()))
                        .unwrap_or_default()
                )?;
            }
            _ => writeln!(
                f,
                "repair: the logs are intact: kept {} records, set aside nothing",
                self.wal.records_replayed
            )?,
        }
        let before = match &self.learned_before {
            LearnedSource::Loaded { slots } => format!("the checkpoint's blob held {slots} slots"),
            LearnedSource::Built { why, .. } => {
                format!("the checkpoint's blob was not used: {why}")
            }
            LearnedSource::Disabled => "the learned path was off".to_string(),
        };
        writeln!(
            f,
            "repair: learned mapping table rebuilt from the tree: {} slots ({before})",
            self.slots
        )?;
        writeln!(
            f,
            "repair: checkpoint written and closed; the store opens normally"
        )
    }
}

impl LearnedStore {
    /// Repairs the store in `dir` (see the module documentation of `repair.rs`): the log cut at
    /// its last good record, the learned table rebuilt from the tree, a checkpoint. `opts` are
    /// the store's; the recovery mode is forced to point-in-time and the learned path on.
    ///
    /// Errors: what the open cannot repair (`Corruption` naming the file), `Io`.
    pub fn repair(dir: &Path, opts: &LearnedStoreOptions) -> Result<RepairReport> {
        let mut o = opts.clone();
        o.wal.recovery_mode = RecoveryMode::PointInTime;
        o.learned.enabled = true;
        if let Some(size) = stored_page_size(&dir.join(PAGE_FILE_NAME))? {
            o.tree.page_size = size;
        }
        let store = LearnedStore::open(dir, &o)?;
        let wal = store.recovery_report().clone();
        let learned_before = store.learned_source().clone();
        store.retrain_learned()?;
        let slots = store.learned_stats().slots;
        store.checkpoint()?;
        store.close()?;
        Ok(RepairReport {
            wal,
            learned_before,
            slots,
        })
    }
}

/// The page size a header copy of the page file at `path` records, if one is readable: slot 0
/// at offset 0, else slot 1 at each possible page size (so a repair needs no `--page-size`;
/// the open checks the header's checksum and size after). `None`: no file, or no header copy
/// with the magic (the open then reports what it finds with the options' page size).
fn stored_page_size(path: &Path) -> Result<Option<usize>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let mut header = [0u8; 48];
    let sizes = (12..=16).map(|shift| 1usize << shift);
    for at in std::iter::once(0).chain(sizes.clone()) {
        if file.seek(SeekFrom::Start(at as u64)).is_err() || file.read_exact(&mut header).is_err() {
            continue;
        }
        let size = crate::page::get_u32(&header, 40) as usize;
        let magic = header.get(32..40) == Some(crate::pagefile::MAGIC.as_slice());
        if magic && (at == 0 || at == size) && sizes.clone().any(|s| s == size) {
            return Ok(Some(size));
        }
    }
    Ok(None)
}
