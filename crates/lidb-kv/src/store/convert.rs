//! Range-query-assisted conversion (the LearnedKV paper, section 4.5.1): a new learned tier built from
//! a merged scan of the LSM and the old tier WITHOUT moving values. Same protocol as GC (gc.rs),
//! with the write phase replaced:
//!
//! 1. **Switch** (`gc::switch`): a new LSM and value log take writes; the old LSM is frozen;
//!    `KVSTATE` names both LSMs.
//! 2. **Collect**: the frozen LSM's (key, pointer) pairs merged with the old tier's entries in key
//!    order, the old tier treated as one more, bottom level (the LSM wins; its tombstones drop
//!    keys). Pointers only: no value is read.
//! 3. **Build**: a referencing static tier (`StaticTierBuilder::referencing`): key list and model,
//!    no svlog; each entry points at the record that holds the key's newest value, in a frozen
//!    `.vlog` or an older tier's `.svlog` (the key list's file table names them).
//! 4. **Install** (`gc::install`): `KVSTATE` names the new tier, the `.vlog` files it reads (in
//!    `vlogs`) and the `.svlog` files it reads (in `svlogs`); the frozen LSM, the old tier's key
//!    list and model, and every log no longer read are retired.
//!
//! Callers: `Store::convert` and the background thread (`due`), any thread; one GC or conversion
//! at a time (the GC mutex). Space is not reclaimed (the paper: "without improving space
//! utilization"): the next GC copies every live value into a fresh svlog, after which the old
//! `.vlog` and `.svlog` files go.
//!
//! Crash recovery: a crash after the switch and before the install leaves a frozen LSM in
//! `KVSTATE`; `Store::open` finishes it as a normal GC (which is also correct: GC reads values
//! through the old tier's file table, and reclaims the space too). Files of the half-built
//! generation are not named by `KVSTATE` and are swept at open.
//!
//! Limits and defaults: when more files than a key list can name (237) would be referenced, the
//! conversion copies the values as GC does instead. The thresholds (`convert_at_lsm_bytes`,
//! `convert_at_lsm_levels`) default to off: GC already converts whenever the value logs outgrow
//! the live data, and a conversion reclaims nothing while making scans read values one by one;
//! the right LSM size or depth depends on the workload, as the paper says ("typically when LSM
//! performance begins to degrade").

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lidb_storage::error::corruption;
use lidb_storage::{Error, Result};

use crate::Pointer;
use crate::static_tier::format::{MAX_TIER_FILES, TierFileKind};
use crate::static_tier::{StaticTier, StaticTierBuilder, TierEntry, TierIter, TierOptions};
use crate::store::Shared;
use crate::store::gc;
use crate::store::options::TierKind;
use crate::store::state::{Tier, TierHandle, Tiers, VlogFile, lock};

/// Whether the active LSM has reached a conversion threshold (`convert_at_lsm_bytes` of tables
/// or `convert_at_lsm_levels` non-empty levels); never for lsm+ or with both thresholds 0.
pub(crate) fn due(s: &Shared) -> bool {
    let (bytes, levels) = (s.opts.convert_at_lsm_bytes, s.opts.convert_at_lsm_levels);
    if (bytes == 0 && levels == 0) || !matches!(s.opts.tier, TierKind::Learned { .. }) {
        return false;
    }
    let stats = s.current().active.db().stats();
    let lsm_bytes: u64 = stats.levels.iter().map(|l| l.bytes).sum();
    let non_empty = stats.levels.iter().filter(|l| l.files > 0).count();
    (bytes > 0 && lsm_bytes >= bytes) || (levels > 0 && non_empty >= levels)
}

/// Runs one conversion to completion (`InvalidOption` unless the tier is learned). A view that
/// already has a frozen LSM (a GC or conversion that failed half-way) is finished as a GC.
pub(crate) fn run(s: &Shared) -> Result<()> {
    let TierKind::Learned {
        family,
        page_boundary,
        params,
    } = &s.opts.tier
    else {
        return Err(Error::InvalidOption(
            "conversion builds a learned tier; this store has none (lsm+ or lsm+tier): use gc"
                .into(),
        ));
    };
    let opts = TierOptions {
        family: *family,
        page_boundary: *page_boundary,
        params: params.clone(),
    };
    convert_once(s, opts).inspect_err(|e| s.stop_writes(e))
}

/// `run` once the tier is known to be learned; its failure stops writes (gc.rs says why).
fn convert_once(s: &Shared, opts: TierOptions) -> Result<()> {
    let one_at_a_time = lock(&s.gc_lock);
    gc::refuse_if_stopped(s)?;
    if s.current().frozen.is_some() {
        drop(one_at_a_time);
        return gc::run(s);
    }
    let view = gc::switch(s)?;
    let generation = s.new_number();
    let frozen_vlogs: Vec<Arc<VlogFile>> = view.vlogs.iter().skip(1).cloned().collect();
    let old_svlogs = view.tier.as_ref().map_or(0, |t| t.svlogs.len());
    if frozen_vlogs.len() + old_svlogs > MAX_TIER_FILES as usize {
        // The key list could not name every file: copy the values instead, as GC does.
        let (tier, tier_vlogs, live) = gc::build_learned(s, &view, generation, opts)?;
        let svlog_bytes = match &tier.tier {
            Tier::Learned(t) => t.svlog_bytes(),
            Tier::Lsm(_) => 0,
        };
        gc::install(s, Some(tier), tier_vlogs, live, svlog_bytes)?;
        s.counters.gcs.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let (tier, kept_vlogs, live) = build(s, &view, &frozen_vlogs, generation, opts)?;
    // Every file the tier reads stays on disk: the svlogs and the value logs it keeps.
    let read_bytes = match &tier.tier {
        Tier::Learned(t) => t.svlog_bytes() + t.vlog_bytes(),
        Tier::Lsm(_) => 0,
    };
    gc::install(s, Some(tier), kept_vlogs, live, read_bytes)?;
    s.counters.conversions.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The next entry of the old tier, if there is one.
fn next_entry(it: &mut Option<TierIter>) -> Result<Option<TierEntry>> {
    match it {
        Some(it) => it.next_entry(),
        None => Ok(None),
    }
}

/// Phases 2 and 3: the referencing tier of the frozen LSM over the old tier; also the value logs
/// it reads (handles from the view) and the bytes of the records it points to.
fn build(
    s: &Shared,
    view: &Arc<Tiers>,
    frozen_vlogs: &[Arc<VlogFile>],
    generation: u64,
    opts: TierOptions,
) -> Result<(Arc<TierHandle>, Vec<Arc<VlogFile>>, u64)> {
    let Some(frozen) = view.frozen.as_ref() else {
        unreachable!("conversion runs after the switch, which freezes the LSM");
    };
    let mut lsm = frozen
        .db()
        .scan_with(b"", None, lidb_lsm::ScanOptions::WHOLE)?;
    let mut old = match view.tier.as_ref().map(|h| &h.tier) {
        Some(Tier::Learned(t)) => Some(t.iter(b"")?),
        _ => None,
    };
    let mut below = next_entry(&mut old)?;
    let mut b = StaticTierBuilder::referencing(Arc::clone(&s.storage), &s.dir, generation, opts)?;
    let mut live = 0u64;
    loop {
        let key = lsm.valid().then(|| lsm.key().to_vec());
        let from_lsm = match (&key, &below) {
            (None, None) => break,
            (Some(k), Some(e)) => k.as_slice() <= e.key.as_slice(),
            (k, _) => k.is_some(),
        };
        if let (true, Some(k)) = (from_lsm, key) {
            if below.as_ref().is_some_and(|e| e.key == k) {
                below = next_entry(&mut old)?;
            }
            let raw = lsm.value();
            if !raw.is_empty() {
                let p = Pointer::decode(raw)
                    .filter(|p| frozen_vlogs.iter().any(|v| v.number == p.file))
                    .ok_or_else(|| {
                        corruption(
                            &frozen.dir,
                            format!("the entry of {k:?} is not a pointer into a frozen value log"),
                        )
                    })?;
                s.note_live_key(&k);
                b.add_ref(&k, TierFileKind::Vlog, p.file, p.offset, p.len)?;
                live += u64::from(p.len);
            }
            lsm.next()?;
        } else if let Some(e) = below.take() {
            s.note_live_key(&e.key);
            b.add_ref(&e.key, e.file.kind, e.file.number, e.offset, e.len)?;
            live += u64::from(e.len);
            below = next_entry(&mut old)?;
        }
    }
    drop((lsm, old));
    b.finish()?;
    let tier = StaticTier::open(Arc::clone(&s.storage), &s.dir, generation, gc_read_mode(s))?
        .with_cache(gc::tier_cache(&s.opts));
    let read: Vec<u64> = tier
        .file_table()
        .iter()
        .filter(|f| f.kind == TierFileKind::Vlog)
        .map(|f| f.number)
        .collect();
    let kept = frozen_vlogs
        .iter()
        .filter(|v| read.contains(&v.number))
        .cloned()
        .collect();
    let known = view.tier.as_ref().map_or(&[][..], |t| t.svlogs.as_slice());
    let handle = TierHandle::learned(Arc::new(tier), &s.dir, &s.storage, known);
    Ok((handle, kept, live))
}

fn gc_read_mode(s: &Shared) -> lidb_storage::ReadMode {
    if s.opts.direct_io {
        lidb_storage::ReadMode::Direct
    } else {
        lidb_storage::ReadMode::Buffered
    }
}
