//! Opening a database, in two phases so that a failed open leaves every file as it was.
//!
//! 1. Read and check, writing nothing: lock the directory, replay the manifest into a version,
//!    read the WALs the manifest does not cover into a memtable, open the version's tables and
//!    level models. Every bad record is classified (`tail::classify`) as a torn tail or damage,
//!    and `Options::recovery_mode` decides: cut it (and everything after it, so what is replayed
//!    stays a prefix of the writes) or fail with `Corruption` naming the file and offset. A batch
//!    `Options::replay_filter` rejects is cut like a torn tail.
//! 2. Write: save the bytes a damage cut drops under `lost/`, truncate the cut WALs, flush the
//!    replayed memtable to an L0 table, start a fresh manifest and WAL, and remove files nothing
//!    references, but only when the manifest and every log were clean: after any cut of the
//!    manifest or any damage, unreferenced files may be the only copy of data the lost edits
//!    named, and are kept for `lidb repair`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};

use crate::db::compact::MAX_LEVELS;
use crate::db::current::CurrentVersion;
use crate::db::flush;
use crate::db::level_index::LevelIndex;
use crate::db::output::{open_handle_in, read_mode_for};
use crate::db::replay::{Replayed, replay_wals};
use crate::db::state::{
    CompactionStats, ManifestState, RecoveryReport, Shared, SuperVersion, TableHandle, Tables,
    WriteState, lock,
};
use crate::manifest::{Manifest, VersionEdit, manifest_path};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::types::SortedIter;
use crate::version::Version;
use lidb_storage::Storage;
use lidb_storage::cache::PageCache;
use lidb_storage::error::{Error, Result, corruption};
use lidb_storage::log::LogWriter;
use lidb_storage::report::{CutKind, LogCut, refused, save_lost};
use lidb_storage::tail::RecoveryMode;
use lidb_sync::Sharded;

/// What the manifest said, folded.
#[derive(Default)]
struct Folded {
    version: Version,
    log_number: u64,
    next_file_number: u64,
    last_sequence: u64,
    level_index: Vec<Option<u64>>,
}

fn fold(edits: &[VersionEdit], manifest_file: &PathBuf) -> Result<Folded> {
    let mut f = Folded {
        next_file_number: 2,
        ..Folded::default()
    };
    f.version.levels.resize_with(MAX_LEVELS, Vec::new);
    for e in edits {
        f.version = f
            .version
            .apply(&e.added, &e.removed)
            .map_err(|d| corruption(manifest_file, format!("edit does not apply: {d}")))?;
        if let Some(n) = e.log_number {
            f.log_number = n;
        }
        if let Some(n) = e.next_file_number {
            f.next_file_number = f.next_file_number.max(n);
        }
        if let Some(n) = e.last_sequence {
            f.last_sequence = f.last_sequence.max(n);
        }
        for &(level, number) in &e.level_index {
            let l = level as usize;
            if f.level_index.len() <= l {
                f.level_index.resize(l + 1, None);
            }
            if let Some(slot) = f.level_index.get_mut(l) {
                *slot = number;
            }
        }
    }
    Ok(f)
}

/// Reads the manifest `CURRENT` names and folds it; `None` for a new database.
fn read_manifest(
    storage: &dyn Storage,
    dir: &Path,
    mode: RecoveryMode,
) -> Result<Option<(Folded, Option<LogCut>)>> {
    let Some(r) = Manifest::recover(storage, dir)? else {
        return Ok(None);
    };
    let path = manifest_path(dir, r.number);
    let cut = match &r.bad_tail {
        None => None,
        Some(t) if mode.allows(t.kind) => Some(LogCut::of_tail(path.clone(), t)),
        Some(t) => return Err(refused(&path, t, mode)),
    };
    let folded = fold(&r.edits, &path)?;
    // WALs are deleted only after an edit that retires them is durable, and a WAL exists before
    // any edit names it. So if the WAL the last intact edit needs is gone, a later edit was
    // durable once and is lost, whether the manifest has a bad tail (a damaged last edit can look
    // torn) or was cut exactly at a record boundary. Exempt: a manifest holding only its snapshot
    // and naming the WAL numbered after it, which versions before this check created after the
    // manifest (a crash in between lost nothing).
    let wal = dir.join(format!("{:06}.log", folded.log_number));
    let legacy_open_crash = r.edits.len() == 1 && folded.log_number == r.number + 1;
    if !storage.exists(&wal) && !legacy_open_crash {
        let tail = cut
            .as_ref()
            .map_or_else(|| "no bad tail".to_string(), |c| c.detail.clone());
        return Err(corruption(
            &path,
            format!(
                "the last intact edit needs {}, which is gone, so a later edit was durable once \
                 and is lost ({tail}): damage, not a torn tail; run `lidb repair`",
                wal.display()
            ),
        ));
    }
    Ok(Some((folded, cut)))
}

/// What phase 1 read and checked: everything the open needs, nothing written yet.
pub(crate) struct Checked {
    lock_guard: Box<dyn Send + Sync + std::fmt::Debug>,
    pub report: RecoveryReport,
    folded: Folded,
    replayed: Replayed,
    cache: Arc<PageCache>,
    handles: HashMap<u64, Arc<TableHandle>>,
    level_indexes: Vec<Option<Arc<LevelIndex>>>,
}

/// Phase 1 of an open (the module documentation): reads and checks everything, writes nothing
/// (but the directory of a new database). The directory stays locked while the result lives.
pub(crate) fn check(storage: &Arc<dyn Storage>, dir: &Path, opts: &Options) -> Result<Checked> {
    let missing = || {
        Error::InvalidOption(format!(
            "{}: no database here (create_if_missing is off)",
            dir.display()
        ))
    };
    if !storage.exists(dir) {
        if !opts.create_if_missing {
            return Err(missing());
        }
        storage.create_dir_all(dir)?;
    }
    let lock_guard = storage.lock(&dir.join("LOCK"))?;
    let mut report = RecoveryReport::default();

    // Phase 1: read and check; nothing is written.
    let mut folded = match read_manifest(&**storage, dir, opts.recovery_mode)? {
        Some((f, cut)) => {
            report.manifest_cut = cut;
            f
        }
        None if opts.create_if_missing => {
            let mut f = Folded {
                next_file_number: 2,
                ..Folded::default()
            };
            f.version.levels.resize_with(MAX_LEVELS, Vec::new);
            f
        }
        None => return Err(missing()),
    };
    let replayed = replay_wals(
        &**storage,
        dir,
        opts,
        folded.log_number,
        &mut folded.last_sequence,
        &mut report,
    )?;
    // A shared pool gives this database a namespace of its own; otherwise a cache of its own.
    let cache = match &opts.shared_cache {
        Some(pool) => pool.new_namespace(opts.cache_mode),
        None => Arc::new(PageCache::with_mode(
            opts.block_cache_bytes,
            opts.cache_mode,
        )),
    };
    let mode = read_mode_for(opts);
    let mut handles = HashMap::new();
    for m in folded.version.levels.iter().flatten() {
        let h = open_handle_in(storage, dir, mode, &cache, m.clone())?;
        handles.insert(m.number, h);
    }
    let mut level_indexes = Vec::new();
    for n in &folded.level_index {
        level_indexes.push(match n {
            Some(n) => Some(Arc::new(LevelIndex::load(&**storage, dir, *n)?)),
            None => None,
        });
    }
    Ok(Checked {
        lock_guard,
        report,
        folded,
        replayed,
        cache,
        handles,
        level_indexes,
    })
}

impl Checked {
    /// Reads every entry of every table of the version (each slot's checksum verified), for a
    /// caller that wants damage to any table found before it writes anything.
    pub(crate) fn verify_tables(&self) -> Result<u64> {
        let mut entries = 0;
        for h in self.handles.values() {
            let mut it = h.table.iter();
            it.seek_to_first()?;
            while it.valid() {
                entries += 1;
                it.next()?;
            }
        }
        Ok(entries)
    }
}

/// Opens the database: phase 1 ([`check`]), then phase 2, which writes.
pub(crate) fn open(storage: Arc<dyn Storage>, dir: PathBuf, opts: Options) -> Result<Shared> {
    let Checked {
        lock_guard,
        mut report,
        mut folded,
        replayed,
        cache,
        mut handles,
        level_indexes,
    } = check(&storage, &dir, &opts)?;
    let mode = read_mode_for(&opts);
    let mut next = folded.next_file_number;
    if let Some(c) = report
        .manifest_cut
        .as_ref()
        .filter(|c| c.kind == CutKind::Damage)
    {
        save_lost(&*storage, &dir, &c.file, c.offset)?;
    }
    for p in &replayed.cuts {
        if p.save {
            save_lost(&*storage, &dir, &p.cut.file, p.cut.offset)?;
        }
        storage.truncate(&p.cut.file, p.cut.offset)?;
    }
    report.wal_cuts = replayed.cuts.into_iter().map(|p| p.cut).collect();
    // Until the new manifest names it, a crash replays the same WALs again and the orphan table
    // is swept.
    if !replayed.mem.is_empty() {
        let number = next;
        next += 1;
        let meta = flush::write_l0_table(&*storage, &dir, number, &replayed.mem, &opts)?;
        storage.sync_dir(&dir)?;
        folded.version = folded
            .version
            .apply(&[(0, meta.clone())], &[])
            .map_err(|d| corruption(&dir, format!("replayed table does not fit: {d}")))?;
        let handle = open_handle_in(&storage, &dir, mode, &cache, meta.clone())?;
        handles.insert(meta.number, handle);
    }
    // 3. The new WAL, durably created before any manifest names it: the WAL a durable manifest
    //    needs always exists (the lost-edit check at open relies on it).
    let wal_number = next;
    let manifest_number = next + 1;
    next += 2;
    let wal_path = dir.join(format!("{wal_number:06}.log"));
    let wal = LogWriter::new(storage.create(&wal_path)?, wal_path);
    storage.sync_dir(&dir)?;
    // 4. A fresh manifest holding the whole version; switching CURRENT to it is the atomic step
    //    that retires the replayed WALs.
    let snapshot = VersionEdit {
        log_number: Some(wal_number),
        next_file_number: Some(next),
        last_sequence: Some(folded.last_sequence),
        added: folded
            .version
            .levels
            .iter()
            .enumerate()
            .flat_map(|(l, ts)| ts.iter().map(move |m| (l as u32, m.clone())))
            .collect(),
        removed: Vec::new(),
        level_index: folded
            .level_index
            .iter()
            .enumerate()
            .map(|(l, n)| (l as u32, *n))
            .collect(),
    };
    let manifest = Manifest::create(Arc::clone(&storage), &dir, manifest_number, &snapshot)?;
    let mut levels = Vec::new();
    for metas in &folded.version.levels {
        let mut level = Vec::new();
        for m in metas {
            let h = handles.get(&m.number).ok_or_else(|| {
                corruption(
                    &dir,
                    format!("table {} of the version was not opened", m.number),
                )
            })?;
            level.push(Arc::clone(h));
        }
        levels.push(level);
    }
    let tables = Tables {
        version: folded.version,
        levels,
        level_indexes,
    };
    let s = Shared {
        dir: dir.clone(),
        storage: Arc::clone(&storage),
        opts: opts.clone(),
        cache,
        _lock: lock_guard,
        current: CurrentVersion::new(SuperVersion {
            mem: Arc::new(MemTable::new()),
            mem_wal: wal_number,
            imm: Vec::new(),
            tables: Arc::new(tables),
        }),
        write: Mutex::new(WriteState { wal, wal_number }),
        writers: Default::default(),
        manifest: Mutex::new(ManifestState {
            manifest,
            next_file_number: next,
        }),
        last_seq: AtomicU64::new(folded.last_sequence),
        work: Mutex::new(()),
        work_cv: Condvar::new(),
        closing: AtomicBool::new(false),
        bg_error: Mutex::new(None),
        read_stats: Sharded::new(),
        scan_reads: Arc::default(),
        compaction_stats: Mutex::new(CompactionStats::default()),
        recovery: Mutex::new(RecoveryReport::default()),
        cursors: Mutex::new(Vec::new()),
        flush_lock: Mutex::new(()),
        compaction_lock: Mutex::new(()),
    };
    if report.manifest_cut.is_none() && !report.found_damage() {
        report.obsolete_files_removed = sweep(&s, manifest_number, wal_number)?;
    }
    *lock(&s.recovery) = report;
    Ok(s)
}

/// Removes what nothing references: old WALs and manifests, orphan tables and models, temporary
/// files. Returns how many files went.
fn sweep(s: &Shared, manifest_number: u64, wal_number: u64) -> Result<u64> {
    let sv = s.current();
    let live_tables: HashSet<u64> = sv
        .tables
        .version
        .levels
        .iter()
        .flatten()
        .map(|m| m.number)
        .collect();
    let live_models: HashSet<u64> = sv
        .tables
        .level_indexes
        .iter()
        .flatten()
        .map(|l| l.number)
        .collect();
    let number = |name: &str, suffix: &str| name.strip_suffix(suffix)?.parse::<u64>().ok();
    let mut removed = 0;
    for name in s.storage.list(&s.dir)? {
        let stale = if let Some(n) = number(&name, ".log") {
            n != wal_number
        } else if let Some(n) = number(&name, ".sst") {
            !live_tables.contains(&n)
        } else if let Some(n) = number(&name, ".lvl") {
            !live_models.contains(&n)
        } else if let Some(n) = name
            .strip_prefix("MANIFEST-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            n != manifest_number
        } else {
            name.ends_with(".tmp")
        };
        if stale && s.storage.remove(&s.dir.join(&name)).is_ok() {
            removed += 1;
        }
    }
    s.storage.sync_dir(&s.dir)?;
    Ok(removed)
}
