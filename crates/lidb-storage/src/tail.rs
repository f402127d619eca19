//! Telling a torn tail from damage, for every log-like file (the record log of WALs and
//! manifests, lidb-kv's value logs), and the recovery modes that decide what each one costs.
//!
//! Pure functions over bytes; callers run them at recovery, single-threaded.
//!
//! The storage contract (`lib.rs`) says a crash keeps the synced bytes and a prefix of the
//! unsynced ones; a file system may also leave the unsynced region zero-filled from a sector
//! boundary. So after a crash, the bytes from the first bad record to the end of the file are a
//! strict prefix of ONE record (every whole record that landed is intact), or zeros from a sector
//! boundary on. Anything else is damage that no crash can leave:
//!
//! 1. an intact record somewhere after the bad one (found by a resynchronising scan that tries
//!    every byte offset; a record's checksum covers its lengths, so a random match needs a 2^-32
//!    coincidence), or
//! 2. a bad record that is complete (its stated lengths end inside the file) whose bytes are not
//!    zeros from a sector boundary to the end of the file.
//!
//! A damaged LAST record whose stated length was flipped past the end of the file, or whose tail
//! happens to be zeros from a sector boundary, reads as a torn tail: the framing alone cannot tell
//! them apart. The manifest adds its own check for that case (lidb-lsm's db/recover.rs: the WAL its last intact
//! edit needs must still exist).

use std::fmt;

/// Bytes of a disk sector: a zero-filled crash tail starts at a multiple of it.
pub const SECTOR_BYTES: u64 = 512;
/// Checksummed bytes the resynchronising scan may verify beyond 4x the bytes it scans: the scan is
/// bounded even when a long tail holds many plausible-looking lengths.
const SCAN_BUDGET_BYTES: u64 = 64 << 20;

/// What recovery does with a bad record (RocksDB's WAL recovery modes are the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// A torn tail is cut and reported; damage fails the open with `Corruption` (the default).
    #[default]
    TolerateTornTail,
    /// Keep the intact prefix before the first bad record, torn or damaged, and report everything
    /// dropped after it (with every later log of the same kind).
    PointInTime,
    /// Any bad record, a torn tail included, fails the open.
    Absolute,
}

impl RecoveryMode {
    /// The names the CLI takes.
    pub const NAMES: [&'static str; 3] = ["tolerate-torn-tail", "point-in-time", "absolute"];

    pub fn name(self) -> &'static str {
        match self {
            RecoveryMode::TolerateTornTail => "tolerate-torn-tail",
            RecoveryMode::PointInTime => "point-in-time",
            RecoveryMode::Absolute => "absolute",
        }
    }

    /// Parses a CLI name.
    pub fn parse(name: &str) -> Option<RecoveryMode> {
        match name {
            "tolerate-torn-tail" => Some(RecoveryMode::TolerateTornTail),
            "point-in-time" => Some(RecoveryMode::PointInTime),
            "absolute" => Some(RecoveryMode::Absolute),
            _ => None,
        }
    }

    /// Whether a bad record of `kind` may be cut (true) or must fail the open (false).
    pub fn allows(self, kind: TailKind) -> bool {
        match self {
            RecoveryMode::TolerateTornTail => kind == TailKind::Torn,
            RecoveryMode::PointInTime => true,
            RecoveryMode::Absolute => false,
        }
    }
}

impl fmt::Display for RecoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a bad record can be the work of a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailKind {
    /// A crash can leave it: a strict prefix of one record, or a zero-filled tail.
    Torn,
    /// No crash leaves it: media or software damage.
    Damage,
}

impl fmt::Display for TailKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TailKind::Torn => "torn tail",
            TailKind::Damage => "damage",
        })
    }
}

/// The bad end of a log: where its intact prefix stops, and what lies after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTail {
    pub kind: TailKind,
    /// Offset of the first byte not part of an intact record (the length of the intact prefix).
    pub offset: u64,
    /// Bytes from `offset` to the end of the file.
    pub bytes: u64,
    /// Intact records found after the bad one (they are dropped with it when the tail is cut).
    pub records_after: u64,
    /// Why the record at `offset` is bad, and what the classification found.
    pub detail: String,
}

impl BadTail {
    /// The report line of an open that cut this tail from `log`, as every engine's recovery
    /// report prints it.
    pub fn cut_line(&self, log: &std::path::Path) -> String {
        format!(
            "recovery: {}: cut {} bytes at offset {} ({}, {} intact records dropped): {}",
            log.display(),
            self.bytes,
            self.offset,
            self.kind,
            self.records_after,
            self.detail
        )
    }
}

/// The bad tail of a log whose length at the last clean close was `closed`, given the tail the
/// framing found (`bad`) and the end of its intact records (`valid_len`). Every byte before
/// `closed` was synced, so no crash can tear it: a "torn" tail before it is damage, and a log
/// whose intact records end before it (cut at a record boundary) was shortened, which is damage
/// with nothing left to cut. Bytes after `closed` keep the framing's verdict. Used by the stores
/// that record their log's length at a clean close (FineStore's `FINESTATE`, LearnedStore's
/// `WALSTATE`).
pub fn judge_clean_close(bad: Option<BadTail>, valid_len: u64, closed: u64) -> Option<BadTail> {
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

/// The framing of one kind of log, for the resynchronising scan.
pub trait Framing {
    /// The whole length of the record the bytes at the start of `rest` claim to be, if its
    /// header is complete and its lengths are in range (cheap: no checksum).
    fn claimed_len(&self, rest: &[u8]) -> Option<u64>;
    /// Whether the first `len` bytes of `rest` are an intact record (verifies the checksum).
    fn intact(&self, rest: &[u8], len: u64) -> bool;
    /// The longest a whole record can be: a torn tail is shorter.
    fn max_len(&self) -> u64;
}

/// Classifies the bad record at `offset` of a file whose bytes from `offset` on are `tail`
/// (`tail` may be a prefix of them when the file is very long; `file_len` is the whole length).
/// `detail` says why the record is bad.
pub fn classify(
    framing: &dyn Framing,
    tail: &[u8],
    offset: u64,
    file_len: u64,
    detail: &str,
) -> BadTail {
    let bytes = file_len.saturating_sub(offset);
    let whole = tail.len() as u64 == bytes;
    let claimed = framing.claimed_len(tail).filter(|&l| l > 0 && l <= bytes);
    let found = resync(framing, tail, claimed);
    let (kind, why) = if let Some((at, records)) = found {
        let why = format!(
            "{records} intact record(s) follow from offset {}",
            offset + at as u64
        );
        (TailKind::Damage, why)
    } else if whole && zero_filled(tail, offset, claimed) {
        (
            TailKind::Torn,
            "zeros from a sector boundary to the end".to_string(),
        )
    } else if claimed.is_some() {
        let why = "the record is whole (its lengths end inside the file), so no crash tore it";
        (TailKind::Damage, why.to_string())
    } else if bytes >= framing.max_len() {
        let why = "the bad bytes are longer than any record, so no crash left them";
        (TailKind::Damage, why.to_string())
    } else {
        (TailKind::Torn, "nothing intact follows".to_string())
    };
    BadTail {
        kind,
        offset,
        bytes,
        records_after: found.map_or(0, |(_, n)| n),
        detail: format!("{detail} at offset {offset}; {kind}: {why}; {bytes} bytes from there on"),
    }
}

/// The first intact record after the bad one (its offset in `tail`) and how many intact records
/// follow each other from there.
fn resync(framing: &dyn Framing, tail: &[u8], claimed: Option<u64>) -> Option<(usize, u64)> {
    let intact_at = |at: usize| -> Option<u64> {
        let rest = tail.get(at..)?;
        let len = framing.claimed_len(rest)?;
        (len > 0 && len <= rest.len() as u64 && framing.intact(rest, len)).then_some(len)
    };
    // Fast path: the bad record's own lengths are intact and a record follows it.
    let mut first = claimed
        .map(|l| l as usize)
        .filter(|&at| intact_at(at).is_some());
    if first.is_none() {
        let mut budget = SCAN_BUDGET_BYTES + 4 * tail.len() as u64;
        for at in 1..tail.len() {
            let Some(rest) = tail.get(at..) else { break };
            let Some(len) = framing.claimed_len(rest) else {
                continue;
            };
            if len == 0 || len > rest.len() as u64 {
                continue;
            }
            if len > budget {
                break;
            }
            budget -= len;
            if framing.intact(rest, len) {
                first = Some(at);
                break;
            }
        }
    }
    let first = first?;
    let (mut at, mut records) = (first, 0u64);
    while let Some(len) = intact_at(at) {
        records += 1;
        at += len as usize;
    }
    Some((first, records))
}

/// Whether `tail` is zeros from a sector boundary inside the bad record (or from its start) to the
/// end: what a file system leaves when it grew the file but never wrote the blocks.
fn zero_filled(tail: &[u8], offset: u64, claimed: Option<u64>) -> bool {
    let zeros_from = tail.len() - tail.iter().rev().take_while(|&&b| b == 0).count();
    if zeros_from == 0 {
        return true;
    }
    if zeros_from == tail.len() {
        return false;
    }
    let record_end = offset + claimed.unwrap_or(tail.len() as u64);
    let first_zero = offset + zeros_from as u64;
    let boundary = first_zero.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
    boundary < record_end
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// A toy framing: [len u8][payload len bytes][sum u8 = wrapping sum of len and payload], so
    /// that, as in the real framings, zeros are never a record.
    struct Toy;

    impl Framing for Toy {
        fn claimed_len(&self, rest: &[u8]) -> Option<u64> {
            rest.first().map(|&l| u64::from(l) + 2)
        }
        fn intact(&self, rest: &[u8], len: u64) -> bool {
            let Some(body) = rest.get(1..len as usize - 1) else {
                return false;
            };
            let sum = body.iter().fold(rest[0], |a, &b| a.wrapping_add(b));
            rest.get(len as usize - 1) == Some(&sum) && !body.is_empty()
        }
        fn max_len(&self) -> u64 {
            257
        }
    }

    fn rec(payload: &[u8]) -> Vec<u8> {
        let mut r = vec![payload.len() as u8];
        r.extend_from_slice(payload);
        r.push(payload.iter().fold(r[0], |a, &b| a.wrapping_add(b)));
        r
    }

    fn kind(tail: &[u8]) -> TailKind {
        classify(&Toy, tail, 100, 100 + tail.len() as u64, "bad").kind
    }

    #[test]
    fn a_truncated_record_is_torn() {
        let r = rec(b"hello world");
        for cut in 1..r.len() - 1 {
            assert_eq!(kind(&r[..cut]), TailKind::Torn, "cut {cut}");
        }
    }

    #[test]
    fn a_whole_record_failing_its_check_is_damage() {
        let mut r = rec(b"hello world");
        r[3] ^= 1;
        assert_eq!(kind(&r), TailKind::Damage);
    }

    #[test]
    fn an_intact_record_after_the_bad_one_is_damage() {
        let mut tail = rec(b"first");
        tail[0] = 200; // its length now runs past the end
        tail.extend(rec(b"second"));
        let t = classify(&Toy, &tail, 100, 100 + tail.len() as u64, "bad");
        assert_eq!(
            (t.kind, t.records_after),
            (TailKind::Damage, 1),
            "{}",
            t.detail
        );
    }

    #[test]
    fn zeros_from_a_sector_boundary_are_torn_and_elsewhere_damage() {
        // Offset 500: the sector boundary 512 lies 12 bytes in.
        let mut tail = rec(&[7u8; 40]);
        for b in tail.iter_mut().skip(12) {
            *b = 0;
        }
        let at = |offset: u64| classify(&Toy, &tail, offset, offset + tail.len() as u64, "bad");
        assert_eq!(at(500).kind, TailKind::Torn, "{}", at(500).detail);
        // From offset 1030 the zeros start at 1042, and the next boundary (1536) is past the
        // record's end (1030 + 42): a whole record with a zeroed tail is damage.
        assert_eq!(at(1030).kind, TailKind::Damage, "{}", at(1030).detail);
        assert_eq!(kind(&[0u8; 64]), TailKind::Torn);
    }

    #[test]
    fn bad_bytes_longer_than_any_record_are_damage() {
        let mut tail = vec![255u8];
        tail.extend(std::iter::repeat_n(3u8, 400));
        assert_eq!(kind(&tail), TailKind::Damage);
    }

    #[test]
    fn modes_allow_what_they_say() {
        use RecoveryMode::*;
        assert!(
            TolerateTornTail.allows(TailKind::Torn) && !TolerateTornTail.allows(TailKind::Damage)
        );
        assert!(PointInTime.allows(TailKind::Torn) && PointInTime.allows(TailKind::Damage));
        assert!(!Absolute.allows(TailKind::Torn) && !Absolute.allows(TailKind::Damage));
        for name in RecoveryMode::NAMES {
            assert_eq!(RecoveryMode::parse(name).map(|m| m.name()), Some(name));
        }
        assert_eq!(RecoveryMode::parse("lenient"), None);
    }
}
