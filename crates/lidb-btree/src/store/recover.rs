//! Opening the write-ahead log of a store: phase 1 reads every log and decides (nothing is
//! written and nothing applied, so a failed open changes no file and no tree); phase 2 replays
//! the writes after the target's checkpoint, cuts an allowed bad tail, removes what is
//! obsolete, clears `WALSTATE`, and opens the last log for appending.
//!
//! Called once per open, single-threaded, before any writer exists.
//!
//! What recovery trusts (docs/format/btree-wal.md): a log is created with its header synced and
//! its directory entry synced before any record goes to it; a switch syncs the old log whole
//! before any record goes to the new one; old logs are removed only after the target's
//! checkpoint at the switch LSN is durable. So, with k the last log holding a record:
//! 1. every log before k is whole: any bad tail in one is damage, in every recovery mode;
//! 2. logs after k hold no record (a checkpoint cut after creating its log): removed;
//! 3. LSNs rise by one within a log; from the first write after the checkpoint's LSN C on they
//!    rise by one across logs too, starting at C + 1: a gap means a log lost records;
//! 4. only log k may end in a torn tail, which is cut; `WALSTATE` (a clean close) turns a bad
//!    tail before the closed length, or a log shorter than it, into damage.

use std::path::{Path, PathBuf};

use lidb_storage::Storage;
use lidb_storage::log::{LOG_HEADER_BYTES, LogWriter};
use lidb_storage::report::save_lost;
use lidb_storage::tail::{BadTail, RecoveryMode, TailKind, judge_clean_close};

use crate::error::{Error, Result};
use crate::store::target::{CheckpointInfo, CheckpointTarget};
use crate::wal::files::{self, ClosedState, STATE_NAME, STATE_TMP_NAME, log_name};
use crate::wal::from_log_error;
use crate::wal::read::{self, ReadLog};

/// What an open found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalRecovery {
    /// Whether the directory held no log and one was created.
    pub created: bool,
    /// Whether `WALSTATE` said the store was closed cleanly.
    pub closed_cleanly: bool,
    /// The checkpoint the target opened with.
    pub checkpoint_lsn: u64,
    /// Every log read, in order.
    pub logs: Vec<PathBuf>,
    /// Intact records applied to the target (LSN above the checkpoint's).
    pub records_replayed: u64,
    /// Intact records already in the checkpoint (LSN at or below it), skipped.
    pub records_skipped: u64,
    /// The log whose bad end was cut, and what was cut (allowed by the recovery mode).
    pub cut_log: Option<PathBuf>,
    pub cut: Option<BadTail>,
    /// Where the bytes of a damage cut were copied first (`lost/{log}@{offset}`).
    pub lost: Option<PathBuf>,
    /// The LSN the next write gets.
    pub next_lsn: u64,
}

impl WalRecovery {
    /// Bytes cut from the end of the last log (0 when nothing was cut).
    pub fn cut_bytes(&self) -> u64 {
        self.cut.as_ref().map_or(0, |t| t.bytes)
    }
}

impl std::fmt::Display for WalRecovery {
    /// One `recovery: ...` line per cut; nothing when the open cut nothing.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let (Some(t), Some(log)) = (&self.cut, &self.cut_log) {
            writeln!(f, "{}", t.cut_line(log))?;
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

/// A successful open: the log to append to and the report.
#[derive(Debug)]
pub struct Recovered {
    pub log_id: u64,
    pub writer: LogWriter,
    pub report: WalRecovery,
    pub loaded: CheckpointInfo,
}

fn corruption(file: &Path, detail: impl Into<String>) -> Error {
    Error::Corruption {
        file: file.to_path_buf(),
        detail: detail.into(),
    }
}

/// The error for a bad tail of `file` that the recovery mode does not allow; it says how to go
/// on, in the words of the other engines.
fn refused(file: &Path, t: &BadTail, mode: RecoveryMode) -> Error {
    let advice = match (mode, t.kind) {
        (RecoveryMode::Absolute, TailKind::Torn) => {
            "the absolute recovery mode refuses even a torn tail; open with \
             --recovery-mode tolerate-torn-tail to cut it"
        }
        _ => {
            "acknowledged writes may follow it; open with --recovery-mode point-in-time to \
             keep only what precedes it (the bytes cut are saved to lost/ first), or run `lidb \
             repair`, which does that and rebuilds the learned table"
        }
    };
    corruption(
        file,
        format!("{} (recovery mode {mode}); {advice}", t.detail),
    )
}

/// Writes `WALSTATE` atomically and durably.
pub fn write_state(storage: &dyn Storage, dir: &Path, state: ClosedState) -> Result<()> {
    let tmp = dir.join(STATE_TMP_NAME);
    let mut f = storage.create(&tmp)?;
    f.append(&files::encode_state(state))?;
    f.sync()?;
    drop(f);
    storage.rename(&tmp, &dir.join(STATE_NAME))?;
    storage.sync_dir(dir)?;
    Ok(())
}

/// Creates log `id` holding its header, synced, with its directory entry synced.
pub fn create_log(storage: &dyn Storage, dir: &Path, id: u64) -> Result<LogWriter> {
    let path = dir.join(log_name(id));
    let mut writer = LogWriter::new(storage.create(&path)?, path);
    writer.sync()?;
    storage.sync_dir(dir)?;
    Ok(writer)
}

/// Opens the log of the store in `dir` over `target` (see the module documentation).
pub fn open(
    storage: &dyn Storage,
    dir: &Path,
    target: &dyn CheckpointTarget,
    mode: RecoveryMode,
) -> Result<Recovered> {
    // Phase 1: reads only.
    let loaded = target.checkpoint_info();
    let ckpt = loaded.lsn;
    let state_path = dir.join(STATE_NAME);
    let closed = if storage.exists(&state_path) {
        let bytes = storage.read_all(&state_path)?;
        Some(files::decode_state(&bytes).map_err(|d| corruption(&state_path, d))?)
    } else {
        None
    };
    let mut logs = Vec::new();
    for id in read::list_logs(storage, dir)? {
        logs.push(read::read(storage, dir, id)?);
    }
    let mut report = WalRecovery {
        closed_cleanly: closed.is_some(),
        checkpoint_lsn: ckpt,
        logs: logs.iter().map(|l| l.path.clone()).collect(),
        ..WalRecovery::default()
    };
    if logs.is_empty() {
        return create(storage, dir, closed, loaded, report);
    }
    let holds = |l: &ReadLog| {
        l.has_records()
            || l.bad_tail
                .as_ref()
                .is_some_and(|t| t.kind == TailKind::Damage)
    };
    let last = logs.iter().rposition(holds).unwrap_or(logs.len() - 1);
    let record_less = logs.split_off(last + 1);
    let Some(mut tail_log) = logs.pop() else {
        unreachable!("the logs through `last` are not empty")
    };
    if let Some(closed) = closed {
        check_closed(&state_path, closed, &mut logs, &mut tail_log, &record_less)?;
    }
    for log in &logs {
        if let Some(t) = &log.bad_tail {
            let detail = format!(
                "{}; damage: a later log holds records, so this one was synced whole before \
                 them (no recovery mode cuts it, nor does `lidb repair`)",
                t.detail
            );
            return Err(corruption(&log.path, detail));
        }
    }
    if let Some(t) = &tail_log.bad_tail
        && !mode.allows(t.kind)
    {
        return Err(refused(&tail_log.path, t, mode));
    }
    logs.push(tail_log);
    let last_lsn = check_lsns(&logs, ckpt)?;
    check_sizes(&logs, ckpt, target)?;
    report.next_lsn = ckpt.max(last_lsn).saturating_add(1);

    // Phase 2: replay, then writes.
    for log in &logs {
        for (_, op) in &log.ops {
            if op.lsn <= ckpt {
                report.records_skipped += 1;
                continue;
            }
            match &op.value {
                Some(v) => target.apply_put(&op.key, v)?,
                None => {
                    target.apply_delete(&op.key)?;
                }
            }
            report.records_replayed += 1;
        }
    }
    let Some(tail_log) = logs.pop() else {
        unreachable!("the tail log was pushed back")
    };
    if let Some(t) = &tail_log.bad_tail {
        if t.kind == TailKind::Damage && t.bytes > 0 {
            let lost = save_lost(storage, dir, &tail_log.path, tail_log.valid_len)
                .map_err(from_log_error)?;
            report.lost = Some(lost);
        }
        let keep = if tail_log.valid_len < LOG_HEADER_BYTES {
            0
        } else {
            tail_log.valid_len
        };
        storage.truncate(&tail_log.path, keep)?;
        report.cut_log = Some(tail_log.path.clone());
        report.cut = Some(t.clone());
    }
    let mut removed = Vec::new();
    removed.extend(record_less.iter().map(|l| l.path.clone()));
    if report.cut.as_ref().is_none_or(|t| t.kind == TailKind::Torn) {
        // Logs whose every record is in the checkpoint: a checkpoint crashed before it removed
        // them. Kept after damage, for whoever looks into it.
        let obsolete = |l: &&ReadLog| l.ops.iter().all(|(_, op)| op.lsn <= ckpt);
        removed.extend(logs.iter().filter(obsolete).map(|l| l.path.clone()));
    }
    for path in &removed {
        storage.remove(path)?;
    }
    if closed.is_some() {
        // The store is open from here on: the log may grow and a crash may tear it, so the
        // closed length goes before any write can reach the log.
        storage.remove(&state_path)?;
    }
    if !removed.is_empty() || closed.is_some() {
        storage.sync_dir(dir)?;
    }
    let file = storage.open_append(&tail_log.path)?;
    let mut writer = LogWriter::new(file, tail_log.path.clone());
    if writer.is_empty() {
        writer.sync()?;
    }
    Ok(Recovered {
        log_id: tail_log.id,
        writer,
        report,
        loaded,
    })
}

/// A directory without a log: a new store, unless `WALSTATE` or the target's checkpoint says
/// writes were logged here (then the logs were lost, which is damage, not a new store).
fn create(
    storage: &dyn Storage,
    dir: &Path,
    closed: Option<ClosedState>,
    loaded: CheckpointInfo,
    mut report: WalRecovery,
) -> Result<Recovered> {
    if let Some(c) = closed {
        let detail = format!("{STATE_NAME} names this log, which is missing");
        return Err(corruption(&dir.join(log_name(c.log_id)), detail));
    }
    if loaded.lsn > 0 {
        let detail = format!(
            "the tree's checkpoint holds the writes through LSN {}, but no write-ahead log \
             (wal-*.log) is left: the logs were lost",
            loaded.lsn
        );
        return Err(corruption(dir, detail));
    }
    let writer = create_log(storage, dir, 1)?;
    report.created = true;
    report.next_lsn = 1;
    Ok(Recovered {
        log_id: 1,
        writer,
        report,
        loaded,
    })
}

/// Applies what `WALSTATE` says: the log it names was synced through `closed.log_bytes` and no
/// record was logged after it, so a torn tail before that length is damage, a log shorter than
/// it was shortened, and a log it names that is gone, or a later log holding records, is
/// damage too.
fn check_closed(
    state_path: &Path,
    closed: ClosedState,
    logs: &mut [ReadLog],
    tail_log: &mut ReadLog,
    record_less: &[ReadLog],
) -> Result<()> {
    if closed.log_id < tail_log.id {
        let detail = format!(
            "{STATE_NAME} says the store was closed cleanly with log {}, but the later log {} \
             holds records: damage",
            closed.log_id,
            tail_log.path.display()
        );
        return Err(corruption(state_path, detail));
    }
    let named = std::iter::once(&mut *tail_log)
        .chain(logs.iter_mut())
        .find(|l| l.id == closed.log_id);
    let Some(log) = named else {
        let known = record_less.iter().any(|l| l.id == closed.log_id);
        if !known {
            let detail = format!("{STATE_NAME} names this log, which is missing");
            return Err(corruption(
                &state_path.with_file_name(log_name(closed.log_id)),
                detail,
            ));
        }
        // The named log holds no record (it was closed right after a checkpoint): only its
        // length can have changed.
        let Some(log) = record_less.iter().find(|l| l.id == closed.log_id) else {
            unreachable!("found above")
        };
        return match judge_clean_close(log.bad_tail.clone(), log.valid_len, closed.log_bytes) {
            Some(t) => Err(corruption(&log.path, t.detail)),
            None => Ok(()),
        };
    };
    log.bad_tail = judge_clean_close(log.bad_tail.take(), log.valid_len, closed.log_bytes);
    Ok(())
}

/// Checks that the target takes every write to replay (`check_put`: a writer checks it before
/// logging, so a record the tree refuses is damage): in phase 1, so a refused record fails the
/// open before any write is applied.
fn check_sizes(logs: &[ReadLog], ckpt: u64, target: &dyn CheckpointTarget) -> Result<()> {
    for log in logs {
        for (offset, op) in log.ops.iter().filter(|(_, op)| op.lsn > ckpt) {
            if let Err(e) = target.check_put(&op.key, op.value.as_deref().unwrap_or_default()) {
                let detail = format!(
                    "the record at offset {offset} (LSN {}) holds a write no writer could log \
                     ({e}); damage (no recovery mode cuts it, nor does `lidb repair`)",
                    op.lsn
                );
                return Err(corruption(&log.path, detail));
            }
        }
    }
    Ok(())
}

/// Checks invariant 3 of the module documentation over the logs to replay; returns the last
/// LSN logged (0 if none).
fn check_lsns(logs: &[ReadLog], ckpt: u64) -> Result<u64> {
    let mut last: Option<u64> = None;
    for log in logs {
        let mut prev_in_log: Option<u64> = None;
        for (offset, op) in &log.ops {
            let lsn = op.lsn;
            let at = |why: String| {
                corruption(
                    &log.path,
                    format!(
                        "the record at offset {offset} has LSN {lsn}, but {why}; damage (no \
                         recovery mode cuts it, nor does `lidb repair`)"
                    ),
                )
            };
            if let Some(p) = prev_in_log
                && p.checked_add(1) != Some(lsn)
            {
                return Err(at(format!("the record before it in this log has LSN {p}")));
            }
            if let Some(l) = last
                && lsn <= l
            {
                return Err(at(format!("an earlier log already reached LSN {l}")));
            }
            if lsn > ckpt {
                let expected = last.unwrap_or(0).max(ckpt) + 1;
                if lsn != expected {
                    return Err(at(format!(
                        "the writes from LSN {expected} on (after the tree's checkpoint at LSN \
                         {ckpt}) are missing: a log lost records"
                    )));
                }
            }
            prev_in_log = Some(lsn);
            last = Some(lsn);
        }
    }
    Ok(last.unwrap_or(0))
}
