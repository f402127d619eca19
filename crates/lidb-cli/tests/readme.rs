//! The README's tour runs as written: every ```sh block of README.md, in order, in an empty
//! directory, with this build's `lidb` first on the PATH, under `bash -euo pipefail` (so a
//! failing command in a pipeline fails the block). Blocks fenced as ```text (the two commands of
//! a fresh machine, the server with redis-cli, Python) are shown, not run here: CI runs those
//! through scripts/test.sh.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::Command;

/// The bodies of the ```sh blocks of `text`, in order.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(body), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_sh_block_of_the_readme_runs_as_written() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let blocks = sh_blocks(&text);
    assert!(
        blocks.len() >= 6,
        "the tour lost its examples: {} blocks",
        blocks.len()
    );
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_lidb"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let scratch = tempfile::tempdir().unwrap();
    for (i, block) in blocks.iter().enumerate() {
        assert!(
            block.contains("lidb "),
            "block {i} runs no lidb command:\n{block}"
        );
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", block])
            .current_dir(scratch.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README block {i} failed ({}):\n{block}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !out.stdout.is_empty(),
            "README block {i} printed nothing:\n{block}"
        );
    }
}
