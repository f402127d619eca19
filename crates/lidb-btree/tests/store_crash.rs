//! Crash tests: a power cut at every storage operation of a workload with `sync` (writes,
//! checkpoints, log switches, a clean close and the reopen after it); after the reboot every
//! acknowledged write is there, nothing never written appears, and recovery never fails. Then
//! concurrent writers with `sync`: they share syncs (group commit) and a cut loses none of
//! their acknowledged writes.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{SlowSync, open, synced};
use lidb_btree::testing::MemTarget;
use lidb_btree::{BTreeStore, WalOptions};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::powercut::PowerCut;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write of the workload: a put (`Some`) or a delete (`None`).
type Write = (Vec<u8>, Option<Vec<u8>>);

fn apply(model: &mut Model, (key, value): &Write) {
    match value {
        Some(v) => model.insert(key.clone(), v.clone()),
        None => model.remove(key),
    };
}

/// A step of the workload: a write, a checkpoint, or a clean close followed by a reopen.
enum Step {
    Write(Write),
    Checkpoint,
    Reopen,
}

fn workload(seed: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..60u64 {
        let key = format!("k{:02}", next() % 12).into_bytes();
        let write = if next() % 4 == 0 {
            (key, None)
        } else {
            (key, Some(format!("v{i}").into_bytes()))
        };
        steps.push(Step::Write(write));
        match i {
            19 | 44 => steps.push(Step::Checkpoint),
            31 => steps.push(Step::Reopen),
            _ => {}
        }
    }
    steps
}

/// Runs the workload until the first error; returns the model of acknowledged writes, the
/// write that failed (it may or may not have reached the log), and whether all ran.
fn run(
    storage: Arc<dyn Storage>,
    opts: &WalOptions,
    steps: &[Step],
) -> (Model, Option<Write>, bool) {
    let mut acked = Model::new();
    let Ok(mut store) = open(Arc::clone(&storage), opts.clone()) else {
        return (acked, None, false);
    };
    for step in steps {
        match step {
            Step::Write(w) => {
                let r = match &w.1 {
                    Some(v) => store.put(&w.0, v),
                    None => store.delete(&w.0).map(|_| ()),
                };
                if r.is_err() {
                    return (acked, Some(w.clone()), false);
                }
                apply(&mut acked, w);
            }
            Step::Checkpoint => {
                if store.checkpoint().is_err() {
                    return (acked, None, false);
                }
            }
            Step::Reopen => {
                if store.close().is_err() {
                    return (acked, None, false);
                }
                match open(Arc::clone(&storage), opts.clone()) {
                    Ok(s) => store = s,
                    Err(_) => return (acked, None, false),
                }
            }
        }
    }
    (acked, None, true)
}

fn contents(store: &BTreeStore<MemTarget>) -> Model {
    store
        .scan(&[], None, usize::MAX)
        .unwrap()
        .into_iter()
        .collect()
}

/// Cuts the power at every operation of the workload under `opts`, for `seeds` (which also
/// decide how unsynced bytes tear).
fn crash_at_every_operation(opts: &WalOptions, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let steps = workload(seed);
        let mut cut_at = 1;
        loop {
            let mem = MemStorage::new();
            let power = PowerCut::new(mem.clone(), cut_at, seed.wrapping_add(cut_at));
            let (acked, failed, finished) = run(Arc::new(power.clone()), opts, &steps);
            if finished && !power.is_cut() {
                assert!(cut_at > 100, "the workload ran only {cut_at} operations");
                break;
            }
            let store = open(Arc::new(mem.clone()), opts.clone()).unwrap_or_else(|e| {
                panic!("seed {seed} cut at {cut_at}: recovery failed after a pure crash: {e}")
            });
            let got = contents(&store);
            let mut with_failed = acked.clone();
            if let Some(w) = &failed {
                apply(&mut with_failed, w);
            }
            assert!(
                got == acked || got == with_failed,
                "seed {seed} cut at {cut_at}: recovered {got:?}, acknowledged {acked:?}, \
                 failed write {failed:?}; {}",
                store.recovery_report()
            );
            // The recovered store goes on: a write and a reopen keep it.
            store.put(b"after", b"crash").unwrap();
            drop(store);
            let store = open(Arc::new(mem.clone()), opts.clone()).unwrap();
            assert_eq!(store.get(b"after").unwrap(), Some(b"crash".to_vec()));
            cut_at += 1;
        }
    }
}

#[test]
fn a_power_cut_at_any_operation_loses_no_acknowledged_write() {
    crash_at_every_operation(&synced(), 0..3);
}

#[test]
fn a_power_cut_during_automatic_checkpoints_loses_no_acknowledged_write() {
    let opts = WalOptions {
        checkpoint_log_bytes: 300,
        ..synced()
    };
    crash_at_every_operation(&opts, 10..12);
}

#[test]
fn concurrent_writers_share_syncs() {
    let syncs = Arc::new(AtomicU64::new(0));
    let storage = Arc::new(SlowSync {
        inner: Arc::new(MemStorage::new()),
        syncs: Arc::clone(&syncs),
        sync_delay: Duration::from_millis(2),
    });
    let store = open(storage, synced()).unwrap();
    let before = syncs.load(Ordering::SeqCst);
    let (threads, per_thread) = (8u64, 50u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = &store;
            s.spawn(move || {
                for i in 0..per_thread {
                    store.put(format!("t{t}-{i}").as_bytes(), b"v").unwrap();
                }
            });
        }
    });
    let synced_writes = syncs.load(Ordering::SeqCst) - before;
    let writes = threads * per_thread;
    assert!(
        synced_writes * 2 < writes,
        "{writes} writes took {synced_writes} syncs: no group commit"
    );
    assert_eq!(
        store.scan(&[], None, usize::MAX).unwrap().len() as u64,
        writes
    );
}

#[test]
fn concurrent_writers_lose_no_acknowledged_write_at_a_power_cut() {
    let opts = WalOptions {
        checkpoint_log_bytes: 2000,
        ..synced()
    };
    for cut_at in [3, 20, 75, 150, 333, 600, 1000] {
        let mem = MemStorage::new();
        let power = PowerCut::new(mem.clone(), cut_at, cut_at);
        let acked = Mutex::new(Vec::new());
        let Ok(store) = open(Arc::new(power.clone()), opts.clone()) else {
            // Cut during the open: nothing was acknowledged, and recovery must still work.
            open(Arc::new(mem.clone()), opts.clone()).unwrap();
            continue;
        };
        std::thread::scope(|s| {
            for t in 0..4 {
                let (store, acked) = (&store, &acked);
                s.spawn(move || {
                    for i in 0..200 {
                        let key = format!("t{t}-{i:03}").into_bytes();
                        if store.put(&key, &key).is_err() {
                            return;
                        }
                        acked.lock().unwrap().push(key);
                    }
                });
            }
        });
        drop(store);
        let store = open(Arc::new(mem.clone()), opts.clone()).unwrap();
        let got = contents(&store);
        let acked = acked.into_inner().unwrap();
        for key in &acked {
            assert_eq!(
                got.get(key),
                Some(key),
                "cut at {cut_at}: an acknowledged write is lost"
            );
        }
        for (k, v) in &got {
            assert_eq!(k, v, "cut at {cut_at}: a value never written");
        }
        // Each thread's writes are acknowledged in order, and the log keeps a prefix of the
        // LSN order: at most one unacknowledged write per thread may have survived.
        assert!(got.len() <= acked.len() + 4, "cut at {cut_at}");
    }
}

/// A target whose apply of the key `slow` takes a while, so a checkpoint can start between a
/// write's LSN and its apply.
struct SlowApply(MemTarget);

impl lidb_btree::CheckpointTarget for SlowApply {
    fn apply_put(&self, key: &[u8], value: &[u8]) -> lidb_btree::Result<()> {
        if key == b"slow" {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.0.apply_put(key, value)
    }
    fn apply_delete(&self, key: &[u8]) -> lidb_btree::Result<bool> {
        self.0.apply_delete(key)
    }
    fn get(&self, key: &[u8]) -> lidb_btree::Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> lidb_btree::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.scan(start, end, limit)
    }
    fn checkpoint(&self, lsn: u64, extra: &[u8]) -> lidb_btree::Result<()> {
        self.0.checkpoint(lsn, extra)
    }
    fn checkpoint_info(&self) -> lidb_btree::CheckpointInfo {
        self.0.checkpoint_info()
    }
}

/// Invariant 2 of `store/checkpoint.rs`: a checkpoint that switched logs at P must wait for
/// every write below P to be applied before the tree checkpoints, or the old log goes while
/// the write is in neither the checkpoint nor a log. Fails if the stripe sweep is removed.
#[test]
fn a_checkpoint_waits_for_writes_logged_before_its_switch() {
    let mem = MemStorage::new();
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let snap = common::dir().join("tree.snap");
    let target = SlowApply(MemTarget::open(Arc::clone(&storage), &snap).unwrap());
    let store = BTreeStore::open(Arc::clone(&storage), common::dir(), target, synced()).unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| store.put(b"slow", b"value"));
        std::thread::sleep(Duration::from_millis(30));
        store.checkpoint().unwrap();
        writer.join().unwrap().unwrap();
    });
    drop(store);
    mem.crash(1);
    let store = open(Arc::new(mem.clone()), synced()).unwrap();
    assert_eq!(store.get(b"slow").unwrap(), Some(b"value".to_vec()));
}

/// Without `sync`, a crash keeps the writes of a prefix of the log, at least through the last
/// `flush` that returned.
#[test]
fn without_sync_a_crash_keeps_a_prefix_through_the_last_flush() {
    let opts = WalOptions {
        sync: false,
        ..synced()
    };
    for seed in 0..20u64 {
        let mem = MemStorage::new();
        let store = open(Arc::new(mem.clone()), opts.clone()).unwrap();
        let mut history = vec![Model::new()];
        let mut flushed = 0;
        for (i, step) in workload(seed).iter().enumerate() {
            let Step::Write(w) = step else { continue };
            match &w.1 {
                Some(v) => store.put(&w.0, v).unwrap(),
                None => {
                    store.delete(&w.0).unwrap();
                }
            }
            let mut next = history.last().cloned().unwrap_or_default();
            apply(&mut next, w);
            history.push(next);
            if i == 25 {
                store.flush().unwrap();
                flushed = history.len() - 1;
            }
        }
        mem.crash(seed);
        drop(store);
        let store = open(Arc::new(mem.clone()), opts.clone()).unwrap();
        let got = contents(&store);
        let at = history.iter().rposition(|h| *h == got);
        assert!(
            at.is_some_and(|j| j >= flushed),
            "seed {seed}: recovered {got:?} is no prefix at or after the flush (found {at:?})"
        );
    }
}

/// A failed sync stops the log: the write is not acknowledged, later writes are refused, and
/// reads go on.
#[test]
fn a_failed_sync_stops_writes_but_not_reads() {
    use lidb_storage::mem::Fault;
    let mem = MemStorage::new();
    let store = open(Arc::new(mem.clone()), synced()).unwrap();
    store.put(b"a", b"1").unwrap();
    mem.fail_after(0, Fault::SyncError);
    assert!(store.put(b"b", b"2").is_err());
    let err = store.put(b"c", b"3").unwrap_err();
    assert!(matches!(err, lidb_btree::Error::Closed(_)), "{err:?}");
    assert!(store.checkpoint().is_err());
    assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
    drop(store);
    mem.crash(3);
    let store = open(Arc::new(mem.clone()), synced()).unwrap();
    assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.get(b"c").unwrap(), None);
}
