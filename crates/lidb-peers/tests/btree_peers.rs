//! The B+-tree peers of `lidb-bench bench btree` (redb over O_DIRECT, LMDB), and lidb's own
//! engines beside them, against a `BTreeMap`: bulk load, then seeded random gets, puts and
//! deletes, a cold reopen, and the same answers. Also the O_DIRECT backend's read-modify-write
//! on unaligned offsets against a byte vector.

use std::collections::BTreeMap;
use std::sync::Arc;

use lidb_bench::btree::config::value_for;
use lidb_bench::btree::{StoreSetup, btree_engines, open_engine};
use lidb_peers::btree::direct::{ALIGN, DirectBackend, IoCounters};
use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redb::StorageBackend;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const SEED: u64 = 0xB7EE_0001;

#[test]
fn peers_agree_with_a_btreemap() -> TestResult {
    let peers = lidb_peers::peers();
    let engines = btree_engines(&peers);
    assert_eq!(engines, ["learnedstore", "btree", "redb", "lmdb"]);
    for engine in engines {
        let scratch = Scratch::new(&format!("btree-peers-{engine}"));
        let setup = StoreSetup {
            dir: scratch.join("db"),
            pool_bytes: 1 << 20,
            data_bytes: 4 << 20,
        };
        let mut store = open_engine(&peers, engine, &setup)?;
        let mut rng = ChaCha8Rng::seed_from_u64(SEED);
        let mut keys: Vec<u64> = (0..3_000).map(|_| rng.gen_range(0..100_000u64)).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut model: BTreeMap<u64, Vec<u8>> =
            keys.iter().map(|&k| (k, value_for(k, 0, 100))).collect();
        let mut records = model.clone().into_iter();
        store.bulk_load(&mut records)?;
        let mut out = Vec::new();
        for step in 0..3_000u32 {
            let key = rng.gen_range(0..100_000u64);
            match rng.gen_range(0..10) {
                0..=4 => {
                    let found = store.get(key, &mut out)?;
                    let want = model.get(&key);
                    assert_eq!(
                        found,
                        want.is_some(),
                        "{engine} get {key} step {step} seed={SEED}"
                    );
                    if let Some(v) = want {
                        assert_eq!(&out, v, "{engine} value of {key} step {step} seed={SEED}");
                    }
                }
                5..=7 => {
                    let v = value_for(key, step, rng.gen_range(8..300));
                    store.put(key, &v)?;
                    model.insert(key, v);
                }
                _ => {
                    let was = store.delete(key)?;
                    assert_eq!(
                        was,
                        model.remove(&key).is_some(),
                        "{engine} delete {key} seed={SEED}"
                    );
                }
            }
        }
        let reads_before = store.device_reads();
        store.reopen_cold()?;
        for (&key, value) in &model {
            assert!(
                store.get(key, &mut out)?,
                "{engine} lost {key} after reopen, seed={SEED}"
            );
            assert_eq!(
                &out, value,
                "{engine} value of {key} after reopen, seed={SEED}"
            );
        }
        assert!(!store.get(100_001, &mut out)?, "{engine} invented a key");
        // LMDB's reads are estimated from the process's read_bytes, which stays 0 where the
        // temporary directory is in memory (tmpfs) or /proc/self/io is missing: nothing to check.
        let counted = engine != "lmdb" || lidb_peers::btree::lmdb_peer::proc_read_bytes() > 0;
        assert!(
            !counted || store.device_reads() > reads_before,
            "{engine}: a cold pass read nothing from the device ({})",
            store.device_reads_source()
        );
    }
    Ok(())
}

#[test]
fn direct_backend_read_modify_write_on_unaligned_offsets() -> TestResult {
    let dir = Scratch::new("btree-peers-direct");
    let counters = Arc::new(IoCounters::default());
    let backend = DirectBackend::open(&dir.join("file"), Arc::clone(&counters))?;
    eprintln!("O_DIRECT in {}: {}", dir.display(), backend.is_direct());
    let mut model: Vec<u8> = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let size = 5 * ALIGN + 123;
    backend.set_len(size)?;
    model.resize(size as usize, 0);
    for step in 0..400u32 {
        let offset = rng.gen_range(0..size - 1);
        let len = rng.gen_range(1..=(size - offset).min(3 * ALIGN));
        if rng.gen_bool(0.5) {
            let data: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
            backend.write(offset, &data)?;
            model
                .get_mut(offset as usize..(offset + len) as usize)
                .ok_or("model range")?
                .copy_from_slice(&data);
        } else {
            let mut out = vec![0u8; len as usize];
            backend.read(offset, &mut out)?;
            let want = model
                .get(offset as usize..(offset + len) as usize)
                .ok_or("model range")?;
            assert_eq!(
                out, want,
                "read {len} at {offset}, step {step}, seed={SEED}"
            );
        }
        assert_eq!(backend.len()?, size, "logical length kept, step {step}");
    }
    // A write past the end grows the file to exactly its end, zero-filled before it.
    backend.write(size + 10, b"tail")?;
    model.resize(size as usize + 10, 0);
    model.extend_from_slice(b"tail");
    assert_eq!(backend.len()?, size + 14);
    assert_eq!(std::fs::metadata(dir.join("file"))?.len(), size + 14);
    let mut all = vec![0u8; model.len()];
    backend.read(0, &mut all)?;
    assert_eq!(all, model);
    // Reading past the end is an error, not zeros.
    assert!(backend.read(size + 10, &mut [0u8; 8]).is_err());
    assert!(counters.reads.load(std::sync::atomic::Ordering::Relaxed) > 0);
    // What was written is on the file: a fresh backend reads the same bytes.
    let again = DirectBackend::open(&dir.join("file"), Arc::new(IoCounters::default()))?;
    let mut reread = vec![0u8; model.len()];
    again.read(0, &mut reread)?;
    assert_eq!(reread, model);
    Ok(())
}

/// redb's cache really is the pool: smaller than the records, lookups keep reading the device;
/// everything resident and warm, they read nothing.
#[test]
fn redb_reads_the_device_only_when_the_pool_is_too_small() -> TestResult {
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * 7919).collect();
    let mut per_lookup = Vec::new();
    for (name, pool) in [("small", 128u64 << 10), ("large", 64 << 20)] {
        let scratch = Scratch::new(&format!("btree-peers-redb-pool-{name}"));
        let setup = StoreSetup {
            dir: scratch.join("db"),
            pool_bytes: pool,
            data_bytes: 20_000 * 72,
        };
        let mut store = open_engine(&lidb_peers::peers(), "redb", &setup)?;
        let mut records = keys.iter().map(|&k| (k, value_for(k, 0, 64)));
        store.bulk_load(&mut records)?;
        let mut out = Vec::new();
        for &k in &keys {
            store.get(k, &mut out)?;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(SEED);
        let before = store.device_reads();
        for _ in 0..2_000 {
            let k = keys.get(rng.gen_range(0..keys.len())).copied().unwrap_or(0);
            assert!(store.get(k, &mut out)?, "redb lost {k}");
        }
        per_lookup.push((store.device_reads() - before) as f64 / 2_000.0);
    }
    let [small, large] = per_lookup.as_slice() else {
        return Err("two runs expected".into());
    };
    assert!(
        *small > 0.5,
        "pool of 128KiB for 1.4MiB: {small} reads per lookup"
    );
    assert_eq!(*large, 0.0, "everything resident: {large} reads per lookup");
    Ok(())
}
