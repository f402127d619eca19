//! Crash tests of the tiered store WITHOUT `sync`: the power goes at every N-th storage operation
//! of a workload of puts, overwrites, deletes, occasional `flush()` calls and GCs. Unsynced writes
//! may be lost, but only as a suffix: after reopening, every read succeeds (no pointer to a lost
//! value-log record) and the store equals the model after some prefix of the writes, at least
//! the prefix acknowledged before the last completed `flush()` (the durability point).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::Result;
use lidb_testkit::mem::each_power_cut;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{learned, open_shared, small};

const KEYS: u32 = 300;

type Write = (Vec<u8>, Option<Vec<u8>>);

#[derive(Default)]
struct History {
    /// Every write attempted, in order (the last one may not have been acknowledged).
    writes: Vec<Write>,
    /// Writes acknowledged before the last completed `flush()`: these must survive.
    durable: usize,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// The shape of a workload: how many writes, one explicit `flush()` in how many (on average),
/// and a `gc()` call every 150 writes or not.
#[derive(Clone, Copy)]
struct Shape {
    steps: usize,
    flush_one_in: u32,
    manual_gc: bool,
}

fn workload(store: &Store, h: &mut History, shape: Shape) -> Result<()> {
    let Shape {
        steps,
        flush_one_in,
        manual_gc,
    } = shape;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for step in 0..steps {
        let k = key(rng.gen_range(0..KEYS));
        if rng.gen_bool(0.85) {
            // Unique values, so every prefix of the history is a distinct state.
            let mut v = format!("{step}:").into_bytes();
            v.resize(rng.gen_range(v.len() + 1..200), b'.');
            h.writes.push((k.clone(), Some(v.clone())));
            store.put(&k, &v)?;
        } else {
            h.writes.push((k.clone(), None));
            store.delete(&k)?;
        }
        if rng.gen_ratio(1, flush_one_in) {
            let acked = h.writes.len();
            store.flush()?;
            h.durable = acked;
        }
        if manual_gc && step % 150 == 149 {
            store.gc()?;
        }
    }
    Ok(())
}

/// Every key's value, read one by one and by a scan (both must succeed and agree).
fn contents(store: &Store, ctx: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut got = BTreeMap::new();
    for i in 0..KEYS {
        let k = key(i);
        let v = store
            .get(&k)
            .unwrap_or_else(|e| panic!("{ctx}: get {}: {e}", String::from_utf8_lossy(&k)));
        if let Some(v) = v {
            got.insert(k, v);
        }
    }
    let mut scanned = BTreeMap::new();
    let mut it = store
        .scan(b"", None)
        .unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    while it.valid() {
        scanned.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    }
    assert_eq!(got, scanned, "{ctx}: scan and get disagree");
    got
}

/// The length of the first prefix of `writes`, at least `min` long, whose model state is `got`.
fn matching_prefix(
    writes: &[Write],
    min: usize,
    got: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Option<usize> {
    let mut model: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
    // Keys whose model value differs from `got`; the empty model differs on every key of `got`.
    let mut differing = got.len();
    for (p, (k, v)) in writes.iter().enumerate() {
        if p >= min && differing == 0 {
            return Some(p);
        }
        let want = got.get(k).map(Vec::as_slice);
        let before = model.get(k.as_slice()).copied().flatten();
        let after = v.as_deref();
        model.insert(k, after);
        match (before == want, after == want) {
            (true, false) => differing += 1,
            (false, true) => differing -= 1,
            _ => {}
        }
    }
    (differing == 0).then_some(writes.len())
}

/// With `background`, GCs start from the store's own thread while the workload keeps writing.
fn power_cuts(tier: TierKind, background: bool, shape: Shape) {
    let opts = StoreOptions {
        sync: false,
        auto_gc: background,
        over_provisioning: 0.2,
        ..small(tier)
    };
    each_power_cut(
        |s| open_shared(s, &opts),
        120,
        |store, h: &mut History| workload(store, h, shape),
        |store, h, ctx| {
            let got = contents(store, ctx);
            let p = matching_prefix(&h.writes, h.durable, &got).unwrap_or_else(|| {
                panic!(
                    "{ctx}: the store is not the state after any prefix of the {} writes from \
                     the {} made durable by a flush on",
                    h.writes.len(),
                    h.durable
                )
            });
            store
                .gc()
                .unwrap_or_else(|e| panic!("{ctx}: GC after recovery: {e}"));
            let after = contents(store, &format!("{ctx}, after a GC"));
            assert_eq!(
                after, got,
                "{ctx}: a GC after recovery changed the contents (prefix {p})"
            );
        },
    );
}

const WITH_GC: Shape = Shape {
    steps: 600,
    flush_one_in: 100,
    manual_gc: true,
};

#[test]
fn learnedkv_without_sync_recovers_a_prefix_through_power_cuts_anywhere() {
    power_cuts(learned(), false, WITH_GC);
}

#[test]
fn learnedkv_without_sync_recovers_a_prefix_through_power_cuts_during_background_gc() {
    let shape = Shape {
        steps: 1_500,
        manual_gc: false,
        ..WITH_GC
    };
    power_cuts(learned(), true, shape);
}

#[test]
fn lsm_plus_tier_without_sync_recovers_a_prefix_through_power_cuts_anywhere() {
    power_cuts(TierKind::Lsm, false, WITH_GC);
}

#[test]
fn write_back_lsm_plus_without_sync_recovers_a_prefix_through_power_cuts_anywhere() {
    power_cuts(TierKind::WriteBack, false, WITH_GC);
}

#[test]
fn write_back_lsm_plus_without_sync_recovers_a_prefix_through_power_cuts_during_background_gc() {
    let shape = Shape {
        steps: 1_500,
        manual_gc: false,
        ..WITH_GC
    };
    power_cuts(TierKind::WriteBack, true, shape);
}

/// Enough writes between the rare explicit flushes that the LSM flushes full memtables itself:
/// its tables must not point to value-log records that were never synced.
#[test]
fn learnedkv_without_sync_recovers_a_prefix_when_memtables_fill_between_flushes() {
    let shape = Shape {
        steps: 8_000,
        flush_one_in: 3_000,
        manual_gc: false,
    };
    power_cuts(learned(), false, shape);
}

#[test]
fn prefixes_are_matched_exactly() {
    let w = |k: &str, v: Option<&str>| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()));
    let writes = vec![
        w("a", Some("1")),
        w("b", Some("2")),
        w("a", None),
        w("b", Some("3")),
    ];
    let state = |pairs: &[(&str, &str)]| -> BTreeMap<Vec<u8>, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    };
    assert_eq!(matching_prefix(&writes, 0, &state(&[])), Some(0));
    assert_eq!(
        matching_prefix(&writes, 0, &state(&[("a", "1"), ("b", "2")])),
        Some(2)
    );
    assert_eq!(matching_prefix(&writes, 3, &state(&[("b", "2")])), Some(3));
    assert_eq!(matching_prefix(&writes, 4, &state(&[("b", "2")])), None);
    assert_eq!(matching_prefix(&writes, 0, &state(&[("b", "3")])), Some(4));
    assert_eq!(
        matching_prefix(&writes, 0, &state(&[("a", "1"), ("b", "3")])),
        None
    );
}

/// The flush hook syncs the value log from the LSM's background thread while writers, holding
/// the store's write mutex, stall until that flush is done: it must not need the write mutex.
#[test]
fn writers_stalled_on_background_flushes_do_not_deadlock_with_the_flush_hook() {
    let mut opts = StoreOptions {
        sync: false,
        ..small(learned())
    };
    opts.lsm.background_compaction = true;
    opts.lsm.l0_compaction_trigger = 2;
    opts.lsm.l0_stop_writes = 3;
    let mem = lidb_storage::mem::MemStorage::new();
    let store = std::sync::Arc::new(support::open_on(mem, &opts).unwrap());
    let (done, finished) = std::sync::mpsc::channel();
    for t in 0..2u32 {
        let (store, done) = (std::sync::Arc::clone(&store), done.clone());
        std::thread::spawn(move || {
            for i in 0..15_000u32 {
                store
                    .put(format!("t{t}-{i:06}").as_bytes(), b"value")
                    .unwrap();
            }
            done.send(()).unwrap();
        });
    }
    for _ in 0..2 {
        finished
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("writers deadlocked (or are far too slow)");
    }
    assert_eq!(store.get(b"t1-014999").unwrap(), Some(b"value".to_vec()));
}
