//! Bad logs at open: a torn tail is cut and reported; damage in the middle fails the open with
//! an error naming the log and the offset (and changes no file); a log shortened after a clean
//! close is damage; LSN gaps and lost logs are damage; the recovery modes do what they say.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::sync::Arc;

use common::{dir, log_path, open, synced};
use lidb_btree::{Error, WalOptions};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::tail::{RecoveryMode, TailKind};

/// Bytes of the log header and of each framed record `k{i:02}` -> `v{i:02}`: 8 bytes of framing,
/// a 13-byte payload header, 3 + 3 bytes of key and value.
const HEADER: u64 = 8;
const RECORD: u64 = 8 + 13 + 3 + 3;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("v{i:02}").into_bytes()
}

/// A store in log 1 holding `n` synced puts, dropped without a clean close.
fn store_with(n: u64, opts: WalOptions) -> Arc<MemStorage> {
    let mem = Arc::new(MemStorage::new());
    let store = open(mem.clone(), opts).unwrap();
    for i in 0..n {
        store.put(&key(i), &value(i)).unwrap();
    }
    drop(store);
    mem
}

fn keys(mem: &Arc<MemStorage>, opts: WalOptions) -> Vec<Vec<u8>> {
    let store = open(mem.clone(), opts).unwrap();
    let all = store.scan(&[], None, usize::MAX).unwrap();
    all.into_iter().map(|(k, _)| k).collect()
}

#[test]
fn a_torn_tail_is_cut_and_reported() {
    let mem = store_with(10, synced());
    let log = log_path(1);
    assert_eq!(mem.file_size(&log).unwrap(), HEADER + 10 * RECORD);
    mem.truncate(&log, HEADER + 10 * RECORD - 3).unwrap();
    let store = open(mem.clone(), synced()).unwrap();
    let report = store.recovery_report().clone();
    let cut = report.cut.clone().unwrap();
    assert_eq!(cut.kind, TailKind::Torn);
    assert_eq!(cut.offset, HEADER + 9 * RECORD);
    assert_eq!(report.cut_bytes(), RECORD - 3);
    assert_eq!(report.records_replayed, 9);
    assert_eq!(report.cut_log.as_deref(), Some(log.as_path()));
    assert!(report.to_string().contains("torn tail"), "{report}");
    assert_eq!(store.get(&key(8)).unwrap(), Some(value(8)));
    assert_eq!(store.get(&key(9)).unwrap(), None);
    // The log was cut, and the next write follows the last intact record.
    assert_eq!(mem.file_size(&log).unwrap(), HEADER + 9 * RECORD);
    assert_eq!(store.next_lsn(), 10);
    store.put(&key(9), b"again").unwrap();
    drop(store);
    let store = open(mem.clone(), synced()).unwrap();
    assert!(store.recovery_report().cut.is_none());
    assert_eq!(store.get(&key(9)).unwrap(), Some(b"again".to_vec()));
}

#[test]
fn a_corrupt_record_in_the_middle_fails_the_open_naming_file_and_offset() {
    let mem = store_with(10, synced());
    let log = log_path(1);
    let offset = HEADER + 3 * RECORD;
    mem.corrupt(&log, offset + 15, 0xff).unwrap();
    let before = mem.read_all(&log).unwrap();
    let err = open(mem.clone(), synced()).unwrap_err();
    let Error::Corruption { file, detail } = &err else {
        panic!("expected corruption, got {err:?}");
    };
    assert_eq!(file, &log);
    assert!(detail.contains(&format!("offset {offset}")), "{detail}");
    assert!(detail.contains("damage"), "{detail}");
    assert!(detail.contains("point-in-time"), "how to go on: {detail}");
    assert!(err.to_string().contains("wal-000001.log"), "{err}");
    // A failed open writes nothing: a retry in another mode sees the same bytes.
    assert_eq!(mem.read_all(&log).unwrap(), before);
    assert!(!mem.exists(&dir().join("lost")));

    let pit = WalOptions {
        recovery_mode: RecoveryMode::PointInTime,
        ..synced()
    };
    let store = open(mem.clone(), pit.clone()).unwrap();
    let report = store.recovery_report().clone();
    assert_eq!(report.cut.as_ref().map(|c| c.kind), Some(TailKind::Damage));
    assert_eq!(report.cut.as_ref().map(|c| c.records_after), Some(6));
    let lost = report.lost.clone().unwrap();
    assert_eq!(mem.read_all(&lost).unwrap().len() as u64, 7 * RECORD);
    drop(store);
    assert_eq!(keys(&mem, pit), vec![key(0), key(1), key(2)]);
}

#[test]
fn the_absolute_mode_refuses_even_a_torn_tail() {
    let mem = store_with(3, synced());
    mem.truncate(&log_path(1), HEADER + 3 * RECORD - 1).unwrap();
    let abs = WalOptions {
        recovery_mode: RecoveryMode::Absolute,
        ..synced()
    };
    let err = open(mem.clone(), abs).unwrap_err();
    assert!(err.to_string().contains("tolerate-torn-tail"), "{err}");
    assert_eq!(keys(&mem, synced()), vec![key(0), key(1)]);
}

fn closed_store(n: u64) -> Arc<MemStorage> {
    let opts = WalOptions {
        checkpoint_on_close: false,
        ..synced()
    };
    let mem = Arc::new(MemStorage::new());
    let store = open(mem.clone(), opts).unwrap();
    for i in 0..n {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap();
    assert!(mem.exists(&dir().join("WALSTATE")));
    mem
}

#[test]
fn a_log_shortened_after_a_clean_close_is_damage() {
    // Cut at a record boundary: the framing sees no bad tail at all.
    let mem = closed_store(10);
    mem.truncate(&log_path(1), HEADER + 8 * RECORD).unwrap();
    let err = open(mem.clone(), synced()).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    assert!(err.to_string().contains("shortened"), "{err}");
    assert!(err.to_string().contains("wal-000001.log"), "{err}");

    // Cut inside a record: what would be a torn tail after a crash.
    let mem = closed_store(10);
    mem.truncate(&log_path(1), HEADER + 10 * RECORD - 2)
        .unwrap();
    let err = open(mem.clone(), synced()).unwrap_err();
    assert!(err.to_string().contains("not a torn tail"), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("offset {}", HEADER + 9 * RECORD)),
        "{err}"
    );
}

#[test]
fn a_clean_close_opens_without_loss_and_clears_its_record() {
    for checkpoint_on_close in [false, true] {
        let opts = WalOptions {
            checkpoint_on_close,
            ..synced()
        };
        let mem = Arc::new(MemStorage::new());
        let store = open(mem.clone(), opts.clone()).unwrap();
        for i in 0..5 {
            store.put(&key(i), &value(i)).unwrap();
        }
        assert!(store.delete(&key(1)).unwrap());
        assert!(!store.delete(&key(1)).unwrap());
        store.close().unwrap();
        let store = open(mem.clone(), opts.clone()).unwrap();
        let report = store.recovery_report().clone();
        assert!(report.closed_cleanly);
        let replayed = if checkpoint_on_close { 0 } else { 6 };
        assert_eq!(report.records_replayed, replayed, "{report:?}");
        assert!(!mem.exists(&dir().join("WALSTATE")), "the open clears it");
        store.put(&key(9), &value(9)).unwrap();
        drop(store);
        // A crash after the reopen: the log grew past the closed length, which is no damage.
        mem.crash(7);
        let got = keys(&mem, opts);
        assert_eq!(got, vec![key(0), key(2), key(3), key(4), key(9)]);
    }
}

#[test]
fn an_lsn_gap_or_lost_logs_are_damage() {
    let mem = Arc::new(MemStorage::new());
    let store = open(mem.clone(), synced()).unwrap();
    for i in 0..5 {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.checkpoint().unwrap();
    for i in 5..8 {
        store.put(&key(i), &value(i)).unwrap();
    }
    drop(store);
    assert!(
        !mem.exists(&log_path(1)),
        "the checkpoint removed the old log"
    );

    // The tree loses its checkpoint (LSNs 1..=5): log 2 starts at LSN 6.
    let snap = dir().join("tree.snap");
    let saved = mem.read_all(&snap).unwrap();
    mem.remove(&snap).unwrap();
    let err = open(mem.clone(), synced()).unwrap_err();
    assert!(err.to_string().contains("wal-000002.log"), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");
    let mut f = mem.create(&snap).unwrap();
    f.append(&saved).unwrap();
    f.sync().unwrap();
    drop(f);

    // Every log is lost while the tree's checkpoint holds LSN 5.
    mem.remove(&log_path(2)).unwrap();
    let err = open(mem.clone(), synced()).unwrap_err();
    assert!(err.to_string().contains("the logs were lost"), "{err}");
}

#[test]
fn the_callers_blob_is_saved_with_each_checkpoint_and_carried_forward() {
    let mem = Arc::new(MemStorage::new());
    let store = open(mem.clone(), synced()).unwrap();
    assert!(store.loaded_checkpoint().extra.is_empty());
    store.set_checkpoint_extra(Box::new(|| b"mapping table v1".to_vec()));
    store.put(b"a", b"1").unwrap();
    store.checkpoint().unwrap();
    drop(store);
    let store = open(mem.clone(), synced()).unwrap();
    assert_eq!(store.loaded_checkpoint().extra, b"mapping table v1");
    assert_eq!(store.loaded_checkpoint().lsn, 1);
    // No hook: the blob loaded is saved again.
    store.put(b"b", b"2").unwrap();
    store.checkpoint().unwrap();
    drop(store);
    let store = open(mem.clone(), synced()).unwrap();
    assert_eq!(store.loaded_checkpoint().extra, b"mapping table v1");
    assert_eq!(store.loaded_checkpoint().lsn, 2);
}
