//! Opening a FineStore directory: phase 1 reads everything and decides (no file is written, so
//! a failed open changes nothing); phase 2 cuts an allowed bad tail, removes files no state
//! names, and opens the log for appending.
//!
//! Called once per open, single-threaded, before any writer exists.
//!
//! What recovery trusts (docs/format/finestore-log.md): `FINESTATE` names one checkpoint (or
//! none) and one log; the state is replaced atomically (temporary file, sync, rename, directory
//! sync) only after both files it names are synced, so every file it names is whole. Recovery
//! loads the checkpoint, then replays the log's intact records in order. When `FINESTATE` holds
//! the log's length at a clean close, a bad tail before it is damage (`judge_closed`), and the
//! open clears that length before the log can grow.

use std::path::{Path, PathBuf};

use lidb_lsm::db::report::save_lost;
use lidb_lsm::storage::{Storage, WritableFile};
use lidb_lsm::tail::{BadTail, RecoveryMode, TailKind};
use lidb_lsm::{Error, Result};

use crate::Config;
use crate::store::format::{
    self, LOG_HEADER_BYTES, STATE_NAME, STATE_TMP_NAME, State, checkpoint_name, log_name,
};
use crate::store::memory::Memory;

/// What an open found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FineRecovery {
    /// The checkpoint loaded, if any, and its entries.
    pub checkpoint: Option<PathBuf>,
    pub checkpoint_entries: u64,
    /// The log replayed and its intact records.
    pub log: PathBuf,
    pub log_records: u64,
    /// The bad end of the log, cut at open (allowed by the recovery mode).
    pub cut: Option<BadTail>,
    /// Where the bytes of a damage cut were copied first (`lost/{log}@{offset}`).
    pub lost: Option<PathBuf>,
    /// Whether the directory held no store and one was created.
    pub created: bool,
}

impl std::fmt::Display for FineRecovery {
    /// One `recovery: ...` line per cut; nothing when the open cut nothing.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = &self.cut {
            writeln!(
                f,
                "recovery: {}: cut {} bytes at offset {} ({}, {} intact records dropped): {}",
                self.log.display(),
                t.bytes,
                t.offset,
                t.kind,
                t.records_after,
                t.detail
            )?;
        }
        if let Some(lost) = &self.lost {
            writeln!(
                f,
                "recovery: the cut bytes were saved to {}",
                lost.display()
            )?;
        }
        Ok(())
    }
}

/// The outcome of a successful open: the data, the log to append to, the next seq.
#[derive(Debug)]
pub struct Opened {
    pub memory: Memory,
    pub state: State,
    pub log_file: Box<dyn WritableFile>,
    pub next_seq: u64,
    pub report: FineRecovery,
}

fn is_store_file(name: &str) -> bool {
    name.starts_with("log-") || name.starts_with("checkpoint-") || name == STATE_TMP_NAME
}

/// Writes `FINESTATE` atomically and durably.
pub fn write_state(storage: &dyn Storage, dir: &Path, state: State) -> Result<()> {
    let tmp = dir.join(STATE_TMP_NAME);
    let mut f = storage.create(&tmp)?;
    f.append(&format::encode_state(state))?;
    f.sync()?;
    drop(f);
    storage.rename(&tmp, &dir.join(STATE_NAME))?;
    storage.sync_dir(dir)
}

/// Creates log `id` holding only its header, synced.
pub fn create_log(storage: &dyn Storage, dir: &Path, id: u64) -> Result<Box<dyn WritableFile>> {
    let mut f = storage.create(&dir.join(log_name(id)))?;
    f.append(&format::log_header())?;
    f.sync()?;
    Ok(f)
}

/// Opens (or creates) the store in `dir`.
pub fn open(storage: &dyn Storage, dir: &Path, mode: RecoveryMode, cfg: Config) -> Result<Opened> {
    let state_path = dir.join(STATE_NAME);
    if !storage.exists(&state_path) {
        return create(storage, dir, cfg);
    }
    // Phase 1: reads only.
    let state_on_disk = format::decode_state(&storage.read_all(&state_path)?)
        .map_err(|d| lidb_lsm::error::corruption(&state_path, d))?;
    let state = state_on_disk;
    let mut report = FineRecovery::default();
    let must_exist = |path: &Path| {
        if storage.exists(path) {
            Ok(())
        } else {
            let detail = format!("{STATE_NAME} names this file, which is missing");
            Err(lidb_lsm::error::corruption(path, detail))
        }
    };
    let (entries, mut next_seq) = if state.checkpoint_id > 0 {
        let path = dir.join(checkpoint_name(state.checkpoint_id));
        must_exist(&path)?;
        let ckpt = format::decode_checkpoint(&storage.read_all(&path)?)
            .map_err(|d| lidb_lsm::error::corruption(&path, d))?;
        report.checkpoint = Some(path);
        report.checkpoint_entries = ckpt.entries.len() as u64;
        (ckpt.entries, ckpt.next_seq)
    } else {
        (Vec::new(), 1)
    };
    let log_path = dir.join(log_name(state.log_id));
    must_exist(&log_path)?;
    let parsed = format::parse_log(&storage.read_all(&log_path)?)
        .map_err(|d| lidb_lsm::error::corruption(&log_path, d))?;
    let bad_tail = judge_closed(parsed.bad_tail, parsed.valid_len, state.closed_log_bytes);
    if let Some(bad) = &bad_tail
        && !mode.allows(bad.kind)
    {
        let detail = format!("{} (recovery mode {mode})", bad.detail);
        return Err(lidb_lsm::error::corruption(&log_path, detail));
    }
    let memory = Memory::load(entries, cfg).map_err(|e| Error::InvalidOption(e.to_string()))?;
    for op in &parsed.ops {
        // A writer never logs seq u64::MAX (`Logger::append`): such a record is damage that
        // passed its checksum, and would leave no next seq.
        let Some(after) = op.seq.checked_add(1) else {
            let detail = format!("an intact record claims seq {}, past the last", op.seq);
            return Err(lidb_lsm::error::corruption(&log_path, detail));
        };
        memory.apply(&op.key, op.value.as_deref());
        next_seq = next_seq.max(after);
    }
    report.log = log_path.clone();
    report.log_records = parsed.ops.len() as u64;
    report.cut = bad_tail.clone();

    // Phase 2: writes.
    let keep = if parsed.valid_len < LOG_HEADER_BYTES {
        0
    } else {
        parsed.valid_len
    };
    if let Some(bad) = &bad_tail
        && bad.kind == TailKind::Damage
        && bad.bytes > 0
    {
        report.lost = Some(save_lost(storage, dir, &log_path, parsed.valid_len)?);
    }
    if bad_tail.is_some() || keep == 0 {
        storage.truncate(&log_path, keep)?;
    }
    // The store is open from here on: the log may grow and a crash may tear it, so the closed
    // length goes before any write can reach the log (a crash before this rename opens as
    // from the clean close again).
    let state = State {
        closed_log_bytes: None,
        ..state
    };
    if state != state_on_disk {
        write_state(storage, dir, state)?;
    }
    let mut log_file = storage.open_append(&log_path)?;
    if log_file.is_empty() {
        log_file.append(&format::log_header())?;
        log_file.sync()?;
    }
    if report.cut.is_none() {
        sweep(storage, dir, state)?;
    }
    Ok(Opened {
        memory,
        state,
        log_file,
        next_seq,
        report,
    })
}

/// The bad tail of a log whose length at the last clean close was `closed` (if it was closed
/// cleanly), given the tail the framing found and the end of the intact records. Every byte
/// before `closed` was synced, so no crash can tear it: a "torn" tail before it is damage, and
/// a log whose intact records end before it (cut at a record boundary) was shortened, which
/// is damage with nothing left to cut. Bytes after `closed` keep the framing's verdict.
fn judge_closed(bad: Option<BadTail>, valid_len: u64, closed: Option<u64>) -> Option<BadTail> {
    let Some(closed) = closed else {
        return bad;
    };
    let why = format!("the log held {closed} bytes, synced, when the store was closed cleanly");
    match bad {
        Some(mut t) if t.offset < closed && t.kind == TailKind::Torn => {
            t.kind = TailKind::Damage;
            t.detail = format!("{}; damage, not a torn tail: {why}", t.detail);
            Some(t)
        }
        None if valid_len < closed => Some(BadTail {
            kind: TailKind::Damage,
            offset: valid_len,
            bytes: 0,
            records_after: 0,
            detail: format!("the log ends at offset {valid_len}, but {why}: it was shortened"),
        }),
        other => other,
    }
}

/// A directory without `FINESTATE`: a new store, unless store files hold data (then the state
/// was lost, which is damage, not an empty store).
fn create(storage: &dyn Storage, dir: &Path, cfg: Config) -> Result<Opened> {
    for name in storage.list(dir)? {
        let path = dir.join(&name);
        let data_file = name.starts_with("log-") || name.starts_with("checkpoint-");
        if data_file && storage.file_size(&path)? > LOG_HEADER_BYTES {
            let detail = format!("{STATE_NAME} is missing but {name} holds data");
            return Err(lidb_lsm::error::corruption(dir.join(STATE_NAME), detail));
        }
    }
    let state = State {
        checkpoint_id: 0,
        log_id: 1,
        closed_log_bytes: None,
    };
    let log_file = create_log(storage, dir, state.log_id)?;
    write_state(storage, dir, state)?;
    let memory = Memory::load(Vec::new(), cfg).map_err(|e| Error::InvalidOption(e.to_string()))?;
    let report = FineRecovery {
        log: dir.join(log_name(state.log_id)),
        created: true,
        ..FineRecovery::default()
    };
    Ok(Opened {
        memory,
        state,
        log_file,
        next_seq: 1,
        report,
    })
}

/// Removes store files `state` does not name (leftovers of a checkpoint that crashed before or
/// after switching the state).
pub fn sweep(storage: &dyn Storage, dir: &Path, state: State) -> Result<()> {
    let named = [checkpoint_name(state.checkpoint_id), log_name(state.log_id)];
    let mut removed = false;
    for name in storage.list(dir)? {
        if is_store_file(&name) && !named.contains(&name) {
            storage.remove(&dir.join(&name))?;
            removed = true;
        }
    }
    if removed {
        storage.sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use lidb_lsm::storage::mem::MemStorage;

    use super::*;
    use crate::{FineStore, FineStoreOptions};

    /// A store whose FINESTATE names `checkpoint` (if any) and a log holding one put at `seq`.
    fn store_with(seq: u64, checkpoint_next_seq: Option<u64>) -> Arc<MemStorage> {
        let mem = Arc::new(MemStorage::new());
        let dir = Path::new("/s");
        mem.create_dir_all(dir).unwrap();
        let put = |name: String, bytes: &[u8]| {
            let mut f = mem.create(&dir.join(name)).unwrap();
            f.append(bytes).unwrap();
            f.sync().unwrap();
        };
        let mut log = format::log_header().to_vec();
        format::encode_record(&mut log, seq, b"k", Some(b"v"));
        put(log_name(2), &log);
        if let Some(next) = checkpoint_next_seq {
            put(checkpoint_name(1), &format::encode_checkpoint(next, &[]));
        }
        let state = State {
            checkpoint_id: u64::from(checkpoint_next_seq.is_some()),
            log_id: 2,
            closed_log_bytes: None,
        };
        put(STATE_NAME.to_string(), &format::encode_state(state));
        mem
    }

    fn open(mem: &Arc<MemStorage>) -> Result<FineStore> {
        FineStore::open_with_storage(mem.clone(), Path::new("/s"), FineStoreOptions::default())
    }

    /// Found by the `finestore` fuzz target: a checksummed record or checkpoint claiming the
    /// last seqs made the next write overflow `next_seq` (a panic with overflow checks, seqs
    /// wrapping to 0 without); and a record at seq u64::MAX overflowed in recovery.
    #[test]
    fn seqs_at_the_end_of_u64_fail_cleanly() {
        let store = open(&store_with(u64::MAX - 1, None)).unwrap();
        assert_eq!(store.get(b"k").as_deref(), Some(&b"v"[..]));
        assert!(matches!(store.put(b"a", b"b"), Err(Error::Closed(_))));
        drop(store);

        let store = open(&store_with(5, Some(u64::MAX))).unwrap();
        assert!(matches!(store.put(b"a", b"b"), Err(Error::Closed(_))));
        drop(store);

        let err = open(&store_with(u64::MAX, None)).unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
        assert!(err.to_string().contains("log-000002"), "{err}");
    }
    /// A hand-made FINESTATE naming the last log id: the store opens and serves, and a
    /// checkpoint (which would need the next id) is refused instead of wrapping to log 0.
    #[test]
    fn a_checkpoint_after_the_last_file_id_is_refused() {
        let mem = Arc::new(MemStorage::new());
        let dir = Path::new("/s");
        mem.create_dir_all(dir).unwrap();
        let mut log = format::log_header().to_vec();
        format::encode_record(&mut log, 1, b"k", Some(b"v"));
        for (name, bytes) in [
            (log_name(u64::MAX), log),
            (
                STATE_NAME.to_string(),
                format::encode_state(State {
                    checkpoint_id: 0,
                    log_id: u64::MAX,
                    closed_log_bytes: None,
                }),
            ),
        ] {
            let mut f = mem.create(&dir.join(name)).unwrap();
            f.append(&bytes).unwrap();
            f.sync().unwrap();
        }
        let store = open(&mem).unwrap();
        assert_eq!(store.get(b"k").as_deref(), Some(&b"v"[..]));
        let err = store.checkpoint().unwrap_err();
        assert!(matches!(err, Error::Closed(_)), "{err:?}");
        assert!(mem.exists(&dir.join(log_name(u64::MAX))));
    }
}
