// Shared by the table test files (included, not a module of its own): the replayable seed of a
// random test and a scratch directory removed on drop.

use std::path::PathBuf;

/// The seed of a random test: `LIDB_SEED` if set, else `default`; printed so a failure can be
/// replayed.
#[allow(dead_code, reason = "a file that includes this module may have no random test")]
pub fn seed(default: u64) -> u64 {
    let s = std::env::var("LIDB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed {s}");
    s
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// `{tmp}/lidb-{prefix}-{pid}-{name}`, emptied first.
    pub fn new(prefix: &str, name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("lidb-{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
