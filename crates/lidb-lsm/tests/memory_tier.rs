//! The memory-only read tier (`Db::get_if_in_memory`): it answers exactly what `get` answers when
//! memtables, filters, indexes and cached pages suffice, says "not in memory" otherwise, and never
//! reads the storage. Checked against a BTreeMap over every key of a flushed, compacted database.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::{Db, Options};
use lidb_storage::mem::MemStorage;

mod support;
use support::small_options;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn fill(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, range: std::ops::Range<u64>) {
    for i in range {
        let v = format!("value-{i}-{}", "x".repeat((i % 40) as usize)).into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
}

fn open(storage: &MemStorage, opts: Options) -> Db {
    Db::open_with_storage(Arc::new(storage.clone()), Path::new("/db"), opts).unwrap()
}

#[test]
fn memory_tier_answers_like_get_or_says_it_needs_a_read() {
    for family in [Family::Pgm, Family::Fp] {
        let storage = MemStorage::new();
        let mut opts = small_options(family, 32);
        opts.block_cache_bytes = 1 << 20;
        let mut model = BTreeMap::new();
        {
            let db = open(&storage, opts.clone());
            fill(&db, &mut model, 0..3000);
            db.flush().unwrap();
            db.compact().unwrap();
            db.close().unwrap();
        }
        // Reopened: the tables' pages are not cached yet; recent writes sit in the memtable.
        let db = open(&storage, opts.clone());
        fill(&db, &mut model, 3000..3100);
        let reads_before = storage.random_reads();
        let (mut answered, mut deferred) = (0, 0);
        for i in (0..3100).step_by(7) {
            match db.get_if_in_memory(&key(i)).unwrap() {
                Some(v) => {
                    assert_eq!(v.as_ref(), model.get(&key(i)), "{family:?} key {i}");
                    answered += 1;
                }
                None => deferred += 1,
            }
        }
        assert_eq!(
            storage.random_reads(),
            reads_before,
            "{family:?}: the memory tier read the storage"
        );
        assert!(
            answered >= 100 / 7,
            "{family:?}: memtable keys must be answered ({answered})"
        );
        assert!(
            deferred > 0,
            "{family:?}: a cold table key cannot be answered from memory"
        );
        // After `get` has cached the pages, the same keys are answered from memory, rightly.
        for i in (0..3100).step_by(7) {
            assert_eq!(db.get(&key(i)).unwrap().as_ref(), model.get(&key(i)));
        }
        let reads_warm = storage.random_reads();
        for i in (0..3100).step_by(7) {
            let got = db.get_if_in_memory(&key(i)).unwrap();
            assert_eq!(
                got,
                Some(model.get(&key(i)).cloned()),
                "{family:?} warm key {i}"
            );
        }
        assert_eq!(storage.random_reads(), reads_warm);
        // A key no table holds is answered "absent" once its table pages are cached or a filter
        // rules it out; whatever the tier says, it never contradicts the model.
        let absent = b"key99999999x".to_vec();
        if let Some(v) = db.get_if_in_memory(&absent).unwrap() {
            assert_eq!(v, None);
        }
    }
}

#[test]
fn without_a_page_cache_only_memtables_answer() {
    let storage = MemStorage::new();
    let mut opts = small_options(Family::Pgm, 32);
    opts.block_cache_bytes = 0;
    let mut model = BTreeMap::new();
    let db = open(&storage, opts);
    fill(&db, &mut model, 0..2000);
    db.flush().unwrap();
    fill(&db, &mut model, 2000..2010);
    for i in 2000..2010 {
        assert_eq!(
            db.get_if_in_memory(&key(i)).unwrap(),
            Some(model.get(&key(i)).cloned())
        );
    }
    let reads = storage.random_reads();
    assert_eq!(db.get_if_in_memory(&key(5)).unwrap(), None);
    assert_eq!(storage.random_reads(), reads);
    assert_eq!(db.get(&key(5)).unwrap().as_ref(), model.get(&key(5)));
}
