//! What a store repair did, one line per thing (printed by `lidb repair`).

use std::fmt;
use std::path::PathBuf;

use lidb_lsm::repair::RepairReport;

/// The result of [`crate::repair::repair_store`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreRepairReport {
    /// Why `KVSTATE` was rebuilt from the directory listing (it was missing or unreadable; the
    /// old bytes are in `lost/KVSTATE@0`), or `None` when it was read.
    pub state_rebuilt: Option<String>,
    /// Each LSM directory's repair.
    pub lsms: Vec<(PathBuf, RepairReport)>,
    /// The active value log's bad tail: (file, offset, bytes, detail). Its bytes are copied to
    /// `lost/`; the log is left as it was and a new, empty value log takes writes.
    pub vlog_tail: Option<(PathBuf, u64, u64, String)>,
    /// A learned tier dropped because a file of it does not read: (generation, why). Its files
    /// are in `lost/`.
    pub tier_dropped: Option<(u64, String)>,
    /// Keys whose newest value does not read: each now has a deletion in the newest LSM. Also
    /// listed in `lost/REPAIR-dropped-keys.txt`.
    pub dropped_keys: Vec<Vec<u8>>,
    /// Keys checked by reading their value.
    pub keys_checked: u64,
}

impl StoreRepairReport {
    /// Whether any data may be missing (the lines say what).
    pub fn set_aside_anything(&self) -> bool {
        self.vlog_tail.is_some()
            || self.tier_dropped.is_some()
            || !self.dropped_keys.is_empty()
            || self.lsms.iter().any(|(_, r)| r.set_aside_anything())
    }
}

impl fmt::Display for StoreRepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state_rebuilt {
            Some(why) => writeln!(f, "KVSTATE rebuilt from the directory listing: {why}")?,
            None => writeln!(f, "KVSTATE read")?,
        }
        for (dir, r) in &self.lsms {
            for line in r.to_string().lines() {
                writeln!(f, "{}: {line}", dir.display())?;
            }
        }
        if let Some((file, offset, bytes, detail)) = &self.vlog_tail {
            writeln!(
                f,
                "set aside {bytes} bytes of value log {} from offset {offset} ({detail}); a new \
                 value log takes writes",
                file.display()
            )?;
        }
        if let Some((g, why)) = &self.tier_dropped {
            writeln!(f, "dropped tier generation {g} (files in lost/): {why}")?;
        }
        writeln!(
            f,
            "checked {} keys; {} keys dropped (value unreadable, now deleted)",
            self.keys_checked,
            self.dropped_keys.len()
        )?;
        for k in &self.dropped_keys {
            writeln!(f, "dropped key {}", String::from_utf8_lossy(k))?;
        }
        Ok(())
    }
}
