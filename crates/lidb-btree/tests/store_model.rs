//! Model-based test: random puts, deletes, reads, scans, checkpoints, clean closes, drops and
//! crashes against a `BTreeMap`, over seeds (the failing seed is printed; set
//! `BTWAL_MODEL_SEED` to replay one).

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{open, synced};
use lidb_btree::WalOptions;
use lidb_storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn run(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let opts = WalOptions {
        // Half the seeds checkpoint by themselves every few hundred bytes of log.
        checkpoint_log_bytes: if seed.is_multiple_of(2) { 0 } else { 600 },
        checkpoint_on_close: rng.gen_bool(0.5),
        ..synced()
    };
    let mem = Arc::new(MemStorage::new());
    let mut store = Some(open(mem.clone(), opts.clone()).unwrap());
    let mut model = Model::new();
    for step in 0..400 {
        let s = store.as_ref().unwrap();
        let key = format!("key{:03}", rng.gen_range(0..40)).into_bytes();
        match rng.gen_range(0..100) {
            0..=44 => {
                let len = rng.gen_range(0..24);
                let value: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
                s.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            45..=64 => {
                let was = model.remove(&key).is_some();
                assert_eq!(s.delete(&key).unwrap(), was, "seed {seed} step {step}");
            }
            65..=84 => {
                assert_eq!(
                    s.get(&key).unwrap(),
                    model.get(&key).cloned(),
                    "seed {seed} step {step}"
                );
            }
            85..=89 => {
                let got = s.scan(&key, None, 7).unwrap();
                let want: Vec<_> = model
                    .range(key.clone()..)
                    .take(7)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "seed {seed} step {step}");
            }
            90..=93 => s.checkpoint().unwrap(),
            94..=95 => {
                store.take().unwrap().close().unwrap();
                store = Some(open(mem.clone(), opts.clone()).unwrap());
            }
            96..=97 => {
                drop(store.take());
                store = Some(open(mem.clone(), opts.clone()).unwrap());
            }
            _ => {
                // Every write was synced before it returned: a power cut loses none.
                drop(store.take());
                mem.crash(seed.wrapping_add(step));
                store = Some(open(mem.clone(), opts.clone()).unwrap());
                let report = store.as_ref().unwrap().recovery_report();
                assert!(report.cut.is_none(), "seed {seed} step {step}: {report}");
            }
        }
    }
    let s = store.take().unwrap();
    let all: Model = s.scan(&[], None, usize::MAX).unwrap().into_iter().collect();
    assert_eq!(all, model, "seed {seed}");
    s.close().unwrap();
    let s = open(mem.clone(), opts).unwrap();
    let all: Model = s.scan(&[], None, usize::MAX).unwrap().into_iter().collect();
    assert_eq!(all, model, "seed {seed} after the last reopen");
}

#[test]
fn the_store_matches_a_map_over_random_operations_and_reopens() {
    if let Some(seed) = std::env::var("BTWAL_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed);
        return;
    }
    for seed in 0..24 {
        let r = std::panic::catch_unwind(|| run(seed));
        if let Err(e) = r {
            eprintln!("failing seed: {seed} (replay with BTWAL_MODEL_SEED={seed})");
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn automatic_checkpoints_run_in_the_background_and_remove_old_logs() {
    let opts = WalOptions {
        checkpoint_log_bytes: 500,
        ..synced()
    };
    let mem = Arc::new(MemStorage::new());
    let store = open(mem.clone(), opts.clone()).unwrap();
    for i in 0..200u32 {
        store.put(&i.to_be_bytes(), b"some value bytes").unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.target().checkpoints_written() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        store.target().checkpoints_written() > 0,
        "no automatic checkpoint ran"
    );
    drop(store);
    let logs = mem
        .files()
        .iter()
        .filter(|p| p.to_string_lossy().contains("wal-"))
        .count();
    assert!(logs <= 2, "{logs} logs left: {:?}", mem.files());
    let store = open(mem.clone(), opts).unwrap();
    assert!(store.recovery_report().checkpoint_lsn > 0);
    assert_eq!(store.scan(&[], None, usize::MAX).unwrap().len(), 200);
}
