//! The static tier against a `BTreeMap` for every index family x page boundary x key set: point
//! lookups of a packed (GC-built) tier in exactly one svlog read and no key-list read, absent
//! keys, scans from random starts; empty tiers; corruption of each file. Seeds are fixed and
//! printed in messages.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_kv::Error;
use lidb_kv::static_tier::{
    StaticTier, StaticTierBuilder, TierOptions, keys_path, model_path, svlog_path,
};
use lidb_storage::mem::MemStorage;
use lidb_storage::{ReadMode, Storage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn dir() -> PathBuf {
    PathBuf::from("/tier")
}

fn setup() -> MemStorage {
    let s = MemStorage::new();
    s.create_dir_all(&dir()).ok();
    s
}

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = rng.gen_range(0..120);
    (0..n).map(|_| rng.r#gen::<u8>()).collect()
}

/// Named key sets: variable-length random bytes, two groups sharing long prefixes (their key
/// images tie across many pages), equal-length decimal strings, variable-length decimal strings.
fn key_sets(n: usize, seed: u64) -> Vec<(&'static str, Map)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sets = Vec::new();
    let mut m = Map::new();
    while m.len() < n {
        let len = rng.gen_range(1..24);
        let k: Vec<u8> = (0..len).map(|_| rng.r#gen::<u8>()).collect();
        m.insert(k, value(&mut rng));
    }
    sets.push(("random-bytes", m));
    let mut m = Map::new();
    while m.len() < n {
        let mut k = if rng.gen_bool(0.5) {
            b"account/00000000000000000000/".to_vec()
        } else {
            b"account/99999999999999999999/".to_vec()
        };
        let len = rng.gen_range(0..10);
        k.extend((0..len).map(|_| rng.gen_range(b'a'..=b'z')));
        m.insert(k, value(&mut rng));
    }
    sets.push(("shared-prefixes", m));
    let mut m = Map::new();
    while m.len() < n {
        let v: u64 = rng.gen_range(0..1_000_000_000_000);
        m.insert(format!("{v:020}").into_bytes(), value(&mut rng));
    }
    sets.push(("decimal-fixed", m));
    let mut m = Map::new();
    while m.len() < n {
        let v: u64 = rng.gen_range(0..10_000_000);
        m.insert(v.to_string().into_bytes(), value(&mut rng));
    }
    sets.push(("decimal-varlen", m));
    sets
}

fn build(s: &MemStorage, g: u64, map: &Map, opts: TierOptions) -> Arc<StaticTier> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let mut b = StaticTierBuilder::new(Arc::clone(&storage), &dir(), g, opts).expect("builder");
    for (k, v) in map {
        b.add(k, v).expect("add");
    }
    let meta = b.finish().expect("finish");
    assert_eq!(meta.entries, map.len() as u64);
    let t = StaticTier::open(storage, &dir(), g, ReadMode::Buffered).expect("open");
    assert_eq!(t.entries(), map.len() as u64);
    assert_eq!(t.meta().keylist_bytes, meta.keylist_bytes);
    assert_eq!(t.model_bytes(), meta.model_bytes);
    assert_eq!(t.svlog_bytes(), meta.svlog_bytes);
    Arc::new(t)
}

fn opts(family: Family, page_boundary: u64) -> TierOptions {
    TierOptions {
        family,
        page_boundary,
        params: Params::new(page_boundary),
    }
}

/// A key near `k` that is probably absent.
fn perturb(k: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
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
    q
}

/// `max_pages`: the most svlog pages one lookup may read, when known.
fn check_tier(
    t: &Arc<StaticTier>,
    map: &Map,
    rng: &mut ChaCha8Rng,
    what: &str,
    max_pages: Option<u64>,
) {
    for (k, v) in map {
        let before = t.read_stats();
        assert_eq!(
            t.get(k).expect("get").as_ref(),
            Some(v),
            "{what}: key {k:?}"
        );
        let after = t.read_stats();
        assert_eq!(
            after.keylist_reads - before.keylist_reads,
            0,
            "{what}: key-list reads"
        );
        assert_eq!(
            after.svlog_reads - before.svlog_reads,
            1,
            "{what}: svlog reads"
        );
        if let Some(m) = max_pages {
            let pages = (after.svlog_bytes - before.svlog_bytes).div_ceil(4096);
            assert!(pages <= m, "{what}: {pages} pages read");
        }
    }
    let keys: Vec<&Vec<u8>> = map.keys().collect();
    for _ in 0..300 {
        let k = keys
            .get(rng.gen_range(0..keys.len()))
            .copied()
            .expect("key");
        let q = perturb(k, rng);
        let want = map.get(&q);
        let before = t.read_stats();
        assert_eq!(
            t.get(&q).expect("get").as_ref(),
            want,
            "{what}: query {q:?}"
        );
        let after = t.read_stats();
        let reads = after.keylist_reads + after.svlog_reads;
        assert!(
            reads - before.keylist_reads - before.svlog_reads <= 1,
            "{what}"
        );
    }
    assert_eq!(t.read_stats().one_read_fallbacks, 0, "{what}");
    let mut starts: Vec<Vec<u8>> = vec![Vec::new(), vec![0xff; 30]];
    for _ in 0..25 {
        let k = keys
            .get(rng.gen_range(0..keys.len()))
            .copied()
            .expect("key");
        starts.push(if rng.gen_bool(0.5) {
            k.clone()
        } else {
            perturb(k, rng)
        });
    }
    for start in starts {
        let got: Vec<_> = t
            .iter(&start)
            .expect("iter")
            .take(400)
            .collect::<Result<_, _>>()
            .expect("scan");
        let want: Vec<_> = map
            .range(start.clone()..)
            .take(400)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "{what}: scan from {start:?}");
        // A scan sized to fewer entries than it takes grows its chunks and misses nothing.
        for hint in [1usize, 10, 400] {
            let sized: Vec<_> = t
                .iter_limited(&start, hint)
                .expect("iter")
                .take(400)
                .collect::<Result<_, _>>()
                .expect("scan");
            assert_eq!(sized, want, "{what}: scan of {hint} from {start:?}");
        }
        // The entries up to an end key, as a scan to that end sizes its reads with them.
        let k = keys
            .get(rng.gen_range(0..keys.len()))
            .copied()
            .expect("key");
        let perturbed = perturb(k, rng);
        let ends = [
            None,
            Some(Vec::new()),
            Some(vec![0xff; 30]),
            Some(k.clone()),
            Some(perturbed),
        ];
        for end in ends {
            let want = map
                .keys()
                .filter(|key| **key >= start && end.as_ref().is_none_or(|e| *key < e))
                .count() as u64;
            let got = t
                .entries_between(&start, end.as_deref())
                .expect("entries_between");
            assert_eq!(got, want, "{what}: entries from {start:?} to {end:?}");
            // A store's scan to that end, told or not how many it takes, yields the same
            // entries as the map up to the end.
            for expected in [None, Some(3usize)] {
                let before_end = |k: &[u8]| end.as_deref().is_none_or(|e| k < e);
                let got: Vec<_> = t
                    .iter_to(&start, end.as_deref(), expected)
                    .expect("iter_to")
                    .take_while(|r| r.as_ref().map_or(true, |(k, _)| before_end(k)))
                    .take(400)
                    .collect::<Result<_, _>>()
                    .expect("scan");
                let want: Vec<_> = map
                    .range(start.clone()..)
                    .take_while(|(k, _)| before_end(k))
                    .take(400)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "{what}: scan to {end:?} told {expected:?}");
            }
        }
    }
}

#[test]
fn every_family_and_page_boundary_on_every_key_set() {
    for (name, map) in key_sets(3000, 7) {
        for family in Family::ALL {
            for b in [2u64, 4, 16] {
                let s = setup();
                let t = build(&s, 5, &map, opts(family, b));
                let what = format!("{name} {family} B={b}");
                let mut rng = ChaCha8Rng::seed_from_u64(b ^ u64::from(family.tag()) << 8);
                // Distinct page images and records under a page: a lookup reads at most B + 1
                // svlog pages.
                let distinct = family.is_bounded() && name != "shared-prefixes";
                check_tier(&t, &map, &mut rng, &what, distinct.then_some(b + 1));
            }
        }
    }
}

#[test]
fn a_scan_told_its_length_reads_about_its_entries_and_then_grows() {
    let sets = key_sets(20_000, 5);
    let (_, map) = sets.first().expect("set");
    let s = setup();
    let t = build(&s, 1, map, TierOptions::default());
    let (start, _) = map.iter().nth(7_000).expect("key");
    let scan = |hint: Option<usize>, take: usize| {
        let before = t.read_stats();
        let it = match hint {
            Some(n) => t.iter_limited(start, n),
            None => t.iter(start),
        };
        let got: Vec<_> = it
            .expect("iter")
            .take(take)
            .collect::<Result<_, _>>()
            .expect("scan");
        let want: Vec<_> = map
            .range(start.clone()..)
            .take(take)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "hint {hint:?}, {take} entries");
        let after = t.read_stats();
        (
            after.svlog_bytes - before.svlog_bytes,
            after.keylist_bytes - before.keylist_bytes,
            after.svlog_reads - before.svlog_reads,
        )
    };
    // 50 entries: their records alone (values under 120 bytes, so under 10 KiB, read in one
    // chunk), against the fixed 1 MiB chunk of an unsized scan.
    let (sized_svlog, sized_keys, sized_reads) = scan(Some(51), 50);
    let (fixed_svlog, fixed_keys, _) = scan(None, 50);
    assert!(
        sized_svlog <= 51 * 150,
        "{sized_svlog} svlog bytes for 50 entries"
    );
    assert_eq!(sized_reads, 1, "one svlog read for the 50 entries");
    assert!(
        sized_svlog * 20 < fixed_svlog,
        "{sized_svlog} against {fixed_svlog}"
    );
    assert!(
        sized_keys <= fixed_keys,
        "{sized_keys} against {fixed_keys} key-list bytes"
    );
    // Past the pages the seek read, the key list too is read for the wanted entries alone, not
    // in chunks of 64 pages.
    let (_, sized_keys, _) = scan(Some(1_501), 1_500);
    let (_, fixed_keys, _) = scan(None, 1_500);
    assert!(
        sized_keys + 32 * 4096 <= fixed_keys,
        "{sized_keys} against {fixed_keys} key-list bytes for 1,500 entries"
    );
    // Told "everything" (a scan to an end key with no limit says usize::MAX): the fixed chunks.
    let (huge_svlog, huge_keys, huge_reads) = scan(Some(usize::MAX), 1_500);
    let (fixed_svlog, fixed_keys, fixed_reads) = scan(None, 1_500);
    assert_eq!(
        (huge_svlog, huge_keys, huge_reads),
        (fixed_svlog, fixed_keys, fixed_reads),
        "a scan told usize::MAX entries"
    );
    // Told 1 but taking 5,000: the chunks double, so reads grow with the log of the length
    // (log2 5,000 is 13; an svlog chunk also ends at the last key-list page held, whose chunks
    // double too, so about twice that).
    let (_, _, reads) = scan(Some(1), 5_000);
    assert!(reads <= 30, "{reads} svlog reads for 5,000 entries told 1");
}

/// A scan to an end key seeks its start once and its end once: one key-list read fewer than
/// counting the entries (two seeks) and then seeking the start again to iterate.
#[test]
fn a_scan_to_an_end_key_seeks_its_start_once() {
    let sets = key_sets(20_000, 5);
    let (_, map) = sets.first().expect("set");
    let s = setup();
    let t = build(&s, 1, map, TierOptions::default());
    let (start, _) = map.iter().nth(7_000).expect("key");
    let (end, _) = map.iter().nth(7_050).expect("key");
    let keylist_reads = |scan: &dyn Fn() -> usize| {
        let before = t.read_stats().keylist_reads;
        assert_eq!(scan(), 50, "entries yielded before the end");
        t.read_stats().keylist_reads - before
    };
    let take = |it: lidb_kv::static_tier::TierIter| {
        it.map(|r| r.expect("entry"))
            .take_while(|(k, _)| k < end)
            .count()
    };
    let one_pass = keylist_reads(&|| take(t.iter_to(start, Some(end), None).expect("iter_to")));
    let two_passes = keylist_reads(&|| {
        let n = t.entries_between(start, Some(end)).expect("count");
        take(t.iter_limited(start, n as usize + 1).expect("iter"))
    });
    assert_eq!(
        one_pass + 1,
        two_passes,
        "key-list reads: {one_pass} against {two_passes}"
    );
}

#[test]
fn a_full_scan_reads_sequentially_in_large_chunks() {
    let sets = key_sets(20_000, 3);
    let (_, map) = sets.first().expect("set");
    let s = setup();
    let t = build(&s, 1, map, TierOptions::default());
    let before = t.read_stats();
    let n = t
        .iter(b"")
        .expect("iter")
        .map(|r| r.expect("scan"))
        .fold(0u64, |n, _| n + 1);
    assert_eq!(n, map.len() as u64);
    let st = t.read_stats();
    let (kl, sv) = (
        st.keylist_reads - before.keylist_reads,
        st.svlog_reads - before.svlog_reads,
    );
    assert!(
        kl <= t.keylist_bytes() / (64 * 4096) + 1,
        "{kl} key-list reads"
    );
    assert!(sv <= t.svlog_bytes() / (1 << 20) + 1, "{sv} svlog reads");
    // Each chunk re-reads at most the one record it cut at its end (values are < 120 bytes).
    let read = st.svlog_bytes - before.svlog_bytes;
    assert!(
        read >= t.svlog_bytes() - 32 && read <= t.svlog_bytes() + sv * 160,
        "{read}"
    );
}

#[test]
fn empty_and_single_entry_tiers() {
    let s = setup();
    let t = build(&s, 2, &Map::new(), TierOptions::default());
    assert_eq!(t.get(b"x").expect("get"), None);
    assert_eq!(t.iter(b"").expect("iter").count(), 0);
    let one: Map = [(b"only".to_vec(), b"v".to_vec())].into_iter().collect();
    let t = build(&s, 3, &one, TierOptions::default());
    assert_eq!(t.get(b"only").expect("get"), Some(b"v".to_vec()));
    assert_eq!(t.get(b"onl").expect("get"), None);
    assert_eq!(t.get(b"onlz").expect("get"), None);
    assert_eq!(t.iter(b"a").expect("iter").count(), 1);
    assert_eq!(t.files().len(), 3);
}

#[test]
fn builder_refuses_unsorted_and_oversized_keys_and_bad_boundaries() {
    let s = setup();
    let st: Arc<dyn Storage> = Arc::new(s.clone());
    let mut b =
        StaticTierBuilder::new(Arc::clone(&st), &dir(), 1, TierOptions::default()).expect("b");
    b.add(b"b", b"1").expect("add");
    assert!(matches!(b.add(b"b", b"2"), Err(Error::InvalidOption(_))));
    assert!(matches!(b.add(b"a", b"2"), Err(Error::InvalidOption(_))));
    assert!(matches!(
        b.add(&[b'c'; 5000], b"2"),
        Err(Error::InvalidOption(_))
    ));
    assert!(matches!(
        StaticTierBuilder::new(st, &dir(), 2, opts(Family::Plr, 1)),
        Err(Error::InvalidOption(_))
    ));
}

fn corruption_names(r: Result<impl std::fmt::Debug, Error>, path: &Path, what: &str) -> String {
    match r {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, path, "{what}: {detail}");
            detail
        }
        other => panic!(
            "{what}: expected Corruption naming {}, got {other:?}",
            path.display()
        ),
    }
}

fn small_tier(s: &MemStorage) -> Map {
    let sets = key_sets(2000, 11);
    let (_, map) = sets.into_iter().next().expect("set");
    build(s, 4, &map, TierOptions::default());
    map
}

fn open(s: &MemStorage) -> lidb_kv::Result<StaticTier> {
    StaticTier::open(Arc::new(s.clone()), &dir(), 4, ReadMode::Buffered)
}

#[test]
fn model_corruption_is_detected_at_open() {
    let s = setup();
    small_tier(&s);
    let path = model_path(&dir(), 4);
    let len = s.file_size(&path).expect("size");
    for i in 0..len {
        s.corrupt(&path, i, 0x04).expect("flip");
        corruption_names(open(&s), &path, &format!("model byte {i}"));
        s.corrupt(&path, i, 0x04).expect("unflip");
    }
    for cut in [0, 1, len / 2, len - 1] {
        let s2 = setup();
        small_tier(&s2);
        s2.truncate(&path, cut).expect("cut");
        corruption_names(open(&s2), &path, &format!("model cut {cut}"));
    }
}

#[test]
fn keylist_and_svlog_corruption_is_detected() {
    let s = setup();
    let map = small_tier(&s);
    let kpath = keys_path(&dir(), 4);
    // The header page: any byte.
    for i in (0..4096).step_by(61).chain(0..80) {
        s.corrupt(&kpath, i, 0x20).expect("flip");
        corruption_names(open(&s), &kpath, &format!("key list header byte {i}"));
        s.corrupt(&kpath, i, 0x20).expect("unflip");
    }
    // A data page: every key-list lookup that reads it fails, naming the key list (one-read
    // gets do not read the key list).
    s.corrupt(&kpath, 4096 + 4096 * 2 + 100, 0x01)
        .expect("flip");
    let t = open(&s).expect("open: data pages are checked when read");
    let mut failed = 0;
    for k in map.keys() {
        assert_eq!(t.get(k).expect("get").as_ref(), map.get(k));
        match t.get_pointer(k) {
            Ok(p) => assert_eq!(t.read_value(p.expect("present")).ok().as_ref(), map.get(k)),
            Err(e) => {
                corruption_names(Err::<(), _>(e), &kpath, "data page");
                failed += 1;
            }
        }
    }
    assert!(failed > 0);
    let scan: Result<Vec<_>, _> = Arc::new(t).iter(b"").expect("iter").collect();
    corruption_names(scan, &kpath, "scan over a bad page");

    // A record of the svlog: its lookup fails naming the svlog and the offset.
    let s = setup();
    let map = small_tier(&s);
    let t = open(&s).expect("open");
    let (k, _) = map.iter().nth(500).expect("key");
    let p = t.get_pointer(k).expect("pointer").expect("present");
    let spath = svlog_path(&dir(), 4);
    s.corrupt(&spath, p.offset + p.len as u64 - 1, 0x10)
        .expect("flip");
    let t = open(&s).expect("open");
    let d = corruption_names(t.get(k), &spath, "svlog record");
    assert!(d.contains(&format!("offset {}", p.offset)), "{d}");
    let d = corruption_names(t.read_value(p), &spath, "svlog record");
    assert!(d.contains(&format!("offset {}", p.offset)), "{d}");

    // Truncated files are refused at open.
    for path in [kpath, spath] {
        let s2 = setup();
        small_tier(&s2);
        let len = s2.file_size(&path).expect("size");
        s2.truncate(&path, len - 1).expect("cut");
        corruption_names(open(&s2), &path, "truncated");
    }
}

#[test]
fn random_bit_flips_in_any_file_never_panic_nor_return_wrong_values() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for round in 0..40 {
        let s = setup();
        let map = small_tier(&s);
        for _ in 0..5 {
            let path = match rng.gen_range(0..3) {
                0 => keys_path(&dir(), 4),
                1 => model_path(&dir(), 4),
                _ => svlog_path(&dir(), 4),
            };
            let len = s.file_size(&path).expect("size");
            s.corrupt(&path, rng.gen_range(0..len), 1 << rng.gen_range(0..8))
                .expect("flip");
        }
        let Ok(t) = open(&s) else { continue };
        for (k, v) in map.iter().step_by(7) {
            if let Ok(got) = t.get(k) {
                assert_eq!(got.as_ref(), Some(v), "round {round}");
            }
        }
        let t = Arc::new(t);
        if let Ok(it) = t.iter(b"") {
            for (k, v) in it.flatten() {
                assert_eq!(map.get(&k), Some(&v), "round {round}");
            }
        }
    }
}
