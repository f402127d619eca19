//! Figures for the static tier on real data (ignored by default; run with
//! `cargo test --release -p lidb-kv --test tier_measure -- --ignored --nocapture`):
//! the first 1M keys of tweetids_10M_uint64 as 8-byte big-endian keys with 1016-byte values,
//! built on the real file system for plr and pgm at several page boundaries. Prints one JSON
//! line per configuration: key-list bytes, model bytes, build and train time, and the key-list
//! bytes a random lookup reads.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::sync::Arc;
use std::time::Instant;

use lidb_index::{Family, Params};
use lidb_kv::static_tier::{StaticTier, StaticTierBuilder, TierOptions};
use lidb_storage::fs::FsStorage;
use lidb_storage::{ReadMode, Storage};
use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DATASET: &str = "/work/shared/datasets/tweetids_10M_uint64.zst";
const KEYS: usize = 1_000_000;
const VALUE_BYTES: usize = 1016;

#[test]
#[ignore = "needs the shared dataset and ~1 GB of disk per configuration"]
fn tweetids_1m_figures() {
    let mut keys = lidb_data::sosd::read_u64(DATASET).expect("dataset");
    keys.truncate(KEYS);
    keys.dedup();
    let scratch = Scratch::new("tier-measure");
    let dir = scratch.path();
    let storage: Arc<dyn Storage> = Arc::new(FsStorage);
    let value = vec![0x5au8; VALUE_BYTES];
    let configs = [
        (Family::Plr, 2),
        (Family::Pgm, 2),
        (Family::Plr, 4),
        (Family::Pgm, 4),
        (Family::Plr, 16),
        (Family::Fp, 2),
    ];
    for (g, (family, b)) in configs.into_iter().enumerate() {
        let opts = TierOptions {
            family,
            page_boundary: b,
            params: Params::new(b),
        };
        let started = Instant::now();
        let mut builder =
            StaticTierBuilder::new(Arc::clone(&storage), dir, g as u64, opts).expect("builder");
        for k in &keys {
            builder.add(&k.to_be_bytes(), &value).expect("add");
        }
        let meta = builder.finish().expect("finish");
        let build_ms = started.elapsed().as_millis();
        let tier = StaticTier::open(Arc::clone(&storage), dir, g as u64, ReadMode::Buffered)
            .expect("open");
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let lookups = 20_000u64;
        let before = tier.read_stats();
        for _ in 0..lookups {
            let k = keys
                .get(rng.gen_range(0..keys.len()))
                .copied()
                .expect("key");
            assert!(tier.get(&k.to_be_bytes()).expect("get").is_some());
        }
        let st = tier.read_stats();
        let index_bytes = tier.index().map_or(0, |i| i.size_bytes());
        println!(
            "{{\"dataset\":\"tweetids_1M\",\"index\":\"{family}\",\"page_boundary\":{b},\"entries\":{},\
             \"keylist_bytes\":{},\"model_bytes\":{},\"index_bytes\":{index_bytes},\"svlog_bytes\":{},\
             \"build_ms\":{build_ms},\"train_ms\":{:.3},\"keylist_bytes_per_get\":{:.0},\
             \"keylist_reads_per_get\":{:.2},\"svlog_reads_per_get\":{:.2},\"seed\":42}}",
            meta.entries,
            meta.keylist_bytes,
            meta.model_bytes,
            meta.svlog_bytes,
            meta.train_time.as_secs_f64() * 1e3,
            (st.keylist_bytes - before.keylist_bytes) as f64 / lookups as f64,
            (st.keylist_reads - before.keylist_reads) as f64 / lookups as f64,
            (st.svlog_reads - before.svlog_reads) as f64 / lookups as f64,
        );
        for f in tier.files() {
            storage.remove(&f).expect("remove");
        }
    }
}
