//! Garbage collection with conversion (the paper's section 4.2), in four phases:
//!
//! 1. **Switch** (under the write mutex, a moment): a new LSM and value log take writes; the old
//!    LSM is frozen. `KVSTATE` names both LSMs, so a crash from here on finishes the GC at open.
//! 2. **Collect**: the frozen LSM and the old tier are merged in key order (the LSM wins, its
//!    tombstones drop keys). This is already sorted: no in-memory sort of pairs is needed.
//! 3. **Write**: each live value is read (from the old value log or the old tier) and streamed
//!    into the new tier: for LearnedKV a static value log in key order, its key list and a model
//!    over the key list; for `lsm+` a key-ordered value log and a fresh LSM over it.
//! 4. **Install**: `KVSTATE` names the new tier and drops the frozen LSM and old logs; the new
//!    view is installed; the old files go when the last reader of the old view is done.
//!
//! Reads and writes go on throughout: writes into the new LSM, reads through the new LSM, the
//! frozen LSM, then the old tier, until the install.
//!
//! Failure: a GC (or conversion) that fails, on the background thread or called through
//! `Store::gc` / `Store::convert`, stops writes until reopen (`Shared::stop_writes`); reads go
//! on. Its result is not installed, but it is not abandoned cleanly either: after the switch
//! `KVSTATE` names a frozen LSM that only a finished GC retires (a reopen finishes it), lsm+'s
//! output value log is named there and resumed by that GC, and the job may have failed the sync
//! of the old value log, of the frozen LSM's WAL, of `KVSTATE` or of the directory, after which a
//! retried sync could report lost pages durable. So every failure, not only a failed sync of a
//! file no acknowledged write depends on (a new svlog, key list or tier table), is treated alike:
//! as RocksDB does with a background error, writes stop. A failure is recorded just after the
//! failing call returns on the GC's own thread, so a write whose check ran in between may still
//! be acknowledged; it is durable as promised (its value log and WAL are the active ones, not
//! the GC's), only refused one write late.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lidb_storage::Storage;
use std::time::Duration;

use lidb_lsm::Db;
use lidb_lsm::batch::WriteBatch;
use lidb_storage::Result;

use crate::manifest::{ENGINE_LEARNED, ENGINE_LSM_TIER, ENGINE_WRITE_BACK, KvState, write_state};
use crate::membloom::MemBloom;
use crate::static_tier::{StaticTier, StaticTierBuilder, TierOptions};
use crate::store::options::{StoreOptions, TierKind};
use crate::store::read::KvIterator;
use crate::store::state::{LsmPart, Tier, TierHandle, Tiers, VlogFile, lock, lsm_dir};
use crate::store::{Shared, WriteState, read, writeback};
use crate::vlog::{VlogReader, VlogWriter, vlog_path};

/// The background thread: sleeps until woken (or a period passes), runs a GC when one is due.
pub(crate) fn background(s: &Arc<Shared>) {
    loop {
        {
            let mut wake = lock(&s.gc_wake);
            if !*wake {
                wake = s
                    .gc_cv
                    .wait_timeout(wake, Duration::from_millis(200))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            *wake = false;
        }
        if s.closing.load(Ordering::SeqCst) {
            return;
        }
        let job: Option<fn(&Shared) -> Result<()>> = if s.gc_due() {
            Some(run)
        } else if s.scan_gc_due() {
            Some(run_for_scans)
        } else if super::convert::due(s) {
            Some(super::convert::run)
        } else {
            None
        };
        // A failed job has stopped writes already (`run`, `convert::run`).
        if let Some(job) = job
            && job(s).is_err()
        {
            return;
        }
    }
}

/// Opens LSM part `number` of the store in `root` (with an empty key filter when enabled).
pub(crate) fn open_part_in(
    storage: &Arc<dyn Storage>,
    root: &Path,
    opts: &StoreOptions,
    number: u64,
    bloom_capacity: u64,
) -> Result<Arc<LsmPart>> {
    let dir = lsm_dir(root, number);
    let db = Db::open_with_storage(Arc::clone(storage), &dir, opts.lsm.clone())?;
    // lsm+ keeps every key in its one LSM: a filter to skip the LSM has nothing to skip to.
    let bits = match opts.tier {
        TierKind::WriteBack => 0,
        _ => opts.lsm_bloom_bits_per_key,
    };
    Ok(Arc::new(LsmPart {
        number,
        db: Some(db),
        bloom: (bits > 0 && bloom_capacity > 0).then(|| MemBloom::new(bloom_capacity, bits)),
        dir,
        storage: Arc::clone(storage),
        retired: AtomicBool::new(false),
    }))
}

pub(crate) fn open_part(s: &Shared, number: u64, bloom_capacity: u64) -> Result<Arc<LsmPart>> {
    open_part_in(&s.storage, &s.dir, &s.opts, number, bloom_capacity)
}

pub(crate) fn vlog_file_in(
    storage: &Arc<dyn Storage>,
    root: &Path,
    reader: &Arc<VlogReader>,
    number: u64,
) -> Arc<VlogFile> {
    Arc::new(VlogFile {
        number,
        path: vlog_path(root, number),
        storage: Arc::clone(storage),
        reader: Arc::clone(reader),
        retired: AtomicBool::new(false),
    })
}

pub(crate) fn vlog_file(s: &Shared, number: u64) -> Arc<VlogFile> {
    vlog_file_in(&s.storage, &s.dir, &s.reader, number)
}

/// The `KVSTATE` describing `view`.
pub(crate) fn state_of(s: &Shared, view: &Tiers, live_bytes: u64) -> KvState {
    state_with(
        view,
        &s.opts.tier,
        s.next_number.load(Ordering::SeqCst),
        live_bytes,
    )
}

/// `KVSTATE`'s code of the engine of tier kind `tier`.
pub(crate) fn engine_code(tier: &TierKind) -> u8 {
    match tier {
        TierKind::Learned { .. } => ENGINE_LEARNED,
        TierKind::Lsm => ENGINE_LSM_TIER,
        TierKind::WriteBack => ENGINE_WRITE_BACK,
    }
}

/// The engine name of `KVSTATE`'s engine code.
pub(crate) fn engine_name(code: u8) -> &'static str {
    match code {
        ENGINE_LEARNED => "learnedkv",
        ENGINE_LSM_TIER => "lsm+tier",
        _ => "lsm+",
    }
}

pub(crate) fn state_with(
    view: &Tiers,
    tier: &TierKind,
    next_number: u64,
    live_bytes: u64,
) -> KvState {
    KvState {
        engine: Some(engine_code(tier)),
        lsm_dirs: [Some(&view.active), view.frozen.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| p.number)
            .collect(),
        vlogs: view.vlogs.iter().map(|v| v.number).collect(),
        tier: view.tier.as_ref().map(|t| t.generation),
        svlogs: view
            .tier
            .iter()
            .flat_map(|t| &t.svlogs)
            .map(|f| f.number)
            .collect(),
        next_number,
        live_bytes,
    }
}

/// Runs one GC to completion (finishing an interrupted one if the view has a frozen LSM). A
/// failure stops writes until reopen (see the module documentation).
pub(crate) fn run(s: &Shared) -> Result<()> {
    run_once(s).inspect_err(|e| s.stop_writes(e))
}

/// [`run`], started because scans wasted reads on scattered values (`scan_gc`); counted apart.
fn run_for_scans(s: &Shared) -> Result<()> {
    run(s)?;
    s.counters.scan_gcs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn run_once(s: &Shared) -> Result<()> {
    let _one_at_a_time = lock(&s.gc_lock);
    refuse_if_stopped(s)?;
    let view = if s.current().frozen.is_none() {
        switch(s)?
    } else {
        s.current()
    };
    if s.opts.tier == TierKind::WriteBack {
        return writeback::run(s, &view);
    }
    let generation = s.new_number();
    let (tier, tier_vlogs, live) = match &s.opts.tier {
        TierKind::Learned {
            family,
            page_boundary,
            params,
        } => {
            let opts = TierOptions {
                family: *family,
                page_boundary: *page_boundary,
                params: params.clone(),
            };
            build_learned(s, &view, generation, opts)?
        }
        TierKind::Lsm => build_lsm_tier(s, &view, generation)?,
        TierKind::WriteBack => unreachable!("handled above"),
    };
    let tier_bytes = match &tier.tier {
        Tier::Learned(t) => t.svlog_bytes(),
        Tier::Lsm(_) => live,
    };
    install(s, Some(tier), tier_vlogs, live, tier_bytes)?;
    s.counters.gcs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// `Closed` once writes stopped: a GC then would write more files after a failed sync, and
/// numbers it allocates without recording them in `KVSTATE` would be allocated again after the
/// reopen (a leftover LSM directory of one could then be taken for another's tier).
pub(crate) fn refuse_if_stopped(s: &Shared) -> Result<()> {
    match lock(&s.bg_error).as_ref() {
        Some(e) => Err(lidb_storage::Error::Closed(format!(
            "no GC or conversion until reopen: writes stopped after a failure: {e}"
        ))),
        None => Ok(()),
    }
}

/// Phase 1: new LSM and value log for writes; the active LSM becomes frozen.
///
/// A failure stops writes before the write mutex is released: writers queued on it would
/// otherwise be acknowledged between the failed sync and `run`'s recording of it.
pub(crate) fn switch(s: &Shared) -> Result<Arc<Tiers>> {
    let mut w = lock(&s.write);
    switch_locked(s, &mut w).inspect_err(|e| s.stop_writes(e))?;
    drop(w);
    refit(s);
    Ok(s.current())
}

fn switch_locked(s: &Shared, w: &mut WriteState) -> Result<()> {
    let old = s.current();
    let lsm_n = s.new_number();
    let vlog_n = s.new_number();
    let part = open_part(s, lsm_n, bloom_capacity(s))?;
    let writer = VlogWriter::create(&*s.storage, &s.dir, vlog_n)?;
    w.vlog.sync()?;
    // Without `sync` the frozen LSM's WAL tail is not durable yet: make it so before writes go
    // to the new LSM, or a crash could keep later writes and lose earlier ones.
    old.active.db().sync_wal()?;
    let mut vlogs = vec![vlog_file(s, vlog_n)];
    if s.opts.tier == TierKind::WriteBack {
        // lsm+'s GC output log is created now and named second, so that a GC resumed after a
        // crash keeps appending to it: pointers already written back into the new LSM stay valid.
        let out_n = s.new_number();
        drop(VlogWriter::create(&*s.storage, &s.dir, out_n)?);
        vlogs.push(vlog_file(s, out_n));
    }
    vlogs.extend(old.vlogs.iter().cloned());
    let next = Tiers {
        active: part,
        frozen: Some(Arc::clone(&old.active)),
        tier: old.tier.clone(),
        vlogs,
    };
    write_state(
        &*s.storage,
        &s.dir,
        &state_of(s, &next, s.live_bytes.load(Ordering::Relaxed)),
    )?;
    w.vlog.replace(writer)?;
    s.active_vlog_bytes.store(0, Ordering::Relaxed);
    s.scan_scatter.reset();
    *lock(&s.next_all_keys) = Some(Arc::new(MemBloom::new(
        next_all_keys_capacity(s),
        crate::store::ALL_KEYS_BITS,
    )));
    s.install(w, next);
    Ok(())
}

/// Under a held memory budget, gives the cache what the resident part leaves now; returns the
/// cache's capacity (unchanged without a budget).
pub(crate) fn refit(s: &Shared) -> u64 {
    let budget = s.memory_budget.load(Ordering::Relaxed);
    if budget == u64::MAX {
        return s.cache.capacity_bytes();
    }
    let m = crate::store::read::memory(s);
    let cache = budget.saturating_sub(m.index_bytes + m.filter_bytes);
    s.cache.set_capacity(cache);
    cache
}

/// Keys the every-key filter's first stage is sized for at open, given the live bytes: the keys
/// of 1 KiB records. Record sizes are not known before records are written; the filter grows
/// if they are smaller, and a first stage sized for 256-byte records held four times the bits
/// of 1 KiB records' keys.
pub(crate) fn all_keys_capacity(live_bytes: u64) -> u64 {
    (live_bytes / 1024).max(MIN_FILTER_KEYS)
}

/// Mean record size assumed until enough records were written since open to measure it.
const ASSUMED_RECORD_BYTES: u64 = 256;

/// The live keys the live bytes stand for: divided by the mean size of the records written
/// since open (at least 1,024 of them), else by 256 bytes. A filter sized for 256-byte records
/// holding 1 KiB records was four times too large (20 MB for 2M keys of 1 KiB).
pub(crate) fn live_keys(s: &Shared) -> u64 {
    s.live_bytes.load(Ordering::Relaxed) / mean_record_bytes(s)
}

/// The mean size of the records written since open (at least 1,024 of them), else 256 bytes.
pub(crate) fn mean_record_bytes(s: &Shared) -> u64 {
    let records = s.appended_records.0.load(Ordering::Relaxed);
    let bytes = s.appended_records.1.load(Ordering::Relaxed);
    if records >= 1024 {
        (bytes / records).max(1)
    } else {
        ASSUMED_RECORD_BYTES
    }
}

/// Keys the first stage of a key filter holds at least: 80 KB at 10 bits a key. The filters
/// grow past their first stage (`membloom`), so a first stage is sized for what is known, not
/// for what may come.
pub(crate) const MIN_FILTER_KEYS: u64 = 1 << 16;

/// The every-key filter a GC starts: the live keys and a quarter more (inserts until the next
/// GC; past that it grows).
fn next_all_keys_capacity(s: &Shared) -> u64 {
    let live = live_keys(s);
    (live + live / 4).max(MIN_FILTER_KEYS)
}

fn bloom_capacity(s: &Shared) -> u64 {
    // Keys a new LSM will hold before the next GC: about the over-provisioned share of the data.
    ((live_keys(s) as f64 * s.opts.over_provisioning) as u64).max(MIN_FILTER_KEYS)
}

/// Phase 2: the frozen LSM merged over the old tier, in key order (an iterator over the view
/// without the active LSM).
pub(crate) fn collect(s: &Shared, view: &Arc<Tiers>) -> Result<KvIterator> {
    let without_active = Tiers {
        active: view
            .frozen
            .clone()
            .unwrap_or_else(|| Arc::clone(&view.active)),
        frozen: None,
        tier: view.tier.clone(),
        vlogs: view.vlogs.clone(),
    };
    read::scan_view(s, Arc::new(without_active), b"", None, None, None)
}

/// The key-list page cache of a learned tier: a namespace of its own in the store's one pool
/// (`opts.lsm.shared_cache`, set at open), which the LSMs share too; its pages leave the pool
/// when the tier is dropped. Options not yet through the open (none in the store) get a cache of
/// `block_cache_bytes` of their own.
pub(crate) fn tier_cache(opts: &StoreOptions) -> Arc<lidb_storage::cache::PageCache> {
    match &opts.lsm.shared_cache {
        // A static tier caches key-list and svlog pages only (it has no slot entries).
        Some(pool) => pool.new_namespace(lidb_lsm::CacheMode::Pages),
        None => Arc::new(lidb_storage::cache::PageCache::new(
            opts.lsm.block_cache_bytes,
        )),
    }
}

/// Phase 3 for LearnedKV: a static value log in key order, its key list and model.
pub(crate) fn build_learned(
    s: &Shared,
    view: &Arc<Tiers>,
    generation: u64,
    opts: TierOptions,
) -> Result<(Arc<TierHandle>, Vec<Arc<VlogFile>>, u64)> {
    let mut it = collect(s, view)?;
    let mut b = StaticTierBuilder::new(Arc::clone(&s.storage), &s.dir, generation, opts)?;
    let mut live = 0u64;
    while it.valid() {
        s.note_live_key(it.key());
        b.add(it.key(), it.value())?;
        live += 12 + it.key().len() as u64 + it.value().len() as u64;
        it.next()?;
    }
    drop(it);
    b.finish()?;
    let mode = if s.opts.direct_io {
        lidb_storage::ReadMode::Direct
    } else {
        lidb_storage::ReadMode::Buffered
    };
    let tier = StaticTier::open(Arc::clone(&s.storage), &s.dir, generation, mode)?
        .with_cache(tier_cache(&s.opts));
    let handle = TierHandle::learned(Arc::new(tier), &s.dir, &s.storage, &[]);
    Ok((handle, Vec::new(), live))
}

/// Phase 3 for lsm+: a key-ordered value log and a fresh LSM of pointers into it.
fn build_lsm_tier(
    s: &Shared,
    view: &Arc<Tiers>,
    generation: u64,
) -> Result<(Arc<TierHandle>, Vec<Arc<VlogFile>>, u64)> {
    let mut it = collect(s, view)?;
    let part = open_part(s, generation, 0)?;
    let vlog_n = s.new_number();
    let mut vlog = VlogWriter::create(&*s.storage, &s.dir, vlog_n)?;
    let mut batch = WriteBatch::new();
    let mut live = 0u64;
    while it.valid() {
        s.note_live_key(it.key());
        let p = vlog.append(it.key(), it.value())?;
        live += u64::from(p.len);
        batch.put(it.key(), &p.encode());
        if batch.len() >= 256 {
            part.db()
                .write(std::mem::replace(&mut batch, WriteBatch::new()))?;
        }
        it.next()?;
    }
    drop(it);
    if !batch.is_empty() {
        part.db().write(batch)?;
    }
    vlog.sync()?;
    part.db().flush()?;
    let handle = Arc::new(TierHandle {
        tier: Tier::Lsm(part),
        generation,
        storage: Arc::clone(&s.storage),
        retired: AtomicBool::new(false),
        svlogs: Vec::new(),
    });
    Ok((handle, vec![vlog_file(s, vlog_n)], live))
}

/// Phase 4: the new tier (none for lsm+) replaces the frozen LSM and the old tier; `tier_vlogs`
/// are the value logs GC wrote (their `tier_bytes` bytes, `tier_live` of them live), the active
/// value log stays.
pub(crate) fn install(
    s: &Shared,
    tier: Option<Arc<TierHandle>>,
    tier_vlogs: Vec<Arc<VlogFile>>,
    tier_live: u64,
    tier_bytes: u64,
) -> Result<()> {
    let w = lock(&s.write);
    // A failure stops writes before the write mutex is released (see `switch`).
    install_locked(s, &w, tier, tier_vlogs, tier_live, tier_bytes)
        .inspect_err(|e| s.stop_writes(e))?;
    drop(w);
    refit(s);
    Ok(())
}

fn install_locked(
    s: &Shared,
    w: &WriteState,
    tier: Option<Arc<TierHandle>>,
    tier_vlogs: Vec<Arc<VlogFile>>,
    tier_live: u64,
    tier_bytes: u64,
) -> Result<()> {
    let cur = s.current();
    let active_vlog = cur.vlogs.first().cloned();
    let mut vlogs: Vec<Arc<VlogFile>> = active_vlog.into_iter().collect();
    vlogs.extend(tier_vlogs);
    let next = Tiers {
        active: Arc::clone(&cur.active),
        frozen: None,
        tier,
        vlogs,
    };
    // Writes since the switch are counted live (an over-estimate until the next GC).
    let appended = s.active_vlog_bytes.load(Ordering::Relaxed);
    let live = tier_live + appended;
    write_state(&*s.storage, &s.dir, &state_of(s, &next, live))?;
    s.live_bytes.store(live, Ordering::Relaxed);
    // The every-key filter restarts from the keys that survived this GC (collected, or written
    // since the switch): deleted keys stop counting as live.
    if let Some(fresh) = lock(&s.next_all_keys).take() {
        *s.all_keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
    }
    s.vlog_bytes.store(tier_bytes + appended, Ordering::Relaxed);
    s.install(w, next);
    Ok(())
}
