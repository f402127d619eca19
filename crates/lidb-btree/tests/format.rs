//! The on-disk format across versions: a file written by format version 1 still opens with
//! its contents, LSN and blob (regenerate only with a new version: `cargo test -p lidb-btree
//! --test format -- --ignored write_v1_fixture`), and a page size other than the file's is a
//! clear error.

use std::path::PathBuf;

use lidb_btree::{BTree, Error, Options};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1.db")
}

fn opts() -> Options {
    Options {
        pool_bytes: 32 * 4096,
        direct_io: false,
        provider_thread: false,
        ..Options::default()
    }
}

fn expected(i: u32) -> (Vec<u8>, Vec<u8>) {
    (
        format!("fixture-key-{i:04}").into_bytes(),
        vec![(i % 251) as u8; (i % 50) as usize],
    )
}

#[test]
#[ignore = "writes the fixture; run only when a new format version is introduced"]
fn write_v1_fixture() {
    let path = fixture();
    std::fs::remove_file(&path).ok();
    let tree = BTree::create(&path, &opts()).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..600 {
        let (k, v) = expected(i);
        tree.put(&k, &v).unwrap_or_else(|e| panic!("{e}"));
    }
    for i in (0..600).step_by(3) {
        tree.delete(&expected(i).0)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    tree.checkpoint(42, b"fixture blob")
        .unwrap_or_else(|e| panic!("{e}"));
    tree.close().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_version_1_file_still_opens() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("v1.db");
    std::fs::copy(fixture(), &path).unwrap_or_else(|e| panic!("{e}"));
    let tree = BTree::open(&path, &opts()).unwrap_or_else(|e| panic!("{e}"));
    let info = tree.checkpoint_info();
    assert_eq!(
        (info.lsn, info.extra.as_slice()),
        (42, b"fixture blob".as_slice())
    );
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..600).filter(|i| i % 3 != 0).map(expected).collect();
    let got = tree
        .scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(got == want, "the fixture's contents changed");
}

#[test]
fn another_page_size_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("v1.db");
    std::fs::copy(fixture(), &path).unwrap_or_else(|e| panic!("{e}"));
    let o = Options {
        page_size: 8192,
        ..opts()
    };
    match BTree::open(&path, &o) {
        Err(Error::InvalidOption(msg)) => assert!(msg.contains("page size 4096"), "{msg}"),
        other => panic!("expected a page size error, got {other:?}"),
    }
}
