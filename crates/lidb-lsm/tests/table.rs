//! SSTable tests: builder -> reader round trips against a `BTreeMap` model for every index family
//! and boundary, read counts, iterators, decimal keys, corruption, truncation, reindex.
//!
//! Every random test prints its seed; rerun one with `LIDB_SEED=<seed>`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_lsm::keys::KeyMap;
use lidb_lsm::table::{
    BuiltTable, Found, PageCache, Table, TableBuilder, TableOptions, capped_boundary, reindex,
};
use lidb_lsm::{EntryKind, IndexKind, ReadStats, SortedIter};
use lidb_storage::Error;
use lidb_storage::fs::FsStorage;
use lidb_storage::{PAGE_SIZE, ReadMode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, (u64, EntryKind, Vec<u8>)>;

use lidb_testkit::{Cases, Scratch};

/// Runs `test` once with this file's seed; `LIDB_SEED=<n>` replaces it, and a failure prints
/// the command that replays it (lidb-testkit's seeded cases).
fn with_seed(test: impl FnMut(&mut ChaCha8Rng, u64)) {
    Cases::new("table", 1).base_seed(0x5eed_7ab1e).run(test);
}

fn random_key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut k = b"tbl/".to_vec();
    if rng.gen_bool(0.5) {
        // A small alphabet: many keys share their first 8 bytes after the prefix (image ties).
        let alphabet = [0u8, 1, 2, b'a', 0xff];
        let len = rng.gen_range(1..=14);
        for _ in 0..len {
            k.push(alphabet[rng.gen_range(0..alphabet.len())]);
        }
    } else {
        let len = rng.gen_range(1..=32);
        for _ in 0..len {
            k.push(rng.r#gen());
        }
    }
    k
}

fn random_model(rng: &mut ChaCha8Rng, n: usize) -> Model {
    let mut m = Model::new();
    while m.len() < n {
        let k = random_key(rng);
        let seq = rng.gen_range(0..1_000_000);
        if rng.gen_bool(0.1) {
            m.insert(k, (seq, EntryKind::Delete, Vec::new()));
        } else {
            let len = rng.gen_range(0..=200);
            let v: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
            m.insert(k, (seq, EntryKind::Put, v));
        }
    }
    m
}

fn build(path: &Path, number: u64, model: &Model, opts: TableOptions) -> BuiltTable {
    let max_key = model.keys().map(Vec::len).max().unwrap_or(0) as u32;
    let max_value = model.values().map(|v| v.2.len()).max().unwrap_or(0) as u32;
    let mut b =
        TableBuilder::new(&FsStorage, path, number, max_key, max_value, opts).expect("builder");
    for (k, (seq, kind, v)) in model {
        b.add(k, *seq, *kind, v).expect("add");
    }
    assert_eq!(b.entries(), model.len() as u64);
    b.finish().expect("finish")
}

/// `build`, then the table opened with a page cache of `cache_bytes`.
fn build_and_open(
    path: &Path,
    number: u64,
    model: &Model,
    opts: TableOptions,
    cache_bytes: u64,
) -> (Table, Arc<PageCache>) {
    build(path, number, model, opts);
    let cache = Arc::new(PageCache::new(cache_bytes));
    let table = Table::open(
        &FsStorage,
        path,
        number,
        ReadMode::Buffered,
        Some(cache.clone()),
    )
    .expect("open");
    (table, cache)
}

fn found(model: &Model, key: &[u8]) -> Option<Found> {
    model.get(key).map(|(seq, kind, v)| Found {
        kind: *kind,
        seq: *seq,
        value: v.clone(),
    })
}

/// Bytes of the pages covering slots [lo, hi).
fn page_span(table: &Table, lo: u64, hi: u64) -> u64 {
    let w = table.slot_width();
    let first = lo * w / PAGE_SIZE;
    let last = (hi * w - 1) / PAGE_SIZE;
    ((last + 1) * PAGE_SIZE).min(table.meta().file_size) - first * PAGE_SIZE
}

fn check_iter(table: &Arc<Table>, model: &Model, rng: &mut ChaCha8Rng) {
    let mut it = table.iter();
    it.seek_to_first().expect("seek_to_first");
    let mut got = 0usize;
    for (k, (seq, kind, v)) in model {
        assert!(it.valid());
        assert_eq!(
            (it.key(), it.seq(), it.kind(), it.value()),
            (&k[..], *seq, *kind, &v[..])
        );
        it.next().expect("next");
        got += 1;
    }
    assert!(!it.valid());
    assert_eq!(got, model.len());

    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for i in 0..200 {
        let target: Vec<u8> = match i % 5 {
            0 => keys[rng.gen_range(0..keys.len())].clone(),
            1 => b"a".to_vec(),
            2 => b"zzz".to_vec(),
            3 => {
                let mut k = keys[rng.gen_range(0..keys.len())].clone();
                k.push(0);
                k
            }
            _ => random_key(rng),
        };
        let mut it = table.iter();
        it.seek(&target).expect("seek");
        let want: Vec<_> = model.range(target.clone()..).take(5).collect();
        for (k, (seq, _, v)) in want {
            assert!(it.valid(), "seek {target:?}");
            assert_eq!((it.key(), it.seq(), it.value()), (&k[..], *seq, &v[..]));
            it.next().expect("next");
        }
        if model.range(target.clone()..).nth(5).is_none() {
            assert!(!it.valid());
        }
    }
}

/// Whether lidb-index can build `family` yet (families land in parallel branches).
fn implemented(family: Family) -> bool {
    match lidb_index::build(family, &[1, 2, 3], &Params::new(4)) {
        Ok(_) => true,
        Err(e) => {
            assert!(e.to_string().contains("not implemented"), "{family}: {e}");
            false
        }
    }
}

#[test]
fn round_trip_every_family_and_boundary() {
    with_seed(|_, seed| {
        let dir = Scratch::new("table-round-trip");
        let mut number = 0;
        let mut total_tie_second_reads = 0;
        for family in Family::ALL {
            if !implemented(family) {
                eprintln!("skipping {family}: not implemented in this build of lidb-index");
                continue;
            }
            for b in [2u64, 16, 256] {
                number += 1;
                let ctx = format!("family {family} B={b} seed {seed}");
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ number);
                let model = random_model(&mut rng, 2000);
                let path = dir.join(format!("{number:06}.sst"));
                let opts = TableOptions {
                    max_window_bytes: 0,
                    index: Some((family, Params::new(b))),
                    bloom_bits_per_key: 10,
                    kind: IndexKind::Clustered,
                };
                let built = build(&path, number, &model, opts);
                assert_eq!(built.meta.entries, 2000);
                assert_eq!(
                    built.meta.file_size,
                    std::fs::metadata(&path).expect("size").len()
                );
                let cache = Arc::new(PageCache::new(64 << 20));
                let table = Arc::new(
                    Table::open(
                        &FsStorage,
                        &path,
                        number,
                        ReadMode::Buffered,
                        Some(cache.clone()),
                    )
                    .expect("open"),
                );
                assert_eq!(table.family(), Some(family), "{ctx}");
                assert_eq!(table.boundary(), Some(b), "{ctx}");
                assert_eq!(table.index_bytes(), built.index_bytes);
                assert_eq!(table.filter_bytes(), built.filter_bytes);
                let map = table.keymap();
                let mut image_count: HashMap<u64, u64> = HashMap::new();
                for k in model.keys() {
                    *image_count.entry(map.image(k)).or_default() += 1;
                }
                let max_run = image_count.values().copied().max().unwrap_or(0);
                assert_eq!(table.max_image_run(), max_run, "{ctx}");
                let log2 = 64 - (model.len() as u64).leading_zeros() as u64;
                assert!(max_run > 1, "{ctx}: the keys should exercise image ties");
                let mut tie_second_reads = 0;

                for k in model.keys() {
                    // Cold.
                    cache.remove_table(number);
                    let mut st = ReadStats::default();
                    let got = table.get(k, &mut st).expect("get");
                    assert_eq!(got, found(&model, k), "{ctx} key {k:?}");
                    if family.is_bounded() {
                        let image = map.image(k);
                        let bound = table.index().expect("index").search(image);
                        if image_count[&image] == 1 {
                            assert_eq!(st.data_reads, 1, "{ctx} key {k:?}");
                            assert_eq!(
                                st.bytes_read,
                                page_span(&table, bound.lo, bound.hi),
                                "{ctx}"
                            );
                        } else {
                            assert!((1..=2).contains(&st.data_reads), "{ctx} {st:?}");
                            tie_second_reads += st.data_reads - 1;
                        }
                    } else {
                        assert!(st.data_reads <= log2 + 1, "{ctx} {st:?}");
                    }
                    // Warm.
                    let mut st = ReadStats::default();
                    assert_eq!(table.get(k, &mut st).expect("get"), found(&model, k));
                    assert_eq!(st.data_reads, 0, "{ctx} warm {st:?}");
                    assert_eq!(st.bytes_read, 0);
                    assert!(st.cache_hits >= 1);
                }
                assert!(cache.usage_bytes() <= cache.capacity_bytes());
                total_tie_second_reads += tie_second_reads;

                let mut negatives = 0;
                for i in 0..2000 {
                    let k = match i {
                        0 => b"a".to_vec(),
                        1 => b"zzzz".to_vec(),
                        2 => Vec::new(),
                        _ => random_key(&mut rng),
                    };
                    let mut st = ReadStats::default();
                    assert_eq!(
                        table.get(&k, &mut st).expect("get"),
                        found(&model, &k),
                        "{ctx}"
                    );
                    negatives += st.filter_negatives;
                }
                assert!(
                    negatives > 1000,
                    "{ctx}: the filter rejected only {negatives}"
                );
                check_iter(&table, &model, &mut rng);
            }
        }
        assert!(
            total_tie_second_reads > 0,
            "the tie fallback was never exercised"
        );
    });
}

#[test]
fn table_without_index_or_filter_probes() {
    with_seed(|rng, _| {
        let dir = Scratch::new("table-no-index");
        let model = random_model(rng, 1500);
        let path = dir.join("000001.sst");
        let opts = TableOptions {
            max_window_bytes: 0,
            index: None,
            bloom_bits_per_key: 0,
            kind: IndexKind::Clustered,
        };
        let built = build(&path, 1, &model, opts);
        assert_eq!((built.index_bytes, built.filter_bytes), (0, 0));
        let table =
            Arc::new(Table::open(&FsStorage, &path, 1, ReadMode::Buffered, None).expect("open"));
        assert_eq!(table.family(), None);
        assert_eq!(table.boundary(), None);
        for (i, k) in model.keys().enumerate() {
            let mut st = ReadStats::default();
            assert_eq!(table.get(k, &mut st).expect("get"), found(&model, k));
            assert!(st.data_reads <= 12, "{st:?}");
            // A level model supplies the range: exactly one read.
            let mut st = ReadStats::default();
            let i = i as u64;
            let got = table
                .get_in_range(k, i.saturating_sub(3), i + 5, &mut st)
                .expect("get_in_range");
            assert_eq!(got, found(&model, k));
            assert_eq!(st.data_reads, 1);
        }
        for _ in 0..500 {
            let k = random_key(rng);
            assert_eq!(
                table.get(&k, &mut ReadStats::default()).expect("get"),
                found(&model, &k)
            );
        }
        check_iter(&table, &model, rng);
    });
}

fn decimal_model(n: u64, value_len: usize, rng: &mut ChaCha8Rng, dense: bool) -> Model {
    let mut m = Model::new();
    let mut i = 0;
    while m.len() < n as usize {
        let v: u64 = if dense {
            i * 3
        } else {
            rng.gen_range(0..1_000_000_000_000_000_000)
        };
        i += 1;
        let key = format!("{v:024}").into_bytes();
        m.insert(key, (i, EntryKind::Put, vec![(i % 251) as u8; value_len]));
    }
    m
}

#[test]
fn decimal_keys_use_the_decimal_map() {
    with_seed(|rng, _| {
        let dir = Scratch::new("table-decimal");
        for (number, dense) in [(1u64, true), (2, false)] {
            let model = decimal_model(3000, 100, rng, dense);
            let path = dir.join(format!("{number:06}.sst"));
            let opts = TableOptions {
                max_window_bytes: 0,
                index: Some((Family::Pgm, Params::new(16))),
                bloom_bits_per_key: 10,
                kind: IndexKind::Clustered,
            };
            let (table, cache) = build_and_open(&path, number, &model, opts, 1 << 20);
            assert!(
                matches!(table.keymap(), KeyMap::Decimal { .. }),
                "{:?}",
                table.keymap()
            );
            assert_eq!(table.max_image_run(), 1);
            assert_eq!(table.padding_bytes(), 0);
            let images: Vec<u64> = model.keys().map(|k| table.keymap().image(k)).collect();
            assert!(images.windows(2).all(|w| matches!(w, [a, b] if a < b)));
            for k in model.keys() {
                cache.remove_table(number);
                let mut st = ReadStats::default();
                assert_eq!(table.get(k, &mut st).expect("get"), found(&model, k));
                assert_eq!(st.data_reads, 1);
            }
        }
    });
}

fn corrupted(err: &Error, path: &Path) -> bool {
    matches!(err, Error::Corruption { file, .. } if file == path)
}

/// Opens, gets every key and scans; returns whether a corruption was reported. Panics on a
/// wrong answer or on any other error.
fn probe_damaged(path: &Path, model: &Model) -> bool {
    let table = match Table::open(&FsStorage, path, 1, ReadMode::Buffered, None) {
        Ok(t) => Arc::new(t),
        Err(e) => {
            assert!(corrupted(&e, path), "open: {e}");
            return true;
        }
    };
    let mut detected = false;
    for k in model.keys() {
        match table.get(k, &mut ReadStats::default()) {
            Ok(got) => assert_eq!(got, found(model, k), "wrong value for {k:?}"),
            Err(e) => {
                assert!(corrupted(&e, path), "get: {e}");
                detected = true;
            }
        }
    }
    let mut it = table.iter();
    let mut r = it.seek_to_first();
    let mut entries = model.iter();
    while r.is_ok() && it.valid() {
        let (k, (seq, _, v)) = entries.next().expect("scan returned too many entries");
        assert_eq!((it.key(), it.seq(), it.value()), (&k[..], *seq, &v[..]));
        r = it.next();
    }
    if let Err(e) = r {
        assert!(corrupted(&e, path), "scan: {e}");
        detected = true;
    }
    detected
}

#[test]
fn bit_flips_in_every_region_are_detected() {
    with_seed(|rng, seed| {
        let dir = Scratch::new("table-flips");
        let model = random_model(rng, 150);
        let good = dir.join("good.sst");
        let opts = TableOptions {
            max_window_bytes: 0,
            index: Some((Family::Pgm, Params::new(8))),
            bloom_bits_per_key: 10,
            kind: IndexKind::Clustered,
        };
        build(&good, 1, &model, opts);
        let bytes = std::fs::read(&good).expect("read");
        let table = Table::open(&FsStorage, &good, 1, ReadMode::Buffered, None).expect("open");
        let data_len = table.entries() * table.slot_width();
        let w = table.slot_width() as usize;
        drop(table);
        // Every byte of the tail; every byte of the first, a middle and the last slot; one random
        // byte of every other slot.
        let mut offsets: Vec<usize> = (data_len as usize..bytes.len()).collect();
        let n = model.len();
        for s in [0, n / 2, n - 1] {
            offsets.extend(s * w..(s + 1) * w);
        }
        for s in 0..n {
            offsets.push(s * w + rng.gen_range(0..w));
        }
        let bad = dir.join("bad.sst");
        for off in offsets {
            let mut b = bytes.clone();
            b[off] ^= 1 << rng.gen_range(0..8);
            std::fs::write(&bad, &b).expect("write");
            assert!(
                probe_damaged(&bad, &model),
                "flip at byte {off} of {} went unnoticed (seed {seed})",
                bytes.len()
            );
        }
        // Truncations of every interesting length fail at open.
        for len in [
            0,
            1,
            63,
            64,
            data_len as usize,
            bytes.len() - 64,
            bytes.len() - 1,
        ]
        .into_iter()
        .chain((0..50).map(|_| rng.gen_range(0..bytes.len())))
        {
            std::fs::write(&bad, &bytes[..len]).expect("write");
            let e =
                Table::open(&FsStorage, &bad, 1, ReadMode::Buffered, None).expect_err("truncated");
            assert!(corrupted(&e, &bad), "{e}");
        }
        // A missing file is an I/O error naming it.
        let e = Table::open(
            &FsStorage,
            &dir.join("nope.sst"),
            1,
            ReadMode::Buffered,
            None,
        )
        .expect_err("missing");
        assert!(matches!(e, Error::Io { .. }), "{e}");
        // The wrong table number is a corruption.
        let e = Table::open(&FsStorage, &good, 2, ReadMode::Buffered, None).expect_err("number");
        assert!(corrupted(&e, &good), "{e}");
    });
}

#[test]
fn builder_rejects_bad_input() {
    let dir = Scratch::new("table-builder");
    let path = dir.join("000001.sst");
    let opts = TableOptions {
        max_window_bytes: 0,
        index: Some((Family::Fp, Params::new(16))),
        bloom_bits_per_key: 10,
        kind: IndexKind::Clustered,
    };
    let mut b = TableBuilder::new(&FsStorage, &path, 1, 4, 4, opts.clone()).expect("new");
    b.add(b"b", 1, EntryKind::Put, b"v").expect("add");
    for (k, v) in [
        (&b"a"[..], &b"v"[..]),
        (b"b", b"v"),
        (b"ccccc", b"v"),
        (b"c", b"vvvvv"),
    ] {
        let e = b.add(k, 1, EntryKind::Put, v).expect_err("bad add");
        assert!(matches!(e, Error::InvalidOption(_)), "{e}");
    }
    b.add(b"c", 2, EntryKind::Delete, b"")
        .expect("add after errors");
    b.finish().expect("finish");

    let b = TableBuilder::new(&FsStorage, &path, 1, 4, 4, opts).expect("new");
    assert!(matches!(b.finish(), Err(Error::InvalidOption(_))));
    let bad = TableOptions {
        max_window_bytes: 0,
        index: Some((Family::Pgm, Params::new(1))),
        bloom_bits_per_key: 10,
        kind: IndexKind::Clustered,
    };
    assert!(TableBuilder::new(&FsStorage, &path, 1, 4, 4, bad).is_err());
    let bad = TableOptions {
        max_window_bytes: 0,
        index: None,
        bloom_bits_per_key: 65,
        kind: IndexKind::Clustered,
    };
    assert!(TableBuilder::new(&FsStorage, &path, 1, 4, 4, bad).is_err());
}

#[test]
fn small_cache_stays_within_capacity() {
    with_seed(|rng, _| {
        let dir = Scratch::new("table-cache");
        let model = decimal_model(2000, 300, rng, false);
        let path = dir.join("000001.sst");
        let opts = TableOptions {
            max_window_bytes: 0,
            index: Some((Family::Fiting, Params::new(16))),
            bloom_bits_per_key: 10,
            kind: IndexKind::Clustered,
        };
        build(&path, 1, &model, opts);
        let cache = Arc::new(PageCache::new(8 * PAGE_SIZE));
        let table = Table::open(
            &FsStorage,
            &path,
            1,
            ReadMode::Buffered,
            Some(cache.clone()),
        )
        .expect("open");
        let keys: Vec<&Vec<u8>> = model.keys().collect();
        for _ in 0..3000 {
            let k = keys[rng.gen_range(0..keys.len())];
            assert_eq!(
                table.get(k, &mut ReadStats::default()).expect("get"),
                found(&model, k)
            );
            assert!(cache.usage_bytes() <= cache.capacity_bytes());
        }
        assert!(cache.usage_bytes() > 0);
    });
}

#[test]
fn reindex_replaces_the_tail() {
    with_seed(|rng, _| {
        let dir = Scratch::new("table-reindex");
        let model = random_model(rng, 1000);
        let path = dir.join("000007.sst");
        let opts = TableOptions {
            max_window_bytes: 0,
            index: Some((Family::Fp, Params::new(16))),
            bloom_bits_per_key: 10,
            kind: IndexKind::Clustered,
        };
        let before = build(&path, 7, &model, opts);
        let opts = TableOptions {
            max_window_bytes: 0,
            index: Some((Family::Pgm, Params::new(64))),
            bloom_bits_per_key: 0,
            kind: IndexKind::Clustered,
        };
        let after = reindex(&FsStorage, &path, opts).expect("reindex");
        assert_eq!(after.meta.entries, before.meta.entries);
        assert_eq!(after.meta.smallest, before.meta.smallest);
        assert_eq!(after.filter_bytes, 0);
        let table =
            Arc::new(Table::open(&FsStorage, &path, 7, ReadMode::Buffered, None).expect("open"));
        assert_eq!(table.family(), Some(Family::Pgm));
        assert_eq!(table.boundary(), Some(64));
        for k in model.keys() {
            assert_eq!(
                table.get(k, &mut ReadStats::default()).expect("get"),
                found(&model, k)
            );
        }
        check_iter(&table, &model, rng);
        assert!(!dir.join("000007.sst.reindex").exists());
    });
}

/// Index and filter bytes per entry for 100K 24-byte zero-padded decimal keys with 1000-byte
/// values at B=16 (the papers' setup). Run with
/// `cargo test -p lidb-lsm --test table -- --ignored --nocapture index_bytes_per_entry`.
#[test]
#[ignore = "writes 200 MB; run on demand for the figures"]
fn index_bytes_per_entry() {
    let dir = Scratch::new("table-figures");
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    for dense in [true, false] {
        let model = decimal_model(100_000, 1000, &mut rng, dense);
        for family in [Family::Fp, Family::Pgm] {
            let path = dir.join("000001.sst");
            let opts = TableOptions {
                max_window_bytes: 0,
                index: Some((family, Params::new(16))),
                bloom_bits_per_key: 10,
                kind: IndexKind::Clustered,
            };
            let built = build(&path, 1, &model, opts);
            let n = built.meta.entries as f64;
            println!(
                "keys={} family={family} B=16 entries={} index_bytes={} ({:.3} B/entry) \
                 filter_bytes={} ({:.3} B/entry) file_bytes={} write_ms={} train_ms={:.3}",
                if dense { "dense(3i)" } else { "uniform<1e18" },
                built.meta.entries,
                built.index_bytes,
                built.index_bytes as f64 / n,
                built.filter_bytes,
                built.filter_bytes as f64 / n,
                built.meta.file_size,
                built.timings.write.as_millis(),
                built.timings.train.as_secs_f64() * 1000.0,
            );
        }
    }
}

/// A table of wide slots gets a smaller boundary so that a window spans at most
/// `max_window_bytes`: B halved until B slots fit, never below 2, recorded in the table, and
/// every cold lookup reads at most the pages of that many bytes. Narrow slots keep B.
#[test]
fn wide_slots_get_a_boundary_whose_window_fits_the_cap() {
    assert_eq!(capped_boundary(16, 1045, 8192), 4);
    assert_eq!(capped_boundary(16, 1020, 8192), 8);
    assert_eq!(capped_boundary(16, 512, 8192), 16);
    assert_eq!(capped_boundary(16, 1045, 0), 16);
    assert_eq!(capped_boundary(16, 100_000, 8192), 2);
    assert_eq!(capped_boundary(5, 4000, 8192), 2);
    let dir = Scratch::new("table-window-cap");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // (table, value bytes, cap, the boundary it must get at most / exactly when Some)
    for (number, value_len, cap, most) in [
        (1u64, 1000usize, 8192u64, 8u64),
        (2, 1000, 4096, 4),
        (3, 1000, 0, 16),
        (4, 40, 8192, 16),
    ] {
        let mut model = Model::new();
        while model.len() < 1500 {
            let seq = model.len() as u64 + 1;
            let value = vec![(seq % 251) as u8; value_len];
            model.insert(random_key(&mut rng), (seq, EntryKind::Put, value));
        }
        let path = dir.join(format!("{number:06}.sst"));
        let opts = TableOptions {
            max_window_bytes: cap,
            index: Some((Family::Pgm, Params::new(16))),
            bloom_bits_per_key: 10,
            kind: IndexKind::Clustered,
        };
        let (table, cache) = build_and_open(&path, number, &model, opts, 64 << 20);
        let ctx = format!("values of {value_len} bytes, cap {cap}");
        // The keys are random and some dozens of bytes, so the slot width is read back.
        let want = capped_boundary(16, table.slot_width(), cap);
        assert!(want <= most, "{ctx}: slots of {} bytes", table.slot_width());
        if cap == 0 || value_len < 100 {
            assert_eq!(want, 16, "{ctx}");
        }
        assert_eq!(table.boundary(), Some(want), "{ctx}");
        let span = want * table.slot_width();
        for k in model.keys() {
            cache.remove_table(number);
            let mut st = ReadStats::default();
            assert_eq!(
                table.get(k, &mut st).expect("get"),
                found(&model, k),
                "{ctx}"
            );
            // A window of `span` bytes covers at most this many pages; a tie may read twice.
            let most = (span.div_ceil(PAGE_SIZE) + 1) * PAGE_SIZE;
            assert!(st.bytes_read <= 2 * most, "{ctx}: {st:?}");
            if st.data_reads == 1 {
                assert!(st.bytes_read <= most, "{ctx}: {st:?}");
            }
        }
    }
}
