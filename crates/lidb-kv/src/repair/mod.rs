//! Offline repair of a tiered store (`lidb repair --engine learnedkv|lsm+|lsm+tier`), after the
//! LSM's `repair_db` (lidb_lsm::repair).
//!
//! ```text
//! 1 state:   KVSTATE, or one rebuilt from the listing (state.rs; old bytes to lost/KVSTATE@0)
//! 2 LSMs:    repair_db on every LSM directory it names (and lsm+tier's tier LSM)
//! 3 vlog:    the active value log's damaged tail copied to lost/; the log is left as it is (later
//!            records may be pointed to) and a new empty value log becomes the active one
//! 4 tier:    a learned tier whose key list or model does not read whole goes to lost/, dropped
//! 5 KVSTATE: written atomically
//! 6 values:  every key any LSM or the tier holds is read through a temporary open; a key whose
//!            newest value does not read gets a deletion in the newest LSM (so no older value
//!            resurfaces), is reported and listed in lost/REPAIR-dropped-keys.txt
//! ```
//!
//! Caller: one thread, no store open on the directory. Nothing is removed: what does not read is
//! renamed or copied into `lost/`. A crash during a repair leaves a store that a second repair
//! fixes (each step is atomic or idempotent). Limits: step 6 holds every key in memory; when a GC
//! was interrupted (two LSMs) and the active value log is damaged, the GC the temporary open
//! resumes keeps only the new value log, so keys the active LSM points into the old one are
//! dropped (reported and listed; the whole old log is copied to `lost/`).

mod report;
mod state;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use lidb_lsm::repair::repair_db;
use lidb_lsm::{CutKind, Db};
use lidb_storage::RecoveryMode;
use lidb_storage::report::{LOST_DIR, save_lost};
use lidb_storage::{ReadMode, Storage};

pub use report::StoreRepairReport;

use crate::Result;
use crate::manifest::{KvState, write_state};
use crate::static_tier::{StaticTier, keys_path, model_path, svlog_path};
use crate::store::state::lsm_dir;
use crate::store::{Store, StoreOptions, TierKind};
use crate::vlog::{VlogWriter, vlog_path};

/// Name of the listing of dropped keys under `lost/`: one key per line, bytes escaped as Rust
/// escapes them (`\xNN`, `\n`, `\\`), in key order.
pub const DROPPED_KEYS_FILE: &str = "REPAIR-dropped-keys.txt";

/// Repairs the store in `dir` as the engine `opts.tier` names (see the module documentation).
/// Errors: `InvalidOption` when `KVSTATE` names another engine; I/O errors. Damage is set aside
/// and reported, not an error.
pub fn repair_store(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    opts: &StoreOptions,
) -> Result<StoreRepairReport> {
    opts.validate()?;
    let mut report = StoreRepairReport::default();
    let (mut st, why) = state::load_or_rebuild(&**storage, dir, &opts.tier)?;
    report.state_rebuilt = why;

    let mut lsms = st.lsm_dirs.clone();
    if let (TierKind::Lsm, Some(g)) = (&opts.tier, st.tier) {
        lsms.push(g);
    }
    for n in lsms {
        let part = lsm_dir(dir, n);
        if storage.exists(&part) {
            let r = repair_db(storage, &part, &opts.lsm)?;
            report.lsms.push((part, r));
        } else if st.tier == Some(n) {
            st.tier = None;
            report.tier_dropped = Some((n, format!("{} is missing", part.display())));
        }
    }
    repair_active_vlog(&**storage, dir, &mut st, &mut report)?;
    st.vlogs.retain(|&n| storage.exists(&vlog_path(dir, n)));
    if let (TierKind::Learned { .. }, Some(g)) = (&opts.tier, st.tier) {
        check_learned_tier(storage, dir, g, &mut st, &mut report)?;
    }
    write_state(&**storage, dir, &st)?;

    let keys = every_key(storage, dir, &st, opts)?;
    report.keys_checked = keys.len() as u64;
    drop_unreadable(storage, dir, opts, &keys, &mut report)?;
    Ok(report)
}

/// Step 3: a damaged (or unreadable) active value log is copied from its cut to `lost/` and a new
/// value log takes its place as the active one. A torn tail is left to open, which cuts it.
fn repair_active_vlog(
    storage: &dyn Storage,
    dir: &Path,
    st: &mut KvState,
    report: &mut StoreRepairReport,
) -> Result<()> {
    let fresh_needed = match st.vlogs.first() {
        None => true,
        Some(&n) if !storage.exists(&vlog_path(dir, n)) => true,
        Some(&n) => {
            let path = vlog_path(dir, n);
            let size = storage.file_size(&path)?;
            let cut = match VlogWriter::check_tail(storage, dir, n, RecoveryMode::PointInTime) {
                Ok(None) => None,
                Ok(Some(c)) if c.kind == CutKind::TornTail => None,
                Ok(Some(c)) => Some((c.offset, c.detail)),
                Err(e) => Some((0, e.to_string())),
            };
            match cut {
                None => false,
                Some((offset, detail)) => {
                    save_lost(storage, dir, &path, offset)?;
                    if st.lsm_dirs.len() > 1 && offset > 0 {
                        // A GC was interrupted: the open resumes it, and its install keeps only
                        // the newest value log, so the active LSM's pointers into this one will
                        // not read (step 6 drops and lists those keys). Keep the whole log.
                        save_lost(storage, dir, &path, 0)?;
                    }
                    report.vlog_tail = Some((path, offset, size - offset, detail));
                    true
                }
            }
        }
    };
    if fresh_needed {
        let n = st.next_number;
        st.next_number += 1;
        drop(VlogWriter::create(storage, dir, n)?);
        storage.sync_dir(dir)?;
        st.vlogs.insert(0, n);
    }
    Ok(())
}

/// Step 4: the learned tier of generation `g` must open and list every key; else its files go to
/// `lost/` and the tier is dropped from the state.
fn check_learned_tier(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    g: u64,
    st: &mut KvState,
    report: &mut StoreRepairReport,
) -> Result<()> {
    let read = || -> Result<Vec<u64>> {
        let t = open_tier(storage, dir, g)?;
        for e in t.keys()? {
            e?;
        }
        Ok(t.svlog_numbers())
    };
    match read() {
        Ok(svlogs) => {
            if report.state_rebuilt.is_some() {
                st.svlogs = svlogs;
            }
        }
        Err(e) => {
            let lost = dir.join(LOST_DIR);
            storage.create_dir_all(&lost)?;
            for p in [keys_path(dir, g), model_path(dir, g), svlog_path(dir, g)] {
                if let Some(name) = p.file_name()
                    && storage.exists(&p)
                {
                    storage.rename(&p, &lost.join(name))?;
                }
            }
            storage.sync_dir(&lost)?;
            storage.sync_dir(dir)?;
            st.tier = None;
            st.svlogs.clear();
            report.tier_dropped = Some((g, e.to_string()));
        }
    }
    Ok(())
}

/// The learned tier of generation `g`, read with buffered I/O (repair reads it once).
fn open_tier(storage: &Arc<dyn Storage>, dir: &Path, g: u64) -> Result<Arc<StaticTier>> {
    Ok(Arc::new(StaticTier::open(
        Arc::clone(storage),
        dir,
        g,
        ReadMode::Buffered,
    )?))
}

/// Every key an LSM (deletions excluded) or the tier of `st` holds.
fn every_key(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    st: &KvState,
    opts: &StoreOptions,
) -> Result<BTreeSet<Vec<u8>>> {
    let mut keys = BTreeSet::new();
    let mut lsms = st.lsm_dirs.clone();
    if let (TierKind::Lsm, Some(g)) = (&opts.tier, st.tier) {
        lsms.push(g);
    }
    for n in lsms {
        let part = lsm_dir(dir, n);
        if !storage.exists(&part) {
            continue;
        }
        let lsm_opts = lidb_lsm::Options {
            background_compaction: false,
            ..opts.lsm.clone()
        };
        let db = Db::open_with_storage(Arc::clone(storage), &part, lsm_opts)?;
        let mut it = db.scan_with(b"", None, lidb_lsm::ScanOptions::WHOLE)?;
        while it.valid() {
            keys.insert(it.key().to_vec());
            it.next()?;
        }
        drop(it);
        db.close()?;
    }
    if let (TierKind::Learned { .. }, Some(g)) = (&opts.tier, st.tier) {
        let t = open_tier(storage, dir, g)?;
        for e in t.keys()? {
            keys.insert(e?.0);
        }
    }
    Ok(keys)
}

/// Step 6: reads every key through a temporary open; deletes those whose value does not read.
fn drop_unreadable(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    opts: &StoreOptions,
    keys: &BTreeSet<Vec<u8>>,
    report: &mut StoreRepairReport,
) -> Result<()> {
    let opts = StoreOptions {
        auto_gc: false,
        ..opts.clone()
    };
    let store = Store::open_with_storage(Arc::clone(storage), dir, opts)?;
    for k in keys {
        if store.get(k).is_err() {
            report.dropped_keys.push(k.clone());
        }
    }
    for k in &report.dropped_keys {
        store.delete(k)?;
    }
    store.close()?;
    if !report.dropped_keys.is_empty() {
        let lost = dir.join(LOST_DIR);
        storage.create_dir_all(&lost)?;
        let mut text = String::new();
        for k in &report.dropped_keys {
            text.push_str(&k.escape_ascii().to_string());
            text.push('\n');
        }
        let mut f = storage.create(&lost.join(DROPPED_KEYS_FILE))?;
        f.append(text.as_bytes())?;
        f.sync()?;
        storage.sync_dir(&lost)?;
    }
    Ok(())
}
