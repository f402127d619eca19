//! The damage campaign for LearnedStore (as lidb-kv's `damage_campaign.rs` is for the other
//! engines): after a clean close, every file of the store (the page file, the logs, `WALSTATE`)
//! gets a flipped bit, a zeroed 512-byte run or a truncation at a seeded offset; the reopened
//! store must answer every key exactly or fail loudly (an error naming the damage), never answer
//! wrong. The learned path is on, so its saved blob inside the page file is damaged too. Each
//! failure names the seed, file, damage and offset.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lidb_btree::{Error, LearnedStore, LearnedStoreOptions, Options};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> LearnedStoreOptions {
    let mut o = LearnedStoreOptions {
        tree: Options {
            pool_bytes: 64 * 4096,
            direct_io: false,
            ..Options::default()
        },
        ..LearnedStoreOptions::default()
    };
    o.wal.sync = true;
    // Writes after the last checkpoint stay in the log, so log damage is covered too.
    o.wal.checkpoint_on_close = false;
    o.wal.checkpoint_log_bytes = 0;
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("user{i:06}").into_bytes()
}

/// A store with two checkpoints and writes after the last, closed cleanly; its final contents.
fn build(dir: &Path) -> Model {
    let store = LearnedStore::open(dir, &options()).unwrap();
    let mut model = Model::new();
    for round in 0..3u32 {
        for i in (round * 7..3000).step_by(3) {
            let v = vec![(i % 251) as u8; 40 + (i % 60) as usize];
            store.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        for i in (0..3000).step_by(17 + round as usize) {
            store.delete(&key(i)).unwrap();
            model.remove(&key(i));
        }
        if round < 2 {
            store.checkpoint().unwrap();
        }
    }
    store.close().unwrap();
    model
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "LOCK"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    out
}

fn restore(dir: &Path, snapshot: &[(PathBuf, Vec<u8>)]) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else if !snapshot.iter().any(|(s, _)| *s == p) {
            std::fs::remove_file(&p).unwrap();
        }
    }
    for (p, bytes) in snapshot {
        std::fs::write(p, bytes).unwrap();
    }
}

/// An error that says the store is damaged: corruption (of the page file or a log) or an I/O
/// error on a file of the store (a truncated page file reads short).
fn is_loud(e: &Error) -> bool {
    match e {
        Error::Corruption { .. } => true,
        Error::Io { file, .. } => !file.as_os_str().is_empty(),
        Error::Log(lidb_storage::Error::Corruption { .. }) => true,
        Error::Log(lidb_storage::Error::Io { .. }) => true,
        _ => false,
    }
}

#[derive(Debug, Default)]
struct Tally {
    exact: u64,
    failed_open: u64,
    loud_reads: u64,
}

#[test]
fn damage_after_a_clean_close_is_exact_answers_or_a_loud_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let snapshot = files(dir.path());
    assert!(
        snapshot
            .iter()
            .any(|(p, b)| p.ends_with("btree.pages") && !b.is_empty())
            && snapshot
                .iter()
                .any(|(p, b)| p.to_string_lossy().ends_with(".log") && b.len() > 8),
        "the store must have a page file and a log with records: {:?}",
        snapshot
            .iter()
            .map(|(p, b)| (p, b.len()))
            .collect::<Vec<_>>()
    );
    let mut tally = Tally::default();
    let trials: u64 = std::env::var("LIDB_DAMAGE_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(200);
    for seed in 0..trials {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (path, bytes) = &snapshot[rng.gen_range(0..snapshot.len())];
        if bytes.is_empty() {
            continue;
        }
        let at = rng.gen_range(0..bytes.len());
        let mut damaged = bytes.clone();
        let what = match rng.gen_range(0..3) {
            0 => {
                damaged[at] ^= 1 << rng.gen_range(0..8);
                "flipped bit"
            }
            1 => {
                let end = (at + 512).min(damaged.len());
                damaged[at..end].fill(0);
                "zeroed 512 bytes"
            }
            _ => {
                damaged.truncate(at);
                "truncated"
            }
        };
        if damaged == *bytes {
            continue;
        }
        std::fs::write(path, &damaged).unwrap();
        let ctx = format!("seed {seed}: {what} at {at} of {}", path.display());
        match LearnedStore::open(dir.path(), &options()) {
            Err(e) => {
                assert!(
                    is_loud(&e),
                    "{ctx}: the open failed quietly or oddly: {e:?}"
                );
                tally.failed_open += 1;
            }
            Ok(store) => {
                let mut loud = false;
                for i in 0..3000 {
                    match store.get(&key(i)) {
                        Ok(got) => assert_eq!(got.as_ref(), model.get(&key(i)), "{ctx}: key {i}"),
                        Err(e) => {
                            assert!(is_loud(&e), "{ctx}: key {i}: {e:?}");
                            loud = true;
                        }
                    }
                }
                match store.scan(b"", None, usize::MAX) {
                    Ok(all) => {
                        let want: Vec<_> =
                            model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                        assert!(all == want, "{ctx}: the scan differs from the model");
                    }
                    Err(e) => {
                        assert!(is_loud(&e), "{ctx}: scan: {e:?}");
                        loud = true;
                    }
                }
                drop(store);
                if loud {
                    tally.loud_reads += 1;
                } else {
                    tally.exact += 1;
                }
            }
        }
        restore(dir.path(), &snapshot);
    }
    eprintln!("LearnedStore damage campaign: {tally:?}");
    assert!(
        tally.failed_open + tally.loud_reads > 0,
        "no damage was ever noticed: {tally:?}"
    );
}
