//! Crash tests of the tiered store: the power goes at every N-th storage operation of a synced
//! workload that runs GCs (so inside GC phases too: switch, collect, tier writing, install), or
//! GCs and range-query-assisted conversions in turn (switch, merged pointer scan, key-list writing,
//! install), and the reopened store must hold every acknowledged write. Also: a corrupt value-log record is an
//! error that names the file and the offset.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::Result;
use lidb_storage::mem::MemStorage;
use lidb_testkit::mem::each_power_cut;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{learned, open_on, open_shared, small};

/// What the workload runs every 150 steps besides puts and deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jobs {
    /// Nothing: the background thread runs GCs when due.
    Background,
    Gc,
    /// A GC then two conversions, in turn: conversions point into a GC-built tier's svlog and
    /// into the previous converted tier's files.
    ConvertAndGc,
}

#[derive(Default)]
struct Expect {
    acked: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    in_flight: Option<(Vec<u8>, Option<Vec<u8>>)>,
}

fn workload(
    store: &Store,
    rng: &mut ChaCha8Rng,
    expect: &mut Expect,
    steps: usize,
    jobs: Jobs,
) -> Result<()> {
    for step in 0..steps {
        let k = format!("key{:04}", rng.gen_range(0..300u32)).into_bytes();
        if rng.gen_bool(0.85) {
            let v = vec![(step % 251) as u8; rng.gen_range(1..200)];
            expect.in_flight = Some((k.clone(), Some(v.clone())));
            store.put(&k, &v)?;
            expect.acked.insert(k, Some(v));
        } else {
            expect.in_flight = Some((k.clone(), None));
            store.delete(&k)?;
            expect.acked.insert(k, None);
        }
        expect.in_flight = None;
        if step % 150 == 149 {
            match jobs {
                Jobs::Background => {}
                Jobs::Gc => store.gc()?,
                Jobs::ConvertAndGc if step % 450 == 149 => store.gc()?,
                Jobs::ConvertAndGc => store.convert()?,
            }
        }
    }
    Ok(())
}

fn verify(store: &Store, e: &Expect, ctx: &str) {
    for (k, v) in &e.acked {
        let got = store
            .get(k)
            .unwrap_or_else(|err| panic!("{ctx}: get {k:?}: {err}"));
        let in_flight = e
            .in_flight
            .as_ref()
            .filter(|(fk, _)| fk == k)
            .map(|(_, fv)| fv);
        assert!(
            &got == v || in_flight.is_some_and(|fv| &got == fv),
            "{ctx}: key {k:?} lost or wrong"
        );
    }
}

/// With `background`, GCs start from the store's own thread while the workload keeps writing, so
/// crashes also land between a GC's switch and its install with acknowledged writes in between.
/// With conversions the power goes at EVERY storage operation (a shorter workload: a GC, then two
/// conversions; after recovery a conversion and a GC over it); otherwise at about 120 of them.
fn power_cuts(tier: TierKind, jobs: Jobs) {
    let background = jobs == Jobs::Background;
    let opts = StoreOptions {
        sync: true,
        auto_gc: background,
        over_provisioning: 0.2,
        ..small(tier)
    };
    let steps = match jobs {
        Jobs::Background => 1_500,
        Jobs::Gc => 500,
        Jobs::ConvertAndGc => 460,
    };
    let run = |store: &Store, expect: &mut Expect| {
        workload(
            store,
            &mut ChaCha8Rng::seed_from_u64(7),
            expect,
            steps,
            jobs,
        )
    };
    if jobs == Jobs::ConvertAndGc {
        let store = open_on(MemStorage::new(), &opts).unwrap();
        run(&store, &mut Expect::default()).unwrap();
        assert_eq!((store.stats().conversions, store.stats().gcs), (2, 1));
    }
    let cuts = if jobs == Jobs::ConvertAndGc {
        usize::MAX
    } else {
        120
    };
    each_power_cut(
        |s| open_shared(s, &opts),
        cuts,
        run,
        |store, expect, ctx| {
            verify(store, expect, ctx);
            if jobs == Jobs::ConvertAndGc {
                store
                    .convert()
                    .unwrap_or_else(|e| panic!("{ctx}: conversion after recovery: {e}"));
                verify(store, expect, &format!("{ctx}, after a conversion"));
            }
            store
                .gc()
                .unwrap_or_else(|e| panic!("{ctx}: GC after recovery: {e}"));
            verify(store, expect, &format!("{ctx}, after a GC"));
        },
    );
}

#[test]
fn learnedkv_keeps_every_synced_write_through_power_cuts_anywhere() {
    power_cuts(learned(), Jobs::Gc);
}

#[test]
fn learnedkv_keeps_every_synced_write_through_power_cuts_during_background_gc() {
    power_cuts(learned(), Jobs::Background);
}

#[test]
fn learnedkv_keeps_every_synced_write_through_power_cuts_during_conversions() {
    power_cuts(learned(), Jobs::ConvertAndGc);
}

#[test]
fn lsm_plus_tier_keeps_every_synced_write_through_power_cuts_anywhere() {
    power_cuts(TierKind::Lsm, Jobs::Gc);
}

#[test]
fn write_back_lsm_plus_keeps_every_synced_write_through_power_cuts_anywhere() {
    power_cuts(TierKind::WriteBack, Jobs::Gc);
}

#[test]
fn write_back_lsm_plus_keeps_every_synced_write_through_power_cuts_during_background_gc() {
    power_cuts(TierKind::WriteBack, Jobs::Background);
}

#[test]
fn a_corrupt_value_log_record_names_the_file_and_offset() {
    let mem = MemStorage::new();
    let store = Store::open_with_storage(Arc::new(mem.clone()), Path::new("/kv"), small(learned()))
        .unwrap();
    for i in 0..200u32 {
        store.put(format!("k{i:03}").as_bytes(), &[9; 100]).unwrap();
    }
    store.flush().unwrap();
    drop(store);
    let vlog = mem
        .files()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "vlog"))
        .unwrap();
    // Flip a byte inside some record's value (past the header and the first records).
    mem.corrupt(&vlog, 5_000, 0x40).unwrap();
    let store = Store::open_with_storage(Arc::new(mem), Path::new("/kv"), small(learned()));
    let mut seen = false;
    if let Ok(store) = store {
        for i in 0..200u32 {
            match store.get(format!("k{i:03}").as_bytes()) {
                Ok(v) => assert_eq!(
                    v,
                    Some(vec![9; 100]),
                    "key {i}: a wrong value instead of an error"
                ),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains(".vlog") && msg.contains("offset"), "{msg}");
                    seen = true;
                }
            }
        }
    } else {
        seen = true;
    }
    assert!(seen, "the corruption was never reported");
}
