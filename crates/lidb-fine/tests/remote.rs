//! The remote side of FINEdex (docs/format/fine-wire.md): trained-data regions copied without
//! locks and validated by their version words, level-bin operations, and the extended RCU
//! barrier's acks, timeouts and reclamation. The last test runs writers that retrain all the
//! time against readers that read like a remote client (predict, copy a window, validate).
//! Every loop is bounded by a count and a deadline; failures print the seed.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lidb_fine::{
    BIN_REGION_RETIRED, Barrier, BinOp, Config, FineIndex, RETIRED, RemoteLayout, WORDS_PER_RECORD,
    bin_copy_is_valid, copy_is_valid, predict_window,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn tiny() -> Config {
    Config {
        root_slots: 2,
        child_slots: 2,
        threshold: 2,
        learning_step: 4,
        learning_rate: 0.5,
        model_retrain_after_nested: 1,
        model_retrain_divisor: 0,
    }
}

fn loaded(n: u64, cfg: Config) -> FineIndex {
    let entries: Vec<(u64, u64)> = (0..n).map(|k| (k * 4, k * 4 + 1)).collect();
    FineIndex::bulk_load(&entries, cfg).unwrap()
}

/// What a remote client's get does with its cached layout: `Some(answer)` from trained data,
/// `None` when the read must go elsewhere (key not trained, torn, retired).
enum Remote {
    Trained(Option<u64>),
    NotTrained { region: usize, position: u64 },
    Invalid { retired: bool },
}

fn remote_get(layout: &RemoteLayout, key: u64) -> Remote {
    let i = layout
        .regions
        .partition_point(|r| r.first_key() <= key)
        .saturating_sub(1);
    let r = &layout.regions[i];
    let (lo, hi) = predict_window(r.segments(), layout.eps, r.records(), key);
    let mut words = Vec::new();
    r.copy_words(lo, hi - lo, &mut words);
    let (head, tail) = (words[0], *words.last().unwrap());
    if !copy_is_valid(head, tail) {
        return Remote::Invalid {
            retired: head & RETIRED != 0,
        };
    }
    let body = &words[1..words.len() - 1];
    let mut p = lo;
    for rec in body.chunks(WORDS_PER_RECORD) {
        if rec[0] == key {
            return Remote::Trained((rec[1] & 1 == 0).then_some(rec[2]));
        }
        if rec[0] > key {
            break;
        }
        p += 1;
    }
    Remote::NotTrained {
        region: i,
        position: p - 1,
    }
}

#[test]
fn a_copy_of_every_region_shows_the_trained_keys_and_values() {
    let ix = loaded(5_000, Config::default());
    ix.update(40, 7);
    ix.remove(44);
    let layout = ix.remote_layout();
    assert_eq!(layout.version, 1);
    let mut seen = 0u64;
    for r in &layout.regions {
        let mut words = Vec::new();
        r.copy_words(0, r.records(), &mut words);
        assert!(copy_is_valid(words[0], *words.last().unwrap()));
        assert_eq!(words.len() as u64, 2 + r.records() * 3);
        for rec in words[1..words.len() - 1].chunks(3) {
            let live = rec[1] & 1 == 0;
            assert_eq!(ix.get(rec[0]), live.then_some(rec[2]), "key {}", rec[0]);
            seen += 1;
        }
    }
    assert_eq!(seen, 5_000);
    for key in [0, 4, 40, 44, 45, 19_996, 20_001] {
        match remote_get(&layout, key) {
            Remote::Trained(v) => assert_eq!(v, ix.get(key), "key {key}"),
            Remote::NotTrained { region, position } => {
                let got = ix.at_bin(&layout.regions[region], position, key, BinOp::Search);
                assert!(got.at_address, "key {key}");
                assert_eq!(got.value, ix.get(key), "key {key}");
            }
            Remote::Invalid { .. } => panic!("no writer, yet invalid"),
        }
    }
}

#[test]
fn bin_copies_show_the_level_bins_and_a_write_section_inside_tears_them() {
    let cfg = Config {
        root_slots: 4,
        child_slots: 4,
        ..Config::default()
    };
    let entries: Vec<(u64, u64)> = (0..1_000u64).map(|k| (k * 100, k)).collect();
    let ix = FineIndex::bulk_load(&entries, cfg).unwrap();
    let layout = ix.remote_layout();
    let r = &layout.regions[0];
    // Record 10 (key 1000): no bins yet, an empty valid root.
    let mut w = Vec::new();
    assert!(r.copy_bin(10, None, &mut w, false));
    assert_eq!(w, vec![0, 0, 0, 0]);
    assert!(!r.copy_bin(u64::MAX, None, &mut w, false));
    // Two keys in the gap: a flat root.
    ix.insert(1_001, 7);
    ix.insert(1_002, 8);
    w.clear();
    assert!(r.copy_bin(10, None, &mut w, false));
    assert!(bin_copy_is_valid(w[0], *w.last().unwrap()), "{w:?}");
    assert_eq!(&w[1..w.len() - 1], &[0, 2, 1_001, 7, 1_002, 8]);
    // More than the root holds: an index over child bins; the child copy carries the root
    // version.
    ix.insert(1_003, 9);
    ix.insert(1_004, 10);
    ix.insert(1_005, 11);
    w.clear();
    assert!(r.copy_bin(10, None, &mut w, false));
    let root_version = w[0];
    assert!(bin_copy_is_valid(root_version, *w.last().unwrap()), "{w:?}");
    assert_eq!(w[1], 1, "{w:?}");
    let child = w[4];
    w.clear();
    assert!(r.copy_bin(10, Some(child as u32), &mut w, false));
    assert!(bin_copy_is_valid(w[0], *w.last().unwrap()), "{w:?}");
    assert_eq!(w[1], root_version);
    assert_eq!(w[3], 1_001, "{w:?}");
    // The write section taken halfway through: torn, rejected.
    w.clear();
    assert!(r.copy_bin(10, None, &mut w, true));
    assert!(!bin_copy_is_valid(w[0], *w.last().unwrap()), "{w:?}");
    // A retraining retires the region: the tail (and later copies' head) carry bit 62.
    ix.retrain_models();
    w.clear();
    assert!(r.copy_bin(10, None, &mut w, false));
    assert!(w[0] & BIN_REGION_RETIRED != 0 && !bin_copy_is_valid(w[0], *w.last().unwrap()));
}

#[test]
fn a_write_during_a_copy_tears_it_and_validation_rejects_it() {
    let ix = loaded(1_000, Config::default());
    let layout = ix.remote_layout();
    let r = &layout.regions[0];
    let mut words = Vec::new();
    r.copy_words_torn_by(0, 64, &mut words, &mut || {
        ix.update(8, 99);
    });
    assert!(
        !copy_is_valid(words[0], *words.last().unwrap()),
        "a write inside the copy was not detected: head {} tail {}",
        words[0],
        words.last().unwrap()
    );
    // The write landed after its record was copied: the torn copy shows the old value, which a
    // client without validation would return as current.
    assert_eq!(words[1 + 2 * 3 + 2], 9);
    assert_eq!(ix.get(8), Some(99));
    // A hook that does not write leaves the copy valid.
    words.clear();
    r.copy_words_torn_by(0, 64, &mut words, &mut || {});
    assert!(copy_is_valid(words[0], *words.last().unwrap()));
    // A write to a key in a gap (no trained record changes) does not tear it.
    words.clear();
    r.copy_words_torn_by(0, 64, &mut words, &mut || {
        ix.insert(9, 1);
    });
    assert!(copy_is_valid(words[0], *words.last().unwrap()));
}

#[test]
fn retraining_retires_the_old_regions_and_bin_ops_on_them_still_land() {
    let ix = loaded(2_000, Config::default());
    let old = ix.remote_layout();
    for k in 0..2_000u64 {
        ix.insert(k * 4 + 1, k);
    }
    ix.retrain_models();
    let new = ix.remote_layout();
    assert!(new.version > old.version);
    assert!(old.regions.iter().all(|r| r.is_retired()));
    assert!(new.regions.iter().all(|r| !r.is_retired()));
    // A client on the old layout: its read is refused (RETIRED), never answered with old data.
    ix.update(8, 1234);
    assert!(matches!(
        remote_get(&old, 8),
        Remote::Invalid { retired: true }
    ));
    assert!(matches!(remote_get(&new, 8), Remote::Trained(Some(1234))));
    // A pipeline write sent to an old bin address runs by key and is seen by everyone.
    let got = ix.at_bin(&old.regions[0], 2, 9, BinOp::Update(77));
    assert!(!got.at_address);
    assert_eq!(got.value, Some(2));
    assert_eq!(ix.get(9), Some(77));
    let got = ix.at_bin(&old.regions[0], 2, 8, BinOp::Remove);
    assert_eq!((got.at_address, got.value), (false, Some(1234)));
    assert!(matches!(remote_get(&new, 8), Remote::Trained(None)));
}

#[test]
fn a_wrong_bin_address_never_misplaces_a_write() {
    let ix = loaded(1_000, Config::default());
    let layout = ix.remote_layout();
    let r = &layout.regions[0];
    // Address of the gap below record 0 (key 0), but key 401 lies far past it.
    let got = ix.at_bin(r, 0, 401, BinOp::Insert(5));
    assert!(!got.at_address);
    assert_eq!(ix.get(401), Some(5));
    assert_eq!(
        ix.range(400, 404, 10),
        vec![(400, 401), (401, 5), (404, 405)]
    );
    // The right address: position 100 is key 400, 401 lies in its gap.
    let got = ix.at_bin(r, 100, 402, BinOp::Insert(6));
    assert!(got.at_address);
    assert_eq!(ix.at_bin(r, 100, 402, BinOp::Search).value, Some(6));
    assert_eq!(ix.at_bin(r, 100, 400, BinOp::Update(3)).value, Some(401));
    assert_eq!(ix.get(400), Some(3));
    // Out of range positions fall back too.
    assert!(!ix.at_bin(r, u64::MAX, 7, BinOp::Search).at_address);
}

#[test]
fn old_regions_are_reclaimed_only_when_every_live_client_moved_on() {
    let ix = loaded(2_000, Config::default());
    let t0 = Instant::now();
    let barrier = Barrier::new(&ix, Duration::from_secs(10));
    let a = barrier.register();
    let b = barrier.register();
    assert_ne!(a, b);
    let silent = barrier.register();
    assert_ne!(silent, a);
    barrier.ack(a, 1, t0);
    barrier.ack(b, 1, t0);
    let old_id = ix.remote_layout().regions[0].id();
    ix.retrain_models();
    let v2 = barrier.sync(&ix).version;
    assert_eq!(v2, 2);
    assert!(barrier.stats().retained > 0);
    assert!(
        barrier.lookup(old_id).is_some(),
        "retained regions stay readable"
    );
    barrier.ack(a, v2, t0);
    assert_eq!(barrier.reclaim(t0), 0, "b is still on version 1");
    assert!(barrier.lookup(old_id).unwrap().is_retired());
    barrier.ack(b, v2, t0);
    assert!(barrier.reclaim(t0) > 0);
    assert!(
        barrier.lookup(old_id).is_none(),
        "a reclaimed region reads as stale"
    );
    assert!(barrier.lookup(ix.remote_layout().regions[0].id()).is_some());

    // A client that vanished is timed out of the count.
    ix.retrain_models();
    let v3 = barrier.sync(&ix).version;
    barrier.ack(a, v3, t0 + Duration::from_secs(20));
    assert_eq!(barrier.reclaim(t0 + Duration::from_secs(5)), 0);
    let freed = barrier.reclaim(t0 + Duration::from_secs(20));
    assert!(freed > 0, "b never acked v3 and stalled reclamation");
    let s = barrier.stats();
    assert_eq!((s.clients, s.timed_out, s.retained), (1, 1, 0), "{s:?}");

    // A client that never fetched a layout (`silent`) never held anything back; one whose
    // connection closed stops counting at once.
    ix.retrain_models();
    let v4 = barrier.sync(&ix).version;
    let c = barrier.register();
    barrier.ack(c, v3, t0 + Duration::from_secs(20));
    barrier.ack(a, v4, t0 + Duration::from_secs(20));
    assert_eq!(barrier.reclaim(t0 + Duration::from_secs(20)), 0);
    barrier.forget(c);
    assert!(barrier.reclaim(t0 + Duration::from_secs(20)) > 0);
}

/// Writers update trained keys with increasing generations and insert gap keys (tiny bins: level
/// bins and models retrain constantly); readers read like remote clients with a cached layout
/// they refresh only when told. A reader never returns a value that is not the key's, never
/// sees a generation go back, and never misses a trained key.
#[test]
fn remote_readers_stay_correct_while_writers_retrain() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let ix = Arc::new(loaded(4_000, tiny()));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (ix, stop) = (Arc::clone(&ix), Arc::clone(&stop));
        writers.push(std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ w);
            for generation in 1..=40_000u64 {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                // Writer w owns trained keys with (k / 4) % 2 == w.
                let k = (rng.gen_range(0..2_000u64) * 2 + w) * 4;
                ix.update(k, k << 20 | generation);
                let g = rng.gen_range(0..16_000u64) | 1;
                ix.insert(g, g);
            }
        }));
    }
    {
        // Model retraining all the time, besides what the tiny bins set off.
        let (ix, stop) = (Arc::clone(&ix), Arc::clone(&stop));
        writers.push(std::thread::spawn(move || {
            for _ in 0..2_000 {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                ix.retrain_models();
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (ix, stop) = (Arc::clone(&ix), Arc::clone(&stop));
        readers.push(std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (r + 100));
            let mut layout = ix.remote_layout();
            let mut last = vec![0u64; 4_000];
            let (mut trained, mut refreshes, mut torn) = (0u64, 0u64, 0u64);
            for _ in 0..3_000_000u64 {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                let i = rng.gen_range(0..4_000u64);
                let k = i * 4;
                let v = match remote_get(&layout, k) {
                    Remote::Trained(v) => v,
                    Remote::Invalid { retired: true } => {
                        layout = ix.remote_layout();
                        refreshes += 1;
                        continue;
                    }
                    Remote::Invalid { retired: false } => {
                        torn += 1;
                        continue;
                    }
                    Remote::NotTrained { .. } => {
                        panic!("seed {seed}: trained key {k} missing from its window")
                    }
                };
                trained += 1;
                let v = v.unwrap_or_else(|| panic!("seed {seed}: key {k} read as absent"));
                let generation = if v == k + 1 { 0 } else { v & ((1 << 20) - 1) };
                assert!(
                    v == k + 1 || v >> 20 == k,
                    "seed {seed}: key {k} read value {v} of another key"
                );
                assert!(
                    generation >= last[i as usize],
                    "seed {seed}: key {k} went back from generation {} to {generation}",
                    last[i as usize]
                );
                last[i as usize] = generation;
            }
            (trained, refreshes, torn)
        }));
    }
    let mut total = (0, 0, 0);
    for h in readers {
        let (a, b, c) = h.join().unwrap();
        total = (total.0 + a, total.1 + b, total.2 + c);
    }
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    println!(
        "trained reads {}, refreshes {}, torn {}",
        total.0, total.1, total.2
    );
    assert!(
        total.0 > 1_000,
        "seed {seed}: too few reads checked: {total:?}"
    );
    assert!(
        total.1 > 0,
        "seed {seed}: no reader ever met a retired region: {total:?}"
    );
    assert!(
        ix.layout_version() > 1,
        "seed {seed}: no model retraining happened"
    );
}
