//! docs/ARCHITECTURE.md opens with the crate map: one line per workspace crate, `crate: the lidb
//! crates it uses`, ordered so that no crate uses one listed above it. This test reads every
//! crate's Cargo.toml and fails when the map names a crate that is not there, misses one, lists
//! other dependencies than the manifest's, or breaks the order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The lidb crates in the `[dependencies]` table of a Cargo.toml's text.
fn lidb_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_deps = false;
    let mut out = BTreeSet::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && line.starts_with("lidb-") {
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

/// The map: the lines of the first ```text block after "## Crates", in order.
fn map(architecture: &str) -> Vec<(String, BTreeSet<String>)> {
    let section = &architecture[architecture.find("## Crates").expect("a Crates section")..];
    let start = section.find("```text\n").expect("the map's block") + "```text\n".len();
    let body = &section[start..start + section[start..].find("```").unwrap()];
    body.lines()
        .map(|line| {
            let (name, uses) = line.split_once(':').expect("crate: uses");
            let uses = uses
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(String::from)
                .collect();
            (name.trim().to_string(), uses)
        })
        .collect()
}

#[test]
fn the_crate_map_is_the_manifests_in_dependency_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut actual: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = dir.join("Cargo.toml");
        if manifest.is_file() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            actual.insert(
                name,
                lidb_dependencies(&std::fs::read_to_string(manifest).unwrap()),
            );
        }
    }
    let text = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let listed = map(&text);
    let names: Vec<&String> = listed.iter().map(|(n, _)| n).collect();
    let set: BTreeSet<&String> = names.iter().copied().collect();
    assert_eq!(set.len(), names.len(), "a crate listed twice: {names:?}");
    assert_eq!(
        set,
        actual.keys().collect::<BTreeSet<_>>(),
        "the map's crates are not the workspace's"
    );
    for (i, (name, uses)) in listed.iter().enumerate() {
        assert_eq!(
            uses, &actual[name],
            "{name}: the map's uses are not its Cargo.toml's"
        );
        for used in uses {
            let at = names.iter().position(|n| *n == used).unwrap();
            assert!(at > i, "{name} uses {used}, which is listed above it");
        }
    }
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// lidb-lsm exports its engine API and keeps its internals to itself: the modules it marks
/// `#[doc(hidden)]` (public only for its own component tests and the fuzz targets) are named by
/// no other crate of the workspace, in its code or its tests.
#[test]
fn no_other_crate_reaches_into_the_lsm_internals() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = std::fs::read_to_string(root.join("crates/lidb-lsm/src/lib.rs")).unwrap();
    let mut hidden = Vec::new();
    let mut lines = lib.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[doc(hidden)]"
            && let Some(next) = lines.peek()
            && let Some(name) = next.trim().strip_prefix("pub mod ")
        {
            hidden.push(name.trim_end_matches(';').to_string());
        }
    }
    assert!(
        hidden.iter().any(|m| m == "table") && hidden.iter().any(|m| m == "memtable"),
        "the internals are marked in lidb-lsm's lib.rs: {hidden:?}"
    );
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        if entry.file_name() != "lidb-lsm" {
            rust_files(&entry.path(), &mut files);
        }
    }
    assert!(files.len() > 100, "the workspace's sources were found");
    let mut reaching = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for module in &hidden {
            if text.contains(&format!("lidb_lsm::{module}::"))
                || text.contains(&format!("lidb_lsm::{module};"))
            {
                reaching.push(format!("{} uses lidb_lsm::{module}", file.display()));
            }
        }
    }
    assert!(reaching.is_empty(), "{reaching:#?}");
}
