//! What opening a tiered store found and cut: the active value log's bad tail and each LSM's
//! recovery report. `lidb kv` prints it on stderr before serving.

use std::fmt;
use std::path::PathBuf;

use lidb_lsm::{CutKind, LogCut, RecoveryReport};

/// The recovery report of a [`crate::Store`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreRecovery {
    /// The active value log's cut, if it had a bad tail.
    pub vlog_cut: Option<LogCut>,
    /// Each LSM directory opened, with its report.
    pub lsms: Vec<(PathBuf, RecoveryReport)>,
}

impl StoreRecovery {
    /// Every cut: the value log's, then each LSM's.
    pub fn cuts(&self) -> impl Iterator<Item = &LogCut> {
        self.vlog_cut
            .iter()
            .chain(self.lsms.iter().flat_map(|(_, r)| r.cuts()))
    }

    /// Whether any cut dropped more than a crash's torn tail.
    pub fn found_damage(&self) -> bool {
        self.cuts().any(|c| c.kind == CutKind::Damage)
    }
}

impl fmt::Display for StoreRecovery {
    /// One line per cut; nothing when the open cut nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.cuts() {
            writeln!(f, "recovery: {c}")?;
        }
        Ok(())
    }
}
