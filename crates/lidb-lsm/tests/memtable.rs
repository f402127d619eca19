//! The memtable against a BTreeMap model: random puts, overwrites and deletes; gets; snapshot
//! iterators created mid-stream, including while another thread keeps inserting.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lidb_lsm::memtable::{ENTRY_OVERHEAD_BYTES, MemTable};
use lidb_lsm::{EntryKind, SortedIter};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One write: seq is its index + 1.
#[derive(Debug, Clone)]
struct Op {
    kind: EntryKind,
    key: Vec<u8>,
    value: Vec<u8>,
}

fn random_ops(seed: u64, n: usize, key_space: u32) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let k = rng.gen_range(0..key_space);
            // Varying key lengths exercise prefix ordering ("k1" < "k10" < "k2").
            let key = format!("k{k}").into_bytes();
            if rng.gen_bool(0.2) {
                Op {
                    kind: EntryKind::Delete,
                    key,
                    value: Vec::new(),
                }
            } else {
                let len = rng.gen_range(0..40);
                let value = (0..len).map(|_| rng.r#gen::<u8>()).collect();
                Op {
                    kind: EntryKind::Put,
                    key,
                    value,
                }
            }
        })
        .collect()
}

/// The newest version <= snapshot of each key, as (kind, seq, value).
type Model = BTreeMap<Vec<u8>, (EntryKind, u64, Vec<u8>)>;

fn model_at(ops: &[Op], snapshot: u64) -> Model {
    let mut model = Model::new();
    for (i, op) in ops.iter().enumerate().take(snapshot as usize) {
        model.insert(op.key.clone(), (op.kind, i as u64 + 1, op.value.clone()));
    }
    model
}

fn collect(table: &Arc<MemTable>, snapshot: u64) -> Model {
    let mut it = table.iter(snapshot);
    assert!(!it.valid(), "an iterator starts unpositioned");
    it.seek_to_first().unwrap();
    let mut out = Model::new();
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        if let Some(last) = &last {
            assert!(it.key() > last.as_slice(), "keys must strictly increase");
        }
        last = Some(it.key().to_vec());
        out.insert(
            it.key().to_vec(),
            (it.kind(), it.seq(), it.value().to_vec()),
        );
        it.next().unwrap();
    }
    out
}

#[test]
fn gets_and_snapshots_match_the_model() {
    for seed in 0..4u64 {
        let ops = random_ops(seed, 3000, 700);
        let table = Arc::new(MemTable::new());
        let mut bytes = 0u64;
        for (i, op) in ops.iter().enumerate() {
            let seq = i as u64 + 1;
            table.insert(seq, op.kind, &op.key, &op.value);
            bytes += (op.key.len() + op.value.len()) as u64 + ENTRY_OVERHEAD_BYTES;
            if seq.is_multiple_of(500) {
                let model = model_at(&ops, seq);
                for k in 0..700u32 {
                    let key = format!("k{k}").into_bytes();
                    assert_eq!(
                        table.get(&key),
                        model.get(&key).cloned(),
                        "seed {seed} key k{k}"
                    );
                }
                // Every earlier snapshot still sees exactly its own state.
                for snapshot in [0, seq / 3, seq / 2, seq - 1, seq] {
                    assert_eq!(
                        collect(&table, snapshot),
                        model_at(&ops, snapshot),
                        "seed {seed} snapshot {snapshot} after {seq} inserts"
                    );
                    let key = &ops[(snapshot as usize).saturating_sub(1)].key;
                    assert_eq!(
                        table.get_at(key, snapshot),
                        model_at(&ops, snapshot).get(key).cloned(),
                        "seed {seed} get_at snapshot {snapshot}"
                    );
                }
            }
        }
        assert_eq!(table.len(), ops.len());
        assert_eq!(table.approximate_bytes(), bytes);
        let max_key = ops.iter().map(|o| o.key.len()).max().unwrap() as u32;
        let max_value = ops.iter().map(|o| o.value.len()).max().unwrap() as u32;
        assert_eq!(table.max_key_len(), max_key);
        assert_eq!(table.max_value_len(), max_value);
    }
}

/// The writers of one group insert their batches in any order (db/write.rs), so a key's older
/// version can arrive after a newer one; and a (key, seq) inserted again replaces the first.
#[test]
fn versions_inserted_out_of_order_match_the_model() {
    use rand::seq::SliceRandom;
    for seed in 0..4u64 {
        let ops = random_ops(seed, 3000, 300);
        let mut order: Vec<usize> = (0..ops.len()).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        for group in order.chunks_mut(64) {
            group.shuffle(&mut rng);
        }
        let table = Arc::new(MemTable::new());
        for &i in &order {
            let op = &ops[i];
            table.insert(i as u64 + 1, op.kind, &op.key, &op.value);
        }
        // Every 7th write again, with another value: it replaces the first.
        let mut again = ops.clone();
        for i in (0..ops.len()).step_by(7) {
            again[i].value = format!("again{i}").into_bytes();
            table.insert(i as u64 + 1, again[i].kind, &again[i].key, &again[i].value);
        }
        assert_eq!(
            table.len(),
            ops.len(),
            "seed {seed}: a replaced version counted"
        );
        let end = ops.len() as u64;
        for snapshot in [0, 1, 64, 65, end / 3, end / 2, end - 1, end] {
            let model = model_at(&again, snapshot);
            assert_eq!(
                collect(&table, snapshot),
                model,
                "seed {seed} snapshot {snapshot}"
            );
            for k in 0..300u32 {
                let key = format!("k{k}").into_bytes();
                assert_eq!(
                    table.get_at(&key, snapshot),
                    model.get(&key).cloned(),
                    "seed {seed} key k{k} snapshot {snapshot}"
                );
            }
        }
    }
}

#[test]
fn seek_lands_on_the_first_key_at_or_after_the_target() {
    let seed = 7;
    let ops = random_ops(seed, 2000, 900);
    let table = Arc::new(MemTable::new());
    for (i, op) in ops.iter().enumerate() {
        table.insert(i as u64 + 1, op.kind, &op.key, &op.value);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..300 {
        let snapshot = rng.gen_range(0..=ops.len() as u64);
        let model = model_at(&ops, snapshot);
        let target = format!("k{}", rng.gen_range(0..1000)).into_bytes();
        let mut it = table.iter(snapshot);
        it.seek(&target).unwrap();
        let mut expected = model.range(target.clone()..);
        // Walk a few hundred entries to cross chunk boundaries.
        for _ in 0..300 {
            match expected.next() {
                Some((k, (kind, seq, v))) => {
                    assert!(it.valid(), "seed {seed} snapshot {snapshot}: ended early");
                    assert_eq!(it.key(), k.as_slice());
                    assert_eq!(
                        (it.kind(), it.seq(), it.value()),
                        (*kind, *seq, v.as_slice())
                    );
                    it.next().unwrap();
                }
                None => {
                    assert!(
                        !it.valid(),
                        "seed {seed} snapshot {snapshot}: ran past the end"
                    );
                    break;
                }
            }
        }
    }
    // Empty and past-the-end seeks.
    let mut it = table.iter(u64::MAX);
    it.seek(b"z").unwrap();
    assert!(!it.valid());
    let empty = Arc::new(MemTable::new());
    let mut it = empty.iter(u64::MAX);
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.next().unwrap();
    assert!(!it.valid());
}

#[test]
fn many_versions_of_one_key_stay_hidden_from_old_snapshots() {
    // Thousands of versions above the snapshot exceed a chunk's scan limit.
    let table = Arc::new(MemTable::new());
    table.insert(1, EntryKind::Put, b"a", b"old-a");
    table.insert(2, EntryKind::Put, b"b", b"old-b");
    table.insert(3, EntryKind::Put, b"c", b"old-c");
    for seq in 4..5000u64 {
        let key: &[u8] = if seq.is_multiple_of(2) { b"b" } else { b"bb" };
        table.insert(seq, EntryKind::Put, key, &seq.to_le_bytes());
    }
    let got = collect(&table, 3);
    let keys: Vec<&[u8]> = got.keys().map(|k| k.as_slice()).collect();
    assert_eq!(keys, vec![&b"a"[..], b"b", b"c"]);
    assert_eq!(got[&b"b".to_vec()].2, b"old-b");
}

#[test]
fn snapshot_iterators_are_stable_while_another_thread_inserts() {
    let seed = 11;
    let ops = Arc::new(random_ops(seed, 40_000, 3000));
    let table = Arc::new(MemTable::new());
    let published = Arc::new(AtomicU64::new(0));

    let writer = {
        let (ops, table, published) =
            (Arc::clone(&ops), Arc::clone(&table), Arc::clone(&published));
        std::thread::spawn(move || {
            for (i, op) in ops.iter().enumerate() {
                let seq = i as u64 + 1;
                table.insert(seq, op.kind, &op.key, &op.value);
                published.store(seq, Ordering::Release);
                if seq.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
        })
    };

    let mut checked = 0;
    let mut mid_stream = 0;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    while checked < 25 || (mid_stream == 0 && !writer.is_finished()) {
        let snapshot = published.load(Ordering::Acquire);
        if snapshot < ops.len() as u64 {
            mid_stream += 1;
        }
        let mut it = table.iter(snapshot);
        it.seek_to_first().unwrap();
        let mut seen = Model::new();
        while it.valid() {
            seen.insert(
                it.key().to_vec(),
                (it.kind(), it.seq(), it.value().to_vec()),
            );
            it.next().unwrap();
            if rng.gen_bool(0.01) {
                std::thread::yield_now();
            }
        }
        assert_eq!(
            seen,
            model_at(&ops, snapshot),
            "seed {seed} snapshot {snapshot}"
        );
        checked += 1;
    }
    writer.join().unwrap();
    eprintln!("seed {seed}: {checked} snapshots, {mid_stream} taken while the writer ran");
    assert!(
        mid_stream > 0,
        "seed {seed}: no snapshot was taken while the writer ran"
    );
    assert_eq!(collect(&table, u64::MAX), model_at(&ops, ops.len() as u64));
}
