//! The crash test of the issue: a child `lidb kv --sync` writes while the test kills it with
//! SIGKILL at random instants (mid-write, mid-flush, mid-compaction: the write buffer is tiny so
//! both happen constantly). After every kill the database is opened in this process and must hold
//! every write the child acknowledged with OK, with its latest acknowledged value. The same for
//! learnedkv with GCs, for finedex (FineStore) with checkpoints, and for learnedstore
//! (LearnedStore) with checkpoints, a pool small enough to evict and automatic checkpoints.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lidb_btree::{LearnedStore, LearnedStoreOptions};
use lidb_fine::{FineStore, FineStoreOptions};
use lidb_kv::{Store, StoreOptions};
use lidb_lsm::{Db, Options};

/// The database a child wrote, opened in this process for checking.
enum Reopened {
    Lsm(Db),
    Tiered(Store),
    Fine(Box<FineStore>),
    Tree(Box<LearnedStore>),
}

impl Reopened {
    fn open(engine: &str, dir: &std::path::Path) -> Result<Reopened, String> {
        let e = |err: lidb_storage::Error| err.to_string();
        if engine == "lsm" {
            return Ok(Reopened::Lsm(Db::open(dir, Options::default()).map_err(e)?));
        }
        if engine == "finedex" {
            let fine = FineStore::open(dir, FineStoreOptions::default()).map_err(e)?;
            return Ok(Reopened::Fine(Box::new(fine)));
        }
        if engine == "learnedstore" {
            let mut opts = LearnedStoreOptions::default();
            opts.tree.direct_io = false;
            let tree = LearnedStore::open(dir, &opts).map_err(|err| err.to_string())?;
            return Ok(Reopened::Tree(Box::new(tree)));
        }
        let opts = StoreOptions {
            auto_gc: false,
            ..StoreOptions::default()
        };
        Ok(Reopened::Tiered(Store::open(dir, opts).map_err(e)?))
    }

    fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            Reopened::Lsm(db) => db.get(k).map_err(|e| e.to_string()),
            Reopened::Tiered(s) => s.get(k).map_err(|e| e.to_string()),
            Reopened::Fine(s) => Ok(s.get(k)),
            Reopened::Tree(s) => s.get(k).map_err(|e| e.to_string()),
        }
    }

    fn tables(&self) -> u64 {
        match self {
            Reopened::Lsm(db) => db.stats().levels.iter().map(|l| l.files).sum(),
            Reopened::Tiered(_) | Reopened::Fine(_) | Reopened::Tree(_) => 0,
        }
    }
}
use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const KILLS: u64 = 6;

#[test]
fn every_acknowledged_write_survives_sigkill() {
    sigkill_rounds("lsm", None);
}

/// FineStore with a `checkpoint` every 150 writes: kills land inside checkpoints (snapshot, new
/// log, state switch, removal of the old pair) as well as between them.
#[test]
fn every_acknowledged_write_survives_sigkill_with_finedex_checkpoints() {
    sigkill_rounds("finedex", Some(150));
}

/// LearnedStore with a `checkpoint` every 150 writes, a pool of 64 pages (so pages are evicted
/// and written back all the time) and automatic checkpoints every 64 KiB of log: kills land
/// inside checkpoints (log switch, tree checkpoint, old logs removed), evictions and writes.
#[test]
fn every_acknowledged_write_survives_sigkill_with_learnedstore_checkpoints() {
    sigkill_rounds("learnedstore", Some(150));
}

/// LearnedKV with a `gc` every 150 writes: kills land inside GCs (switch, collect, tier writing,
/// install) as well as between them.
#[test]
fn every_acknowledged_write_survives_sigkill_during_learnedkv_gc() {
    sigkill_rounds("learnedkv", Some(150));
}

/// The table and memtable flags of the LSM engines (a tiny write buffer, so flushes and
/// compactions happen constantly); finedex refuses them, having neither; learnedstore gets a
/// tiny pool and frequent automatic checkpoints instead.
fn lsm_flags(engine: &str) -> &'static [&'static str] {
    if engine == "finedex" {
        &[]
    } else if engine == "learnedstore" {
        &["--pool", "256KiB", "--checkpoint-log-bytes", "64KiB"]
    } else {
        &[
            "--write-buffer",
            "64KiB",
            "--sst-size",
            "4MiB",
            "--index",
            "pgm",
            "--boundary",
            "16",
        ]
    }
}

/// One test of this file at a time: a child spawned by one test inherits, until its exec, the
/// descriptors of a store another test has open in this process, lock included, and that store's
/// next open then reads as "in use by another process".
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn sigkill_rounds(engine: &str, gc_every: Option<u64>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new(&format!("kv-crash-{engine}"));
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    // The latest acknowledged value of every key, over all rounds.
    let mut acked: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut tables_seen = 0u64;
    let mut gcs_done = 0u64;
    for round in 0..KILLS {
        let seed = 0xc0ffee + round;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
            .args([
                "kv",
                "--engine",
                engine,
                "--db",
                dir.to_str().unwrap(),
                "--sync",
            ])
            .args(lsm_flags(engine))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn lidb kv");
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let kill_after = Duration::from_millis(rng.gen_range(100..1500));
        let started = Instant::now();
        let mut in_flight: Option<(String, Option<String>)> = None;
        let mut line = String::new();
        let mut n = 0u64;
        loop {
            if started.elapsed() >= kill_after {
                child.kill().unwrap();
                break;
            }
            if gc_every.is_some_and(|g| n > 0 && n.is_multiple_of(g)) {
                n += 1;
                let job: &[u8] = if engine == "finedex" || engine == "learnedstore" {
                    b"checkpoint\n"
                } else {
                    b"gc\n"
                };
                if stdin.write_all(job).and_then(|()| stdin.flush()).is_err() {
                    break;
                }
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => assert_eq!(line.trim_end(), "OK", "round {round}: job said {line:?}"),
                }
                gcs_done += 1;
                continue;
            }
            let key = format!("k{:05}", rng.gen_range(0..3000u32));
            let (cmd, val) = if rng.gen_bool(0.85) {
                let v = format!("r{round}n{n}{}", "x".repeat(rng.gen_range(0..200)));
                (format!("put {key} {v}\n"), Some(v))
            } else {
                (format!("del {key}\n"), None)
            };
            n += 1;
            in_flight = Some((key.clone(), val.clone()));
            if stdin
                .write_all(cmd.as_bytes())
                .and_then(|()| stdin.flush())
                .is_err()
            {
                break;
            }
            line.clear();
            match stdout.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    assert_eq!(
                        line.trim_end(),
                        "OK",
                        "round {round} (seed {seed}): child said {line:?}"
                    );
                    acked.insert(key, val);
                    in_flight = None;
                }
            }
        }
        let _ = child.wait();
        let db = Reopened::open(engine, &dir)
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): reopen: {e}"));
        for (k, v) in &acked {
            let got = db
                .get(k.as_bytes())
                .unwrap()
                .map(|g| String::from_utf8(g).unwrap());
            let in_flight_ok = in_flight
                .as_ref()
                .is_some_and(|(fk, fv)| fk == k && &got == fv);
            assert!(
                &got == v || in_flight_ok,
                "round {round} (seed {seed}), after {n} commands: key {k}: got {got:?}, acknowledged {v:?}"
            );
        }
        if let Some((k, v)) = in_flight {
            // The write in flight at the kill may or may not have landed; take what is there.
            let got = db
                .get(k.as_bytes())
                .unwrap()
                .map(|g| String::from_utf8(g).unwrap());
            assert!(
                got == v
                    || acked.get(&k).cloned().flatten() == got
                    || (got.is_none() && !acked.contains_key(&k)),
                "round {round}: in-flight key {k} holds {got:?}"
            );
            acked.insert(k, got);
        }
        tables_seen = tables_seen.max(db.tables());
        drop(db);
    }
    if engine == "lsm" {
        assert!(
            tables_seen > 0,
            "no table was ever written: the kills never met a flush"
        );
    } else {
        assert!(
            gcs_done > 0,
            "no GC or checkpoint ran: the kills never met one"
        );
    }
    assert!(
        acked.len() > 100,
        "too few writes were acknowledged to test anything: {}",
        acked.len()
    );
}
