//! docs/cli.md is `lidb manual`'s output: this test fails when a command, option or help text
//! changed and the manual was not regenerated (`lidb manual > docs/cli.md`, or run this test
//! with LIDB_BLESS=1 to write it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

#[test]
fn docs_cli_md_is_the_manual_the_binary_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .arg("manual")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    if std::env::var_os("LIDB_BLESS").is_some() {
        std::fs::write(&path, &printed).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    // Every command's section is there, and the manual names every engine option.
    for section in [
        "## `lidb`",
        "`lidb kv`",
        "`lidb serve`",
        "`lidb repair`",
        "`lidb bench ycsb`",
    ] {
        assert!(printed.contains(section), "{section} missing");
    }
    for opt in [
        "--engine",
        "--recovery-mode",
        "--leaf-model",
        "--checkpoint-log-bytes",
    ] {
        assert!(printed.contains(opt), "{opt} missing");
    }
    assert!(
        on_disk == printed,
        "docs/cli.md is out of date: regenerate it with `cargo run --bin lidb -- manual > \
         docs/cli.md` (or LIDB_BLESS=1 cargo test -p lidb-cli --test manual)"
    );
}
