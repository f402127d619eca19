//! Group commit (store/write.rs): many threads of synced writes share the value log's and the
//! WAL's syncs. Each thread owns its keys, so what a key may hold is known exactly: every write
//! a thread saw acknowledged is readable by it at once (a write is visible only once durable,
//! and a thread's later write of a key wins over its earlier one); after a reopen each key holds
//! its last acknowledged value, or a write attempted after it that failed. With `sync-fail`
//! injected, the first failed group stops every later write, across threads.

mod support;

use std::path::Path;
use std::sync::Arc;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::fault::{FaultSpec, FaultStorage};
use lidb_storage::mem::MemStorage;
use support::{learned, small};

const DIR: &str = "/kv";
const THREADS: u32 = 8;
const KEYS_PER_THREAD: u32 = 40;
const WRITES_PER_THREAD: u32 = 300;

fn key(thread: u32, i: u32) -> Vec<u8> {
    format!("t{thread:02}k{i:04}").into_bytes()
}

fn value(thread: u32, i: u32, n: u32) -> Vec<u8> {
    format!("t{thread} k{i} write {n} {}", "v".repeat(40)).into_bytes()
}

/// What one key may hold after a reopen: the last acknowledged state, then every state a
/// failed write tried after it (None: absent or deleted).
#[derive(Debug, Clone, Default)]
struct KeyLog {
    acknowledged: Option<Vec<u8>>,
    failed_after: Vec<Option<Vec<u8>>>,
}

/// One thread's writes: puts, overwrites and deletes of its own keys, each acknowledged write
/// read back at once. After its first failed write it tries three more, which must fail too.
fn writer(store: &Store, thread: u32) -> Vec<KeyLog> {
    let mut logs = vec![KeyLog::default(); KEYS_PER_THREAD as usize];
    let mut failures = 0;
    for n in 0..WRITES_PER_THREAD {
        let i = (n * 7 + thread) % KEYS_PER_THREAD;
        let k = key(thread, i);
        let delete = n % 5 == 4;
        let v = value(thread, i, n);
        let result = if delete {
            store.delete(&k)
        } else {
            store.put(&k, &v)
        };
        let state = (!delete).then(|| v.clone());
        let Some(log) = logs.get_mut(i as usize) else {
            unreachable!("i < KEYS_PER_THREAD")
        };
        match result {
            Ok(()) => {
                assert!(
                    failures == 0,
                    "thread {thread}: a write was acknowledged after one of its own failed"
                );
                log.acknowledged = state.clone();
                log.failed_after.clear();
                let got = store.get(&k).unwrap_or_else(|e| panic!("get {k:?}: {e}"));
                assert_eq!(
                    got, state,
                    "thread {thread}: an acknowledged write of {k:?}"
                );
            }
            Err(_) => {
                failures += 1;
                log.failed_after.push(state);
                if failures == 4 {
                    break;
                }
            }
        }
    }
    logs
}

fn run_threads(store: &Arc<Store>) -> Vec<Vec<KeyLog>> {
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let s = Arc::clone(store);
            std::thread::spawn(move || writer(&s, t))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| panic!("a writer panicked")))
        .collect()
}

fn check_after_reopen(store: &Store, logs: &[Vec<KeyLog>], ctx: &str) {
    for (t, thread_logs) in logs.iter().enumerate() {
        for (i, log) in thread_logs.iter().enumerate() {
            let k = key(t as u32, i as u32);
            let got = store
                .get(&k)
                .unwrap_or_else(|e| panic!("{ctx}: get {k:?}: {e}"));
            assert!(
                got == log.acknowledged || log.failed_after.contains(&got),
                "{ctx}: {k:?} holds {got:?}, expected {:?} or one of the failed {:?}",
                log.acknowledged,
                log.failed_after
            );
        }
    }
}

fn opts(tier: TierKind) -> StoreOptions {
    StoreOptions {
        sync: true,
        ..small(tier)
    }
}

#[test]
fn concurrent_synced_writers_are_durable_and_read_their_writes() {
    for tier in [learned(), TierKind::Lsm] {
        let mem = MemStorage::new();
        let o = opts(tier);
        let store = Arc::new(
            Store::open_with_storage(Arc::new(mem.clone()), Path::new(DIR), o.clone())
                .unwrap_or_else(|e| panic!("open: {e}")),
        );
        let logs = run_threads(&store);
        for thread_logs in &logs {
            assert!(
                thread_logs.iter().all(|l| l.failed_after.is_empty()),
                "no write may fail without faults"
            );
        }
        check_after_reopen(&store, &logs, "before the reopen");
        drop(store);
        let store = Store::open_with_storage(Arc::new(mem.clone()), Path::new(DIR), o.clone())
            .unwrap_or_else(|e| panic!("reopen: {e}"));
        check_after_reopen(&store, &logs, "after the reopen");
    }
}

#[test]
fn a_failed_group_sync_stops_every_thread_and_loses_no_acknowledged_write() {
    let mut stopped_runs = 0;
    for seed in 0..6u64 {
        let mem = MemStorage::new();
        let spec = FaultSpec::parse("sync-fail=0.01").unwrap_or_else(|e| panic!("spec: {e}"));
        let fault = FaultStorage::new(Arc::new(mem.clone()), spec, seed);
        fault.set_enabled(false);
        let o = opts(learned());
        let store = Arc::new(
            Store::open_with_storage(Arc::new(fault.clone()), Path::new(DIR), o.clone())
                .unwrap_or_else(|e| panic!("open: {e}")),
        );
        fault.set_enabled(true);
        let logs = run_threads(&store);
        fault.set_enabled(false);
        let failed_syncs = fault.counts().sync_errors;
        if failed_syncs > 0 {
            stopped_runs += 1;
            // Writes stay refused until reopen, whichever thread's group failed.
            assert!(
                store.put(b"after", b"the failure").is_err(),
                "seed {seed}: a write was taken after a failed sync"
            );
        }
        drop(store);
        let store = Store::open_with_storage(Arc::new(mem.clone()), Path::new(DIR), o.clone())
            .unwrap_or_else(|e| panic!("reopen on clean storage: {e}"));
        check_after_reopen(&store, &logs, &format!("seed {seed}"));
        store
            .put(b"after", b"reopen")
            .unwrap_or_else(|e| panic!("a reopen takes writes again: {e}"));
    }
    assert!(
        stopped_runs > 0,
        "no seed failed a sync: the test checked nothing"
    );
}

#[test]
fn put_many_is_one_atomic_write_and_a_later_entry_wins() {
    let mem = MemStorage::new();
    let o = opts(learned());
    let store = Store::open_with_storage(Arc::new(mem.clone()), Path::new(DIR), o.clone())
        .unwrap_or_else(|e| panic!("open: {e}"));
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..50u32)
        .map(|i| (key(0, i % 20), value(0, i % 20, i)))
        .collect();
    let borrowed: Vec<(&[u8], &[u8])> = entries
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    store
        .put_many(&borrowed)
        .unwrap_or_else(|e| panic!("put_many: {e}"));
    store
        .put_many(&[])
        .unwrap_or_else(|e| panic!("an empty batch is a no-op: {e}"));
    drop(store);
    let store = Store::open_with_storage(Arc::new(mem.clone()), Path::new(DIR), o)
        .unwrap_or_else(|e| panic!("reopen: {e}"));
    for i in 0..20u32 {
        // Entries i, i + 20, i + 40 (when below 50) wrote key i; the last one wins.
        let last = (0..50u32)
            .filter(|n| n % 20 == i)
            .max()
            .unwrap_or_else(|| panic!("key {i} has an entry"));
        assert_eq!(
            store.get(&key(0, i)).unwrap_or_else(|e| panic!("get: {e}")),
            Some(value(0, i, last)),
            "key {i}"
        );
    }
}
