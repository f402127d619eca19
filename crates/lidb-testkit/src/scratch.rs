//! Scratch directories for tests that touch the real file system (table files, `lidb` runs,
//! servers' data directories).
//!
//! [`Scratch::new`] makes a fresh empty directory `lidb-{prefix}-XXXXXX` under the system's
//! temporary directory (`tempfile` picks the random suffix, so parallel tests and concurrent runs
//! of one test never share one). It is removed with everything in it when the `Scratch` drops,
//! also when the test panics. With `LIDB_KEEP_SCRATCH=1` in the environment it is kept instead and
//! its path printed to stderr (which the test harness shows with a failure), so the files a
//! failing test left can be inspected.
//!
//! Called by the integration tests of lidb-lsm, lidb-kv, lidb-stress and lidb-cli, from any test
//! thread. Invariant: while a `Scratch` lives, its directory exists and nothing else created it.

use std::path::Path;

use tempfile::TempDir;

/// The environment variable that keeps scratch directories after the test (`1` keeps them).
pub const KEEP_VAR: &str = "LIDB_KEEP_SCRATCH";

/// A fresh directory, removed on drop unless kept (see the module documentation).
#[derive(Debug)]
pub struct Scratch {
    /// `None` only inside `drop`.
    dir: Option<TempDir>,
    keep: bool,
}

/// Whether the environment asks to keep scratch directories.
fn keep_from_env() -> bool {
    std::env::var_os(KEEP_VAR).is_some_and(|v| v == "1")
}

impl Scratch {
    /// A fresh empty directory named `lidb-{prefix}-` and a random suffix. Panics when the
    /// temporary directory cannot be written: a test cannot run without it.
    pub fn new(prefix: &str) -> Scratch {
        Scratch::with_keep(prefix, keep_from_env())
    }

    fn with_keep(prefix: &str, keep: bool) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("lidb-{prefix}-"))
            .tempdir()
            .unwrap_or_else(|e| panic!("scratch directory lidb-{prefix}-*: {e}"));
        Scratch {
            dir: Some(dir),
            keep,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        match &self.dir {
            Some(dir) => dir.path(),
            None => unreachable!("a Scratch has its directory until it drops"),
        }
    }
}

/// A `Scratch` stands for its path wherever a `&Path` or an `AsRef<Path>` is taken
/// (`scratch.join("db")`, `Command::arg(&scratch)`), so a test's helper that returned a bare
/// `PathBuf` can return a `Scratch` and keep its call sites.
impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        if self.keep {
            let kept = dir.keep();
            eprintln!("{KEEP_VAR}=1: kept scratch directory {}", kept.display());
        }
        // Otherwise `dir` drops here and removes the directory (errors ignored: a test that
        // already passed or failed should not fail again over its cleanup).
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_exists_while_alive_and_is_removed_on_drop() {
        let scratch = Scratch::with_keep("unit", false);
        let dir = scratch.path().to_path_buf();
        assert!(dir.is_dir(), "{} was not created", dir.display());
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        assert!(
            name.as_deref().is_some_and(|n| n.starts_with("lidb-unit-")),
            "{name:?}"
        );
        std::fs::create_dir_all(scratch.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(scratch.join("sub/file"), b"bytes").unwrap_or_else(|e| panic!("{e}"));
        drop(scratch);
        assert!(!dir.exists(), "{} survived the drop", dir.display());
    }

    #[test]
    fn a_kept_directory_survives_the_drop() {
        let scratch = Scratch::with_keep("unit-kept", true);
        let dir = scratch.path().to_path_buf();
        std::fs::write(scratch.join("left"), b"for inspection").unwrap_or_else(|e| panic!("{e}"));
        drop(scratch);
        let kept = std::fs::read(dir.join("left"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            kept.ok().as_deref(),
            Some(&b"for inspection"[..]),
            "{} was removed",
            dir.display()
        );
    }

    #[test]
    fn two_scratches_of_one_prefix_are_different_directories() {
        let (a, b) = (
            Scratch::with_keep("twin", false),
            Scratch::with_keep("twin", false),
        );
        assert_ne!(a.path(), b.path());
    }
}
