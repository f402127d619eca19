//! What a repair kept, set aside and wrote: one line per thing, printed by `lidb repair`.

use std::fmt;

/// A table or log set aside under `lost/`, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// File name in the database directory.
    pub file: String,
    /// Where its bytes went (a path under `lost/`).
    pub saved_as: String,
    pub reason: String,
}

/// The bytes of a WAL after its intact prefix, copied to `lost/{name}@{offset}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalSetAside {
    pub file: String,
    pub offset: u64,
    pub bytes: u64,
    pub saved_as: String,
    pub reason: String,
}

/// The result of [`crate::repair::repair_db`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// (file name, entries) of every table that read cleanly and was merged.
    pub tables_kept: Vec<(String, u64)>,
    pub tables_set_aside: Vec<SetAside>,
    /// Intact WAL records (batches) merged.
    pub wal_records: u64,
    pub wal_set_aside: Vec<WalSetAside>,
    /// Old `MANIFEST-*` and `CURRENT` files, copied to `lost/` before the new manifest.
    pub manifests_set_aside: Vec<String>,
    /// (file name, entries) of the tables written.
    pub tables_written: Vec<(String, u64)>,
    /// Deletions dropped by the merge (nothing older remains for them to hide).
    pub deletions_dropped: u64,
    pub last_sequence: u64,
}

impl RepairReport {
    /// Whether anything was set aside (data may be missing; the lines say what).
    pub fn set_aside_anything(&self) -> bool {
        !self.tables_set_aside.is_empty() || !self.wal_set_aside.is_empty()
    }

    pub fn entries_kept(&self) -> u64 {
        self.tables_kept.iter().map(|(_, n)| n).sum()
    }

    pub fn entries_written(&self) -> u64 {
        self.tables_written.iter().map(|(_, n)| n).sum()
    }
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kept {} tables ({} entries)",
            self.tables_kept.len(),
            self.entries_kept()
        )?;
        for t in &self.tables_set_aside {
            writeln!(
                f,
                "set aside table {} as {}: {}",
                t.file, t.saved_as, t.reason
            )?;
        }
        writeln!(f, "recovered {} WAL records", self.wal_records)?;
        for w in &self.wal_set_aside {
            writeln!(
                f,
                "set aside {} bytes of WAL {} from offset {} as {}: {}",
                w.bytes, w.file, w.offset, w.saved_as, w.reason
            )?;
        }
        for m in &self.manifests_set_aside {
            writeln!(f, "set aside old manifest file {m}")?;
        }
        writeln!(
            f,
            "wrote {} tables ({} entries, {} deletions dropped, last sequence {})",
            self.tables_written.len(),
            self.entries_written(),
            self.deletions_dropped,
            self.last_sequence
        )
    }
}
