//! Where the real datasets live, and how tests that need them skip visibly when they are absent.
//!
//! The data directory is the first of these that is a directory:
//! 1. the value of the environment variable [`DATA_DIR_ENV`] (`LIDB_DATA_DIR`), if set;
//! 2. `<workspace root>/../shared/datasets`, the workspace root being two levels above this
//!    crate's manifest directory (fixed at compile time);
//! 3. `../shared/datasets` relative to the current directory.
//!
//! The known real datasets are the four files of `shared/datasets/README.md`: three SOSD u64
//! files ([`REAL_U64_DATASETS`]) and one text file ([`WORDS_DATASET`]). Tests never fail just
//! because the data is missing: they call [`require_data`] / [`require_dataset`], which print
//! a `SKIPPED` line to stderr so the absence shows in the test output.

use std::path::{Path, PathBuf};

/// Environment variable that points at the dataset directory.
pub const DATA_DIR_ENV: &str = "LIDB_DATA_DIR";

/// The real SOSD u64 datasets (zstd-compressed), smallest first.
pub const REAL_U64_DATASETS: [&str; 3] = [
    "osm_cellids_274K_uint64.zst",
    "tweet_ts_10M_uint64.zst",
    "tweetids_10M_uint64.zst",
];

/// The real text-key dataset: English words, one per line, byte-order sorted, unique.
pub const WORDS_DATASET: &str = "words_663K.txt.zst";

/// Every real dataset file name.
pub const REAL_DATASETS: [&str; 4] = [
    "osm_cellids_274K_uint64.zst",
    "tweet_ts_10M_uint64.zst",
    "tweetids_10M_uint64.zst",
    WORDS_DATASET,
];

/// The dataset directory, or `None` when no candidate is a directory (see the module doc).
pub fn data_dir() -> Option<PathBuf> {
    let from_env = std::env::var_os(DATA_DIR_ENV).map(PathBuf::from);
    let workspace_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        from_env,
        Some(workspace_root.join("../shared/datasets")),
        Some(PathBuf::from("../shared/datasets")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_dir())
}

/// The path of the known real dataset `name` (one of [`REAL_DATASETS`]) if it exists in the
/// data directory. Unknown names give `None`.
pub fn real_dataset(name: &str) -> Option<PathBuf> {
    if !REAL_DATASETS.contains(&name) {
        return None;
    }
    let path = data_dir()?.join(name);
    path.is_file().then_some(path)
}

/// For tests: the data directory, or `None` after printing
/// `SKIPPED <test_name>: dataset directory not found; set LIDB_DATA_DIR` to stderr.
pub fn require_data(test_name: &str) -> Option<PathBuf> {
    let dir = data_dir();
    if dir.is_none() {
        eprintln!("SKIPPED {test_name}: dataset directory not found; set {DATA_DIR_ENV}");
    }
    dir
}

/// For tests: the path of real dataset `name`, or `None` after printing a `SKIPPED` line that
/// says whether the directory or just the file is missing.
pub fn require_dataset(test_name: &str, name: &str) -> Option<PathBuf> {
    let dir = require_data(test_name)?;
    let path = real_dataset(name);
    if path.is_none() {
        eprintln!(
            "SKIPPED {test_name}: dataset {name} not found in {}; set {DATA_DIR_ENV}",
            dir.display()
        );
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_datasets_are_listed_among_all() {
        for name in REAL_U64_DATASETS {
            assert!(REAL_DATASETS.contains(&name));
            assert!(name.ends_with("_uint64.zst"));
        }
        assert!(REAL_DATASETS.contains(&WORDS_DATASET));
    }

    #[test]
    fn unknown_names_are_not_datasets() {
        assert_eq!(real_dataset("passwords.txt"), None);
        assert_eq!(real_dataset("../etc/passwd"), None);
    }

    #[test]
    fn found_datasets_exist() {
        let Some(dir) = require_data("found_datasets_exist") else {
            return;
        };
        assert!(dir.is_dir());
        for name in REAL_DATASETS {
            if let Some(p) = real_dataset(name) {
                assert!(p.is_file(), "{}", p.display());
            }
        }
    }
}
