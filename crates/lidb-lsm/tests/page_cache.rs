//! Page-granular caching of point lookups (table/window.rs): a window read caches only
//! the page(s) of the slot that answered; cached pages of a window clip the read to the uncached
//! span that can still hold the key; the memory-only tier answers whenever those pages are
//! cached. Table-level tests place pages in the cache by hand and check the exact reads; the
//! engine-level model test (every cache mode) is in tests/entry_cache.rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_lsm::table::{PageCache, Table, TableBuilder, TableOptions};
use lidb_lsm::{EntryKind, IndexKind, ReadStats};
use lidb_storage::fs::FsStorage;
use lidb_storage::{PAGE_SIZE, ReadMode};

use lidb_testkit::Scratch;

const ENTRIES: u64 = 600;
const VALUE_LEN: usize = 1000;

fn table_key(i: u64) -> Vec<u8> {
    format!("key{:08}", i * 3).into_bytes()
}

fn table_value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; VALUE_LEN]
}

/// A table of `ENTRIES` 1000-byte values (slots of about a quarter page, some straddling two
/// pages) with a PGM index at boundary `b`, opened with a cache of 1 MiB.
fn open_table(dir: &Scratch, b: u64) -> (Table, Arc<PageCache>, Vec<u8>) {
    let path = dir.join(format!("{b:06}.sst"));
    let opts = TableOptions {
        max_window_bytes: 0,
        index: Some((Family::Pgm, Params::new(b))),
        bloom_bits_per_key: 10,
        kind: IndexKind::Clustered,
    };
    let mut builder =
        TableBuilder::new(&FsStorage, &path, 7, 11, VALUE_LEN as u32, opts).expect("builder");
    for i in 0..ENTRIES {
        builder
            .add(&table_key(i), i + 1, EntryKind::Put, &table_value(i))
            .expect("add");
    }
    builder.finish().expect("finish");
    let cache = Arc::new(PageCache::new(1 << 20));
    let table = Table::open(
        &FsStorage,
        &path,
        7,
        ReadMode::Buffered,
        Some(cache.clone()),
    )
    .expect("open");
    let file = std::fs::read(&path).expect("file bytes");
    (table, cache, file)
}

/// The index's window of slots for `key`, clipped to the table as lookups clip it.
fn window(table: &Table, key: &[u8]) -> (u64, u64) {
    let bound = table
        .index()
        .expect("index")
        .search(table.keymap().image(key));
    let hi = bound.hi.min(table.entries());
    (bound.lo.min(hi), hi)
}

/// First and last page of slots `[lo, hi)`.
fn pages(table: &Table, lo: u64, hi: u64) -> (u64, u64) {
    let w = table.slot_width();
    (lo * w / PAGE_SIZE, (hi * w - 1) / PAGE_SIZE)
}

/// Bytes of the file's pages `first..=last` (the last page of the file may be short).
fn page_bytes(table: &Table, first: u64, last: u64) -> u64 {
    ((last + 1) * PAGE_SIZE).min(table.meta().file_size) - first * PAGE_SIZE
}

fn cached_pages(table: &Table, cache: &PageCache) -> BTreeSet<u64> {
    let last = table.meta().file_size / PAGE_SIZE;
    cache
        .peek_pages(table.number(), 0, last)
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_some())
        .map(|(i, _)| i as u64)
        .collect()
}

fn put_page(table: &Table, cache: &PageCache, file: &[u8], page: u64) {
    let start = (page * PAGE_SIZE) as usize;
    let end = (start + PAGE_SIZE as usize).min(file.len());
    cache.insert(table.number(), page, file[start..end].into());
}

fn get(table: &Table, i: u64) -> ReadStats {
    let mut st = ReadStats::default();
    let found = table
        .get(&table_key(i), &mut st)
        .expect("get")
        .expect("present");
    assert_eq!((found.seq, found.value), (i + 1, table_value(i)), "key {i}");
    st
}

#[test]
fn a_get_caches_only_the_pages_of_the_answer_and_they_answer_again() {
    let dir = Scratch::new("pagecache-answer-only");
    let (table, cache, _) = open_table(&dir, 16);
    let mut wider = 0;
    for i in 0..ENTRIES {
        cache.remove_table(table.number());
        let (lo, hi) = window(&table, &table_key(i));
        let cold = get(&table, i);
        assert_eq!((cold.data_reads, cold.cache_hits), (1, 0), "key {i}");
        let (wf, wl) = pages(&table, lo, hi);
        assert_eq!(
            cold.bytes_read,
            page_bytes(&table, wf, wl),
            "key {i}: the whole window"
        );
        let (a, b) = pages(&table, i, i + 1);
        let want: BTreeSet<u64> = (a..=b).collect();
        assert_eq!(cached_pages(&table, &cache), want, "key {i}");
        assert_eq!(cache.usage_bytes(), page_bytes(&table, a, b), "key {i}");
        wider += u64::from(wl - wf + 1 > want.len() as u64);
        // The answer is in a cached page: no read.
        let warm = get(&table, i);
        assert_eq!(
            (warm.data_reads, warm.bytes_read, warm.cache_hits),
            (0, 0, 1),
            "key {i}"
        );
        // So is every other key whose slot lies wholly in those pages and in its window.
        let w = table.slot_width();
        for j in i.saturating_sub(8)..(i + 8).min(ENTRIES) {
            let inside = j * w >= a * PAGE_SIZE && (j + 1) * w <= (b + 1) * PAGE_SIZE;
            if inside {
                let st = get(&table, j);
                assert_eq!((st.data_reads, st.cache_hits), (0, 1), "key {j} near {i}");
            }
        }
        assert_eq!(
            cached_pages(&table, &cache),
            want,
            "key {i}: hits insert nothing"
        );
    }
    assert!(
        wider > ENTRIES / 2,
        "windows wider than the answer: {wider}"
    );
}

#[test]
fn cached_pages_on_both_sides_leave_only_the_gap_to_read() {
    let dir = Scratch::new("pagecache-gap");
    let (table, cache, file) = open_table(&dir, 16);
    let mut checked = 0;
    for i in 0..ENTRIES {
        let (lo, hi) = window(&table, &table_key(i));
        let (first, last) = pages(&table, lo, hi);
        let (a, b) = pages(&table, i, i + 1);
        if !(first < a && b < last) {
            continue;
        }
        cache.remove_table(table.number());
        put_page(&table, &cache, &file, first);
        put_page(&table, &cache, &file, last);
        let st = get(&table, i);
        assert_eq!(st.data_reads, 1, "key {i}");
        assert_eq!(
            st.bytes_read,
            (last - first - 1) * PAGE_SIZE,
            "key {i} [{first}, {last}]"
        );
        let mut want: BTreeSet<u64> = (a..=b).collect();
        want.extend([first, last]);
        assert_eq!(cached_pages(&table, &cache), want, "key {i}");
        checked += 1;
    }
    assert!(
        checked > ENTRIES / 4,
        "keys with pages on both sides: {checked}"
    );
}

#[test]
fn a_slot_straddling_two_pages() {
    let dir = Scratch::new("pagecache-straddle");
    let (table, cache, file) = open_table(&dir, 4);
    let mut checked = 0;
    for i in 0..ENTRIES {
        let (a, b) = pages(&table, i, i + 1);
        if a == b {
            continue;
        }
        cache.remove_table(table.number());
        let cold = get(&table, i);
        assert_eq!(cold.data_reads, 1);
        assert_eq!(
            cached_pages(&table, &cache),
            BTreeSet::from([a, b]),
            "key {i}"
        );
        assert_eq!(cache.usage_bytes(), page_bytes(&table, a, b));
        let warm = get(&table, i);
        assert_eq!((warm.data_reads, warm.cache_hits), (0, 1), "key {i}");
        // Only its first page cached: the read starts after it.
        cache.remove_table(table.number());
        put_page(&table, &cache, &file, a);
        let (lo, hi) = window(&table, &table_key(i));
        let (_, last) = pages(&table, lo, hi);
        let st = get(&table, i);
        assert_eq!(st.data_reads, 1, "key {i}");
        assert!(st.bytes_read <= (last - a) * PAGE_SIZE, "key {i}: {st:?}");
        assert_eq!(
            cached_pages(&table, &cache),
            BTreeSet::from([a, b]),
            "key {i}"
        );
        // Only its second page cached: the read ends before it.
        cache.remove_table(table.number());
        put_page(&table, &cache, &file, b);
        let (first, _) = pages(&table, lo, hi);
        let st = get(&table, i);
        assert_eq!(st.data_reads, 1, "key {i}");
        assert!(st.bytes_read <= (b - first) * PAGE_SIZE, "key {i}: {st:?}");
        checked += 1;
    }
    assert!(checked > 10, "straddling slots: {checked}");
}

#[test]
fn absent_keys_cache_the_slot_that_proves_them_absent() {
    let dir = Scratch::new("pagecache-absent");
    let (table, cache, _) = open_table(&dir, 16);
    let mut checked = 0;
    for i in 0..ENTRIES - 1 {
        // Between two present keys (3i and 3i + 3): absent, inside the table's range.
        let key = format!("key{:08}", i * 3 + 1).into_bytes();
        cache.remove_table(table.number());
        let mut cold = ReadStats::default();
        assert_eq!(table.get(&key, &mut cold).expect("get"), None);
        if cold.filter_negatives == 1 {
            continue;
        }
        assert_eq!(cold.data_reads, 1);
        // The pages of the two slots around the key: at most three.
        assert!(cache.len() <= 3, "key {i}: {} pages", cache.len());
        let mut warm = ReadStats::default();
        assert_eq!(table.get(&key, &mut warm).expect("get"), None);
        assert_eq!(
            (warm.data_reads, warm.cache_hits),
            (0, 1),
            "absent key near {i}"
        );
        checked += 1;
    }
    assert!(checked > 0, "every absent key was a filter negative");
}

// ---- The engine against a BTreeMap, tiny cache, both read modes. ----

// The engine-level model test against a BTreeMap with a tiny cache (every cache mode, Pages
// included) is tests/entry_cache.rs's `engine_with_a_tiny_cache_matches_a_btreemap_in_every_cache_mode`.
