//! FineStore under power cuts (lidb-lsm's `PowerCut` storage) at operations spread over a
//! workload of puts, deletes and checkpoints: with `sync` every acknowledged write survives;
//! without, the reopened store equals the state after some prefix of the writes, at least the
//! last flushed one. After each cut, a second cut lands inside the recovery that follows.
//! Writers also run during (fuzzy) checkpoints, explicit or automatic: every acknowledged write
//! keeps its last value.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_fine::{FineStore, FineStoreOptions};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::powercut::PowerCut;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn open_on(storage: impl Storage + 'static, sync: bool) -> lidb_storage::Result<FineStore> {
    open_checkpointing(
        storage,
        sync,
        FineStoreOptions::default().checkpoint_log_bytes,
    )
}

/// A store that checkpoints by itself once its log holds `checkpoint_log_bytes`.
fn open_checkpointing(
    storage: impl Storage + 'static,
    sync: bool,
    checkpoint_log_bytes: u64,
) -> lidb_storage::Result<FineStore> {
    let opts = FineStoreOptions {
        sync,
        checkpoint_log_bytes,
        ..FineStoreOptions::default()
    };
    FineStore::open_with_storage(Arc::new(storage), Path::new("/fine"), opts)
}

/// One write of the workload: key, value (`None`: delete).
type Op = (Vec<u8>, Option<Vec<u8>>);

fn ops(seed: u64) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..120)
        .map(|i| {
            let k = if rng.gen_bool(0.5) {
                format!("collide!{}", rng.gen_range(0..20))
            } else {
                format!("key{:03}", rng.gen_range(0..60))
            };
            let v = rng
                .gen_bool(0.8)
                .then(|| vec![i as u8; rng.gen_range(0..40)]);
            (k.into_bytes(), v)
        })
        .collect()
}

/// What the interrupted workload saw: writes acknowledged, and how many were made durable by
/// a flush or checkpoint that returned.
#[derive(Default)]
struct Seen {
    acked: usize,
    flushed: usize,
}

fn apply(map: &mut Map, (k, v): &Op) {
    match v {
        Some(v) => map.insert(k.clone(), v.clone()),
        None => map.remove(k),
    };
}

fn run(store: &FineStore, ops: &[Op], seen: &mut Seen) -> lidb_storage::Result<()> {
    for (i, (k, v)) in ops.iter().enumerate() {
        match v {
            Some(v) => store.put(k, v)?,
            None => store.delete(k).map(|_| ())?,
        }
        seen.acked = i + 1;
        if i % 40 == 39 {
            store.checkpoint()?;
            seen.flushed = i + 1;
        } else if i % 25 == 24 {
            store.flush()?;
            seen.flushed = i + 1;
        }
    }
    Ok(())
}

/// The store's entries, without the one write a recovery that was not cut may have added.
fn contents(store: &FineStore) -> Map {
    let mut map: Map = store.scan(&[], None, usize::MAX).into_iter().collect();
    map.remove(b"after-the-cut".as_slice());
    map
}

/// Runs the workload with the power cut at about `cuts` operations spread over it, reopens,
/// and hands the recovered contents and what was seen to `check`.
fn each_power_cut(sync: bool, cuts: u64, check: impl Fn(&Map, &[Op], &Seen, &str)) {
    let workload = ops(sync as u64);
    let total = {
        let p = PowerCut::new(MemStorage::new(), u64::MAX, 0);
        let store = open_on(p.clone(), sync).unwrap();
        run(&store, &workload, &mut Seen::default()).unwrap();
        drop(store);
        p.ops()
    };
    for (i, cut_at) in (1..=total)
        .step_by((total / cuts).max(1) as usize)
        .enumerate()
    {
        let seed = i as u64;
        let mem = MemStorage::new();
        let p = PowerCut::new(mem.clone(), cut_at, seed);
        let mut seen = Seen::default();
        if let Ok(store) = open_on(p.clone(), sync) {
            let _ = run(&store, &workload, &mut seen);
            drop(store);
        }
        if !p.is_cut() {
            mem.crash(seed);
        }
        // A second cut inside the recovery that follows (reading, cutting a torn tail, sweeping
        // leftovers, the first writes): the recovery after it must find the same guarantees.
        let again_at = 1 + i as u64 % 12;
        let p = PowerCut::new(mem.clone(), again_at, seed + 1000);
        if let Ok(store) = open_on(p.clone(), sync) {
            let _ = store.put(b"after-the-cut", b"x");
            drop(store);
        }
        if !p.is_cut() {
            mem.crash(seed + 1000);
        }
        let ctx = format!(
            "sync {sync}: power cut at operation {cut_at} of {total} (seed {seed}), then at \
             operation {again_at} of the recovery"
        );
        let store = open_on(mem, sync).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        check(&contents(&store), &workload, &seen, &ctx);
    }
}

/// The index of the prefix of `ops` whose state is `got`, searched from `from`.
fn matching_prefix(got: &Map, ops: &[Op], from: usize) -> Option<usize> {
    let mut map = Map::new();
    for op in &ops[..from] {
        apply(&mut map, op);
    }
    (from..=ops.len()).find(|&n| {
        if n > from {
            apply(&mut map, &ops[n - 1]);
        }
        &map == got
    })
}

#[test]
fn with_sync_every_acknowledged_write_survives() {
    each_power_cut(true, 150, |got, ops, seen, ctx| {
        // The write in flight at the cut may or may not have landed.
        let n = matching_prefix(got, ops, seen.acked);
        assert!(
            n.is_some_and(|n| n <= seen.acked + 1),
            "{ctx}: recovered state is not the state after {} or {} writes",
            seen.acked,
            seen.acked + 1
        );
    });
}

#[test]
fn without_sync_a_prefix_survives() {
    each_power_cut(false, 150, |got, ops, seen, ctx| {
        let n = matching_prefix(got, ops, seen.flushed);
        assert!(
            n.is_some_and(|n| n <= seen.acked + 1),
            "{ctx}: recovered state is no prefix of at least {} of the {} acknowledged writes",
            seen.flushed,
            seen.acked
        );
    });
}

/// Three writers with `sync` share the logger thread (their records are batched together) while
/// the power goes: every value a writer had acknowledged is found, or a later one of the same key.
#[test]
fn concurrent_sync_writers_keep_every_acknowledged_write() {
    const THREADS: u32 = 3;
    const WRITES: u32 = 120;
    let run = |store: &FineStore, acked: &Acked| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || write_keys(store, acked, t, WRITES, 20));
            }
        });
    };
    cut_while_writing(&run, FineStoreOptions::default().checkpoint_log_bytes);
}

/// Three `sync` writers run while a fourth thread takes checkpoints (at most `CHECKPOINTS`, so the
/// run is bounded): checkpoints are fuzzy, the writers go on during them, and the power goes at
/// operations spread over the whole run (inside switches, snapshots, state switches and
/// removals). Every value a writer had acknowledged is found, or a later one of the same key.
/// Without the power cut, every key holds exactly its last write.
#[test]
fn writers_during_checkpoints_keep_every_acknowledged_write() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};
    const THREADS: u32 = 3;
    const WRITES: u32 = 150;
    const CHECKPOINTS: u32 = 8;
    let run = |store: &FineStore, acked: &Acked| {
        let writers_done = AtomicU32::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let writers_done = &writers_done;
                s.spawn(move || {
                    write_keys(store, acked, t, WRITES, 25);
                    writers_done.fetch_add(1, Ordering::SeqCst);
                });
            }
            s.spawn(|| {
                for _ in 0..CHECKPOINTS {
                    if writers_done.load(Ordering::SeqCst) == THREADS || store.checkpoint().is_err()
                    {
                        return;
                    }
                    std::thread::yield_now();
                }
            });
        });
    };
    // The whole run without a cut: exactly the last writes, also after a reopen.
    let mem = MemStorage::new();
    let acked = Mutex::default();
    let store = open_on(mem.clone(), true).unwrap();
    run(&store, &acked);
    drop(store);
    let acked = acked.into_inner().unwrap();
    assert_eq!(acked.len() as u32, THREADS * 25);
    let store = open_on(mem, true).unwrap();
    for (k, want) in &acked {
        assert_eq!(store.get(k), Some(want.to_le_bytes().to_vec()));
    }
    drop(store);

    cut_while_writing(&run, FineStoreOptions::default().checkpoint_log_bytes);
}

/// What sync writers acknowledged: each key's last acknowledged value.
type Acked = std::sync::Mutex<BTreeMap<Vec<u8>, u32>>;

/// Writer `t`'s load: `writes` puts of the values 0.. to its `hot` keys in turn (sharing their
/// first 8 bytes with every other writer's keys, so images collide), recording each acknowledged
/// one; stops at the first failed put (the power is gone). Writer 0 writes batches of three
/// through `put_many`, recorded once the call returns.
fn write_keys(store: &FineStore, acked: &Acked, t: u32, writes: u32, hot: u32) {
    let key = |i: u32| format!("collide!{t}-{:02}", i % hot).into_bytes();
    let batch = if t == 0 { 3 } else { 1 };
    for first in (0..writes).step_by(batch) {
        let writes: Vec<(Vec<u8>, [u8; 4])> = (first..(first + batch as u32).min(writes))
            .map(|i| (key(i), i.to_le_bytes()))
            .collect();
        let entries: Vec<(&[u8], &[u8])> = writes
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let written = match entries.as_slice() {
            [(k, v)] => store.put(k, v),
            _ => store.put_many(&entries),
        };
        if written.is_err() {
            return;
        }
        let mut acked = acked.lock().unwrap();
        for (i, (k, _)) in (first..).zip(&writes) {
            acked.insert(k.clone(), i);
        }
    }
}

/// Runs `run` (sync writers that record what they acknowledged) on a store that checkpoints by
/// itself every `checkpoint_log_bytes`, once to count its storage operations, then again with the
/// power cut at 40 points spread over them, reopens, and checks that every acknowledged value is
/// there, or a later one of the same key.
fn cut_while_writing(run: &dyn Fn(&FineStore, &Acked), checkpoint_log_bytes: u64) {
    let open = |storage| open_checkpointing(storage, true, checkpoint_log_bytes);
    let total = {
        let p = PowerCut::new(MemStorage::new(), u64::MAX, 0);
        let store = open(p.clone()).unwrap();
        run(&store, &Acked::default());
        drop(store);
        p.ops()
    };
    for (i, cut_at) in (1..=total)
        .step_by((total / 40).max(1) as usize)
        .enumerate()
    {
        let mem = MemStorage::new();
        let p = PowerCut::new(mem.clone(), cut_at, i as u64);
        let acked = Acked::default();
        if let Ok(store) = open(p.clone()) {
            run(&store, &acked);
            drop(store);
        }
        if !p.is_cut() {
            mem.crash(i as u64);
        }
        let store = open_checkpointing(mem, true, checkpoint_log_bytes)
            .unwrap_or_else(|e| panic!("cut at {cut_at} of ~{total}: reopen: {e}"));
        for (k, want) in acked.into_inner().unwrap() {
            let got = store
                .get(&k)
                .map(|v| u32::from_le_bytes(v.try_into().unwrap()));
            assert!(
                got.is_some_and(|g| g >= want),
                "cut at {cut_at} of ~{total}: {} holds {got:?}, acknowledged {want}",
                String::from_utf8_lossy(&k)
            );
        }
    }
}

/// Three `sync` writers with automatic checkpoints every 2 KiB of log (about 8 over the run, in
/// the checkpointer thread, while they write), and the power goes at operations spread over the
/// whole run: every value a writer had acknowledged is found, or a later one of the same key.
/// Without the power cut the store did checkpoint by itself (at the latest in `close`, which lets
/// a due checkpoint finish), and every key holds its last write.
#[test]
fn writers_during_automatic_checkpoints_keep_every_acknowledged_write() {
    use std::sync::Mutex;
    const THREADS: u32 = 3;
    const WRITES: u32 = 150;
    const THRESHOLD: u64 = 2 << 10;
    let run = |store: &FineStore, acked: &Acked| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || write_keys(store, acked, t, WRITES, 25));
            }
        });
    };
    let open = |mem: MemStorage| open_checkpointing(mem, true, THRESHOLD);
    // The whole run without a cut: checkpoints happened, exactly the last writes after a reopen.
    let mem = MemStorage::new();
    let acked = Mutex::default();
    let store = open(mem.clone()).unwrap();
    run(&store, &acked);
    store.close().unwrap();
    let checkpoint_id = |mem: &MemStorage| {
        mem.list(Path::new("/fine"))
            .unwrap()
            .iter()
            .filter_map(|n| n.strip_prefix("checkpoint-")?.parse::<u64>().ok())
            .max()
    };
    let done = checkpoint_id(&mem);
    assert!(done.is_some(), "no checkpoint made");
    let store = open(mem).unwrap();
    for (k, want) in acked.into_inner().unwrap() {
        assert_eq!(store.get(&k), Some(want.to_le_bytes().to_vec()));
    }
    drop(store);

    cut_while_writing(&run, THRESHOLD);
}
