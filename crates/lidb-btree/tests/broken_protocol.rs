//! A test that breaks the latching protocol on purpose, to show the protocol's checks matter: readers that skip the leaf's
//! version validation see torn values while a writer rewrites them; with the validation they
//! never do. If the first half stops failing, the check below it proves nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lidb_btree::{BTree, Options};

/// Runs a writer flipping one 1000-byte value between all-`a` and all-`b` and a reader that
/// counts values mixing both, for at most `limit` (or until the first torn value).
fn torn_reads(skip_validation: bool, limit: Duration) -> u64 {
    let opts = Options {
        pool_bytes: 64 * 4096,
        direct_io: false,
        provider_thread: false,
        ..Options::default()
    };
    let tree = Arc::new(BTree::in_memory(&opts).unwrap_or_else(|e| panic!("{e}")));
    tree.put(b"key", &[b'a'; 1000])
        .unwrap_or_else(|e| panic!("{e}"));
    tree.set_skip_leaf_validation_for_test(skip_validation);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (tree, stop) = (tree.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let b = if i.is_multiple_of(2) { b'b' } else { b'a' };
                tree.put(b"key", &[b; 1000])
                    .unwrap_or_else(|e| panic!("{e}"));
                i += 1;
            }
        })
    };
    let start = Instant::now();
    let mut torn = 0u64;
    while start.elapsed() < limit && (torn == 0 || !skip_validation) {
        for _ in 0..1000 {
            let v = tree
                .get(b"key")
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_default();
            let first = v.first().copied().unwrap_or(0);
            if v.len() != 1000 || v.iter().any(|b| *b != first) {
                torn += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap_or_else(|_| panic!("writer panicked"));
    torn
}

#[test]
fn skipping_validation_shows_torn_values_and_validation_hides_them() {
    let broken = torn_reads(true, Duration::from_secs(20));
    assert!(
        broken > 0,
        "readers without validation never saw a torn value in 20 s"
    );
    let correct = torn_reads(false, Duration::from_secs(2));
    assert_eq!(correct, 0, "validated readers saw torn values");
    eprintln!("without validation: {broken} torn read(s); with: none");
}
