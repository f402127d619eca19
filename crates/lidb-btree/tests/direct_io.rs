//! O_DIRECT on the temp dir's file system: if it refuses O_DIRECT, the error says so and names
//! the buffered option; the test then uses the buffered fallback and says so on stderr.

use lidb_btree::{BTree, Options};

#[test]
fn direct_io_or_a_visible_fallback() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("direct.db");
    let mut opts = Options {
        pool_bytes: 32 * 4096,
        ..Options::default()
    };
    let tree = match BTree::create(&path, &opts) {
        Ok(t) => {
            eprintln!("O_DIRECT accepted on {}", dir.path().display());
            t
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("O_DIRECT") && msg.contains("direct_io"),
                "{msg}"
            );
            eprintln!(
                "O_DIRECT refused on {} ({msg}); using the buffered fallback",
                dir.path().display()
            );
            std::fs::remove_file(&path).ok();
            opts.direct_io = false;
            BTree::create(&path, &opts).unwrap_or_else(|e| panic!("{e}"))
        }
    };
    for i in 0..5000u32 {
        tree.put(&i.to_be_bytes(), &[7; 100])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    tree.checkpoint(5, b"x").unwrap_or_else(|e| panic!("{e}"));
    tree.close().unwrap_or_else(|e| panic!("{e}"));
    let tree = BTree::open(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        tree.scan(b"", None, usize::MAX)
            .map(|v| v.len())
            .unwrap_or(0),
        5000
    );
}
