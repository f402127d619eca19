//! The engine over `FaultStorage` (injected EIO, failed syncs, ENOSPC) on in-memory storage,
//! with sync on: a fault gives an error and no panic, a failed WAL sync stops the database from
//! taking writes, and every write that returned Ok is found after a reopen.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::{Db, Options};
use lidb_storage::Error;
use lidb_storage::fault::{FaultSpec, FaultStorage};
use lidb_storage::mem::MemStorage;
use support::small_options;

const DIR: &str = "/db";

fn opts() -> Options {
    Options {
        sync: true,
        ..small_options(Family::Pgm, 16)
    }
}

fn spec(s: &str) -> FaultSpec {
    FaultSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn open(storage: &FaultStorage) -> Db {
    Db::open_with_storage(Arc::new(storage.clone()), Path::new(DIR), opts())
        .unwrap_or_else(|e| panic!("open: {e}"))
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value {i} {}", "v".repeat(80)).into_bytes()
}

fn is_injected(e: &Error) -> bool {
    e.to_string().contains("injected fault:")
}

/// Every acknowledged put answers its value in `db`.
fn check(db: &Db, acked: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    for (k, v) in acked {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "{ctx}: key {k:?}"),
            Ok(None) => panic!("{ctx}: acknowledged key {k:?} lost"),
            Err(e) => panic!("{ctx}: get {k:?}: {e}"),
        }
    }
}

/// Reopens on a fresh FaultStorage over `mem` with injection off and checks every acked put.
fn reopen_and_check(mem: &MemStorage, acked: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    let clean = FaultStorage::new(Arc::new(mem.clone()), FaultSpec::default(), 0);
    let db = open(&clean);
    check(&db, acked, ctx);
    assert_eq!(clean.counts().total(), 0);
}

#[test]
fn a_failed_sync_stops_writes_and_loses_no_acknowledged_put() {
    let mem = MemStorage::new();
    let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=1"), 7);
    fault.set_enabled(false);
    let db = open(&fault);
    let mut acked = BTreeMap::new();
    for i in 0..50 {
        db.put(&key(i), &value(i))
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
        acked.insert(key(i), value(i));
    }
    fault.set_enabled(true);
    let e = db
        .put(&key(50), &value(50))
        .err()
        .unwrap_or_else(|| panic!("put acknowledged though its sync failed"));
    assert!(is_injected(&e), "{e}");
    // Refused with injection on and off alike: the WAL is not trusted after a failed sync.
    for i in 51..60 {
        assert!(db.put(&key(i), &value(i)).is_err(), "put {i} accepted");
    }
    fault.set_enabled(false);
    for i in 60..70 {
        assert!(
            db.put(&key(i), &value(i)).is_err(),
            "put {i} accepted after a failed sync"
        );
    }
    // Nothing tried the sync again.
    assert_eq!(fault.counts().sync_errors, 1);
    check(&db, &acked, "after the failed sync");
    fault.set_enabled(true);
    drop(db);
    reopen_and_check(&mem, &acked, "reopened");
    // Those puts were synced: a power cut keeps them too.
    mem.crash(11);
    reopen_and_check(&mem, &acked, "reopened after a crash");
}

#[test]
fn a_failed_table_read_is_an_error_and_answers_once_the_disk_is_back() {
    let mem = MemStorage::new();
    let fault = FaultStorage::new(Arc::new(mem.clone()), spec("read-eio=1"), 8);
    fault.set_enabled(false);
    let db = open(&fault);
    for i in 0..200 {
        db.put(&key(i), &value(i))
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
    }
    db.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    fault.set_enabled(true);
    let e = db
        .get(&key(123))
        .err()
        .unwrap_or_else(|| panic!("get answered with every read failing"));
    assert!(is_injected(&e), "{e}");
    assert!(fault.counts().read_errors >= 1);
    fault.set_enabled(false);
    let got = db.get(&key(123)).unwrap_or_else(|e| panic!("get: {e}"));
    assert_eq!(got, Some(value(123)));
}

#[test]
fn enospc_fails_puts_and_after_space_returns_every_acknowledged_put_is_there() {
    let mem = MemStorage::new();
    let fault = FaultStorage::new(Arc::new(mem.clone()), spec("enospc=32KiB"), 9);
    fault.set_enabled(false);
    let db = open(&fault);
    fault.set_enabled(true);
    let mut acked = BTreeMap::new();
    let mut first_failure = None;
    for i in 0..2000 {
        match db.put(&key(i), &value(i)) {
            Ok(()) => {
                assert!(
                    first_failure.is_none(),
                    "put {i} accepted after a failed one"
                );
                acked.insert(key(i), value(i));
            }
            Err(e) => {
                assert!(is_injected(&e), "put {i}: {e}");
                first_failure.get_or_insert(i);
            }
        }
    }
    let first = first_failure.unwrap_or_else(|| panic!("no put failed past the budget"));
    // Each put appends its 93 bytes of key and value and a little framing to the WAL.
    assert!(
        (32 * 1024 / 200..=32 * 1024 / 93).contains(&first),
        "first failure at put {first}"
    );
    // The failed append poisoned the WAL: no later put reached the storage.
    assert_eq!(fault.counts().enospc, 1);
    check(&db, &acked, "after ENOSPC");
    drop(db);
    fault.reset_space();
    let db = open(&fault);
    check(&db, &acked, "reopened after the space came back");
}

/// Rounds of a workload of puts, flushes and compactions with every fault on at low rates, each
/// round ended by a power cut: every acknowledged put survives, a failed put is there whole or
/// not at all, and a get either fails or answers right.
#[test]
fn every_fault_at_low_rates_loses_no_acknowledged_put_across_power_cuts() {
    let mem = MemStorage::new();
    let all = spec("read-eio=0.002,write-eio=0.001,short-write=0.001,sync-fail=0.002");
    let fault = FaultStorage::new(Arc::new(mem.clone()), all, 10);
    let mut acked = BTreeMap::new();
    let mut failed = BTreeMap::new();
    let mut next = 0u32;
    for round in 0..30u32 {
        let ctx = format!("round {round}");
        fault.set_enabled(true);
        let Ok(db) = Db::open_with_storage(Arc::new(fault.clone()), Path::new(DIR), opts()) else {
            mem.crash(u64::from(round));
            continue;
        };
        for step in 0..300u32 {
            let i = next;
            next += 1;
            if step % 97 == 96 {
                let _ = db.flush();
            } else if step % 149 == 148 {
                let _ = db.compact();
            }
            match db.put(&key(i), &value(i)) {
                Ok(()) => {
                    acked.insert(key(i), value(i));
                }
                Err(_) => {
                    failed.insert(key(i), value(i));
                    break;
                }
            }
            let probe = key(i / 2);
            if let Ok(got) = db.get(&probe) {
                let want = acked.get(&probe).or_else(|| failed.get(&probe));
                assert!(
                    got.is_none() || got.as_ref() == want,
                    "{ctx}: get {probe:?}"
                );
            }
        }
        drop(db);
        mem.crash(u64::from(round));
        fault.set_enabled(false);
        let db = open(&fault);
        check(&db, &acked, &ctx);
        for (k, v) in &failed {
            let got = db
                .get(k)
                .unwrap_or_else(|e| panic!("{ctx}: get {k:?}: {e}"));
            assert!(got.is_none() || got.as_ref() == Some(v), "{ctx}: {k:?}");
        }
    }
    let counts = fault.counts();
    assert!(
        counts.total() >= 10,
        "too few faults to mean anything: {counts:?}"
    );
    assert!(acked.len() >= 1000, "{} puts acknowledged", acked.len());
}
