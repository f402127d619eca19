//! Offline repair of a FineStore that does not open (`lidb repair --engine finedex`; lidb-lsm's
//! `repair_db` is the model): rebuild the store from what reads cleanly, set aside what does not.
//!
//! ```text
//! 1 read:   FINESTATE; when it does not decode, it is copied to lost/FINESTATE@0 and the
//!           directory listing stands in for it
//!           checkpoints, the one FINESTATE names first, then newest first: the first that
//!           decodes is the base; each one tried that does not is copied to lost/{name}@0
//!           every log: every intact record that decodes, in a walk that resynchronises past
//!           each bad range (to the next offset where an intact, decoding record starts); each
//!           dropped range is copied to lost/{log}@{offset}
//! 2 merge:  the base, then every record with seq >= the base's next_seq, in seq order
//! 3 commit: a new checkpoint and an empty log under new ids, synced; then FINESTATE naming
//!           them, atomically, recording the empty log's length as a clean close does
//! 4 clean:  remove every other log and checkpoint (merged, superseded, or saved in lost/)
//! ```
//!
//! Why step 2 is right: a log record is a whole put or delete of one key (`format.rs`), seqs
//! are given one per logged write with no gaps, and the base holds every write below its
//! next_seq; so applying the later records in seq order (last write wins) rebuilds the store,
//! whichever logs they sit in. A gap in the seqs after the base is writes lost to damage; the
//! report lists them.
//!
//! Caller: one thread, with no store open on the directory (repair takes its lock).
//!
//! Invariants: nothing is removed before the new FINESTATE is durable, and no byte that is not
//! merged is removed without a copy in lost/. A crash before step 3 leaves the store as it was
//! plus orphan files (a clean open sweeps them; a second repair reads them again without harm:
//! an orphan checkpoint holds the same merge); a crash after it leaves the repaired store.
//!
//! Limits: a base lost with no older checkpoint whole loses every write before the logs' first
//! records (reported as missing seqs); writes lost at the very end of the last log cannot be
//! told from writes never made.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use lidb_storage::Result;
use lidb_storage::Storage;
use lidb_storage::report::LOST_DIR;
use lidb_storage::tail::Framing;

use crate::store::format::{
    self, FINE_LOG_FRAMING, LOG_HEADER_BYTES, LogOp, STATE_NAME, STATE_TMP_NAME, State,
    checkpoint_name, decode_payload, log_name,
};
use crate::store::recover::{create_log, write_state};

/// Bytes of a file that repair did not keep, and where they went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// File name in the store directory.
    pub file: String,
    pub offset: u64,
    pub bytes: u64,
    /// Where the bytes were copied (under `lost/`); `None` when there was nothing to copy.
    pub saved_as: Option<String>,
    pub reason: String,
}

/// What [`crate::FineStore::repair`] kept, set aside and wrote: one line per thing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FineRepair {
    /// Why `FINESTATE` could not be used (the listing stood in for it).
    pub state_set_aside: Option<SetAside>,
    /// The checkpoint the store was rebuilt from, and its entries.
    pub checkpoint_kept: Option<(String, u64)>,
    /// Checkpoints that do not read whole (or are missing), tried before the one kept.
    pub checkpoints_set_aside: Vec<SetAside>,
    /// Intact log records applied.
    pub log_records: u64,
    /// Intact log records older than the checkpoint kept (already in it).
    pub log_records_older: u64,
    /// Bad ranges of the logs, dropped.
    pub log_set_aside: Vec<SetAside>,
    /// Ranges `[from, to)` of seqs after the base that no intact record holds: lost writes.
    pub missing_seqs: Vec<(u64, u64)>,
    /// The files written, and the entries of the new checkpoint.
    pub checkpoint_written: String,
    pub log_written: String,
    pub entries_written: u64,
}

impl FineRepair {
    /// Whether anything was set aside (data may be missing; the lines say what).
    pub fn set_aside_anything(&self) -> bool {
        self.state_set_aside.is_some()
            || !self.checkpoints_set_aside.is_empty()
            || !self.log_set_aside.is_empty()
            || !self.missing_seqs.is_empty()
    }
}

impl fmt::Display for FineRepair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = |f: &mut fmt::Formatter<'_>, what: &str, s: &SetAside| {
            let saved = s
                .saved_as
                .as_ref()
                .map_or(String::new(), |p| format!(" as {p}"));
            writeln!(
                f,
                "set aside {} bytes of {what} {} from offset {}{saved}: {}",
                s.bytes, s.file, s.offset, s.reason
            )
        };
        if let Some(s) = &self.state_set_aside {
            line(f, "state file", s)?;
        }
        for s in &self.checkpoints_set_aside {
            line(f, "checkpoint", s)?;
        }
        match &self.checkpoint_kept {
            Some((name, n)) => writeln!(f, "kept checkpoint {name} ({n} entries)")?,
            None => writeln!(f, "kept no checkpoint: the logs alone are replayed")?,
        }
        writeln!(
            f,
            "recovered {} log records ({} older than the checkpoint, already in it)",
            self.log_records, self.log_records_older
        )?;
        for s in &self.log_set_aside {
            line(f, "log", s)?;
        }
        for (from, to) in &self.missing_seqs {
            writeln!(
                f,
                "writes with seq {from} to {} are lost (no intact record holds them)",
                to - 1
            )?;
        }
        writeln!(
            f,
            "wrote {} ({} entries) and an empty {}; {STATE_NAME} names them",
            self.checkpoint_written, self.entries_written, self.log_written
        )
    }
}

/// The id of `name` if it is `{prefix}{digits}`.
fn numbered(name: &str, prefix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Copies `bytes` to `dir/lost/{file}@{offset}`, durably; returns that path.
fn save(
    storage: &dyn Storage,
    dir: &Path,
    file: &str,
    offset: u64,
    bytes: &[u8],
) -> Result<String> {
    let lost = dir.join(LOST_DIR);
    storage.create_dir_all(&lost)?;
    let to = lost.join(format!("{file}@{offset}"));
    let mut out = storage.create(&to)?;
    out.append(bytes)?;
    out.sync()?;
    storage.sync_dir(&lost)?;
    storage.sync_dir(dir)?;
    Ok(to.display().to_string())
}

/// Repairs the store in `dir` (see the module documentation). Errors are I/O errors, a held
/// lock, or a directory holding no FineStore file; damage is never an error here, it is set
/// aside and reported.
pub fn repair(storage: &dyn Storage, dir: &Path) -> Result<FineRepair> {
    let _lock = storage.lock(&dir.join("LOCK"))?;
    let names = storage.list(dir)?;
    let mut logs: Vec<u64> = names.iter().filter_map(|n| numbered(n, "log-")).collect();
    let mut checkpoints: Vec<u64> = names
        .iter()
        .filter_map(|n| numbered(n, "checkpoint-"))
        .collect();
    let has_state = names.iter().any(|n| n == STATE_NAME);
    if !has_state && logs.is_empty() && checkpoints.is_empty() {
        return Err(lidb_storage::Error::InvalidOption(format!(
            "{} holds no FineStore ({STATE_NAME}, log-* or checkpoint-* files)",
            dir.display()
        )));
    }
    logs.sort_unstable();
    checkpoints.sort_unstable_by(|a, b| b.cmp(a));
    let mut report = FineRepair::default();

    // 1. Read: the state, the base checkpoint, every log.
    let (mut named_checkpoint, mut named_log) = (None, None);
    if has_state {
        let bytes = storage.read_all(&dir.join(STATE_NAME))?;
        match format::decode_state(&bytes) {
            Ok(state) => {
                named_checkpoint = Some(state.checkpoint_id).filter(|&c| c > 0);
                named_log = Some(state.log_id);
            }
            Err(reason) => {
                let saved = save(storage, dir, STATE_NAME, 0, &bytes)?;
                report.state_set_aside = Some(SetAside {
                    file: STATE_NAME.into(),
                    offset: 0,
                    bytes: bytes.len() as u64,
                    saved_as: Some(saved),
                    reason,
                });
            }
        }
    }
    let mut candidates: Vec<u64> = named_checkpoint.into_iter().collect();
    candidates.extend(checkpoints.iter().filter(|&&c| Some(c) != named_checkpoint));
    let mut base = format::Checkpoint::default();
    for id in candidates {
        let name = checkpoint_name(id);
        let path = dir.join(&name);
        if !storage.exists(&path) {
            report.checkpoints_set_aside.push(SetAside {
                file: name,
                offset: 0,
                bytes: 0,
                saved_as: None,
                reason: format!("{STATE_NAME} names it, but it is missing"),
            });
            continue;
        }
        let bytes = storage.read_all(&path)?;
        match format::decode_checkpoint(&bytes) {
            Ok(c) => {
                report.checkpoint_kept = Some((name, c.entries.len() as u64));
                base = c;
                break;
            }
            Err(reason) => {
                let saved = save(storage, dir, &name, 0, &bytes)?;
                report.checkpoints_set_aside.push(SetAside {
                    file: name,
                    offset: 0,
                    bytes: bytes.len() as u64,
                    saved_as: Some(saved),
                    reason,
                });
            }
        }
    }
    let mut ops: Vec<LogOp> = Vec::new();
    for &id in &logs {
        let name = log_name(id);
        let bytes = storage.read_all(&dir.join(&name))?;
        let salvaged = salvage_log(&bytes);
        ops.extend(salvaged.ops);
        for (from, to, reason) in salvaged.bad {
            let range = bytes.get(from as usize..to as usize);
            debug_assert!(
                range.is_some(),
                "salvage_log names only ranges of the bytes it walked"
            );
            let range = range.unwrap_or_default();
            let saved = save(storage, dir, &name, from, range)?;
            report.log_set_aside.push(SetAside {
                file: name.clone(),
                offset: from,
                bytes: to - from,
                saved_as: Some(saved),
                reason,
            });
        }
    }

    // 2. Merge: the base, then the later records in seq order (stable: a log read later wins
    // a tie, which no store writes).
    let base_seq = if report.checkpoint_kept.is_some() {
        base.next_seq
    } else {
        1
    };
    let mut data: BTreeMap<Vec<u8>, Vec<u8>> = base.entries.into_iter().collect();
    ops.sort_by_key(|op| op.seq);
    let mut expected = base_seq;
    for op in ops {
        if op.seq < base_seq {
            report.log_records_older += 1;
            continue;
        }
        if op.seq > expected {
            report.missing_seqs.push((expected, op.seq));
        }
        expected = expected.max(op.seq + 1);
        report.log_records += 1;
        match op.value {
            Some(v) => data.insert(op.key, v),
            None => data.remove(&op.key),
        };
    }

    // 3. Commit, under ids past every file of the directory and every id the state named (a
    // new file never replaces one that may still be needed).
    let next_id = |ids: &[u64], named: Option<u64>| {
        let last = ids.iter().copied().chain(named).max().unwrap_or(0);
        last.checked_add(1).ok_or_else(|| {
            lidb_storage::Error::Closed("the store's file numbers are exhausted".into())
        })
    };
    let state = State {
        checkpoint_id: next_id(&checkpoints, named_checkpoint)?,
        log_id: next_id(&logs, named_log)?,
        closed_log_bytes: Some(LOG_HEADER_BYTES),
    };
    let entries: Vec<(Vec<u8>, Vec<u8>)> = data.into_iter().collect();
    report.entries_written = entries.len() as u64;
    report.checkpoint_written = checkpoint_name(state.checkpoint_id);
    report.log_written = log_name(state.log_id);
    let mut f = storage.create(&dir.join(&report.checkpoint_written))?;
    f.append(&format::encode_checkpoint(expected, &entries))?;
    f.sync()?;
    drop(f);
    drop(create_log(storage, dir, state.log_id)?);
    storage.sync_dir(dir)?;
    write_state(storage, dir, state)?;

    // 4. Clean: FINESTATE names only the new pair.
    for name in &names {
        let stale = numbered(name, "log-").is_some_and(|id| id != state.log_id)
            || numbered(name, "checkpoint-").is_some_and(|id| id != state.checkpoint_id)
            || name == STATE_TMP_NAME;
        if stale {
            storage.remove(&dir.join(name))?;
        }
    }
    storage.sync_dir(dir)?;
    Ok(report)
}

/// What a log gives a repair.
#[derive(Debug, Default)]
struct Salvaged {
    /// Every intact record that decodes, in file order.
    ops: Vec<LogOp>,
    /// The byte ranges `[from, to)` dropped, each with why.
    bad: Vec<(u64, u64, String)>,
}

/// Walks a whole log: intact records are kept; from each bad record, the walk resynchronises at
/// the next offset where an intact record that decodes starts (`next_record`), and the bytes
/// skipped are a bad range. A record that passes its checksum but does not decode (or claims
/// the last seq, which no writer gives) is a bad range of its own.
fn salvage_log(bytes: &[u8]) -> Salvaged {
    let mut out = Salvaged::default();
    let len = bytes.len() as u64;
    let mut pos = LOG_HEADER_BYTES.min(len);
    if bytes.get(..pos as usize) != Some(&format::log_header()[..]) {
        let to = next_record(bytes, LOG_HEADER_BYTES).unwrap_or(len);
        out.bad
            .push((0, to, "the log header is not \"FINELOG\" version 1".into()));
        pos = to;
    }
    while pos < len {
        let mut undecodable = Vec::new();
        let walked = FINE_LOG_FRAMING.walk(bytes, pos, |at, payload| {
            match decode_payload(payload).filter(|op| op.seq < u64::MAX) {
                Some(op) => out.ops.push(op),
                None => undecodable.push((
                    at,
                    at + 8 + payload.len() as u64,
                    format!("intact record at offset {at} does not decode"),
                )),
            }
            Ok(())
        });
        out.bad.append(&mut undecodable);
        // The closure never refuses a record, so the walk cannot fail.
        let Ok(end) = walked else { break };
        let Some(tail) = end.bad_tail else { break };
        let from = end.valid_len;
        let to = next_record(bytes, from + 1).unwrap_or(len);
        // The classifier's detail speaks of the whole tail; the range needs its first clause.
        let reason = tail
            .detail
            .split_once(';')
            .map_or(tail.detail.as_str(), |(first, _)| first)
            .to_string();
        out.bad.push((from, to, reason));
        pos = to;
    }
    out.bad.sort_by_key(|b| b.0);
    out
}

/// The first offset at or after `from` where an intact record that decodes starts.
fn next_record(bytes: &[u8], from: u64) -> Option<u64> {
    (from..bytes.len() as u64).find(|&at| {
        let Some(rest) = bytes.get(at as usize..) else {
            return false;
        };
        let Some(len) = FINE_LOG_FRAMING.claimed_len(rest) else {
            return false;
        };
        len <= rest.len() as u64
            && FINE_LOG_FRAMING.intact(rest, len)
            && rest
                .get(8..len as usize)
                .and_then(decode_payload)
                .is_some_and(|op| op.seq < u64::MAX)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn log_of(n: u64) -> (Vec<u8>, Vec<u64>) {
        let mut b = format::log_header().to_vec();
        let mut starts = Vec::new();
        for i in 0..n {
            starts.push(b.len() as u64);
            format::encode_record(&mut b, i + 1, format!("k{i}").as_bytes(), Some(b"value"));
        }
        (b, starts)
    }

    #[test]
    fn the_walk_resynchronises_past_damage() {
        let (mut b, starts) = log_of(6);
        b[starts[2] as usize + 12] ^= 1;
        let s = salvage_log(&b);
        let seqs: Vec<u64> = s.ops.iter().map(|o| o.seq).collect();
        assert_eq!(seqs, vec![1, 2, 4, 5, 6]);
        assert_eq!(s.bad.len(), 1);
        assert_eq!((s.bad[0].0, s.bad[0].1), (starts[2], starts[3]));
        assert!(s.bad[0].2.contains("checksum"), "{}", s.bad[0].2);
    }

    #[test]
    fn a_damaged_header_and_a_torn_tail_are_ranges() {
        let (mut b, starts) = log_of(3);
        b[0] = b'X';
        b.extend_from_slice(&[1, 2, 3]);
        let s = salvage_log(&b);
        assert_eq!(s.ops.len(), 3);
        let ranges: Vec<(u64, u64)> = s.bad.iter().map(|r| (r.0, r.1)).collect();
        let end = b.len() as u64;
        assert_eq!(ranges, vec![(0, starts[0]), (end - 3, end)]);
    }

    #[test]
    fn the_walk_never_panics_on_random_bytes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
        for _ in 0..300 {
            let (mut b, _) = log_of(4);
            for _ in 0..rng.gen_range(0..6) {
                let i = rng.gen_range(0..b.len());
                b[i] = rng.r#gen();
            }
            b.truncate(rng.gen_range(0..=b.len()));
            let s = salvage_log(&b);
            let kept: u64 = s.bad.iter().map(|r| r.1 - r.0).sum();
            assert!(kept <= b.len() as u64);
        }
    }
}
