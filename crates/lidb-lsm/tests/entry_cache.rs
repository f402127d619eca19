//! The entry cache (table/window.rs): a point lookup caches the answering slot (or the
//! key as absent) under (table, hash of the key); a later lookup of that key is answered from it
//! with no read, and a lookup of another key sharing the hash is never answered by it. The
//! engine test runs random operations against a BTreeMap with a tiny cache, in every cache mode,
//! for several boundaries, buffered and direct I/O.
//!
//! Every random test prints its seed; rerun one with `LIDB_SEED=<seed>`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_lsm::table::{PageCache, Table, TableBuilder, TableOptions};
use lidb_lsm::{CacheMode, Db, EntryKind, IndexKind, IndexOptions, Options, ReadStats, Source};
use lidb_storage::cache::entry_hash;
use lidb_storage::fs::FsStorage;
use lidb_storage::{PAGE_SIZE, ReadMode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lidb_testkit::{Cases, Scratch};

/// Runs `test` once with this file's seed; `LIDB_SEED=<n>` replaces it, and a failure prints
/// the command that replays it (lidb-testkit's seeded cases).
fn with_seed(test: impl FnMut(&mut ChaCha8Rng, u64)) {
    Cases::new("entry cache", 1)
        .base_seed(0x0005_107c_ac4e)
        .run(test);
}

const ENTRIES: u64 = 300;
const VALUE_LEN: usize = 1000;

fn table_key(i: u64) -> Vec<u8> {
    format!("key{:08}", i * 3).into_bytes()
}

fn table_value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; VALUE_LEN]
}

/// A table of `ENTRIES` entries (every seventh a tombstone) with a PGM index at boundary 4,
/// opened with an entries-only cache of 1 MiB.
fn open_table(dir: &Scratch) -> (Table, Arc<PageCache>) {
    let path = dir.join("000007.sst");
    let opts = TableOptions {
        max_window_bytes: 0,
        index: Some((Family::Pgm, Params::new(4))),
        bloom_bits_per_key: 10,
        kind: IndexKind::Clustered,
    };
    let mut builder =
        TableBuilder::new(&FsStorage, &path, 7, 11, VALUE_LEN as u32, opts).expect("builder");
    for i in 0..ENTRIES {
        let (kind, value) = if i % 7 == 3 {
            (EntryKind::Delete, Vec::new())
        } else {
            (EntryKind::Put, table_value(i))
        };
        builder
            .add(&table_key(i), i + 1, kind, &value)
            .expect("add");
    }
    builder.finish().expect("finish");
    let cache = Arc::new(PageCache::with_mode(1 << 20, CacheMode::Entries));
    let table = Table::open(
        &FsStorage,
        &path,
        7,
        ReadMode::Buffered,
        Some(cache.clone()),
    )
    .expect("open");
    (table, cache)
}

fn get(table: &Table, key: &[u8]) -> (Option<(EntryKind, Vec<u8>)>, ReadStats) {
    let mut st = ReadStats::default();
    let found = table.get(key, &mut st).expect("get");
    (found.map(|f| (f.kind, f.value)), st)
}

fn want(i: u64) -> Option<(EntryKind, Vec<u8>)> {
    Some(if i % 7 == 3 {
        (EntryKind::Delete, Vec::new())
    } else {
        (EntryKind::Put, table_value(i))
    })
}

#[test]
fn an_entry_answers_its_key_again_with_no_read_and_no_page() {
    let dir = Scratch::new("entrycache-hit");
    let (table, cache) = open_table(&dir);
    for i in 0..ENTRIES {
        let (cold, st) = get(&table, &table_key(i));
        assert_eq!(cold, want(i), "key {i}");
        assert_eq!((st.data_reads, st.cache_hits), (1, 0), "key {i}");
        let (warm, st) = get(&table, &table_key(i));
        assert_eq!(warm, want(i), "key {i}: tombstones too");
        assert_eq!(
            (st.data_reads, st.bytes_read, st.cache_hits),
            (0, 0, 1),
            "key {i}"
        );
    }
    assert_eq!(cache.len(), 0, "entries only: no page was kept");
    assert_eq!(cache.entry_count(), ENTRIES);
    let slot = table.slot_width();
    assert_eq!(
        cache.usage_bytes(),
        ENTRIES * (8 + slot + lidb_storage::cache::ENTRY_OVERHEAD_BYTES)
    );
    // remove_table drops them: the next lookup reads again.
    cache.remove_table(table.number());
    assert_eq!((cache.entry_count(), cache.usage_bytes()), (0, 0));
    let (again, st) = get(&table, &table_key(5));
    assert_eq!((again, st.data_reads), (want(5), 1));
}

#[test]
fn an_absent_key_is_cached_as_absent_in_a_few_bytes() {
    let dir = Scratch::new("entrycache-absent");
    let (table, cache) = open_table(&dir);
    let mut checked = 0;
    for i in 0..ENTRIES - 1 {
        let key = format!("key{:08}", i * 3 + 1).into_bytes();
        let (cold, st) = get(&table, &key);
        assert_eq!(cold, None);
        if st.filter_negatives == 1 {
            continue;
        }
        assert_eq!(st.data_reads, 1, "key {i}");
        let (warm, st) = get(&table, &key);
        assert_eq!(warm, None);
        assert_eq!(
            (st.data_reads, st.cache_hits),
            (0, 1),
            "absent key near {i}"
        );
        checked += 1;
    }
    assert!(checked > 0, "every absent key was a filter negative");
    assert_eq!(cache.entry_count(), checked);
    assert_eq!(
        cache.usage_bytes(),
        checked * (8 + 11 + lidb_storage::cache::ENTRY_OVERHEAD_BYTES)
    );
}

#[test]
fn an_entry_never_answers_another_key_of_the_same_hash() {
    let dir = Scratch::new("entrycache-collision");
    let (table, cache) = open_table(&dir);
    let n = table.number();
    for (a, b) in [(1u64, 2u64), (3, 4), (10, 9), (20, 3)] {
        cache.remove_table(n);
        // Key a's entry, put under key b's hash: the collision a real hash could give.
        let (found, _) = get(&table, &table_key(a));
        assert_eq!(found, want(a));
        let entry_a = cache
            .get_entry(n, entry_hash(&table_key(a)))
            .expect("a's entry");
        cache.insert_entry(n, entry_hash(&table_key(b)), entry_a);
        let (found, st) = get(&table, &table_key(b));
        assert_eq!(found, want(b), "key {b} answered by {a}'s entry");
        assert_eq!(
            (st.data_reads, st.cache_hits),
            (1, 0),
            "a collision is a miss"
        );
        // The read put b's own entry there: it answers b now.
        let (found, st) = get(&table, &table_key(b));
        assert_eq!((found, st.data_reads, st.cache_hits), (want(b), 0, 1));
        // An entry saying "absent" for another key under b's hash: b is still found.
        let mut absent = u64::MAX.to_le_bytes().to_vec();
        absent.extend_from_slice(b"some other key");
        cache.insert_entry(n, entry_hash(&table_key(b)), absent.into());
        let (found, st) = get(&table, &table_key(b));
        assert_eq!((found, st.data_reads), (want(b), 1), "key {b}");
    }
}

// ---- The engine against a BTreeMap, tiny cache, every cache mode. ----

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const CACHE_PAGES: u64 = 16;

fn options(boundary: u64, direct_io: bool, mode: CacheMode) -> Options {
    Options {
        index: IndexOptions {
            family: Family::Pgm,
            params: Params::new(boundary),
            level_boundaries: vec![],
            kind: IndexKind::Clustered,
        },
        sst_size_bytes: 64 * 1024,
        write_buffer_bytes: 64 * 1024,
        l0_compaction_trigger: 3,
        l0_stop_writes: 8,
        block_cache_bytes: CACHE_PAGES * PAGE_SIZE,
        cache_mode: mode,
        background_compaction: false,
        direct_io,
        ..Options::default()
    }
}

#[test]
fn engine_with_a_tiny_cache_matches_a_btreemap_in_every_cache_mode() {
    with_seed(|_, seed| {
        let dir = Scratch::new("entrycache-engine");
        for mode in CacheMode::ALL {
            for boundary in [2u64, 4, 16] {
                for direct_io in [false, true] {
                    let ctx = format!(
                        "{} B={boundary} direct={direct_io} seed {seed}",
                        mode.name()
                    );
                    let path = dir.join(format!("db-{}-{boundary}-{direct_io}", mode.name()));
                    let opts = options(boundary, direct_io, mode);
                    run_engine(&path, opts, seed ^ boundary, &ctx);
                }
            }
        }
    });
}

fn run_engine(path: &Path, opts: Options, seed: u64, ctx: &str) {
    let mode = opts.cache_mode;
    // Tables a get may touch while all they keep fits the cache: a table keeps at most 4 pages
    // (a slot of two pages, twice with the tie fallback) and one entry (under 2 KiB here).
    let max_touched = match mode {
        CacheMode::Pages => CACHE_PAGES / 4,
        CacheMode::EntriesAndPages => CACHE_PAGES / 5,
        CacheMode::Entries => CACHE_PAGES * 2,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let db = Db::open(path, opts).unwrap();
    let mut model = Model::new();
    let key = |rng: &mut ChaCha8Rng| format!("k{:06}", rng.gen_range(0..700u32)).into_bytes();
    let (mut from_tables, mut warm_hits) = (0u64, 0u64);
    for step in 0..4000 {
        match rng.gen_range(0..100) {
            0..=44 => {
                let k = key(&mut rng);
                let len = rng.gen_range(0..1500);
                let v: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            45..=52 => {
                let k = key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            53..=54 => db.flush().unwrap(),
            55 => db.compact().unwrap(),
            _ => {
                let k = key(&mut rng);
                if let Some(v) = db.get_if_in_memory(&k).unwrap() {
                    assert_eq!(v.as_ref(), model.get(&k), "{ctx} step {step}: memory tier");
                }
                let traced = db.get_traced(&k).unwrap();
                assert_eq!(traced.value.as_ref(), model.get(&k), "{ctx} step {step}");
                let st = traced.stats;
                let touched = st.tables_probed - st.filter_negatives;
                if matches!(traced.source, Source::Level(_)) && touched <= max_touched {
                    from_tables += 1;
                    let again = db.get_if_in_memory(&k).unwrap();
                    assert_eq!(
                        again,
                        Some(model.get(&k).cloned()),
                        "{ctx} step {step}: {:?} {st:?}",
                        traced.source
                    );
                    // Asked again, every table that answered is a hit: no read at all.
                    let warm = db.get_traced(&k).unwrap();
                    assert_eq!(warm.value.as_ref(), model.get(&k), "{ctx} step {step}");
                    assert_eq!(warm.stats.data_reads, 0, "{ctx} step {step}: {warm:?}");
                    warm_hits += warm.stats.cache_hits;
                }
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{ctx} final");
    }
    assert!(
        from_tables > 100,
        "{ctx}: only {from_tables} answers came from tables"
    );
    assert!(warm_hits >= from_tables, "{ctx}: {warm_hits} hits");
    db.close().unwrap();
}

#[test]
fn a_deleted_key_cached_as_a_tombstone_entry_reads_as_absent() {
    let dir = Scratch::new("entrycache-tombstone");
    let db = Db::open(dir.join("db"), options(4, false, CacheMode::Entries)).unwrap();
    for i in 0..50u32 {
        db.put(format!("k{i:04}").as_bytes(), &[i as u8; 900])
            .unwrap();
    }
    db.flush().unwrap();
    db.delete(b"k0007").unwrap();
    db.flush().unwrap();
    // Cold: the tombstone's table reads its slot and caches it as an entry.
    let cold = db.get_traced(b"k0007").unwrap();
    assert_eq!(cold.value, None);
    assert_eq!(cold.stats.data_reads, 1, "{cold:?}");
    // Warm: the tombstone entry answers; the older table holding the value is not consulted.
    let warm = db.get_traced(b"k0007").unwrap();
    assert_eq!(warm.value, None);
    assert_eq!(
        (warm.stats.data_reads, warm.stats.cache_hits),
        (0, 1),
        "{warm:?}"
    );
    assert_eq!(db.get_if_in_memory(b"k0007").unwrap(), Some(None));
    assert_eq!(db.get(b"k0008").unwrap(), Some(vec![8u8; 900]));
    db.close().unwrap();
}
