//! The bytes of FineStore's three kinds of file: the log, the checkpoint and `FINESTATE`
//! (specified in docs/format/finestore-log.md and docs/format/finestore-checkpoint.md).
//! DO NOT CHANGE the constants: they are stored on disk.
//!
//! Pure functions over bytes, shared by the writer and by recovery; decoders never panic on
//! any bytes and return the corruption detail as a `String` (the caller names the file).
//!
//! ```text
//! log:        [magic "FINELOG" 7][version u8 = 1] record*
//! record:     [crc32c u32 LE of (len bytes ++ payload)][len u32 LE][payload: len bytes]
//! payload:    [op u8: 1 put, 2 delete][seq u64 LE][key_len u32 LE][key][value: the rest]
//! checkpoint: [magic "FINECKP" 7][version u8 = 1][next_seq u64][entries u64]
//!             ([key_len u32][value_len u32][key][value])* [crc32c u32 LE of all before]
//! FINESTATE:  [magic "FINESTA" 7][version u8 = 2][checkpoint id u64][log id u64]
//!             [closed log bytes u64: 0 = not closed cleanly][crc32c u32 LE of all before]
//!             (version 1, still read: the same without the closed log bytes, 28 bytes)
//! ```

use lidb_storage::log::{RecordFraming, record_crc};
use lidb_storage::tail::BadTail;

pub const LOG_MAGIC: &[u8; 7] = b"FINELOG";
pub const CHECKPOINT_MAGIC: &[u8; 7] = b"FINECKP";
pub const STATE_MAGIC: &[u8; 7] = b"FINESTA";
pub const FORMAT_VERSION: u8 = 1;
/// Version of `FINESTATE` written (2 adds the log length at a clean close); 1 is still read.
pub const STATE_VERSION: u8 = 2;
/// Bytes of a log's file header.
pub const LOG_HEADER_BYTES: u64 = 8;
/// Largest payload of a log record (1 GiB); a longer stated length is a bad record.
pub const MAX_PAYLOAD_BYTES: u64 = 1 << 30;
/// Bytes of `FINESTATE` (version 2).
pub const STATE_BYTES: usize = 36;
/// Bytes of a version-1 `FINESTATE`.
pub const STATE_V1_BYTES: usize = 28;
/// Name of the state file and of its temporary twin.
pub const STATE_NAME: &str = "FINESTATE";
pub const STATE_TMP_NAME: &str = "FINESTATE.tmp";

pub const OP_PUT: u8 = 1;
pub const OP_DELETE: u8 = 2;

/// File name of log `id`.
pub fn log_name(id: u64) -> String {
    format!("log-{id:06}")
}

/// File name of checkpoint `id` (ids start at 1; 0 means "no checkpoint").
pub fn checkpoint_name(id: u64) -> String {
    format!("checkpoint-{id:06}")
}

/// The header every log starts with.
pub fn log_header() -> [u8; LOG_HEADER_BYTES as usize] {
    let mut h = [FORMAT_VERSION; LOG_HEADER_BYTES as usize];
    for (d, s) in h.iter_mut().zip(LOG_MAGIC) {
        *d = *s;
    }
    h
}

/// One write, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOp {
    pub seq: u64,
    pub key: Vec<u8>,
    /// `None`: a deletion.
    pub value: Option<Vec<u8>>,
}

/// Appends the framed record of one write to `out`. The caller keeps keys and values under
/// the limits (`check_sizes`).
pub fn encode_record(out: &mut Vec<u8>, seq: u64, key: &[u8], value: Option<&[u8]>) {
    let mut payload = Vec::with_capacity(13 + key.len() + value.map_or(0, <[u8]>::len));
    payload.push(if value.is_some() { OP_PUT } else { OP_DELETE });
    payload.extend_from_slice(&seq.to_le_bytes());
    payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
    payload.extend_from_slice(key);
    if let Some(v) = value {
        payload.extend_from_slice(v);
    }
    let len_bytes = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&record_crc(len_bytes, &payload).to_le_bytes());
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&payload);
}

/// Whether a key and value fit one record.
pub fn fits(key: &[u8], value: &[u8]) -> bool {
    13 + key.len() as u64 + value.len() as u64 <= MAX_PAYLOAD_BYTES
}

/// The record framing (the same as lidb-lsm's record log), for `lidb_storage::tail::classify`.
pub const FINE_LOG_FRAMING: RecordFraming = RecordFraming {
    max_payload: MAX_PAYLOAD_BYTES,
};

/// The intact records of a log, and what follows them.
#[derive(Debug, Default)]
pub struct ParsedLog {
    pub ops: Vec<LogOp>,
    /// Bytes through the last intact record (or the header; 0 when the header is torn).
    pub valid_len: u64,
    pub bad_tail: Option<BadTail>,
}

/// Parses a whole log. Err: the file is not a FineStore log (wrong magic or version), or an
/// intact record (its checksum matches) does not decode: no crash leaves either.
pub fn parse_log(bytes: &[u8]) -> Result<ParsedLog, String> {
    let mut out = ParsedLog::default();
    if bytes.is_empty() {
        return Ok(out);
    }
    let expected = log_header();
    let head = bytes.get(..LOG_HEADER_BYTES as usize).unwrap_or(bytes);
    if head != expected {
        if expected.starts_with(head) || head.iter().all(|&b| b == 0) {
            return Ok(bad_at(out, bytes, 0, "the log header is torn"));
        }
        return Err(format!(
            "not a FineStore log: it starts with {head:02x?}, expected \"FINELOG\" version 1"
        ));
    }
    let end = FINE_LOG_FRAMING.walk(bytes, LOG_HEADER_BYTES, |pos, payload| {
        let op = decode_payload(payload)
            .ok_or_else(|| format!("intact record at offset {pos} does not decode"))?;
        out.ops.push(op);
        Ok(())
    })?;
    out.valid_len = end.valid_len;
    out.bad_tail = end.bad_tail;
    Ok(out)
}

/// The write a record's payload holds; `None` when it does not decode.
pub fn decode_payload(p: &[u8]) -> Option<LogOp> {
    let op = *p.first()?;
    let seq = u64::from_le_bytes(p.get(1..9)?.try_into().ok()?);
    let key_len = u32::from_le_bytes(p.get(9..13)?.try_into().ok()?) as usize;
    let key = p.get(13..13usize.checked_add(key_len)?)?.to_vec();
    let rest = p.get(13 + key_len..)?;
    let value = match op {
        OP_PUT => Some(rest.to_vec()),
        OP_DELETE if rest.is_empty() => None,
        _ => return None,
    };
    Some(LogOp { seq, key, value })
}

fn bad_at(mut out: ParsedLog, bytes: &[u8], offset: u64, detail: &str) -> ParsedLog {
    out.valid_len = offset;
    out.bad_tail = Some(FINE_LOG_FRAMING.bad_tail(bytes, offset, detail));
    out
}

/// A checkpoint's contents: the sorted entries and the sequence number the log goes on from.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub next_seq: u64,
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The bytes of a checkpoint of `entries` (sorted by key, keys distinct).
pub fn encode_checkpoint(next_seq: u64, entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(CHECKPOINT_MAGIC);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&next_seq.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a checkpoint; Err is the corruption detail.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<Checkpoint, String> {
    let n = bytes.len();
    if n < 28 {
        return Err(format!(
            "{n} bytes are shorter than a checkpoint's 28-byte frame"
        ));
    }
    let (body, crc) = bytes.split_at(n - 4);
    let stored = u32::from_le_bytes(crc.try_into().map_err(|_| "crc")?);
    if crc32c::crc32c(body) != stored {
        return Err(format!("checkpoint of {n} bytes fails its checksum"));
    }
    if body.get(..7) != Some(CHECKPOINT_MAGIC.as_slice()) || body.get(7) != Some(&FORMAT_VERSION) {
        return Err("not a FineStore checkpoint (magic or version)".into());
    }
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?))
    };
    let u32_at = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let bad = || "checkpoint entries do not match its length".to_string();
    let next_seq = u64_at(8).ok_or_else(bad)?;
    let count = u64_at(16).ok_or_else(bad)?;
    let mut entries = Vec::new();
    let mut pos = 24;
    for _ in 0..count {
        let (kl, vl) = (
            u32_at(pos).ok_or_else(bad)?,
            u32_at(pos + 4).ok_or_else(bad)?,
        );
        pos += 8;
        let k = body.get(pos..pos + kl).ok_or_else(bad)?;
        let v = body.get(pos + kl..pos + kl + vl).ok_or_else(bad)?;
        pos += kl + vl;
        entries.push((k.to_vec(), v.to_vec()));
    }
    if pos != body.len() {
        return Err(bad());
    }
    if entries
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.0 >= b.0))
    {
        return Err("checkpoint keys are not strictly increasing".into());
    }
    Ok(Checkpoint { next_seq, entries })
}

/// What `FINESTATE` names: the checkpoint (0: none) and the log recovery replays after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    pub checkpoint_id: u64,
    pub log_id: u64,
    /// The length of log `log_id`, synced, when the store was closed cleanly; `None` while it
    /// is open (or after a crash). Recovery reads a bad tail before it as damage, not a tear.
    pub closed_log_bytes: Option<u64>,
}

pub fn encode_state(s: State) -> Vec<u8> {
    let mut out = Vec::with_capacity(STATE_BYTES);
    out.extend_from_slice(STATE_MAGIC);
    out.push(STATE_VERSION);
    out.extend_from_slice(&s.checkpoint_id.to_le_bytes());
    out.extend_from_slice(&s.log_id.to_le_bytes());
    // A log always holds its 8-byte header, so 0 is never a closed length.
    out.extend_from_slice(&s.closed_log_bytes.unwrap_or(0).to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a `FINESTATE` of version 2 or 1 (which has no closed length).
pub fn decode_state(bytes: &[u8]) -> Result<State, String> {
    let version = match bytes.len() {
        STATE_BYTES => STATE_VERSION,
        STATE_V1_BYTES => 1,
        n => {
            return Err(format!(
                "{n} bytes, expected {STATE_BYTES} (or {STATE_V1_BYTES})"
            ));
        }
    };
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().map_err(|_| "crc")?) {
        return Err("the state fails its checksum".into());
    }
    if body.get(..7) != Some(STATE_MAGIC.as_slice()) || body.get(7) != Some(&version) {
        return Err(format!(
            "not a FineStore state file of version {version} (magic or version)"
        ));
    }
    let at = |i: usize| {
        body.get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let closed_log_bytes = match version {
        1 => None,
        _ => Some(at(24).ok_or("state fields missing")?).filter(|&n| n > 0),
    };
    match (at(8), at(16)) {
        (Some(checkpoint_id), Some(log_id)) => Ok(State {
            checkpoint_id,
            log_id,
            closed_log_bytes,
        }),
        _ => Err("state fields missing".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use lidb_storage::tail::TailKind;

    fn log_of(n: u64) -> Vec<u8> {
        let mut b = log_header().to_vec();
        for i in 0..n {
            encode_record(&mut b, i + 1, format!("k{i}").as_bytes(), Some(b"value"));
        }
        encode_record(&mut b, n + 1, b"gone", None);
        b
    }

    #[test]
    fn records_round_trip_and_every_cut_is_torn() {
        let b = log_of(3);
        let p = parse_log(&b).unwrap();
        assert_eq!(p.ops.len(), 4);
        assert_eq!(p.ops[3].value, None);
        assert_eq!(p.ops[1].key, b"k1");
        assert!(p.bad_tail.is_none());
        for cut in 1..b.len() {
            let p = parse_log(&b[..cut]).unwrap();
            let t = p.bad_tail.as_ref().map(|t| t.kind);
            assert!(t.is_none() || t == Some(TailKind::Torn), "cut {cut}");
        }
    }

    #[test]
    fn a_flipped_bit_mid_log_is_damage() {
        let mut b = log_of(5);
        b[20] ^= 4;
        let t = parse_log(&b).unwrap().bad_tail.unwrap();
        assert_eq!(t.kind, TailKind::Damage);
        assert_eq!(t.offset, 8);
    }

    /// Decoders of untrusted bytes never panic: random bytes, and valid files with random
    /// bytes changed, cut or appended.
    #[test]
    fn decoders_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
        let entries = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"bb".to_vec(), vec![7; 30]),
        ];
        let valid = [
            log_of(4),
            encode_checkpoint(3, &entries),
            encode_state(State {
                checkpoint_id: 1,
                log_id: 2,
                closed_log_bytes: Some(90),
            }),
        ];
        for round in 0..3000 {
            let mut b = if round % 4 == 0 {
                (0..rng.gen_range(0..80))
                    .map(|_| rng.r#gen::<u8>())
                    .collect()
            } else {
                valid[round % 3].clone()
            };
            for _ in 0..rng.gen_range(0..4) {
                if !b.is_empty() {
                    let i = rng.gen_range(0..b.len());
                    b[i] = rng.r#gen();
                }
            }
            if rng.gen_bool(0.3) {
                b.truncate(rng.gen_range(0..=b.len()));
            }
            if rng.gen_bool(0.2) {
                b.extend((0..rng.gen_range(1..20)).map(|_| rng.r#gen::<u8>()));
            }
            let _ = parse_log(&b);
            let _ = decode_checkpoint(&b);
            let _ = decode_state(&b);
        }
    }

    #[test]
    fn checkpoint_and_state_round_trip_and_catch_flips() {
        let e = vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), vec![])];
        let c = encode_checkpoint(9, &e);
        assert_eq!(decode_checkpoint(&c).unwrap().entries, e);
        for i in 0..c.len() {
            let mut d = c.clone();
            d[i] ^= 1;
            assert!(decode_checkpoint(&d).is_err(), "flip at {i}");
        }
        for closed_log_bytes in [None, Some(8), Some(u64::MAX)] {
            let s = State {
                checkpoint_id: 3,
                log_id: 4,
                closed_log_bytes,
            };
            assert_eq!(decode_state(&encode_state(s)).unwrap(), s);
            let mut d = encode_state(s);
            d[9] ^= 1;
            assert!(decode_state(&d).is_err());
        }
    }

    /// The bytes a version-1 store wrote (28 bytes, no closed length) still decode.
    #[test]
    fn a_version_1_state_decodes() {
        let mut v1 = STATE_MAGIC.to_vec();
        v1.push(1);
        v1.extend_from_slice(&3u64.to_le_bytes());
        v1.extend_from_slice(&4u64.to_le_bytes());
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        let want = State {
            checkpoint_id: 3,
            log_id: 4,
            closed_log_bytes: None,
        };
        assert_eq!(decode_state(&v1).unwrap(), want);
        // A version byte that does not match the length is refused.
        let mut v2 = encode_state(want);
        v2[7] = 1;
        let crc = crc32c::crc32c(&v2[..STATE_BYTES - 4]);
        v2[STATE_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_state(&v2).is_err());
    }
}
