//! A loom model of the shard protocol: a hit and inserts (with eviction) racing a re-division of
//! the pool, over every interleaving loom finds within two preemptions. Run it with
//! `RUSTFLAGS="--cfg loom" cargo test -p lidb-storage --lib --release cache::loom_model`
//! (in its own target directory: every crate is rebuilt under the cfg). Under loom a pool has at
//! most two shards of at least 64 bytes each (`MAX_SHARDS`, `MIN_SHARD_BYTES`).

use super::*;

fn page(len: usize, fill: u8) -> Arc<[u8]> {
    vec![fill; len].into()
}

/// Every shard's invariants, each slot in its home shard, and the pool within its capacity.
fn audit(cache: &PageCache) {
    let shards: Vec<_> = cache.pool.shards.iter().map(|s| read(s)).collect();
    let n = cache.shard_count();
    let mut usage = 0;
    for (i, s) in shards.iter().enumerate() {
        s.check();
        for slot in s.slots() {
            assert_eq!(
                home(slot.key.hash64(), n),
                i,
                "a slot lives in its home shard"
            );
        }
        usage += s.usage_bytes;
    }
    assert!(usage <= cache.capacity_bytes());
}

/// Three pages of table 1 whose home is shard 1 of two.
fn pages_of_shard_1() -> [u64; 3] {
    let mut found = (0..).filter(|&p| {
        let key = Key {
            namespace: 0,
            table: 1,
            id: p,
            kind: Kind::Page,
        };
        home(key.hash64(), 2) == 1
    });
    [(); 3].map(|()| found.next().unwrap_or_default())
}

#[test]
fn hits_and_inserts_racing_a_redivision_see_whole_pages_in_their_home_shards() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(2);
    model.check(|| {
        // One shard of 100 bytes: two 40-byte pages fit, a third evicts one. The writer's pages
        // live in shard 1 once the pool is two shards, so one put in shard 0 after the
        // re-division (a lookup that did not look again at the layout) fails the audit.
        let cache = Arc::new(PageCache::new(100));
        let [a, b, c] = pages_of_shard_1();
        cache.insert(1, a, page(40, 1));
        let writer = {
            let cache = Arc::clone(&cache);
            loom::thread::spawn(move || {
                cache.insert(1, b, page(40, 2));
                cache.insert(1, c, page(40, 3));
            })
        };
        let reader = {
            let cache = Arc::clone(&cache);
            loom::thread::spawn(move || {
                for (p, fill) in [(a, 1), (b, 2), (c, 3)] {
                    if let Some(got) = cache.get(1, p) {
                        assert_eq!(&got[..], &[fill; 40][..], "a hit is its own page, whole");
                    }
                }
            })
        };
        // Two shards of 64 bytes: every page moves home, one page per shard fits.
        cache.set_capacity(128);
        let joined = writer.join().is_ok() && reader.join().is_ok();
        assert!(joined, "no thread panicked");
        audit(&cache);
        assert_eq!(cache.shard_count(), 2);
    });
}
