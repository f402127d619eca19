//! Crash tests of the tiered store: the power goes at every N-th storage operation of a synced
//! workload that runs GCs (so inside GC phases too: switch, collect, tier writing, install), and
//! the reopened store must hold every acknowledged write. Also: a corrupt value-log record is an
//! error that names the file and the offset.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support {
    include!("support/store_options.rs");
    include!("support/power_cut.rs");
}

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_lsm::Result;
use lidb_lsm::storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{each_power_cut, learned, small};

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
    manual_gc: bool,
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
        if manual_gc && step % 150 == 149 {
            store.gc()?;
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
fn power_cuts(tier: TierKind, background: bool) {
    let opts = StoreOptions {
        sync: true,
        auto_gc: background,
        over_provisioning: 0.2,
        ..small(tier)
    };
    let steps = if background { 1_500 } else { 500 };
    each_power_cut(
        &opts,
        120,
        |store, expect: &mut Expect| {
            workload(
                store,
                &mut ChaCha8Rng::seed_from_u64(7),
                expect,
                steps,
                !background,
            )
        },
        |store, expect, ctx| {
            verify(store, expect, ctx);
            store
                .gc()
                .unwrap_or_else(|e| panic!("{ctx}: GC after recovery: {e}"));
            verify(store, expect, &format!("{ctx}, after a GC"));
        },
    );
}

#[test]
fn learnedkv_keeps_every_synced_write_through_power_cuts_anywhere() {
    power_cuts(learned(), false);
}

#[test]
fn learnedkv_keeps_every_synced_write_through_power_cuts_during_background_gc() {
    power_cuts(learned(), true);
}

#[test]
fn lsm_plus_tier_keeps_every_synced_write_through_power_cuts_anywhere() {
    power_cuts(TierKind::Lsm, false);
}

#[test]
fn write_back_lsm_plus_keeps_every_synced_write_through_power_cuts_anywhere() {
    power_cuts(TierKind::WriteBack, false);
}

#[test]
fn write_back_lsm_plus_keeps_every_synced_write_through_power_cuts_during_background_gc() {
    power_cuts(TierKind::WriteBack, true);
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
