//! Scan-triggered GC (store/scan_gc.rs), for the three tiered engines: a store loaded in random
//! key order and then scanned sorts its values by itself once the scans have wasted a GC's cost,
//! after which the same scans read the value log a few times instead of once per value; scans
//! stay exact (model-based against a BTreeMap) while the GC runs beside them; a store loaded in
//! key order, or with the trigger off, never GCs for its scans.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::mem::MemStorage;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod support;
use support::{learned, open_on, small};

/// Above the trigger's floor of 4,096 active records.
const RECORDS: u32 = 6_000;
const SCAN_LEN: usize = 50;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Records of about 1 KiB: 6 MB of them, so 50 random ones lie farther apart than a span joins.
fn value(i: u32) -> Vec<u8> {
    format!("value of {i} {}", "v".repeat(1000)).into_bytes()
}

/// Background GC on (the trigger lives in its thread), the overgrowth trigger out of reach.
fn opts(tier: TierKind, ratio: f64) -> StoreOptions {
    StoreOptions {
        auto_gc: true,
        over_provisioning: 10.0,
        scan_gc_ratio: ratio,
        ..small(tier)
    }
}

fn tiers() -> [(&'static str, TierKind); 3] {
    [
        ("learnedkv", learned()),
        ("lsm+tier", TierKind::Lsm),
        ("lsm+", TierKind::WriteBack),
    ]
}

/// Loads every record, in key order or shuffled (the order decides where values lie).
fn load(store: &Store, shuffled: bool, rng: &mut ChaCha8Rng) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut order: Vec<u32> = (0..RECORDS).collect();
    if shuffled {
        order.shuffle(rng);
    }
    let mut model = BTreeMap::new();
    for i in order {
        store.put(&key(i), &value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    model
}

/// One scan of `SCAN_LEN` entries from a random key, checked against the model; returns the
/// value-log reads it cost.
fn scan_checked(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut ChaCha8Rng) -> u64 {
    let start = key(rng.gen_range(0..RECORDS));
    let before = store.device_reads().vlog_reads;
    let mut it = store.scan_limited(&start, None, SCAN_LEN).unwrap();
    let mut got = Vec::new();
    while it.valid() && got.len() < SCAN_LEN {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range(start..)
        .take(SCAN_LEN)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        got,
        want,
        "scan from {:?}",
        String::from_utf8_lossy(&want[0].0)
    );
    store.device_reads().vlog_reads - before
}

/// Scans until a scan-triggered GC is installed (or `limit` scans / 60 s pass); returns the
/// scans it took, None if no GC came.
fn scan_until_gc(
    store: &Store,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut ChaCha8Rng,
    limit: u32,
) -> Option<u32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    for n in 1..=limit {
        scan_checked(store, model, rng);
        if store.stats().scan_gcs > 0 {
            return Some(n);
        }
        if Instant::now() > deadline {
            break;
        }
    }
    // The background thread checks every 200 ms: give it time to notice the last scans.
    let settle = Instant::now() + Duration::from_secs(10);
    while Instant::now() < settle {
        if store.stats().scan_gcs > 0 {
            return Some(limit);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn scans_over_scattered_values_sort_them_and_then_read_a_few_spans() {
    for (name, tier) in tiers() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let store = open_on(MemStorage::new(), &opts(tier, 1.0)).unwrap();
        let model = load(&store, true, &mut rng);
        let scattered: u64 = (0..20)
            .map(|_| scan_checked(&store, &model, &mut rng))
            .sum();
        assert!(
            scattered >= 20 * (SCAN_LEN as u64) / 2,
            "{name}: shuffled values should cost about a read each, got {scattered} for 20 scans"
        );
        // Each scan wastes about 49 reads; a GC costs about 6,000: some 120 scans, with room.
        let took = scan_until_gc(&store, &model, &mut rng, 2_000);
        assert!(
            took.is_some(),
            "{name}: no scan-triggered GC after 2,000 scans"
        );
        assert_eq!(store.stats().gcs, store.stats().scan_gcs, "{name}");
        let sorted: u64 = (0..20)
            .map(|_| scan_checked(&store, &model, &mut rng))
            .sum();
        assert!(
            sorted * 10 <= scattered,
            "{name}: after the GC 20 scans read {sorted} times, before {scattered}"
        );
        store.close().unwrap();
    }
}

#[test]
fn scans_stay_exact_while_writes_and_the_scan_gc_run() {
    for (name, tier) in tiers() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let store = open_on(MemStorage::new(), &opts(tier, 0.5)).unwrap();
        let mut model = load(&store, true, &mut rng);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut n = 0u32;
        while (store.stats().scan_gcs < 2 || n < 400) && n < 4_000 && Instant::now() < deadline {
            n += 1;
            // One write in four: updates, inserts past the loaded keys and deletes.
            if n.is_multiple_of(4) {
                let i = rng.gen_range(0..RECORDS + 500);
                if rng.gen_bool(0.2) {
                    store.delete(&key(i)).unwrap();
                    model.remove(&key(i));
                } else {
                    let v = format!("update {n} of {i}").into_bytes();
                    store.put(&key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
            }
            scan_checked(&store, &model, &mut rng);
        }
        assert!(
            store.stats().scan_gcs >= 1,
            "{name}: no scan-triggered GC in {n} operations"
        );
        for (k, v) in &model {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{name}");
        }
        store.close().unwrap();
    }
}

#[test]
fn values_already_in_key_order_or_the_trigger_off_bring_no_gc() {
    for (name, tier) in tiers() {
        for (shuffled, ratio) in [(false, 1.0), (true, 0.0)] {
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            let store = open_on(MemStorage::new(), &opts(tier.clone(), ratio)).unwrap();
            let model = load(&store, shuffled, &mut rng);
            // Twice what the shuffled store needed to trigger, then time for the thread to look.
            for _ in 0..400 {
                scan_checked(&store, &model, &mut rng);
            }
            std::thread::sleep(Duration::from_millis(500));
            assert_eq!(
                store.stats().gcs,
                0,
                "{name} shuffled={shuffled} ratio={ratio}: scans started a GC"
            );
            store.close().unwrap();
        }
    }
}

#[test]
fn a_ratio_out_of_range_is_refused() {
    for ratio in [-1.0, f64::NAN, 1001.0] {
        let e = open_on(MemStorage::new(), &opts(learned(), ratio)).unwrap_err();
        assert!(e.to_string().contains("scan GC ratio"), "{e}");
    }
}
