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
