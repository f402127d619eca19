//! MemStorage semantics: synced bytes survive a crash, unsynced bytes survive as a prefix,
//! directory operations without sync_dir are undone, stale handles fail, faults fire once.

use std::path::{Path, PathBuf};

use lidb_storage::Error;
use lidb_storage::mem::{Fault, MemStorage};
use lidb_storage::{ReadMode, Storage};

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn p(name: &str) -> PathBuf {
    dir().join(name)
}

fn setup() -> MemStorage {
    let s = MemStorage::new();
    s.create_dir_all(&dir())
        .unwrap_or_else(|e| panic!("create dir: {e}"));
    s
}

fn read(s: &MemStorage, path: &Path) -> Vec<u8> {
    s.read_all(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn ok<T>(r: lidb_storage::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn synced_bytes_survive_and_unsynced_are_a_prefix() {
    let mut seen_lens = std::collections::BTreeSet::new();
    for seed in 0..200u64 {
        let s = setup();
        let mut f = ok(s.create(&p("a")));
        ok(f.append(b"hello "));
        ok(f.sync());
        ok(s.sync_dir(&dir()));
        ok(f.append(b"unsynced world"));
        s.crash(seed);
        let got = read(&s, &p("a"));
        let all = b"hello unsynced world";
        assert!(got.len() >= 6, "seed {seed}: synced bytes lost: {got:?}");
        assert_eq!(
            got.as_slice(),
            all.get(..got.len()).unwrap_or_default(),
            "seed {seed}: not a prefix"
        );
        seen_lens.insert(got.len());
        // The old handle is stale.
        assert!(
            matches!(f.append(b"x"), Err(Error::Io { .. })),
            "seed {seed}: stale handle appended"
        );
        assert!(f.sync().is_err(), "seed {seed}");
    }
    assert!(
        seen_lens.contains(&6) && seen_lens.len() > 5,
        "{seen_lens:?}"
    );
}

#[test]
fn crash_is_deterministic_per_seed() {
    let run = |seed| {
        let s = setup();
        let mut f = ok(s.create(&p("a")));
        ok(s.sync_dir(&dir()));
        ok(f.append(&[7u8; 1000]));
        s.crash(seed);
        read(&s, &p("a")).len()
    };
    for seed in 0..20 {
        assert_eq!(run(seed), run(seed), "seed {seed}");
    }
}

#[test]
fn creation_without_sync_dir_vanishes() {
    let s = setup();
    let mut f = ok(s.create(&p("new")));
    ok(f.append(b"data"));
    ok(f.sync());
    s.crash(1);
    assert!(!s.exists(&p("new")));
    assert!(s.files().is_empty(), "{:?}", s.files());
}

#[test]
fn rename_without_sync_dir_reverts() {
    let s = setup();
    for (name, body) in [("CURRENT", b"old".as_slice()), ("tmp", b"new".as_slice())] {
        let mut f = ok(s.create(&p(name)));
        ok(f.append(body));
        ok(f.sync());
    }
    ok(s.sync_dir(&dir()));
    ok(s.rename(&p("tmp"), &p("CURRENT")));
    assert_eq!(read(&s, &p("CURRENT")), b"new");
    assert!(!s.exists(&p("tmp")));
    s.crash(3);
    assert_eq!(read(&s, &p("CURRENT")), b"old");
    assert_eq!(read(&s, &p("tmp")), b"new");

    // With sync_dir the rename is durable.
    ok(s.rename(&p("tmp"), &p("CURRENT")));
    ok(s.sync_dir(&dir()));
    s.crash(4);
    assert_eq!(read(&s, &p("CURRENT")), b"new");
    assert!(!s.exists(&p("tmp")));
    assert_eq!(s.files(), vec![p("CURRENT")]);
}

#[test]
fn removal_without_sync_dir_returns() {
    let s = setup();
    let mut f = ok(s.create(&p("t.sst")));
    ok(f.append(b"table"));
    ok(f.sync());
    ok(s.sync_dir(&dir()));
    ok(s.remove(&p("t.sst")));
    assert!(!s.exists(&p("t.sst")));
    s.crash(5);
    assert_eq!(read(&s, &p("t.sst")), b"table");
    ok(s.remove(&p("t.sst")));
    ok(s.sync_dir(&dir()));
    s.crash(6);
    assert!(!s.exists(&p("t.sst")));
}

#[test]
fn sync_dir_is_per_directory() {
    let s = setup();
    ok(s.create_dir_all(&dir().join("sub")));
    let _a = ok(s.create(&p("a")));
    let _b = ok(s.create(&dir().join("sub").join("b")));
    ok(s.sync_dir(&dir().join("sub")));
    s.crash(7);
    assert_eq!(s.files(), vec![dir().join("sub").join("b")]);
    assert_eq!(ok(s.list(&dir())), vec!["sub".to_string()]);
}

#[test]
fn create_truncates_and_needs_a_directory() {
    let s = setup();
    let mut f = ok(s.create(&p("a")));
    ok(f.append(b"abc"));
    ok(f.sync());
    ok(s.sync_dir(&dir()));
    let _f2 = ok(s.create(&p("a")));
    assert_eq!(read(&s, &p("a")), b"");
    s.crash(8);
    assert_eq!(read(&s, &p("a")), b"", "the truncation is durable");
    assert!(s.create(Path::new("/nowhere/x")).is_err());
}

#[test]
fn readers_and_truncate() {
    let s = setup();
    let mut f = ok(s.create(&p("a")));
    ok(f.append(b"0123456789"));
    let r = ok(s.open(&p("a"), ReadMode::Direct));
    assert_eq!(r.len(), 10);
    let mut buf = [0u8; 4];
    ok(r.read_at(3, &mut buf));
    assert_eq!(&buf, b"3456");
    assert!(r.read_at(8, &mut buf).is_err());
    assert!(r.read_at(u64::MAX, &mut buf).is_err());
    ok(s.truncate(&p("a"), 5));
    assert_eq!(ok(s.file_size(&p("a"))), 5);
    assert_eq!(s.durable_len(&p("a")), Some(5));
    ok(s.sync_dir(&dir()));
    s.crash(9);
    assert_eq!(read(&s, &p("a")), b"01234");
    assert!(r.read_at(0, &mut buf).is_err(), "stale reader");
}

#[test]
fn faults_fire_once() {
    let s = setup();
    let mut f = ok(s.create(&p("a")));
    s.fail_after(1, Fault::WriteError);
    ok(f.append(b"one"));
    ok(f.sync()); // syncs do not count for write faults
    assert!(f.append(b"two").is_err());
    assert_eq!(f.len(), 3);
    ok(f.append(b"three"));
    assert_eq!(read(&s, &p("a")), b"onethree");

    s.fail_after(0, Fault::ShortWrite);
    assert!(f.append(b"abcdef").is_err());
    assert_eq!(read(&s, &p("a")), b"onethreeabc");
    assert_eq!(f.len(), 11);

    s.fail_after(0, Fault::SyncError);
    assert!(f.sync().is_err());
    assert_eq!(s.durable_len(&p("a")), Some(3));
    ok(f.sync());
    assert_eq!(s.durable_len(&p("a")), Some(11));

    s.fail_after(0, Fault::WriteError);
    s.clear_faults();
    ok(f.append(b"!"));
}

#[test]
fn corrupt_flips_bits() {
    let s = setup();
    let mut f = ok(s.create(&p("a")));
    ok(f.append(&[0u8; 4]));
    ok(s.corrupt(&p("a"), 2, 0x81));
    assert_eq!(read(&s, &p("a")), vec![0, 0, 0x81, 0]);
    assert!(s.corrupt(&p("a"), 4, 1).is_err());
    assert!(s.corrupt(&p("b"), 0, 1).is_err());
}

#[test]
fn locks_exclude_until_dropped_or_crash() {
    let s = setup();
    let lock = ok(s.lock(&p("LOCK")));
    assert!(s.lock(&p("LOCK")).is_err());
    drop(lock);
    let lock = ok(s.lock(&p("LOCK")));
    s.crash(10);
    // The process that held it died with the crash.
    let again = ok(s.lock(&p("LOCK")));
    drop(lock); // the stale guard must not release the new holder's lock
    assert!(s.lock(&p("LOCK")).is_err());
    drop(again);
}

#[test]
fn removed_open_file_stays_readable() {
    let s = setup();
    let mut f = ok(s.create(&p("a")));
    ok(f.append(b"xyz"));
    let r = ok(s.open(&p("a"), ReadMode::Buffered));
    ok(s.remove(&p("a")));
    let mut buf = [0u8; 3];
    ok(r.read_at(0, &mut buf));
    assert_eq!(&buf, b"xyz");
    assert!(s.read_all(&p("a")).is_err());
}
