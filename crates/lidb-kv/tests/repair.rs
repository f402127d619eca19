//! `repair_store` ("Repair") on each tiered engine: a lost KVSTATE, a value log flipped
//! in the middle, a damaged tier file and a damaged LSM manifest. After repair the store opens and
//! every key reads its final value, or (where the report says its data was set aside) nothing or
//! an earlier value of that key, never an error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::PathBuf;
use std::sync::Arc;

use lidb_kv::manifest::{read_state, state_path};
use lidb_kv::repair::{DROPPED_KEYS_FILE, StoreRepairReport, repair_store};
use lidb_kv::vlog::vlog_path;
use lidb_storage::RecoveryMode;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;

mod support;
use lidb_testkit::mem::{Damage, damage, restore, snapshot};
use support::damage::{Engine, Model, key, root, values_ever, workload};
use support::small;

const TIERED: [Engine; 3] = [Engine::LearnedKv, Engine::LsmPlus, Engine::LsmTier];

fn tier(engine: Engine) -> lidb_kv::TierKind {
    match engine {
        Engine::LearnedKv => support::learned(),
        Engine::LsmPlus => lidb_kv::TierKind::WriteBack,
        _ => lidb_kv::TierKind::Lsm,
    }
}

/// A store after a seeded workload with a GC in the middle and a clean close.
fn build(engine: Engine) -> (MemStorage, Vec<Model>) {
    let s = MemStorage::new();
    let db = engine.open(&s, RecoveryMode::default()).unwrap();
    let (models, _) = workload(&db, 7, 480);
    db.close().unwrap();
    (s, models)
}

fn repair(engine: Engine, s: &MemStorage) -> StoreRepairReport {
    let st: Arc<dyn Storage> = Arc::new(s.clone());
    repair_store(&st, &root(), &small(tier(engine))).unwrap()
}

/// Opens after repair; returns how many keys read exact. Every other key reads an older value
/// or nothing; keys the report dropped read nothing.
fn check(
    engine: Engine,
    s: &MemStorage,
    models: &[Model],
    r: &StoreRepairReport,
    ctx: &str,
) -> u32 {
    let model = models.last().unwrap();
    let ever = values_ever(models);
    let db = engine
        .open(s, RecoveryMode::default())
        .unwrap_or_else(|e| panic!("{ctx}: open after repair: {e}\n{r}"));
    let mut exact = 0;
    for i in 0..300 {
        let k = key(i);
        let got = db
            .get(&k)
            .unwrap_or_else(|e| panic!("{ctx}: key {i}: {e}\n{r}"));
        if r.dropped_keys.contains(&k) {
            assert_eq!(got, None, "{ctx}: dropped key {i} still reads a value");
        }
        if got.as_ref() == model.get(&k) {
            exact += 1;
        } else if let Some(v) = &got {
            assert!(
                ever[&k].contains(v),
                "{ctx}: key {i} reads a value it never had"
            );
        }
    }
    db.close().unwrap();
    exact
}

fn newest(s: &MemStorage, dir: &std::path::Path, suffix: &str) -> Option<PathBuf> {
    s.list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .max()
        .map(|n| dir.join(n))
}

#[test]
fn a_lost_kvstate_is_rebuilt_and_every_key_is_exact() {
    for engine in TIERED {
        for how in ["deleted", "flipped"] {
            let ctx = format!("{engine:?}: KVSTATE {how}");
            let (s, models) = build(engine);
            let path = state_path(&root());
            if how == "deleted" {
                s.remove(&path).unwrap();
            } else {
                damage(&s, &path, 10, Damage::Flip, 3);
            }
            // Not a new store to create over the old one's files: a loud failure, nothing swept.
            let before = snapshot(&s);
            assert!(engine.open(&s, RecoveryMode::default()).is_err(), "{ctx}");
            assert!(
                snapshot(&s) == before,
                "{ctx}: the failed open changed files"
            );
            let r = repair(engine, &s);
            assert!(r.state_rebuilt.is_some(), "{ctx}: {r}");
            let exact = check(engine, &s, &models, &r, &ctx);
            assert_eq!(exact, 300, "{ctx}: {r}");
        }
    }
}

#[test]
fn a_value_log_flipped_in_the_middle_drops_only_the_keys_pointing_there() {
    for engine in TIERED {
        let ctx = format!("{engine:?}: active value log flipped");
        let (s, models) = build(engine);
        let state = read_state(&s, &root()).unwrap().unwrap();
        let vlog = vlog_path(&root(), state.vlogs[0]);
        let len = s.file_size(&vlog).unwrap();
        assert!(len > 1000, "{ctx}: {len}");
        // The middle (likely a record an overwrite made dead) and the last record (the newest
        // put: live unless a later deletion hit its key).
        s.corrupt(&vlog, len / 2, 0x08).unwrap();
        s.corrupt(&vlog, len - 3, 0x08).unwrap();
        assert!(engine.open(&s, RecoveryMode::default()).is_err(), "{ctx}");
        let r = repair(engine, &s);
        assert!(r.vlog_tail.is_some(), "{ctx}: {r}");
        let exact = check(engine, &s, &models, &r, &ctx);
        assert!(!r.dropped_keys.is_empty(), "{ctx}: {r}");
        assert_eq!(exact as usize + r.dropped_keys.len(), 300, "{ctx}: {r}");
        assert!(
            s.exists(&root().join("lost").join(DROPPED_KEYS_FILE)),
            "{ctx}"
        );
        // A second repair finds nothing more to drop.
        let again = repair(engine, &s);
        assert!(again.dropped_keys.is_empty(), "{ctx}: {again}");
    }
}

#[test]
fn a_damaged_tier_file_is_set_aside_and_every_key_reads() {
    for engine in [Engine::LearnedKv, Engine::LsmTier] {
        let ctx = format!("{engine:?}: tier damaged");
        let (s, models) = build(engine);
        let state = read_state(&s, &root()).unwrap().unwrap();
        let g = state.tier.expect("the workload's GC made a tier");
        let file = match engine {
            Engine::LearnedKv => root().join(format!("{g:06}.keys")),
            _ => newest(&s, &root().join(format!("lsm-{g:06}")), ".sst").unwrap(),
        };
        let len = s.file_size(&file).unwrap();
        s.corrupt(&file, len / 3, 0x40).unwrap();
        let r = repair(engine, &s);
        check(engine, &s, &models, &r, &ctx);
    }
}

#[test]
fn a_damaged_lsm_manifest_is_rebuilt_and_every_key_is_exact() {
    for engine in TIERED {
        let ctx = format!("{engine:?}: LSM manifest flipped");
        let (s, models) = build(engine);
        let state = read_state(&s, &root()).unwrap().unwrap();
        let lsm = root().join(format!("lsm-{:06}", state.lsm_dirs[0]));
        let m = newest(&s, &lsm, "").filter(|_| true);
        let manifest = s
            .list(&lsm)
            .unwrap()
            .into_iter()
            .find(|n| n.starts_with("MANIFEST-"))
            .map(|n| lsm.join(n))
            .or(m)
            .unwrap();
        let len = s.file_size(&manifest).unwrap();
        s.corrupt(&manifest, len / 2, 0x02).unwrap();
        assert!(engine.open(&s, RecoveryMode::default()).is_err(), "{ctx}");
        let r = repair(engine, &s);
        let exact = check(engine, &s, &models, &r, &ctx);
        assert_eq!(exact, 300, "{ctx}: {r}");
    }
}

/// Power cuts through the repair of each tiered store that lost its KVSTATE: the store then
/// opens, or a second repair fixes it, and every key reads exact (only KVSTATE was damaged).
#[test]
fn a_crash_during_repair_leaves_a_store_that_opens_or_repairs() {
    use lidb_storage::powercut::PowerCut;
    for engine in TIERED {
        let (base, models) = build(engine);
        base.remove(&state_path(&root())).unwrap();
        let clean = snapshot(&base);
        let opts = small(tier(engine));
        let total = {
            let p = PowerCut::new(restore(&clean), u64::MAX, 0);
            let st: Arc<dyn Storage> = Arc::new(p.clone());
            repair_store(&st, &root(), &opts).unwrap();
            p.ops()
        };
        let step = (total / 60).max(1) as usize;
        for cut_at in (1..=total).step_by(step) {
            let ctx = format!("{engine:?}: power cut at operation {cut_at} of {total}");
            let mem = restore(&clean);
            let p = PowerCut::new(mem.clone(), cut_at, cut_at);
            let st: Arc<dyn Storage> = Arc::new(p.clone());
            // The last operations' errors may be ignored (a removal of an obsolete file).
            let _ = repair_store(&st, &root(), &opts);
            if !p.is_cut() {
                mem.crash(cut_at);
            }
            let r = match engine.open(&mem, RecoveryMode::default()) {
                Ok(db) => {
                    db.close().unwrap();
                    StoreRepairReport::default()
                }
                Err(_) => repair(engine, &mem),
            };
            let exact = check(engine, &mem, &models, &r, &ctx);
            assert_eq!(exact, 300, "{ctx}: {r}");
        }
    }
}
