//! A rough speed check, ignored by default (run with `--release -- --ignored --nocapture`):
//! inserts, lookups and a scan in memory with a pool that holds everything, and lookups with a
//! pool of a tenth of the pages. Not a benchmark (lidb-bench has those); it catches a pathology.

use std::time::Instant;

use lidb_btree::{BTree, Options};

#[test]
#[ignore = "timing; run in release by hand"]
fn speed_smoke() {
    let n = 300_000u64;
    let mix = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes();
    for (name, pool_bytes) in [("all in memory", 1u64 << 30), ("pool 1/10", 6 << 20)] {
        let opts = Options {
            pool_bytes,
            direct_io: false,
            ..Options::default()
        };
        let tree = BTree::in_memory(&opts).unwrap_or_else(|e| panic!("{e}"));
        let t = Instant::now();
        for i in 0..n {
            tree.put(&mix(i), &i.to_le_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let put_ns = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for i in 0..n {
            let v = tree.get(&mix(i)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(v, Some(i.to_le_bytes().to_vec()));
        }
        let get_ns = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        let all = tree
            .scan(b"", None, usize::MAX)
            .unwrap_or_else(|e| panic!("{e}"));
        let scan_ns = t.elapsed().as_nanos() as f64 / n as f64;
        assert_eq!(all.len() as u64, n);
        eprintln!(
            "{name}: put {put_ns:.0} ns, get {get_ns:.0} ns, scan {scan_ns:.0} ns per key; {:?}",
            tree.stats().pool
        );
    }
}
