//! What an open found and cut: the recovery report every engine returns and the CLI prints on
//! stderr before serving (file, offset, bytes and records dropped, and why).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::Storage;
use crate::error::{Error, Result, corruption};
use crate::tail::{BadTail, RecoveryMode, TailKind};

/// Where a log file's bytes go when a damage cut drops them: `dir/lost/{name}@{offset}`.
pub const LOST_DIR: &str = "lost";

/// Why recovery cut a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutKind {
    /// A crash's torn tail: only unacknowledged (or unsynced) writes.
    TornTail,
    /// Damage, cut because the recovery mode is point-in-time: acknowledged writes may be lost.
    /// The dropped bytes are saved under `lost/` in the database directory.
    Damage,
    /// `Options::replay_filter` rejected a batch (an embedding store's own torn tail).
    ReplayFilter,
    /// A later log, dropped whole because an earlier one was cut (what is kept stays a prefix).
    AfterCut,
}

impl fmt::Display for CutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutKind::TornTail => "torn tail",
            CutKind::Damage => "damage",
            CutKind::ReplayFilter => "replay filter",
            CutKind::AfterCut => "after an earlier cut",
        })
    }
}

/// One cut: the log `file` was truncated to `offset`, dropping `bytes` bytes that held `records`
/// intact records (besides the bad one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCut {
    pub file: PathBuf,
    pub offset: u64,
    pub bytes: u64,
    pub records: u64,
    pub kind: CutKind,
    pub detail: String,
}

impl LogCut {
    /// The cut of a classified bad tail.
    pub fn of_tail(file: PathBuf, t: &BadTail) -> LogCut {
        LogCut {
            file,
            offset: t.offset,
            bytes: t.bytes,
            records: t.records_after,
            kind: match t.kind {
                TailKind::Torn => CutKind::TornTail,
                TailKind::Damage => CutKind::Damage,
            },
            detail: t.detail.clone(),
        }
    }
}

impl fmt::Display for LogCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} cut at offset {}: {} bytes and {} intact records dropped ({})",
            self.file.display(),
            self.kind,
            self.offset,
            self.bytes,
            self.records,
            self.detail
        )
    }
}

/// What opening the database found and repaired.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryReport {
    pub wal_records_replayed: u64,
    /// WAL cuts, in WAL order.
    pub wal_cuts: Vec<LogCut>,
    /// The manifest's cut, if it had a bad tail.
    pub manifest_cut: Option<LogCut>,
    /// Files removed because nothing referenced them (only after a recovery with no cut of the
    /// manifest and no damage: otherwise unreferenced files are kept for `lidb repair`).
    pub obsolete_files_removed: u64,
}

impl RecoveryReport {
    /// Every cut, the manifest's first.
    pub fn cuts(&self) -> impl Iterator<Item = &LogCut> {
        self.manifest_cut.iter().chain(&self.wal_cuts)
    }

    /// Whether any cut dropped more than a crash's torn tail.
    pub fn found_damage(&self) -> bool {
        self.cuts().any(|c| c.kind == CutKind::Damage)
    }
}

impl fmt::Display for RecoveryReport {
    /// One line per cut; nothing when the open cut nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.cuts() {
            writeln!(f, "recovery: {c}")?;
        }
        Ok(())
    }
}

/// The `Corruption` error for a bad tail of `file` that the recovery mode does not allow.
pub fn refused(file: &Path, t: &BadTail, mode: RecoveryMode) -> Error {
    let advice = match (mode, t.kind) {
        (RecoveryMode::Absolute, TailKind::Torn) => {
            "the absolute recovery mode refuses even a torn tail; open with \
             --recovery-mode tolerate-torn-tail to cut it"
        }
        _ => {
            "acknowledged writes may follow it; open with --recovery-mode point-in-time to keep \
             only what precedes it, or run `lidb repair`"
        }
    };
    corruption(file, format!("{}; {advice}", t.detail))
}

/// Copies the bytes of `file` from `offset` on to `dir/lost/{name}@{offset}`, durably.
pub fn save_lost(storage: &dyn Storage, dir: &Path, file: &Path, offset: u64) -> Result<PathBuf> {
    let bytes = storage.read_all(file)?;
    // The offset came from a scan of this file; a file that shrank since is damage, not an
    // empty tail to set aside.
    let tail = bytes.get(offset as usize..).ok_or_else(|| {
        corruption(
            file,
            format!(
                "the bytes to set aside start at offset {offset}, past the end of the file \
                 ({} bytes)",
                bytes.len()
            ),
        )
    })?;
    let lost = dir.join(LOST_DIR);
    storage.create_dir_all(&lost)?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let to = lost.join(format!("{name}@{offset}"));
    let mut out = storage.create(&to)?;
    out.append(tail)?;
    out.sync()?;
    storage.sync_dir(&lost)?;
    storage.sync_dir(dir)?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemStorage;

    fn file_of(storage: &MemStorage, path: &Path, bytes: &[u8]) {
        let mut f = storage.create(path).unwrap_or_else(|e| panic!("{e}"));
        f.append(bytes).unwrap_or_else(|e| panic!("{e}"));
        f.sync().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn the_tail_from_the_offset_is_set_aside_and_an_offset_past_the_end_is_damage() {
        let storage = MemStorage::new();
        let dir = Path::new("/db");
        storage
            .create_dir_all(dir)
            .unwrap_or_else(|e| panic!("{e}"));
        let wal = dir.join("000001.log");
        file_of(&storage, &wal, b"0123456789");
        let to = save_lost(&storage, dir, &wal, 4).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(to, dir.join("lost/000001.log@4"));
        assert_eq!(storage.read_all(&to).ok().as_deref(), Some(&b"456789"[..]));
        match save_lost(&storage, dir, &wal, 11) {
            Err(Error::Corruption { file, detail }) => {
                assert_eq!(file, wal);
                assert!(detail.contains("offset 11"), "{detail}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        assert!(!storage.exists(&dir.join("lost/000001.log@11")));
    }
}
