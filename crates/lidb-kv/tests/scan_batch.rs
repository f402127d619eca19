//! Scans whose LSM-resident values are fetched in batches: model-based against a
//! BTreeMap after random updates, deletes, GC and conversion, for the three engines, with
//! unbounded scans and scans told how many entries they will take (`Store::scan_limited`); and
//! the value-log reads they cost (`Store::device_reads`): a scan over keys written one after
//! another costs a read per span of nearby records, not a read per key. Failure messages name
//! the seed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_kv::{Store, TierKind};
use lidb_storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

mod support;
use support::{learned, small};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Up to `limit` entries of `[start, end)`, as the engines drain a scan.
fn scan(
    store: &Store,
    start: &[u8],
    end: Option<&[u8]>,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = match limit {
        Some(n) => store.scan_limited(start, end, n).unwrap(),
        None => store.scan(start, end).unwrap(),
    };
    let mut got = Vec::new();
    while it.valid() && limit.is_none_or(|n| got.len() < n) {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    got
}

fn want(
    model: &Model,
    start: &[u8],
    end: Option<&[u8]>,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range(start.to_vec()..)
        .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
        .take(limit.unwrap_or(usize::MAX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run(seed: u64, tier: TierKind, steps: usize) {
    let store = Store::open_with_storage(
        Arc::new(MemStorage::new()),
        Path::new("/kv"),
        small(tier.clone()),
    )
    .unwrap();
    let mut model = Model::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ctx = format!("seed {seed} tier {tier:?}");
    let converts = matches!(tier, TierKind::Learned { .. });
    let mut scans = 0;
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        match rng.gen_range(0..100) {
            // Runs of consecutive keys written one after another (near in the log), and
            // single random updates.
            0..=29 => {
                let first = rng.gen_range(0..2000u32);
                for i in first..(first + rng.gen_range(1..60)).min(2000) {
                    let v: Vec<u8> = (0..rng.gen_range(1..400)).map(|_| rng.r#gen()).collect();
                    store.put(&key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
            }
            30..=49 => {
                let i = rng.gen_range(0..2000u32);
                let v: Vec<u8> = (0..rng.gen_range(1..400)).map(|_| rng.r#gen()).collect();
                store.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
            50..=57 => {
                let i = rng.gen_range(0..2000u32);
                store.delete(&key(i)).unwrap();
                model.remove(&key(i));
            }
            58..=89 => {
                let start = key(rng.gen_range(0..2000u32));
                let end = rng.gen_bool(0.5).then(|| key(rng.gen_range(0..2100u32)));
                let limit = rng.gen_bool(0.7).then(|| rng.gen_range(1..700usize));
                let got = scan(&store, &start, end.as_deref(), limit);
                let want = want(&model, &start, end.as_deref(), limit);
                assert_eq!(
                    got.len(),
                    want.len(),
                    "{ctx}: scan length (limit {limit:?})"
                );
                assert!(got == want, "{ctx}: scan differs from the model");
                scans += 1;
            }
            90..=93 => store.flush().unwrap(),
            94..=97 => store.gc().unwrap_or_else(|e| panic!("{ctx}: gc: {e}")),
            _ if converts => store.convert().unwrap(),
            _ => store.compact().unwrap(),
        }
    }
    assert!(scans > 0);
    assert!(store.stats().gcs > 0, "{ctx}: GC ran");
    let all = scan(&store, b"", None, None);
    assert!(all == want(&model, b"", None, None), "{ctx}: full scan");
}

#[test]
fn learnedkv_batched_scans_match_a_btreemap_after_updates_and_gc() {
    for seed in 0..3 {
        run(seed, learned(), 1_500);
    }
}

#[test]
fn lsm_plus_tier_batched_scans_match_a_btreemap_after_updates_and_gc() {
    for seed in 10..12 {
        run(seed, TierKind::Lsm, 1_500);
    }
}

#[test]
fn lsm_plus_batched_scans_match_a_btreemap_after_updates_and_gc() {
    for seed in 20..22 {
        run(seed, TierKind::WriteBack, 1_500);
    }
}

/// k consecutive keys updated one after another (their records adjacent in the active log) cost
/// far fewer than k value-log reads to scan, while point reads of them cost one each.
#[test]
fn a_scan_over_keys_written_together_reads_their_values_in_few_reads() {
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let store = Store::open_with_storage(
            Arc::new(MemStorage::new()),
            Path::new("/kv"),
            small(tier.clone()),
        )
        .unwrap();
        // Settled data in the tier (lsm+: in the LSM after its write-back GC) ...
        for i in 0..3_000u32 {
            store.put(&key(i), &[1u8; 300]).unwrap();
        }
        store.gc().unwrap();
        // ... then k consecutive keys updated together: the LSM points into the active log.
        let k = 200u32;
        for i in 1_000..1_000 + k {
            store.put(&key(i), &i.to_le_bytes().repeat(75)).unwrap();
        }
        let before = store.device_reads();
        let got = scan(&store, &key(1_000), Some(&key(1_000 + k)), Some(k as usize));
        let after = store.device_reads();
        assert_eq!(got.len(), k as usize, "{tier:?}");
        for (n, (kk, v)) in got.iter().enumerate() {
            let i = 1_000 + n as u32;
            assert_eq!((kk, v), (&key(i), &i.to_le_bytes().repeat(75)), "{tier:?}");
        }
        let vlog_reads = after.vlog_reads - before.vlog_reads;
        // 200 records of 312 bytes, 62 KB: one 512 KiB span (one more for the advance after the
        // last entry at most).
        assert!(
            (1..=2).contains(&vlog_reads),
            "{tier:?}: {vlog_reads} reads for {k} keys"
        );
        assert!(
            after.vlog_bytes - before.vlog_bytes >= u64::from(k) * 300,
            "{tier:?}"
        );
        assert!(
            after.reads >= after.vlog_reads,
            "{tier:?}: totals include the value log"
        );
        // The same keys read one by one: a read each.
        let before = store.device_reads();
        for i in 1_000..1_000 + k {
            assert!(store.get(&key(i)).unwrap().is_some());
        }
        let point = store.device_reads().vlog_reads - before.vlog_reads;
        assert_eq!(
            point,
            u64::from(k),
            "{tier:?}: point reads cost a read per key"
        );
    }
}

/// Records far apart in the log (each followed by a 20 KB value of another key) are a read each,
/// read several at once (the batch's spans go to parallel reads): the scan still returns each
/// key's own value, in key order.
#[test]
fn a_scan_over_scattered_records_reads_each_once_and_in_key_order() {
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let store = Store::open_with_storage(
            Arc::new(MemStorage::new()),
            Path::new("/kv"),
            small(tier.clone()),
        )
        .unwrap();
        let k = 64u32;
        // Written in reverse key order, so log order is the opposite of the scan's.
        for i in (0..k).rev() {
            store.put(&key(i), &i.to_le_bytes().repeat(50)).unwrap();
            store.put(b"zz-filler", &vec![i as u8; 20_000]).unwrap();
        }
        let before = store.device_reads();
        let got = scan(&store, &key(0), Some(&key(k)), None);
        let reads = store.device_reads().vlog_reads - before.vlog_reads;
        assert_eq!(got.len(), k as usize, "{tier:?}");
        for (n, (kk, v)) in got.iter().enumerate() {
            let i = n as u32;
            assert_eq!((kk, v), (&key(i), &i.to_le_bytes().repeat(50)), "{tier:?}");
        }
        // One read per record (the filler after the range is not read).
        assert_eq!(reads, u64::from(k), "{tier:?}");
    }
}
