//! Scans' table reads are counted: a scan over flushed and compacted tables adds its storage
//! reads and bytes to `DbStats::scan_reads` when its iterator drops, and leaves the per-lookup
//! counters (`lookups`, `read`) as they were; a scan answered by the memtable alone adds none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lidb_index::Family;
use lidb_lsm::{Db, ScanOptions};
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

/// 4,000 entries of 200-byte values in tables of 256 KiB (a scan's 64 KiB read-ahead chunk is
/// a fraction of a table), compacted, with a cache that holds them all.
fn scanned_db(dir: &Scratch) -> Db {
    let db = scanned_db_reopened(dir);
    let value = vec![5u8; 200];
    for i in 0..4_000u32 {
        db.put(format!("k{i:06}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    db
}

/// Scans `[from, from + n)` of `scanned_db`'s keys as `opts` says; returns the table reads and
/// bytes it added.
fn scan_with(db: &Db, from: u32, n: u32, opts: ScanOptions) -> (u64, u64) {
    let before = db.stats();
    let mut it = db
        .scan_with(format!("k{from:06}").as_bytes(), None, opts)
        .unwrap();
    for i in from..from + n {
        assert!(it.valid(), "key {i} is there");
        assert_eq!(it.key(), format!("k{i:06}").as_bytes());
        assert_eq!(it.value(), &[5u8; 200][..]);
        it.next().unwrap();
    }
    drop(it);
    let after = db.stats();
    (
        after.scan_reads - before.scan_reads,
        after.scan_bytes_read - before.scan_bytes_read,
    )
}

/// The reads of `Db::scan` (which fills the cache) over `[from, from + n)`.
fn scan_reads(db: &Db, from: u32, n: u32) -> u64 {
    scan_with(db, from, n, ScanOptions::default()).0
}

#[test]
fn a_scan_keeps_the_pages_it_returned_so_the_same_scan_reads_nothing() {
    let dir = Scratch::new("scan-fill");
    let db = scanned_db(&dir);
    assert!(
        scan_reads(&db, 1_000, 150) > 0,
        "the first scan reads its tables"
    );
    assert_eq!(
        scan_reads(&db, 1_000, 150),
        0,
        "the same scan again is cached"
    );
    assert_eq!(scan_reads(&db, 1_050, 50), 0, "a scan inside it too");

    // A point lookup of a key the scan returned is answered by the scan's pages.
    let reads = db.stats().read.data_reads;
    for i in 1_000..1_150u32 {
        assert!(db.get(format!("k{i:06}").as_bytes()).unwrap().is_some());
    }
    assert_eq!(db.stats().read.data_reads, reads, "no lookup read a table");
}

#[test]
fn a_scan_does_not_cache_the_read_ahead_it_never_returned() {
    let dir = Scratch::new("scan-readahead");
    let db = scanned_db(&dir);
    // 30 entries (7 KB: past the seek window's pages, so a 64 KiB chunk is read), then stop:
    // the chunk holds about 250 entries more.
    assert!(scan_reads(&db, 2_000, 30) > 0);
    assert_eq!(scan_reads(&db, 2_000, 30), 0, "what it returned is cached");
    assert!(
        scan_reads(&db, 2_100, 20) > 0,
        "entries inside the first scan's chunk that it never returned are read again"
    );
}

#[test]
fn a_scan_without_fill_cache_reads_past_the_cache() {
    let dir = Scratch::new("scan-nofill");
    let db = scanned_db(&dir);
    let past = ScanOptions {
        fill_cache: false,
        limit: None,
    };
    assert!(scan_with(&db, 1_000, 150, past).0 > 0);
    assert!(scan_with(&db, 1_000, 150, past).0 > 0, "nothing was cached");
    let used = db.stats();
    assert_eq!(
        used.read.cache_hits, 0,
        "and no lookup found a page: {used:?}"
    );
}

#[test]
fn a_scan_told_its_limit_reads_ahead_only_that_far() {
    let dir = Scratch::new("scan-limit");
    let db = scanned_db(&dir);
    let told = |limit| ScanOptions {
        fill_cache: false,
        limit,
    };
    // 30 entries of 229 bytes: 7 KB, two or three pages past the seek window, in a table of
    // about 1,100 entries that holds them and the 64 KiB chunk after them.
    let (_, unsized_bytes) = scan_with(&db, 1_300, 30, told(None));
    let (_, sized_bytes) = scan_with(&db, 1_300, 30, told(Some(30)));
    assert!(
        unsized_bytes >= 64 * 1024,
        "without a limit the first chunk is 64 KiB: {unsized_bytes} bytes"
    );
    assert!(
        sized_bytes <= 6 * 4096,
        "told 30 entries, the window and 30 slots: {sized_bytes} bytes"
    );
    // A limit sizes the read-ahead, not the scan: past it the chunks double and the scan goes on.
    let (_, long_bytes) = scan_with(&db, 1_300, 400, told(Some(30)));
    assert!(
        long_bytes >= 400 * 200,
        "{long_bytes} bytes for 400 entries"
    );
}

/// Scans every key with `Db::scan` (through the cache); the first error, if any.
fn scan_all(db: &Db) -> Option<lidb_lsm::Error> {
    let mut it = match db.scan(b"", None) {
        Ok(it) => it,
        Err(e) => return Some(e),
    };
    while it.valid() {
        if let Err(e) = it.next() {
            return Some(e);
        }
    }
    None
}

#[test]
fn a_flipped_bit_fails_a_scan_through_the_cache_every_time() {
    let dir = Scratch::new("scan-damage");
    let path = {
        let db = scanned_db(&dir);
        assert!(scan_all(&db).is_none(), "an undamaged database scans whole");
        let mut tables: Vec<_> = std::fs::read_dir(dir.join("db"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "sst"))
            .collect();
        tables.sort();
        tables.swap_remove(0)
    };
    // A bit inside the fourth page of the data region: a slot's bytes, under its checksum.
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.get_mut(3 * 4096 + 100).unwrap() ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();

    let db = scanned_db_reopened(&dir);
    for round in 0..2 {
        let e = scan_all(&db).unwrap_or_else(|| panic!("scan {round} found no damage"));
        assert!(
            matches!(e, lidb_lsm::Error::Corruption { .. }),
            "scan {round}: {e}"
        );
    }
}

/// `scanned_db`'s database (opened again, as it is on disk, or made empty).
fn scanned_db_reopened(dir: &Scratch) -> Db {
    let opts = lidb_lsm::Options {
        sst_size_bytes: 256 * 1024,
        write_buffer_bytes: 256 * 1024,
        block_cache_bytes: 8 << 20,
        ..support::small_options(Family::Pgm, 16)
    };
    Db::open(dir.join("db"), opts).unwrap()
}
