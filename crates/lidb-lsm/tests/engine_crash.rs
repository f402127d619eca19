//! Crash and fault tests of the engine on in-memory storage.
//!
//! `PowerCut` wraps a MemStorage and cuts the power at its N-th operation (any method of the
//! storage or of a file it handed out): the MemStorage crashes (dropping unsynced bytes, tearing
//! tails, undoing unsynced directory changes) and every later call fails. Trying every N from 1 up
//! puts the crash inside WAL appends, flushes, compactions and manifest switches alike. After the
//! crash the database is reopened on the rebooted storage and must hold every write acknowledged
//! with sync, and nothing that was never written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::{Db, Options};
use lidb_storage::Result;
use lidb_storage::mem::{Fault, MemStorage};
use lidb_storage::powercut::PowerCut;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::small_options;

/// What the database may hold for each key: the acknowledged value, or (for the one write that
/// failed when the power went) that write's value too.
#[derive(Default)]
struct Expect {
    acked: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    in_flight: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn workload(db: &Db, rng: &mut ChaCha8Rng, expect: &mut Expect, steps: usize) -> Result<()> {
    for _ in 0..steps {
        let k = format!("key{:05}", rng.gen_range(0..400u32)).into_bytes();
        let r = rng.gen_range(0..100);
        if r < 70 {
            let v = vec![rng.r#gen::<u8>(); rng.gen_range(1..300)];
            expect.in_flight = vec![(k.clone(), Some(v.clone()))];
            db.put(&k, &v)?;
            expect.acked.insert(k, Some(v));
        } else if r < 85 {
            expect.in_flight = vec![(k.clone(), None)];
            db.delete(&k)?;
            expect.acked.insert(k, None);
        } else if r < 95 {
            db.flush()?;
        } else {
            db.compact()?;
        }
        expect.in_flight.clear();
    }
    Ok(())
}

fn verify(db: &Db, expect: &Expect, ctx: &str) {
    for (k, v) in &expect.acked {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{ctx}: get {k:?}: {e}"));
        let in_flight = expect
            .in_flight
            .iter()
            .find(|(fk, _)| fk == k)
            .map(|(_, fv)| fv);
        let ok = &got == v || in_flight.is_some_and(|fv| &got == fv);
        assert!(
            ok,
            "{ctx}: key {k:?}: got {:?} expected {:?}",
            got.map(|g| g.len()),
            v.as_ref().map(Vec::len)
        );
    }
}

#[test]
fn every_synced_write_survives_a_power_cut_at_any_operation() {
    let opts = Options {
        sync: true,
        ..small_options(Family::Pgm, 16)
    };
    let steps = 400;
    // Count the operations of a full run, then cut at spread points across it.
    let total = {
        let p = PowerCut::new(MemStorage::new(), u64::MAX, 0);
        let db =
            Db::open_with_storage(Arc::new(p.clone()), Path::new("/db"), opts.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        workload(&db, &mut rng, &mut Expect::default(), steps).unwrap();
        drop(db);
        p.ops()
    };
    let cuts: Vec<u64> = (1..=total).step_by((total as usize / 150).max(1)).collect();
    for (i, &cut_at) in cuts.iter().enumerate() {
        let seed = i as u64;
        let mem = MemStorage::new();
        let p = PowerCut::new(mem.clone(), cut_at, seed);
        let mut expect = Expect::default();
        let ctx = format!("power cut at operation {cut_at} of {total} (tear seed {seed})");
        if let Ok(db) = Db::open_with_storage(Arc::new(p.clone()), Path::new("/db"), opts.clone()) {
            let mut rng = ChaCha8Rng::seed_from_u64(99);
            let _ = workload(&db, &mut rng, &mut expect, steps);
            drop(db);
        }
        if !p.is_cut() {
            mem.crash(seed);
        }
        let db = Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone())
            .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
        verify(&db, &expect, &ctx);
        // A second crash right after recovery loses nothing either.
        drop(db);
        mem.crash(seed + 1000);
        let db = Db::open_with_storage(Arc::new(mem), Path::new("/db"), opts.clone())
            .unwrap_or_else(|e| panic!("{ctx}: second reopen failed: {e}"));
        verify(&db, &expect, &format!("{ctx}, after a second crash"));
    }
}

#[test]
fn injected_faults_give_errors_and_lose_no_acknowledged_write() {
    for (i, kind) in [Fault::WriteError, Fault::ShortWrite, Fault::SyncError]
        .into_iter()
        .enumerate()
    {
        for after in [0u64, 1, 5, 20, 60, 200] {
            let ctx = format!("{kind:?} after {after}");
            let mem = MemStorage::new();
            let opts = Options {
                sync: true,
                ..small_options(Family::Rs, 16)
            };
            let db = Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone())
                .unwrap();
            mem.fail_after(after, kind);
            let mut expect = Expect::default();
            let mut rng = ChaCha8Rng::seed_from_u64(i as u64 * 100 + after);
            let r = workload(&db, &mut rng, &mut expect, 300);
            assert!(r.is_err(), "{ctx}: the fault never surfaced");
            // Reads keep working after a failed write.
            let _ = db.get(b"key00001");
            drop(db);
            mem.clear_faults();
            mem.crash(after);
            let db = Db::open_with_storage(Arc::new(mem), Path::new("/db"), opts)
                .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            verify(&db, &expect, &ctx);
        }
    }
}

#[test]
fn a_corrupt_table_gives_corruption_naming_the_file_never_a_wrong_value() {
    let mem = MemStorage::new();
    let opts = small_options(Family::Pgm, 16);
    let db = Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone()).unwrap();
    for i in 0..3_000u32 {
        db.put(format!("key{i:06}").as_bytes(), &i.to_le_bytes().repeat(8))
            .unwrap();
    }
    db.compact().unwrap();
    drop(db);
    let tables: Vec<_> = mem
        .files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert!(!tables.is_empty());
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut corruptions_seen = 0;
    for round in 0..40 {
        let table = &tables[round % tables.len()];
        let size = mem.durable_len(table).unwrap();
        let offset = rng.gen_range(0..size);
        let mask = 1u8 << rng.gen_range(0..8);
        mem.corrupt(table, offset, mask).unwrap();
        match Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone()) {
            Err(e) => {
                assert!(
                    e.to_string().contains(".sst"),
                    "round {round}: error does not name the table: {e}"
                );
                corruptions_seen += 1;
            }
            Ok(db) => {
                for i in (0..3_000u32).step_by(7) {
                    match db.get(format!("key{i:06}").as_bytes()) {
                        Ok(Some(v)) => assert_eq!(
                            v,
                            i.to_le_bytes().repeat(8),
                            "round {round}: wrong value for {i}"
                        ),
                        Ok(None) => panic!("round {round}: key {i} lost without an error"),
                        Err(e) => {
                            assert!(e.to_string().contains(".sst"), "round {round}: {e}");
                            corruptions_seen += 1;
                        }
                    }
                }
            }
        }
        // Flip the bit back for the next round.
        mem.corrupt(table, offset, mask).unwrap();
    }
    assert!(corruptions_seen > 0, "no corruption was ever detected");
}
