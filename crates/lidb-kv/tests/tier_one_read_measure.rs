//! Figures for one-read lookups (ignored by default; run with
//! `cargo test --release -p lidb-kv --test tier_one_read_measure -- --ignored --nocapture`,
//! LIDB_MEASURE_DIR picks the directory, /tmp by default): 200K random 8-byte keys with
//! 1016-byte values (YCSB's record), one packed generation on the real file system read with
//! direct I/O, then 100K random gets after 20K warm-up gets: device reads per get, bytes per
//! read and p50/p99 latency, for the version-3 model and the same files with the model rewritten
//! as version 2 (always the two-read path), each without a page cache, with a 2 MiB one (less
//! than the 4.8 MB key list: version 3 reads once) and an 8 MiB one (the YCSB bench's default
//! `--cache`, which holds the key list: version 3 takes the cached key list too). One JSON line
//! per configuration.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use lidb_kv::static_tier::format::ModelFile;
use lidb_kv::static_tier::{StaticTier, StaticTierBuilder, TierOptions, model_path};
use lidb_storage::cache::PageCache;
use lidb_storage::fs::FsStorage;
use lidb_storage::{ReadMode, Storage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const RECORDS: usize = 200_000;
const VALUE_BYTES: usize = 1016;
const WARM: usize = 20_000;
const GETS: usize = 100_000;

fn measure(storage: &Arc<dyn Storage>, dir: &Path, keys: &[u64], model: u32, cache: u64) {
    let tier = StaticTier::open(Arc::clone(storage), dir, 1, ReadMode::Direct).expect("open");
    let tier = if cache > 0 {
        tier.with_cache(Arc::new(PageCache::new(cache)))
    } else {
        tier
    };
    let fits = cache >= tier.keylist_bytes() - 4096;
    assert_eq!(tier.reads_once(), model == 3 && !fits);
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut pick = || {
        keys.get(rng.gen_range(0..keys.len()))
            .copied()
            .expect("key")
            .to_be_bytes()
    };
    for _ in 0..WARM {
        assert!(tier.get(&pick()).expect("get").is_some());
    }
    let before = tier.read_stats();
    let mut lat = Vec::with_capacity(GETS);
    for _ in 0..GETS {
        let k = pick();
        let t = Instant::now();
        let v = tier.get(&k).expect("get");
        lat.push(t.elapsed().as_nanos() as u64);
        assert_eq!(v.map(|v| v.len()), Some(VALUE_BYTES));
    }
    lat.sort_unstable();
    let st = tier.read_stats();
    let reads = (st.keylist_reads - before.keylist_reads) + (st.svlog_reads - before.svlog_reads);
    let bytes = (st.keylist_bytes - before.keylist_bytes) + (st.svlog_bytes - before.svlog_bytes);
    let q = |f: f64| {
        lat.get((f * (lat.len() - 1) as f64) as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "{{\"model_version\":{model},\"cache_bytes\":{cache},\"one_read\":{},\"gets\":{GETS},\
         \"device_reads_per_get\":{:.3},\"keylist_reads_per_get\":{:.3},\
         \"svlog_reads_per_get\":{:.3},\"bytes_per_read\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\
         \"fallbacks\":{}}}",
        tier.reads_once(),
        reads as f64 / GETS as f64,
        (st.keylist_reads - before.keylist_reads) as f64 / GETS as f64,
        (st.svlog_reads - before.svlog_reads) as f64 / GETS as f64,
        bytes as f64 / reads.max(1) as f64,
        q(0.5) as f64 / 1e3,
        q(0.99) as f64 / 1e3,
        st.one_read_fallbacks,
    );
}

#[test]
#[ignore = "writes ~210 MB and reads with direct I/O"]
fn one_read_against_two_reads_with_direct_io() {
    let root = std::env::var("LIDB_MEASURE_DIR").unwrap_or_else(|_| "/tmp".into());
    let dir = Path::new(&root).join(format!("lidb-one-read-{}", std::process::id()));
    let storage: Arc<dyn Storage> = Arc::new(FsStorage);
    storage.create_dir_all(&dir).expect("dir");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut keys: Vec<u64> = (0..RECORDS).map(|_| rng.r#gen()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut b = StaticTierBuilder::new(Arc::clone(&storage), &dir, 1, TierOptions::default())
        .expect("builder");
    let value = vec![0x5au8; VALUE_BYTES];
    for k in &keys {
        b.add(&k.to_be_bytes(), &value).expect("add");
    }
    let meta = b.finish().expect("finish");
    println!(
        "{{\"records\":{},\"svlog_bytes\":{},\"keylist_bytes\":{},\"model_bytes\":{}}}",
        meta.entries, meta.svlog_bytes, meta.keylist_bytes, meta.model_bytes
    );
    for cache in [0, 2 << 20, 8 << 20] {
        measure(&storage, &dir, &keys, 3, cache);
    }
    let path = model_path(&dir, 1);
    let m = ModelFile::decode(&storage.read_all(&path).expect("read")).expect("decode");
    let mut w = storage.create(&path).expect("create");
    w.append(&m.encode_v2()).expect("append");
    w.sync().expect("sync");
    drop(w);
    for cache in [0, 2 << 20, 8 << 20] {
        measure(&storage, &dir, &keys, 2, cache);
    }
    std::fs::remove_dir_all(&dir).ok();
}
