//! The names of the write-ahead log's files and the bytes of `WALSTATE`, the clean-close record
//! (docs/format/btree-wal.md). DO NOT CHANGE the constants: they are stored on disk.
//!
//! ```text
//! log file:  wal-{id:06}.log, ids from 1 up, one lidb-lsm record log each
//! WALSTATE:  [magic "BTWALST" 7][version u8 = 1][log id u64 LE][closed log bytes u64 LE]
//!            [crc32c u32 LE of the 24 bytes before]
//! ```
//!
//! Pure functions; [`decode_state`] never panics on any bytes.

/// Name of the clean-close record and of its temporary twin.
pub const STATE_NAME: &str = "WALSTATE";
pub const STATE_TMP_NAME: &str = "WALSTATE.tmp";
/// First bytes of `WALSTATE`. DO NOT CHANGE: stored on disk.
pub const STATE_MAGIC: &[u8; 7] = b"BTWALST";
/// Version of `WALSTATE`.
pub const STATE_VERSION: u8 = 1;
/// Bytes of `WALSTATE`.
pub const STATE_BYTES: usize = 28;
/// Name of the directory lock the store holds while open.
pub const LOCK_NAME: &str = "LOCK";

const LOG_PREFIX: &str = "wal-";
const LOG_SUFFIX: &str = ".log";

/// File name of log `id`.
pub fn log_name(id: u64) -> String {
    format!("{LOG_PREFIX}{id:06}{LOG_SUFFIX}")
}

/// The id of a log file name, or `None` for any other name.
pub fn parse_log_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(LOG_PREFIX)?.strip_suffix(LOG_SUFFIX)?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What a clean close recorded: the log appended to last, and its length, every byte synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedState {
    pub log_id: u64,
    pub log_bytes: u64,
}

/// The bytes of `WALSTATE`.
pub fn encode_state(s: ClosedState) -> Vec<u8> {
    let mut out = Vec::with_capacity(STATE_BYTES);
    out.extend_from_slice(STATE_MAGIC);
    out.push(STATE_VERSION);
    out.extend_from_slice(&s.log_id.to_le_bytes());
    out.extend_from_slice(&s.log_bytes.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&out).to_le_bytes());
    out
}

/// Decodes `WALSTATE`. Err: the corruption detail.
pub fn decode_state(bytes: &[u8]) -> Result<ClosedState, String> {
    if bytes.len() != STATE_BYTES {
        return Err(format!(
            "{STATE_NAME} holds {} bytes, expected {STATE_BYTES}",
            bytes.len()
        ));
    }
    let (body, crc) = bytes
        .split_at_checked(STATE_BYTES - 4)
        .ok_or_else(|| format!("{STATE_NAME} is too short"))?;
    let crc = u32::from_le_bytes(crc.try_into().map_err(|_| "bad crc field".to_string())?);
    if crc32c::crc32c(body) != crc {
        return Err(format!("{STATE_NAME} fails its checksum"));
    }
    if body.get(..7) != Some(STATE_MAGIC.as_slice()) {
        return Err(format!("{STATE_NAME} does not start with \"BTWALST\""));
    }
    match body.get(7) {
        Some(&STATE_VERSION) => {}
        v => {
            return Err(format!(
                "{STATE_NAME} version {v:?} is not supported (this build reads {STATE_VERSION})"
            ));
        }
    }
    let u64_at = |at: usize| {
        body.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| format!("{STATE_NAME} is too short"))
    };
    Ok(ClosedState {
        log_id: u64_at(8)?,
        log_bytes: u64_at(16)?,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn log_names_round_trip() {
        for id in [1, 42, 999_999, 1_000_000, u64::MAX] {
            assert_eq!(parse_log_name(&log_name(id)), Some(id));
        }
        for name in [
            "wal-1.log",
            "wal-00000x.log",
            "wal-000001.tmp",
            "LOCK",
            "wal-.log",
        ] {
            assert_eq!(parse_log_name(name), None, "{name}");
        }
    }

    #[test]
    fn the_state_round_trips_and_refuses_a_flipped_byte() {
        let s = ClosedState {
            log_id: 3,
            log_bytes: 1234,
        };
        let mut bytes = encode_state(s);
        assert_eq!(bytes.len(), STATE_BYTES);
        assert_eq!(decode_state(&bytes), Ok(s));
        for at in 0..bytes.len() {
            if let Some(b) = bytes.get_mut(at) {
                *b ^= 0x10;
            }
            assert!(decode_state(&bytes).is_err(), "byte {at}");
            if let Some(b) = bytes.get_mut(at) {
                *b ^= 0x10;
            }
        }
    }

    proptest! {
        #[test]
        fn decode_state_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_state(&bytes);
        }
    }
}
