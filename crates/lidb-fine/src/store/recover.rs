//! Opening a FineStore directory: phase 1 reads everything and decides (no file is written, so
//! a failed open changes nothing); phase 2 cuts an allowed bad tail, removes files no state
//! names, and opens the log for appending.
//!
//! Called once per open, single-threaded, before any writer exists.
//!
//! What recovery trusts (docs/format/finestore-log.md): `FINESTATE` names one checkpoint (or
//! none) and one log; the state is replaced atomically (temporary file, sync, rename, directory
//! sync) only after both files it names are synced, so every file it names is whole. Recovery
//! loads the checkpoint, then replays the intact records of the state's log chain in order (the
//! log the state names and the ones after it that a checkpoint interrupted before its state
//! switch left; `read_chain`). When `FINESTATE` holds
//! the log's length at a clean close, a bad tail before it is damage (`judge_closed`), and the
//! open clears that length before the log can grow.

use std::path::{Path, PathBuf};

use lidb_storage::report::save_lost;
use lidb_storage::tail::{BadTail, RecoveryMode, TailKind, judge_clean_close};
use lidb_storage::{Error, Result};
use lidb_storage::{Storage, WritableFile};

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
    /// The last log replayed (the one appended to and cut, if anything was cut), and the intact
    /// records of every log of the chain.
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
            writeln!(f, "{}", t.cut_line(&self.log))?;
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
    /// The last log of the state's chain: the one appended to.
    pub last_log_id: u64,
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
        .map_err(|d| lidb_storage::error::corruption(&state_path, d))?;
    let state = state_on_disk;
    let mut report = FineRecovery::default();
    let must_exist = |path: &Path| {
        if storage.exists(path) {
            Ok(())
        } else {
            let detail = format!("{STATE_NAME} names this file, which is missing");
            Err(lidb_storage::error::corruption(path, detail))
        }
    };
    let (entries, mut next_seq) = if state.checkpoint_id > 0 {
        let path = dir.join(checkpoint_name(state.checkpoint_id));
        must_exist(&path)?;
        let ckpt = format::decode_checkpoint(&storage.read_all(&path)?)
            .map_err(|d| lidb_storage::error::corruption(&path, d))?;
        report.checkpoint = Some(path);
        report.checkpoint_entries = ckpt.entries.len() as u64;
        (ckpt.entries, ckpt.next_seq)
    } else {
        (Vec::new(), 1)
    };
    must_exist(&dir.join(log_name(state.log_id)))?;
    let (mut chain, record_less) = read_chain(storage, dir, state.log_id)?;
    let Some((log_id, log_path, parsed)) = chain.pop() else {
        unreachable!("the chain holds at least the state's log")
    };
    let memory = Memory::load(entries, cfg).map_err(|e| Error::InvalidOption(e.to_string()))?;
    let mut last_seq: Option<u64> = None;
    for (id, path, before) in &chain {
        // A later log holds a record, so this one was synced whole before it (invariant 4 of
        // `logger.rs`): any bad tail is damage, whatever the mode.
        let bad = if *id == state.log_id {
            judge_closed(
                before.bad_tail.clone(),
                before.valid_len,
                state.closed_log_bytes,
            )
        } else {
            before.bad_tail.clone()
        };
        if let Some(t) = bad {
            let detail = format!(
                "{}; damage: a later log of the chain holds records, so this one was synced \
                 whole before them (lidb repair salvages the records after the damage)",
                t.detail
            );
            return Err(lidb_storage::error::corruption(path, detail));
        }
        replay(&memory, path, before, &mut last_seq, &mut next_seq)?;
        report.log_records += before.ops.len() as u64;
    }
    let mut bad_tail = parsed.bad_tail.clone();
    if log_id == state.log_id {
        bad_tail = judge_closed(bad_tail, parsed.valid_len, state.closed_log_bytes);
    }
    if let Some(bad) = &bad_tail
        && !mode.allows(bad.kind)
    {
        let detail = format!("{} (recovery mode {mode})", bad.detail);
        return Err(lidb_storage::error::corruption(&log_path, detail));
    }
    replay(&memory, &log_path, &parsed, &mut last_seq, &mut next_seq)?;
    report.log_records += parsed.ops.len() as u64;
    report.log = log_path.clone();
    report.cut = bad_tail.clone();

    // Phase 2: writes.
    for path in &record_less {
        storage.remove(path)?;
    }
    if !record_less.is_empty() {
        storage.sync_dir(dir)?;
    }
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
        sweep(storage, dir, state, log_id)?;
    }
    Ok(Opened {
        memory,
        state,
        last_log_id: log_id,
        log_file,
        next_seq,
        report,
    })
}

/// One log of a chain, read: its id, path and contents.
type ChainLog = (u64, PathBuf, format::ParsedLog);

/// The logs of the chain that starts at log `first` (the state's): it and the logs after it,
/// in order, through the last one that holds an intact record or damage. A checkpoint that did
/// not finish leaves the next log (`mod.rs`); logs after the last holding a record hold none
/// (made by a checkpoint cut before any record reached them) and are returned apart, for
/// phase 2 to remove.
fn read_chain(
    storage: &dyn Storage,
    dir: &Path,
    first: u64,
) -> Result<(Vec<ChainLog>, Vec<PathBuf>)> {
    let mut logs = Vec::new();
    let mut id = first;
    loop {
        let path = dir.join(log_name(id));
        if id != first && !storage.exists(&path) {
            break;
        }
        let parsed = format::parse_log(&storage.read_all(&path)?)
            .map_err(|d| lidb_storage::error::corruption(&path, d))?;
        logs.push((id, path, parsed));
        match id.checked_add(1) {
            Some(next) => id = next,
            None => break,
        }
    }
    let holds = |p: &format::ParsedLog| {
        !p.ops.is_empty()
            || p.bad_tail
                .as_ref()
                .is_some_and(|t| t.kind == TailKind::Damage)
    };
    let last = logs.iter().rposition(|(_, _, p)| holds(p)).unwrap_or(0);
    let record_less = logs
        .split_off(last + 1)
        .into_iter()
        .map(|(_, p, _)| p)
        .collect();
    Ok((logs, record_less))
}

/// Applies the records of one log of the chain, checking that its seqs continue the previous
/// log's (`last_seq`): a gap means a log before this one lost records from its end. Within a
/// log, seqs increase (writers number records as they buffer them, and the buffer reaches the
/// file in order, `logger.rs`): a record whose seq is not above the one before it, records that
/// passed their checksums out of order, is damage, and replaying it would give a key an older
/// value. (A gap inside a log is not refused: a log whose records lie below its checkpoint's
/// next seq, which an open accepts, continues at that seq after its last record.)
fn replay(
    memory: &Memory,
    path: &Path,
    parsed: &format::ParsedLog,
    last_seq: &mut Option<u64>,
    next_seq: &mut u64,
) -> Result<()> {
    if let (Some(last), Some(first)) = (*last_seq, parsed.ops.first())
        && last.checked_add(1) != Some(first.seq)
    {
        let detail = format!(
            "its first record has seq {}, but the log before it in the chain ends at seq \
             {last}: that log was shortened",
            first.seq
        );
        return Err(lidb_storage::error::corruption(path, detail));
    }
    let mut in_log: Option<u64> = None;
    for op in &parsed.ops {
        // A writer never logs seq u64::MAX (`Logger::append`): such a record is damage that
        // passed its checksum, and would leave no next seq.
        let Some(after) = op.seq.checked_add(1) else {
            let detail = format!("an intact record claims seq {}, past the last", op.seq);
            return Err(lidb_storage::error::corruption(path, detail));
        };
        if let Some(before) = in_log.filter(|&b| op.seq <= b) {
            let detail = format!("a record of seq {} follows one of seq {before}", op.seq);
            return Err(lidb_storage::error::corruption(path, detail));
        }
        in_log = Some(op.seq);
        memory.apply(&op.key, op.value.as_deref());
        *next_seq = (*next_seq).max(after);
    }
    *last_seq = parsed.ops.last().map(|op| op.seq).or(*last_seq);
    Ok(())
}

/// [`judge_clean_close`] for a log that may not have been closed cleanly (`closed` `None`).
fn judge_closed(bad: Option<BadTail>, valid_len: u64, closed: Option<u64>) -> Option<BadTail> {
    match closed {
        Some(closed) => judge_clean_close(bad, valid_len, closed),
        None => bad,
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
            return Err(lidb_storage::error::corruption(
                dir.join(STATE_NAME),
                detail,
            ));
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
        last_log_id: state.log_id,
        log_file,
        next_seq: 1,
        report,
    })
}

/// Removes store files that neither `state` names nor its log chain (through `last_log_id`)
/// holds: leftovers of a checkpoint that crashed before or after switching the state.
pub fn sweep(storage: &dyn Storage, dir: &Path, state: State, last_log_id: u64) -> Result<()> {
    let mut named = vec![checkpoint_name(state.checkpoint_id)];
    named.extend((state.log_id..=last_log_id).map(log_name));
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

    use lidb_storage::mem::MemStorage;

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
    /// Writes `logs` (id, [(seq, key)]) and a FINESTATE naming no checkpoint and log 1.
    fn chain_of(logs: &[(u64, &[(u64, &str)])]) -> Arc<MemStorage> {
        let mem = Arc::new(MemStorage::new());
        let dir = Path::new("/s");
        mem.create_dir_all(dir).unwrap();
        let put = |name: String, bytes: &[u8]| {
            let mut f = mem.create(&dir.join(name)).unwrap();
            f.append(bytes).unwrap();
            f.sync().unwrap();
        };
        for (id, records) in logs {
            let mut log = format::log_header().to_vec();
            for (seq, key) in *records {
                format::encode_record(&mut log, *seq, key.as_bytes(), Some(b"v"));
            }
            put(log_name(*id), &log);
        }
        let state = State {
            checkpoint_id: 0,
            log_id: 1,
            closed_log_bytes: None,
        };
        put(STATE_NAME.to_string(), &format::encode_state(state));
        mem
    }

    /// A checkpoint cut between its log switch and its new FINESTATE leaves the state's log
    /// followed by the new one: the open replays both, then folds them into a checkpoint.
    #[test]
    fn the_log_chain_of_an_unfinished_checkpoint_is_replayed_and_folded() {
        let mem = chain_of(&[(1, &[(1, "a"), (2, "b")]), (2, &[(3, "c"), (4, "a")])]);
        let store = open(&mem).unwrap();
        assert_eq!(store.recovery_report().log_records, 4);
        let keys: Vec<Vec<u8>> = store.scan(&[], None, 9).into_iter().map(|e| e.0).collect();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        let dir = Path::new("/s");
        let state = format::decode_state(&mem.read_all(&dir.join(STATE_NAME)).unwrap()).unwrap();
        assert_eq!((state.checkpoint_id, state.log_id), (1, 3));
        assert!(!mem.exists(&dir.join(log_name(1))) && !mem.exists(&dir.join(log_name(2))));
        store.put(b"d", b"v").unwrap();
        drop(store);
        assert_eq!(open(&mem).unwrap().scan(&[], None, 9).len(), 4);
    }

    /// In a chain, the logs before the last were synced whole before the next one got a
    /// record: a gap in the seqs between them, or a bad tail in one, is damage naming it.
    #[test]
    fn a_shortened_or_torn_log_inside_a_chain_is_damage() {
        let mem = chain_of(&[(1, &[(1, "a"), (2, "b")]), (2, &[(4, "c")])]);
        let err = open(&mem).unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
        assert!(err.to_string().contains("log-000002"), "{err}");

        let mem = chain_of(&[(1, &[(1, "a"), (2, "b")]), (2, &[(3, "c")])]);
        let first = Path::new("/s").join(log_name(1));
        let len = mem.file_size(&first).unwrap();
        mem.truncate(&first, len - 2).unwrap();
        for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::PointInTime] {
            let opts = FineStoreOptions {
                recovery_mode: mode,
                ..FineStoreOptions::default()
            };
            let err = FineStore::open_with_storage(mem.clone(), Path::new("/s"), opts).unwrap_err();
            assert!(err.to_string().contains("log-000001"), "{err}");
        }
    }

    /// Within one log the seqs increase: records out of order (which would give a key an older
    /// value on replay) or a seq repeated are damage; a gap is not.
    #[test]
    fn records_out_of_seq_order_in_a_log_are_damage() {
        let mem = chain_of(&[(1, &[(1, "a"), (2, "a"), (4, "b")])]);
        assert_eq!(open(&mem).unwrap().recovery_report().log_records, 3);
        for records in [
            &[(1, "a"), (3, "a"), (2, "b")][..],
            &[(1, "a"), (1, "b")][..],
        ] {
            let err = open(&chain_of(&[(1, records)])).unwrap_err();
            assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
            assert!(err.to_string().contains("follows one of seq"), "{err}");
        }
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
