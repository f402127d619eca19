//! `repair_db` ("Repair"): a database that does not open is rebuilt from what reads
//! cleanly, what does not is set aside in `lost/`, and the database then opens and serves every
//! readable key. Power cuts at every storage operation of a repair leave a directory that opens
//! or that a second repair fixes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::repair::repair_db;
use lidb_lsm::{Db, Granularity, Options};
use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::powercut::PowerCut;
use support::small_options;

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn opts() -> Options {
    small_options(Family::Pgm, 16)
}

fn open(s: &MemStorage, o: &Options) -> Result<Db, Error> {
    Db::open_with_storage(Arc::new(s.clone()), &dir(), o.clone())
}

fn repair(s: &MemStorage, o: &Options) -> lidb_lsm::repair::RepairReport {
    let st: Arc<dyn Storage> = Arc::new(s.clone());
    repair_db(&st, &dir(), o).unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Every value each key ever had (oldest first) and its final value.
#[derive(Default)]
struct History {
    all: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    last: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Puts over three rounds with flushes (tables on several levels), deletions, and a WAL tail
/// that was never flushed (the database is dropped, not closed).
fn build(s: &MemStorage, o: &Options) -> History {
    let db = open(s, o).unwrap();
    let mut h = History::default();
    for round in 0..3u32 {
        for i in 0..300 {
            if (i + round) % 7 == 0 && round > 0 {
                db.delete(&key(i)).unwrap();
                h.last.insert(key(i), None);
                continue;
            }
            let v = format!("r{round}-{i}").into_bytes();
            db.put(&key(i), &v).unwrap();
            h.all.entry(key(i)).or_default().push(v.clone());
            h.last.insert(key(i), Some(v));
        }
        if round < 2 {
            db.flush().unwrap();
        }
        if round == 0 {
            db.compact().unwrap();
        }
    }
    db.sync_wal().unwrap();
    drop(db);
    h
}

fn named(s: &MemStorage, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = s
        .list(&dir())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .map(|n| dir().join(n))
        .collect();
    v.sort();
    v
}

fn current_manifest(s: &MemStorage) -> PathBuf {
    let c = String::from_utf8(s.read_all(&dir().join("CURRENT")).unwrap()).unwrap();
    dir().join(c.trim())
}

fn assert_exact(db: &Db, h: &History, ctx: &str) {
    for (k, v) in &h.last {
        assert_eq!(
            &db.get(k).unwrap(),
            v,
            "{ctx}: key {:?}",
            String::from_utf8_lossy(k)
        );
    }
}

/// Every key reads without error its final value, an older value, or nothing. Returns how many
/// keys read their final value.
fn assert_readable(db: &Db, h: &History, ctx: &str) -> usize {
    let mut exact = 0;
    for (k, last) in &h.last {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{ctx}: read error {e}"));
        if &got == last {
            exact += 1;
            continue;
        }
        if let Some(g) = &got {
            let ok = h.all.get(k).is_some_and(|vs| vs.contains(g));
            assert!(ok, "{ctx}: key {k:?} reads a value it never had: {g:?}");
        }
    }
    exact
}

fn copy_of(s: &MemStorage) -> MemStorage {
    let t = MemStorage::new();
    t.create_dir_all(&dir()).unwrap();
    for p in s.files() {
        if p.ends_with("LOCK") {
            continue;
        }
        if let Some(parent) = p.parent() {
            t.create_dir_all(parent).unwrap();
        }
        let b = s.read_all(&p).unwrap();
        let mut f = t.create(&p).unwrap();
        f.append(&b).unwrap();
        f.sync().unwrap();
        t.sync_dir(p.parent().unwrap()).unwrap();
    }
    t
}

#[test]
fn a_lost_manifest_is_rebuilt_and_every_key_is_exact() {
    for granularity in [Granularity::Table, Granularity::Level] {
        let o = Options {
            granularity,
            ..opts()
        };
        let base = MemStorage::new();
        let h = build(&base, &o);
        type Damage = fn(&MemStorage, &Path);
        let damages: [(&str, Damage); 4] = [
            ("deleted", |s, m| s.remove(m).unwrap()),
            ("truncated", |s, m| {
                let n = s.file_size(m).unwrap();
                s.truncate(m, n / 2).unwrap();
            }),
            ("flipped", |s, m| {
                let n = s.file_size(m).unwrap();
                s.corrupt(m, n / 2, 0x20).unwrap();
            }),
            ("CURRENT deleted", |s, _| {
                s.remove(&dir().join("CURRENT")).unwrap()
            }),
        ];
        for (what, damage) in damages {
            let ctx = format!("{granularity:?}, manifest {what}");
            let s = copy_of(&base);
            damage(&s, &current_manifest(&base));
            let report = repair(&s, &o);
            assert!(report.tables_set_aside.is_empty(), "{ctx}: {report}");
            assert!(report.wal_records > 0, "{ctx}: {report}");
            let db = open(&s, &o).unwrap();
            assert_exact(&db, &h, &ctx);
            assert!(!db.recovery_report().found_damage(), "{ctx}");
            drop(db);
            let lost = s.list(&dir().join("lost")).unwrap();
            assert!(
                !lost.is_empty(),
                "{ctx}: old manifest files are kept in lost/"
            );
        }
    }
}

#[test]
fn a_damaged_table_goes_to_lost_and_the_other_keys_are_served() {
    let o = opts();
    let s = MemStorage::new();
    let h = build(&s, &o);
    let tables = named(&s, ".sst");
    assert!(tables.len() >= 2, "{tables:?}");
    let victim = &tables[0];
    let n = s.file_size(victim).unwrap();
    s.corrupt(victim, n / 3, 0x40).unwrap();
    let report = repair(&s, &o);
    assert_eq!(report.tables_set_aside.len(), 1, "{report}");
    let name = victim.file_name().unwrap().to_str().unwrap();
    assert!(s.exists(&dir().join("lost").join(name)), "{report}");
    let db = open(&s, &o).unwrap();
    let exact = assert_readable(&db, &h, "damaged table");
    assert!(exact > 0, "{report}");
    // Text of the report: one line per thing.
    let text = report.to_string();
    assert!(text.contains("set aside table"), "{text}");
}

#[test]
fn a_wal_flipped_mid_file_keeps_its_prefix_and_sets_the_rest_aside() {
    let o = opts();
    let s = MemStorage::new();
    let h = build(&s, &o);
    let wal = named(&s, ".log").pop().unwrap();
    let n = s.file_size(&wal).unwrap();
    s.corrupt(&wal, n / 2, 0x01).unwrap();
    assert!(matches!(open(&s, &o), Err(Error::Corruption { .. })));
    let report = repair(&s, &o);
    assert_eq!(report.wal_set_aside.len(), 1, "{report}");
    let cut = &report.wal_set_aside[0];
    assert!(
        cut.offset < n / 2 + 1 && cut.offset + cut.bytes == n,
        "{report}"
    );
    let lost = dir().join("lost").join(format!(
        "{}@{}",
        wal.file_name().unwrap().to_str().unwrap(),
        cut.offset
    ));
    assert_eq!(s.file_size(&lost).unwrap(), cut.bytes);
    let db = open(&s, &o).unwrap();
    let exact = assert_readable(&db, &h, "wal flip");
    assert!(
        exact > h.last.len() / 2,
        "{exact} of {}: {report}",
        h.last.len()
    );
}

#[test]
fn repair_twice_is_fine() {
    let o = opts();
    let s = MemStorage::new();
    let h = build(&s, &o);
    s.remove(&current_manifest(&s)).unwrap();
    repair(&s, &o);
    let again = repair(&s, &o);
    assert!(!again.set_aside_anything(), "{again}");
    let db = open(&s, &o).unwrap();
    assert_exact(&db, &h, "twice");
}

/// A power cut at every storage operation of a repair, of a database that lost its manifest and
/// of a healthy one: the directory then opens (as before the repair, or repaired), or a second
/// repair fixes it, and every key reads exact (nothing was damaged but the manifest).
#[test]
fn a_crash_during_repair_leaves_a_directory_that_opens_or_repairs() {
    let o = opts();
    for manifest_lost in [true, false] {
        let base = MemStorage::new();
        let h = build(&base, &o);
        if manifest_lost {
            base.remove(&current_manifest(&base)).unwrap();
        }
        let total = {
            let p = PowerCut::new(copy_of(&base), u64::MAX, 0);
            let st: Arc<dyn Storage> = Arc::new(p.clone());
            repair_db(&st, &dir(), &o).unwrap();
            p.ops()
        };
        let mut opened_without_repair = 0;
        for cut_at in 1..=total {
            let ctx = format!(
                "manifest lost {manifest_lost}: power cut at operation {cut_at} of {total}"
            );
            let mem = copy_of(&base);
            let p = PowerCut::new(mem.clone(), cut_at, cut_at);
            let st: Arc<dyn Storage> = Arc::new(p.clone());
            let r = repair_db(&st, &dir(), &o);
            assert!(r.is_err() || !p.is_cut(), "{ctx}");
            if !p.is_cut() {
                mem.crash(cut_at);
            }
            let db = match open(&mem, &o) {
                Ok(db) => {
                    opened_without_repair += 1;
                    db
                }
                Err(_) => {
                    repair(&mem, &o);
                    open(&mem, &o).unwrap_or_else(|e| panic!("{ctx}: after a second repair: {e}"))
                }
            };
            assert_exact(&db, &h, &ctx);
        }
        if !manifest_lost {
            assert_eq!(
                opened_without_repair, total,
                "a healthy database always opens"
            );
        }
    }
}
