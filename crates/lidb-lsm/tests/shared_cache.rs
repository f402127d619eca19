//! Databases sharing one page cache pool (`Options::shared_cache`): table numbers of different
//! databases collide (each numbers its tables from the same start), so each database gets a
//! namespace of its own; these tests check that no database is answered from another's pages,
//! that the pool never exceeds its one capacity, and that a dropped database's pages leave it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::{Db, Options};
use lidb_storage::cache::{PageCache, SharedCache};
use lidb_storage::mem::MemStorage;
use support::small_options;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn value(db: u8, i: u32) -> Vec<u8> {
    format!("db{db}-v{i:05}-{}", "x".repeat(40)).into_bytes()
}

fn opts(pool: &Arc<PageCache>) -> Options {
    Options {
        shared_cache: Some(SharedCache(Arc::clone(pool))),
        // Ignored with a shared pool.
        block_cache_bytes: 1 << 30,
        ..small_options(Family::Pgm, 16)
    }
}

#[test]
fn two_databases_with_colliding_table_numbers_share_one_pool() {
    let storage = Arc::new(MemStorage::new());
    let capacity = 48 * 1024;
    let pool = Arc::new(PageCache::new(capacity));
    let open = |n: u8| {
        Db::open_with_storage(
            storage.clone(),
            &PathBuf::from(format!("/db{n}")),
            opts(&pool),
        )
        .unwrap()
    };
    let (a, b) = (open(1), open(2));
    // Same keys, same write sizes: both number their tables alike.
    for i in 0..3000 {
        a.put(&key(i), &value(1, i)).unwrap();
        b.put(&key(i), &value(2, i)).unwrap();
    }
    a.flush().unwrap();
    b.flush().unwrap();
    a.compact().unwrap();
    b.compact().unwrap();
    let tables = |db: &Db| db.stats().levels.iter().map(|l| l.files).sum::<u64>();
    assert!(tables(&a) > 1 && tables(&b) > 1, "several tables each");
    assert_eq!(
        a.block_cache_capacity_bytes(),
        capacity,
        "the pool's capacity"
    );
    for round in 0..3 {
        for i in (0..3000).step_by(7 + round) {
            assert_eq!(a.get(&key(i)).unwrap(), Some(value(1, i)), "a, key {i}");
            assert_eq!(b.get(&key(i)).unwrap(), Some(value(2, i)), "b, key {i}");
            assert!(pool.usage_bytes() <= capacity);
        }
    }
    assert!(!pool.is_empty(), "reads went through the pool");
    assert_eq!(pool.namespaces_cached(), 2);
    // Both report the pool's usage, not a share of it.
    assert_eq!(a.memory_usage().cache_bytes, pool.usage_bytes());
    // Resizing through one database resizes the pool for both.
    b.set_block_cache_bytes(capacity / 2);
    assert!(a.memory_usage().cache_bytes <= capacity / 2);
    assert_eq!(a.block_cache_capacity_bytes(), capacity / 2);
    // A dropped database leaves no page behind; the other still answers.
    drop(b);
    assert_eq!(pool.namespaces_cached(), 1);
    for i in (0..3000).step_by(5) {
        assert_eq!(a.get(&key(i)).unwrap(), Some(value(1, i)));
    }
    drop(a);
    assert!(pool.is_empty());
}
