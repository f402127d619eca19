//! Scans' table reads are counted: a scan over flushed and compacted tables adds its storage
//! reads and bytes to `DbStats::scan_reads` when its iterator drops, and leaves the per-lookup
//! counters (`lookups`, `read`) as they were; a scan answered by the memtable alone adds none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lidb_index::Family;
use lidb_lsm::Db;
use lidb_testkit::Scratch;

#[test]
fn a_scan_counts_its_table_reads_apart_from_lookups() {
    let dir = Scratch::new("scan-reads");
    let db = Db::open(dir.join("db"), support::small_options(Family::Pgm, 16)).unwrap();
    let value = vec![3u8; 200];
    for i in 0..2_000u32 {
        db.put(format!("k{i:06}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    let before = db.stats();
    assert_eq!(before.scan_reads, 0);

    let mut n = 0;
    let mut it = db.scan(b"k000100", Some(b"k001900")).unwrap();
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    drop(it);
    assert_eq!(n, 1_800);
    let after = db.stats();
    assert!(after.scan_reads > 0, "the scan read tables: {after:?}");
    assert!(
        after.scan_bytes_read >= 1_800 * 200,
        "at least the values scanned: {} bytes",
        after.scan_bytes_read
    );
    assert_eq!(after.lookups, before.lookups, "a scan is not a lookup");
    assert_eq!(after.read.data_reads, before.read.data_reads);

    // New writes stay in the memtable: a scan of them alone reads no table.
    for i in 0..50u32 {
        db.put(format!("m{i:06}").as_bytes(), &value).unwrap();
    }
    let mut it = db.scan(b"m", None).unwrap();
    while it.valid() {
        it.next().unwrap();
    }
    drop(it);
    let last = db.stats();
    assert!(
        last.scan_reads - after.scan_reads <= 2,
        "a scan past the tables' keys reads at most their seek windows: {} reads",
        last.scan_reads - after.scan_reads
    );
}
