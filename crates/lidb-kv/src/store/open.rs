//! Opening a store: read `KVSTATE` (or create a new store), reopen the active value log (cutting a
//! torn tail), open the LSMs with hooks bound to that log (`with_vlog_hooks`; a second LSM means a
//! GC was interrupted: `Store::open` finishes it), open the tier, rebuild the in-memory Bloom
//! filters from the LSMs' keys, and remove every file `KVSTATE` does not name. Every LSM and
//! static tier of the store shares one page cache pool (`Shared::cache`), each in a namespace of
//! its own.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use lidb_lsm::{Db, ReplayFilter};
use lidb_storage::cache::{PageCache, SharedCache};
use lidb_storage::{Error, Result, error::corruption};
use lidb_storage::{ReadMode, Storage};

use crate::Pointer;
use crate::manifest::{KvState, read_state, write_state};
use crate::membloom::MemBloom;
use crate::static_tier::StaticTier;
use crate::store::active_vlog::ActiveVlog;
use crate::store::gc::{
    MIN_FILTER_KEYS, all_keys_capacity, engine_code, engine_name, open_part_in, state_with,
    tier_cache, vlog_file_in,
};
use crate::store::options::{StoreOptions, TierKind};
use crate::store::recovery::StoreRecovery;
use crate::store::state::{LsmPart, Tier, TierHandle, Tiers, lsm_dir, remove_tree};
use crate::store::{ALL_KEYS_BITS, Counters, Shared, WriteState};
use crate::vlog::{VLOG_HEADER_BYTES, VlogReader, VlogWriter, vlog_path};

pub(crate) fn open(storage: Arc<dyn Storage>, dir: &Path, opts: StoreOptions) -> Result<Shared> {
    if !storage.exists(dir) {
        storage.create_dir_all(dir)?;
    }
    let mut lsm = opts.lsm.clone();
    lsm.sync = opts.sync;
    lsm.direct_io = opts.direct_io;
    // One page cache for the whole store: every LSM it opens and every static tier takes a
    // namespace of its own in this pool (a caller may hand in a pool of its own to share).
    let cache = match &lsm.shared_cache {
        Some(pool) => Arc::clone(&pool.0),
        None => Arc::new(PageCache::new(lsm.block_cache_bytes)),
    };
    lsm.shared_cache = Some(SharedCache(Arc::clone(&cache)));
    let opts = StoreOptions { lsm, ..opts };
    let mode = if opts.direct_io {
        ReadMode::Direct
    } else {
        ReadMode::Buffered
    };
    let found = read_state(&*storage, dir)?;
    let fresh = found.is_none();
    let state = found.unwrap_or(KvState {
        lsm_dirs: vec![1],
        vlogs: vec![2],
        tier: None,
        svlogs: Vec::new(),
        next_number: 3,
        live_bytes: 0,
        engine: Some(engine_code(&opts.tier)),
    });
    if let Some(found) = state.engine
        && found != engine_code(&opts.tier)
    {
        return Err(Error::InvalidOption(format!(
            "{}: this store was written by {}; open it with that engine, not {}",
            dir.display(),
            engine_name(found),
            engine_name(engine_code(&opts.tier))
        )));
    }
    if fresh {
        refuse_lost_state(&*storage, dir)?;
        // Nothing can be named yet; clear leftovers of a store whose creation never finished.
        sweep(&*storage, dir, &state)?;
    }
    let all_keys_cap = all_keys_capacity(state.live_bytes);
    let all_keys = Arc::new(MemBloom::new(all_keys_cap, ALL_KEYS_BITS));
    // The LSMs' read filters: they let reads of settled keys skip the LSM, so a store with no
    // tier yet (every key is in its LSM, as after a load into a fresh store) has none; the GC
    // that makes the tier opens the next LSM with one. Otherwise the keys written since the
    // last GC are not known before they are read: the least first stage, grown as they are.
    let capacity = if state.tier.is_some() {
        MIN_FILTER_KEYS
    } else {
        0
    };
    let reader = Arc::new(VlogReader::new(
        Arc::clone(&storage),
        dir.to_path_buf(),
        mode,
    ));
    let active_n = *state
        .vlogs
        .first()
        .ok_or_else(|| corruption(dir.join("KVSTATE"), "no value log is named"))?;
    // Read and check everything before writing anything, so that a failed open changes no
    // file: the active value log's tail, then every LSM (with the replay filter bound to the
    // log's length after its cut).
    let recovery_mode = opts.lsm.recovery_mode;
    let vlog_cut = if fresh {
        None
    } else {
        VlogWriter::check_tail(&*storage, dir, active_n, recovery_mode)?
    };
    let vlog_len = match &vlog_cut {
        Some(c) => c.offset,
        None if fresh => 0,
        None => storage.file_size(&vlog_path(dir, active_n))?,
    };
    // Keys point into every value log the state names: one that cannot be sized (gone, or a
    // failing read) is refused here, before anything is written, not counted as empty.
    let mut older_vlog_bytes = 0u64;
    for &n in state.vlogs.iter().skip(1) {
        older_vlog_bytes += storage.file_size(&vlog_path(dir, n))?;
    }
    let opts = with_replay_filter(opts, active_n, vlog_len);
    let mut lsm_dirs = state.lsm_dirs.clone();
    if let (TierKind::Lsm, Some(g)) = (&opts.tier, state.tier) {
        lsm_dirs.push(g);
    }
    for &n in &lsm_dirs {
        let part = lsm_dir(dir, n);
        if storage.exists(&part) {
            Db::verify_with_storage(Arc::clone(&storage), &part, &opts.lsm)?;
        }
    }
    // A learned tier opens read-only (its whole key list is read): before anything is written.
    let learned_tier = match (state.tier, &opts.tier) {
        (Some(g), TierKind::Learned { .. }) => {
            Some(open_tier(&storage, dir, &opts, g, mode, &all_keys)?)
        }
        _ => None,
    };

    let active_vlog = ActiveVlog::new(if fresh {
        VlogWriter::create(&*storage, dir, active_n)?
    } else {
        VlogWriter::reopen_cut(&*storage, dir, active_n, vlog_cut.as_ref())?
    });
    let opts = with_flush_hook(opts, &active_vlog);
    let tier = match (learned_tier, state.tier) {
        (Some(t), _) => Some(t),
        (None, None) => None,
        (None, Some(g)) => Some(open_tier(&storage, dir, &opts, g, mode, &all_keys)?),
    };

    let mut parts = Vec::new();
    let mut lsm_reports = Vec::new();
    for &n in &state.lsm_dirs {
        let part = open_part_in(&storage, dir, &opts, n, capacity)?;
        refill_blooms(&part, &all_keys)?;
        if let Some(db) = &part.db {
            lsm_reports.push((lsm_dir(dir, n), db.recovery_report()));
        }
        parts.push(part);
    }
    let mut parts = parts.into_iter();
    let active = parts
        .next()
        .ok_or_else(|| corruption(dir.join("KVSTATE"), "no LSM is named"))?;
    let frozen = parts.next();
    let vlogs = state
        .vlogs
        .iter()
        .map(|&n| vlog_file_in(&storage, dir, &reader, n))
        .collect();
    let view = Tiers {
        active,
        frozen,
        tier,
        vlogs,
    };
    if fresh {
        write_state(
            &*storage,
            dir,
            &state_with(&view, &opts.tier, state.next_number, 0),
        )?;
    }
    let vlog_bytes: u64 = older_vlog_bytes
        + active_vlog.len()
        + match view.tier.as_ref().map(|t| &t.tier) {
            Some(Tier::Learned(t)) => t.svlog_bytes(),
            _ => 0,
        };
    let live = if state.live_bytes == 0 {
        vlog_bytes
    } else {
        state.live_bytes
    };
    let appended = active_vlog.len();
    let recovery = StoreRecovery {
        vlog_cut,
        lsms: lsm_reports,
    };
    // After damage, files KVSTATE does not name are kept for `lidb repair`.
    if !fresh && !recovery.found_damage() {
        sweep(&*storage, dir, &state)?;
    }
    Ok(Shared {
        dir: dir.to_path_buf(),
        storage,
        current: arc_swap::ArcSwap::from_pointee(view),
        write: Mutex::new(WriteState { vlog: active_vlog }),
        write_queue: Default::default(),
        reader,
        records: cache.new_namespace_with_mode(lidb_storage::cache::CacheMode::Entries),
        cache,
        vlog_reads: Arc::default(),
        retired_reads: (AtomicU64::new(0), AtomicU64::new(0)),
        all_keys: RwLock::new(all_keys),
        next_all_keys: Mutex::new(None),
        live_bytes: AtomicU64::new(live),
        appended_records: (AtomicU64::new(0), AtomicU64::new(0)),
        active_vlog_bytes: AtomicU64::new(appended),
        scan_scatter: Arc::default(),
        memory_budget: AtomicU64::new(u64::MAX),
        vlog_bytes: AtomicU64::new(vlog_bytes),
        next_number: AtomicU64::new(state.next_number),
        gc_lock: Mutex::new(()),
        gc_wake: Mutex::new(false),
        gc_cv: Condvar::new(),
        closing: AtomicBool::new(false),
        bg_error: Mutex::new(None),
        counters: Counters::default(),
        recovery,
        opts,
    })
}

/// `opts` with the replay filter that keeps the LSMs consistent with the active value log
/// `number`, `valid_len` bytes long once its bad tail is cut: WAL replay stops at the first
/// pointer past the log's end, so a crash without `sync` recovers a prefix of the writes instead
/// of pointers to lost records. Deletions and pointers into other logs (synced when a GC switched
/// away from them, or a tier's) pass. Only the LSMs opened now have WALs to replay; those a GC
/// creates later start empty.
fn with_replay_filter(opts: StoreOptions, number: u64, valid_len: u64) -> StoreOptions {
    let filter = ReplayFilter::new(move |_, _, value| match Pointer::decode(value) {
        Some(p) if p.file == number && p.offset.saturating_add(u64::from(p.len)) > valid_len => {
            Err(format!(
                "record at offset {} ({} bytes) of value log {number:06} is past its end \
                 ({valid_len} bytes): lost in a crash",
                p.offset, p.len
            ))
        }
        _ => Ok(()),
    });
    let lsm = lidb_lsm::Options {
        replay_filter: Some(filter),
        ..opts.lsm
    };
    StoreOptions { lsm, ..opts }
}

/// `opts` with the flush hook that syncs the active value log before any memtable becomes a
/// table (a table must never point past the log's durable end).
fn with_flush_hook(opts: StoreOptions, vlog: &ActiveVlog) -> StoreOptions {
    let lsm = lidb_lsm::Options {
        before_flush: Some(vlog.flush_hook()),
        ..opts.lsm
    };
    StoreOptions { lsm, ..opts }
}

/// The tier of generation `g`: a learned tier's files, or lsm+'s LSM directory. Its keys go into
/// the every-key filter.
fn open_tier(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    opts: &StoreOptions,
    g: u64,
    mode: ReadMode,
    all_keys: &MemBloom,
) -> Result<Arc<TierHandle>> {
    // An LSM tier's directory holds a database (its CURRENT): an empty `lsm-{g}` is what a
    // sweep leaves of an LSM that a failed GC created and never recorded (directories are not
    // removed), whose number a later GC may have given to a learned tier.
    let is_lsm = storage.exists(&lsm_dir(dir, g).join("CURRENT"));
    let tier = match (&opts.tier, is_lsm) {
        (TierKind::Learned { .. }, false) => {
            let t = Arc::new(
                StaticTier::open(Arc::clone(storage), dir, g, mode)?.with_cache(tier_cache(opts)),
            );
            for entry in t.keys()? {
                all_keys.insert(&entry?.0);
            }
            return Ok(TierHandle::learned(t, dir, storage, &[]));
        }
        (TierKind::Lsm, true) => {
            let part = open_part_in(storage, dir, opts, g, 0)?;
            refill_blooms(&part, all_keys)?;
            Tier::Lsm(part)
        }
        (TierKind::Learned { .. }, true) => {
            return Err(Error::InvalidOption(format!(
                "{}: this store was written by lsm+ (its tier is an LSM); open it as lsm+",
                dir.display()
            )));
        }
        (TierKind::WriteBack, _) => {
            return Err(Error::InvalidOption(format!(
                "{}: this store has a tier (written by learnedkv or lsm+tier); lsm+ keeps every \
                 key in one LSM, open it with the engine that wrote it",
                dir.display()
            )));
        }
        (TierKind::Lsm, false) => {
            return Err(Error::InvalidOption(format!(
                "{}: this store was written by learnedkv (its tier is learned); open it as learnedkv",
                dir.display()
            )));
        }
    };
    Ok(Arc::new(TierHandle {
        tier,
        generation: g,
        storage: Arc::clone(storage),
        retired: AtomicBool::new(false),
        svlogs: Vec::new(),
    }))
}

/// Puts every key of an LSM into its read filter and into the every-key filter (a scan of the
/// whole LSM that leaves the page cache alone).
fn refill_blooms(part: &LsmPart, all_keys: &MemBloom) -> Result<()> {
    let mut it = part
        .db()
        .scan_with(b"", None, lidb_lsm::ScanOptions::WHOLE)?;
    while it.valid() {
        if let Some(b) = &part.bloom {
            b.insert(it.key());
        }
        all_keys.insert(it.key());
        it.next()?;
    }
    Ok(())
}

/// Fails when `KVSTATE` is missing but the directory holds a store's data: a value log with a
/// record, or a tier. A creation that crashed before writing `KVSTATE` leaves only empty files
/// (no write is accepted before it), which the sweep clears; data means `KVSTATE` was lost, and
/// sweeping would delete the store.
fn refuse_lost_state(storage: &dyn Storage, dir: &Path) -> Result<()> {
    for name in storage.list(dir)? {
        let path = dir.join(&name);
        let data = if name.ends_with(".vlog") {
            storage.file_size(&path)? > VLOG_HEADER_BYTES
        } else {
            name.ends_with(".keys") || name.ends_with(".svlog")
        };
        if data {
            return Err(corruption(
                dir.join("KVSTATE"),
                format!(
                    "missing, but {} holds a store's data: run `lidb repair` to rebuild it",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Removes value logs, tier files and LSM directories that `state` does not name (left by a crash
/// mid-GC or mid-conversion, or by a GC whose retired files were still in use at the crash). An
/// svlog stays while `state.svlogs` names it (a converted tier reads it); a key list or model only
/// if it is the tier's.
fn sweep(storage: &dyn Storage, dir: &Path, state: &KvState) -> Result<()> {
    let vlogs: HashSet<u64> = state.vlogs.iter().copied().collect();
    let lsms: HashSet<u64> = state.lsm_dirs.iter().copied().chain(state.tier).collect();
    let number = |name: &str, suffix: &str| name.strip_suffix(suffix)?.parse::<u64>().ok();
    for name in storage.list(dir)? {
        let path = dir.join(&name);
        let stale = if let Some(n) = number(&name, ".vlog") {
            !vlogs.contains(&n)
        } else if let Some(n) = number(&name, ".svlog") {
            !state.svlogs.contains(&n)
        } else if let Some(n) = [".keys", ".model"]
            .iter()
            .find_map(|suf| number(&name, suf))
        {
            state.tier != Some(n)
        } else if let Some(n) = name
            .strip_prefix("lsm-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            if !lsms.contains(&n) {
                remove_tree(storage, &path);
            }
            false
        } else {
            name.ends_with(".tmp")
        };
        if stale {
            let _ = storage.remove(&path);
        }
    }
    storage.sync_dir(dir)
}
