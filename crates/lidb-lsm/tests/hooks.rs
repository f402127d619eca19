//! The hooks an embedding store installs: the WAL replay filter cuts replay at the first batch it
//! rejects (and the recovery report says so), and the flush hook runs before a memtable's table
//! is written, where an error fails the flush without losing anything.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use lidb_index::Family;
use lidb_lsm::batch::WriteBatch;
use lidb_lsm::{CutKind, Db, EntryKind, FlushHook, Options, ReplayFilter};
use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use support::small_options;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

fn open(mem: &MemStorage, opts: Options) -> Db {
    Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts).unwrap()
}

fn tables(mem: &MemStorage) -> usize {
    mem.list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .count()
}

#[test]
fn the_replay_filter_cuts_replay_at_the_first_rejected_batch() {
    let mem = MemStorage::new();
    let opts = Options {
        sync: true,
        ..small_options(Family::Pgm, 16)
    };
    let db = open(&mem, opts.clone());
    for i in 0..10 {
        db.put(&key(i), b"v").unwrap();
    }
    // One batch: the rejected put of k10 takes the deletion of k03 with it.
    let mut b = WriteBatch::new();
    b.put(&key(10), b"v");
    b.delete(&key(3));
    db.write(b).unwrap();
    db.delete(&key(4)).unwrap();
    db.put(&key(11), b"v").unwrap();
    drop(db);

    let seen = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&seen);
    let filtered = Options {
        replay_filter: Some(ReplayFilter::new(move |kind, k, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            if kind == EntryKind::Put && k == key(10).as_slice() {
                Err("k10 is gone".into())
            } else {
                Ok(())
            }
        })),
        ..opts.clone()
    };
    let db = open(&mem, filtered);
    let report = db.recovery_report();
    assert_eq!(report.wal_records_replayed, 10, "{report:?}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        11,
        "consulted up to the rejection"
    );
    let cut = report
        .wal_cuts
        .iter()
        .find(|c| c.kind == CutKind::ReplayFilter && c.detail.contains("k10 is gone"))
        .unwrap_or_else(|| panic!("the cut is not reported: {report:?}"));
    assert!(
        cut.offset > 8,
        "the cut is after the first records: {cut:?}"
    );
    assert_eq!(
        cut.records, 3,
        "the rejected batch and the two after it: {cut:?}"
    );
    for i in 0..10 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"v".to_vec()), "k{i}");
    }
    for i in [10, 11] {
        assert_eq!(db.get(&key(i)).unwrap(), None, "k{i} came after the cut");
    }
    drop(db);

    // The cut is permanent: without the filter the dropped tail does not come back.
    let db = open(&mem, opts);
    assert_eq!(db.get(&key(3)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(&key(4)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(&key(10)).unwrap(), None);
}

#[test]
fn the_flush_hook_runs_before_the_table_is_written() {
    let mem = MemStorage::new();
    let calls = Arc::new(AtomicU64::new(0));
    let tables_seen = Arc::new(AtomicU64::new(u64::MAX));
    let (c, t, m) = (Arc::clone(&calls), Arc::clone(&tables_seen), mem.clone());
    let opts = Options {
        before_flush: Some(FlushHook::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
            t.store(tables(&m) as u64, Ordering::SeqCst);
            Ok(())
        })),
        ..small_options(Family::Pgm, 16)
    };
    let db = open(&mem, opts);
    for i in 0..20 {
        db.put(&key(i), b"v").unwrap();
    }
    let before = tables(&mem);
    db.flush().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(tables_seen.load(Ordering::SeqCst), before as u64);
    assert_eq!(tables(&mem), before + 1);
    // Nothing to flush: no call.
    db.flush().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failing_flush_hook_fails_the_flush_and_keeps_the_data() {
    let mem = MemStorage::new();
    let fail = Arc::new(AtomicBool::new(true));
    let f = Arc::clone(&fail);
    let opts = Options {
        sync: true,
        before_flush: Some(FlushHook::new(move || {
            if f.load(Ordering::SeqCst) {
                Err(Error::Io {
                    file: "/vlog".into(),
                    source: std::io::Error::other("sync failed"),
                })
            } else {
                Ok(())
            }
        })),
        ..small_options(Family::Pgm, 16)
    };
    let db = open(&mem, opts.clone());
    for i in 0..20 {
        db.put(&key(i), b"v").unwrap();
    }
    let before = tables(&mem);
    let err = db.flush().expect_err("the hook failed");
    assert!(err.to_string().contains("sync failed"), "{err}");
    assert_eq!(tables(&mem), before, "no table after a failed hook");
    for i in 0..20 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"v".to_vec()), "k{i}");
    }
    // A crash now: the WAL still holds everything. The hook runs for the table of the entries
    // replayed at open too, so while it fails, so does the open, losing nothing.
    mem.crash(1);
    drop(db);
    assert!(Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone()).is_err());
    let db = open(
        &mem,
        Options {
            before_flush: None,
            ..opts.clone()
        },
    );
    for i in 0..20 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(b"v".to_vec()),
            "k{i} after crash"
        );
    }
    drop(db);

    // Once the hook succeeds, so does the flush.
    let db = open(&mem, opts.clone());
    for i in 20..30 {
        db.put(&key(i), b"v").unwrap();
    }
    assert!(db.flush().is_err());
    fail.store(false, Ordering::SeqCst);
    db.flush().unwrap();
    assert_eq!(
        tables(&mem),
        before + 2,
        "the replayed and the flushed memtable"
    );
    drop(db);
    let db = open(&mem, opts);
    for i in 0..30 {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(b"v".to_vec()),
            "k{i} after reopen"
        );
    }
}
