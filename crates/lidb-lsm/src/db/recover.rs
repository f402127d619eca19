//! Opening a database: lock the directory, replay the manifest into a version, open its tables
//! and level models, replay the WALs the manifest does not cover into a memtable (truncating a
//! torn tail and reporting it; a batch `Options::replay_filter` rejects is cut like a torn tail,
//! with everything after it, so what is replayed stays a prefix of the writes), flush that memtable, start a fresh WAL and a fresh manifest, and
//! remove files nothing references.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use crate::batch::BatchOp;
use crate::db::compact::MAX_LEVELS;
use crate::db::flush;
use crate::db::level_index::LevelIndex;
use crate::db::output::open_handle;
use crate::db::state::{
    CompactionStats, ManifestState, RecoveryReport, Shared, SuperVersion, Tables, WriteState, lock,
};
use crate::error::{Error, Result, corruption};
use crate::log::{
    LOG_HEADER_BYTES, LogWriter, RECORD_HEADER_BYTES as LOG_RECORD_HEADER_BYTES, read_log,
};
use crate::manifest::{Manifest, VersionEdit};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::storage::Storage;
use crate::table::cache::PageCache;
use crate::types::ReadStats;
use crate::version::Version;

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

/// Why `Options::replay_filter` rejects a batch (its first rejected entry), if it does.
fn rejected(opts: &Options, ops: &[BatchOp]) -> Option<String> {
    let filter = opts.replay_filter.as_ref()?;
    ops.iter()
        .find_map(|op| filter.check(op.kind, &op.key, &op.value).err())
}

pub(crate) fn open(storage: Arc<dyn Storage>, dir: PathBuf, opts: Options) -> Result<Shared> {
    let missing = || {
        Error::InvalidOption(format!(
            "{}: no database here (create_if_missing is off)",
            dir.display()
        ))
    };
    if !storage.exists(&dir) {
        if !opts.create_if_missing {
            return Err(missing());
        }
        storage.create_dir_all(&dir)?;
    }
    let lock_guard = storage.lock(&dir.join("LOCK"))?;
    let mut report = RecoveryReport::default();
    let mut folded = match Manifest::recover(&*storage, &dir)? {
        Some(r) => {
            if let Some(t) = &r.torn_tail {
                report.torn_manifest_tail = Some((t.offset, t.detail.clone()));
            }
            fold(&r.edits, &dir.join(format!("MANIFEST-{:06}", r.number)))?
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
    let mut next = folded.next_file_number;

    // 1. Replay the WALs the manifest does not cover into a memtable.
    let mut wals: Vec<u64> = storage
        .list(&dir)?
        .iter()
        .filter_map(|n| n.strip_suffix(".log")?.parse().ok())
        .filter(|&n| n >= folded.log_number)
        .collect();
    wals.sort_unstable();
    let replay = Arc::new(MemTable::new());
    // Set once the replay filter rejected an entry: every later record and WAL is dropped.
    let mut cut: Option<String> = None;
    for &n in &wals {
        let path = dir.join(format!("{n:06}.log"));
        if let Some(why) = &cut {
            report.torn_wal_tails.push((path.clone(), 0, why.clone()));
            storage.truncate(&path, 0)?;
            continue;
        }
        let contents = read_log(&*storage, &path)?;
        if let Some(t) = &contents.torn_tail {
            report
                .torn_wal_tails
                .push((path.clone(), t.offset, t.detail.clone()));
            storage.truncate(&path, contents.valid_len)?;
        }
        let mut offset = LOG_HEADER_BYTES;
        for rec in &contents.records {
            let (seq, ops) = crate::batch::decode(rec).map_err(|d| corruption(&path, d))?;
            if let Some(why) = rejected(&opts, &ops) {
                let why = format!(
                    "replay filter rejected the batch at offset {offset} of {}: {why}",
                    path.display()
                );
                report
                    .torn_wal_tails
                    .push((path.clone(), offset, why.clone()));
                storage.truncate(&path, offset)?;
                cut = Some(why);
                break;
            }
            for (i, op) in ops.iter().enumerate() {
                replay.insert(seq + i as u64, op.kind, &op.key, &op.value);
            }
            let last = seq + (ops.len() as u64).saturating_sub(1);
            folded.last_sequence = folded.last_sequence.max(last);
            report.wal_records_replayed += 1;
            offset += LOG_RECORD_HEADER_BYTES + rec.len() as u64;
        }
    }
    // 2. Write what was replayed to an L0 table. Until step 3 no manifest names it, so a crash
    //    here replays the same WALs again and the orphan table is swept.
    if !replay.is_empty() {
        let number = next;
        next += 1;
        let meta = flush::write_l0_table(&*storage, &dir, number, &replay, &opts)?;
        storage.sync_dir(&dir)?;
        folded.version = folded
            .version
            .apply(&[(0, meta)], &[])
            .map_err(|d| corruption(&dir, format!("replayed table does not fit: {d}")))?;
    }
    // 3. A fresh manifest holding the whole version; switching CURRENT to it is the atomic step
    //    that retires the replayed WALs.
    let manifest_number = next;
    let wal_number = next + 1;
    next += 2;
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
    // 4. The new WAL.
    let wal_path = dir.join(format!("{wal_number:06}.log"));
    let wal = LogWriter::new(storage.create(&wal_path)?, wal_path);
    storage.sync_dir(&dir)?;

    let s = Shared {
        dir: dir.clone(),
        storage: Arc::clone(&storage),
        opts: opts.clone(),
        cache: Arc::new(PageCache::new(opts.block_cache_bytes)),
        _lock: lock_guard,
        current: RwLock::new(Arc::new(SuperVersion {
            mem: Arc::new(MemTable::new()),
            mem_wal: wal_number,
            imm: Vec::new(),
            tables: Arc::new(Tables::default()),
        })),
        write: Mutex::new(WriteState { wal, wal_number }),
        manifest: Mutex::new(ManifestState {
            manifest,
            next_file_number: next,
        }),
        last_seq: AtomicU64::new(folded.last_sequence),
        work: Mutex::new(()),
        work_cv: Condvar::new(),
        closing: AtomicBool::new(false),
        bg_error: Mutex::new(None),
        read_stats: Mutex::new(ReadStats::default()),
        lookups: AtomicU64::new(0),
        compaction_stats: Mutex::new(CompactionStats::default()),
        recovery: Mutex::new(RecoveryReport::default()),
        cursors: Mutex::new(Vec::new()),
        flush_lock: Mutex::new(()),
        compaction_lock: Mutex::new(()),
    };

    // 5. Open the tables and level models of the version.
    let mut levels = Vec::new();
    for metas in &folded.version.levels {
        let mut handles = Vec::new();
        for m in metas {
            handles.push(open_handle(&s, m.clone())?);
        }
        levels.push(handles);
    }
    let mut level_indexes = Vec::new();
    for n in &folded.level_index {
        level_indexes.push(match n {
            Some(n) => Some(Arc::new(LevelIndex::load(&*storage, &dir, *n)?)),
            None => None,
        });
    }
    let tables = Tables {
        version: folded.version,
        levels,
        level_indexes,
    };
    s.update(|sv| SuperVersion {
        tables: Arc::new(tables),
        ..sv.clone()
    });

    // 6. Remove what nothing references: old WALs and manifests, orphan tables and models.
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
    for name in storage.list(&dir)? {
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
        if stale && storage.remove(&dir.join(&name)).is_ok() {
            report.obsolete_files_removed += 1;
        }
    }
    storage.sync_dir(&dir)?;
    *lock(&s.recovery) = report;
    Ok(s)
}
