//! One-read lookups of packed (GC-built) generations (docs/format/static-tier.md, "One-read
//! lookup"): against a `BTreeMap` over random key sets and value sizes, every present key is
//! answered in exactly one svlog read and no key-list read (two reads only for a record spanning
//! more than 16 pages), absent keys are None; version-2 models still open and read twice; a
//! tampered page-start table never gives a wrong answer; a store reopened after GC reads once.
//! Seeds are fixed and printed in messages.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_kv::static_tier::format::ModelFile;
use lidb_kv::static_tier::page_model::NO_RECORD_START;
use lidb_kv::static_tier::{StaticTier, StaticTierBuilder, TierOptions, model_path};
use lidb_kv::{Error, ReadSource, Store};
use lidb_storage::mem::MemStorage;
use lidb_storage::{ReadMode, Storage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod support;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn dir() -> PathBuf {
    PathBuf::from("/tier")
}

fn setup() -> MemStorage {
    let s = MemStorage::new();
    s.create_dir_all(&dir()).ok();
    s
}

fn opts(family: Family, b: u64) -> TierOptions {
    TierOptions {
        family,
        page_boundary: b,
        params: Params::new(b),
    }
}

fn build(s: &MemStorage, g: u64, map: &Map, o: TierOptions) -> StaticTier {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let mut b = StaticTierBuilder::new(Arc::clone(&storage), &dir(), g, o).expect("builder");
    for (k, v) in map {
        b.add(k, v).expect("add");
    }
    b.finish().expect("finish");
    StaticTier::open(storage, &dir(), g, ReadMode::Buffered).expect("open")
}

/// Random keys of 1 to 40 bytes; values mostly small, some over a page, in `huge` seeds a few
/// over 16 pages.
fn random_map(seed: u64, n: usize, huge: bool) -> Map {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = Map::new();
    while m.len() < n {
        let len = rng.gen_range(1..40);
        let k: Vec<u8> = (0..len).map(|_| rng.r#gen::<u8>()).collect();
        let vlen = match rng.gen_range(0..100) {
            0..=69 => rng.gen_range(0..200),
            70..=94 => rng.gen_range(200..3000),
            95..=98 => rng.gen_range(3000..20_000),
            _ if huge => rng.gen_range(66_000..100_000),
            _ => rng.gen_range(0..50),
        };
        m.insert(k, vec![rng.r#gen::<u8>(); vlen]);
    }
    m
}

/// A key near `k` that is absent from `map` (None when the tries all hit present keys).
fn absent_near(k: &[u8], map: &Map, rng: &mut ChaCha8Rng) -> Option<Vec<u8>> {
    for _ in 0..8 {
        let mut q = k.to_vec();
        match rng.gen_range(0..3) {
            0 => q.push(rng.r#gen()),
            1 => {
                q.pop();
            }
            _ => {
                if let Some(b) = q.last_mut() {
                    *b = b.wrapping_add(1);
                }
            }
        }
        if !map.contains_key(&q) {
            return Some(q);
        }
    }
    None
}

#[test]
fn every_present_key_reads_once_and_absent_keys_answer_none() {
    for seed in 0..6u64 {
        let huge = seed % 3 == 2;
        let map = random_map(seed, 400 + 300 * seed as usize, huge);
        let mut tail_reads = 0;
        for (family, b) in [
            (Family::Plr, 4),
            (Family::Pgm, 2),
            (Family::Fp, 16),
            (Family::Rmi, 8),
        ] {
            let what = format!("seed {seed} {family} B={b}");
            let s = setup();
            let t = build(&s, 3, &map, opts(family, b));
            assert!(t.reads_once(), "{what}");
            // Records spanning more than 16 pages are read whole by a second read.
            let mut spans = Vec::new();
            for k in map.keys() {
                let p = t.get_pointer(k).expect("pointer").expect("present");
                let first = p.offset / 4096;
                let last = (p.offset + u64::from(p.len) - 1) / 4096;
                spans.push(last - first);
            }
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x51);
            for ((k, v), span) in map.iter().zip(&spans) {
                let before = t.read_stats();
                assert_eq!(t.get(k).expect("get").as_ref(), Some(v), "{what}: {k:?}");
                let after = t.read_stats();
                assert_eq!(after.keylist_reads, before.keylist_reads, "{what}");
                // A record over 16 pages needs a second read unless the window held it anyway.
                let reads = after.svlog_reads - before.svlog_reads;
                let ok = reads == 1 || (*span > 16 && reads == 2);
                assert!(ok, "{what}: key {k:?} spanning {span} pages: {reads} reads");
                tail_reads += reads - 1;
                let Some(q) = absent_near(k, &map, &mut rng) else {
                    continue;
                };
                let before = t.read_stats();
                assert_eq!(t.get(&q).expect("get absent"), None, "{what}: {q:?}");
                let after = t.read_stats();
                assert_eq!(after.keylist_reads, before.keylist_reads, "{what}");
                let reads = after.svlog_reads - before.svlog_reads;
                assert!(reads <= if huge { 2 } else { 1 }, "{what}: {reads} reads");
            }
            assert_eq!(t.read_stats().one_read_fallbacks, 0, "{what}");
        }
        // Seeds with values over 16 pages take the second read somewhere.
        assert_eq!(
            tail_reads > 0,
            huge,
            "seed {seed}: {tail_reads} second reads"
        );
    }
}

#[test]
fn single_record_and_empty_generations() {
    let s = setup();
    let one: Map = [(b"k".to_vec(), vec![7u8; 9000])].into_iter().collect();
    let t = build(&s, 1, &one, TierOptions::default());
    assert!(t.reads_once());
    assert_eq!(t.get(b"k").expect("get"), Some(vec![7u8; 9000]));
    assert_eq!(t.read_stats().svlog_reads, 1);
    assert_eq!(t.get(b"j").expect("get"), None);
    assert_eq!(t.get(b"l").expect("get"), None);
    let t = build(&s, 2, &Map::new(), TierOptions::default());
    assert!(
        !t.reads_once(),
        "an empty generation has no svlog page model"
    );
    assert_eq!(t.get(b"k").expect("get"), None);
}

fn rewrite_model(s: &MemStorage, g: u64, f: impl FnOnce(&mut ModelFile) -> Vec<u8>) {
    let path = model_path(&dir(), g);
    let mut m = ModelFile::decode(&s.read_all(&path).expect("read")).expect("decode");
    let bytes = f(&mut m);
    let mut w = s.create(&path).expect("create");
    w.append(&bytes).expect("append");
    w.sync().expect("sync");
}

#[test]
fn a_version_2_model_still_opens_and_reads_through_the_key_list() {
    let s = setup();
    let map = random_map(9, 600, false);
    drop(build(&s, 4, &map, TierOptions::default()));
    // The version-2 writer: the same model without the svlog page model.
    rewrite_model(&s, 4, |m| m.encode_v2());
    let raw = s.read_all(&model_path(&dir(), 4)).expect("read");
    assert_eq!(raw.get(8..12), Some(&2u32.to_le_bytes()[..]));
    let t = StaticTier::open(Arc::new(s.clone()), &dir(), 4, ReadMode::Buffered).expect("open");
    assert!(!t.reads_once());
    for (k, v) in &map {
        let before = t.read_stats();
        assert_eq!(t.get(k).expect("get").as_ref(), Some(v));
        let after = t.read_stats();
        assert_eq!(after.keylist_reads - before.keylist_reads, 1);
        assert_eq!(after.svlog_reads - before.svlog_reads, 1);
    }
}

fn corruption(r: Result<impl std::fmt::Debug, Error>, what: &str) {
    match r {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, model_path(&dir(), 5), "{what}: {detail}");
        }
        other => panic!("{what}: expected Corruption, got {other:?}"),
    }
}

#[test]
fn a_damaged_or_tampered_svlog_page_model_is_refused_or_bypassed_never_wrong() {
    let map = random_map(21, 800, false);
    let s = setup();
    drop(build(&s, 5, &map, TierOptions::default()));
    let path = model_path(&dir(), 5);
    let open =
        |s: &MemStorage| StaticTier::open(Arc::new(s.clone()), &dir(), 5, ReadMode::Buffered);
    // Any flipped byte of the page-start table (the end of the file): the model's CRC.
    let len = s.file_size(&path).expect("size");
    for at in (len.saturating_sub(400)..len).step_by(7) {
        s.corrupt(&path, at, 0x08).expect("flip");
        corruption(open(&s), &format!("model byte {at}"));
        s.corrupt(&path, at, 0x08).expect("unflip");
    }
    // A page count that disagrees with the svlog, under a valid CRC: refused at open.
    let s2 = setup();
    drop(build(&s2, 5, &map, TierOptions::default()));
    rewrite_model(&s2, 5, |m| {
        if let Some(sm) = m.svlog.as_mut() {
            sm.pages += 1;
            sm.page_starts.push(NO_RECORD_START);
        }
        m.encode()
    });
    corruption(open(&s2), "page count");
    // Page starts moved under a valid CRC: every get is right (the walk notices and answers
    // through the key list), none panics.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for round in 0..6 {
        let s3 = setup();
        drop(build(&s3, 5, &map, TierOptions::default()));
        rewrite_model(&s3, 5, |m| {
            if let Some(sm) = m.svlog.as_mut() {
                for _ in 0..3 {
                    let p = rng.gen_range(1..sm.page_starts.len());
                    if let Some(x) = sm.page_starts.get_mut(p) {
                        *x = rng.gen_range(0..4096);
                    }
                }
            }
            m.encode()
        });
        let t = open(&s3).expect("open: the table is checked when walked");
        for (k, v) in &map {
            assert_eq!(t.get(k).expect("get").as_ref(), Some(v), "round {round}");
        }
        assert!(t.read_stats().one_read_fallbacks > 0, "round {round}");
    }
}

#[test]
fn a_store_reopened_after_gc_answers_settled_gets_in_one_read() {
    let storage = MemStorage::new();
    let mut opts = support::small(support::learned());
    // No page cache, so every get reaches the device and the count is exact.
    opts.lsm.block_cache_bytes = 0;
    let open = || {
        Store::open_with_storage(Arc::new(storage.clone()), Path::new("/kv"), opts.clone())
            .expect("open")
    };
    let store = open();
    let mut model = Map::new();
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    for i in 0..1500u32 {
        let k = format!("user{:08}", rng.gen_range(0..1_000_000u32)).into_bytes();
        let v = vec![(i % 251) as u8; rng.gen_range(10..1500)];
        store.put(&k, &v).expect("put");
        model.insert(k, v);
    }
    store.gc().expect("gc");
    store.close().expect("close");
    let store = open();
    for (k, v) in &model {
        let before = store.stats().tier_reads;
        let (got, source) = store.get_traced(k).expect("get");
        assert_eq!((got.as_ref(), source), (Some(v), ReadSource::Tier), "{k:?}");
        let after = store.stats().tier_reads;
        assert_eq!(after.keylist_reads, before.keylist_reads, "{k:?}");
        assert_eq!(after.svlog_reads - before.svlog_reads, 1, "{k:?}");
    }
    assert_eq!(store.get(b"user-absent").expect("get"), None);
}
