//! The record log shared by the write-ahead log and the manifest (format: docs/format/wal.md).
//!
//! A log is a file header followed by records, each framed with its length and a CRC-32C:
//!
//! ```text
//! file:   [magic "LIDBLOG" 7 bytes][format version u8 = 1] record*
//! record: [crc32c u32 LE of (len bytes ++ payload)][len u32 LE][payload: len bytes]
//! ```
//!
//! Callers: the DB's write path owns the WAL's [`LogWriter`] (one writer thread at a time, `&mut`),
//! the manifest owns its own; [`read_log`] runs at recovery, single-threaded.
//!
//! Invariants:
//! - A record is appended with one `append` call, so a crash tears at most the records not yet
//!   synced, and only at the tail of the file.
//! - After any failed append or sync the writer is poisoned: every later call returns an error,
//!   because the file may now end in a partial record and records written after it would be
//!   unreadable (recovery stops at the first bad record) although acknowledged.
//! - [`read_log`] returns only records whose checksum matches, in order, and stops at the first
//!   truncated or mismatching record, which it classifies as a torn tail or damage
//!   (`tail::classify`); it never panics on any bytes.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result, corruption};
use crate::tail::{BadTail, Framing, classify};
use crate::{Storage, WritableFile};

/// First bytes of every log. DO NOT CHANGE: stored on disk.
pub const LOG_MAGIC: &[u8; 7] = b"LIDBLOG";
/// Format version of the framing, the byte after the magic.
pub const LOG_FORMAT_VERSION: u8 = 1;
/// Bytes of the file header.
pub const LOG_HEADER_BYTES: u64 = 8;
/// Bytes of a record header: crc u32 + len u32.
pub const RECORD_HEADER_BYTES: u64 = 8;
/// Largest payload of one record (2 GiB - 1): fits one 1 GiB value with its batch framing.
/// A larger length in a record header is corruption.
pub const MAX_RECORD_BYTES: u64 = (1 << 31) - 1;

fn file_header() -> [u8; LOG_HEADER_BYTES as usize] {
    let mut h = [0u8; LOG_HEADER_BYTES as usize];
    for (d, s) in h
        .iter_mut()
        .zip(LOG_MAGIC.iter().chain([&LOG_FORMAT_VERSION]))
    {
        *d = *s;
    }
    h
}

/// The checksum of a record: CRC-32C of the length bytes followed by the payload, so a zeroed
/// header (len 0, crc 0) never passes. FineStore's log frames its records the same way.
pub fn record_crc(len_bytes: [u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload)
}

/// Appends records to a log file.
#[derive(Debug)]
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    header_written: bool,
    /// Set by the first failed append or sync; every later call fails with it.
    poisoned: Option<String>,
}

impl LogWriter {
    /// Wraps a freshly created (empty) file; the file header is written with the first record
    /// or sync.
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf) -> LogWriter {
        let header_written = !file.is_empty();
        LogWriter {
            file,
            path,
            header_written,
            poisoned: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            None => Ok(()),
            Some(why) => Err(Error::Io {
                file: self.path.clone(),
                source: std::io::Error::other(format!(
                    "log writer stopped after an earlier failure: {why}"
                )),
            }),
        }
    }

    /// Runs a file operation, poisoning the writer if it fails.
    fn guarded(&mut self, op: impl FnOnce(&mut dyn WritableFile) -> Result<()>) -> Result<()> {
        self.check_poisoned()?;
        let r = op(self.file.as_mut());
        if let Err(e) = &r {
            self.poisoned = Some(e.to_string());
        }
        r
    }

    /// Appends one record (not yet durable: see [`LogWriter::sync`]).
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_poisoned()?;
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&l| u64::from(l) <= MAX_RECORD_BYTES)
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "log record of {} bytes exceeds the limit of {MAX_RECORD_BYTES} bytes",
                    payload.len()
                ))
            })?;
        let len_bytes = len.to_le_bytes();
        let header_bytes = if self.header_written {
            0
        } else {
            LOG_HEADER_BYTES
        };
        let mut buf =
            Vec::with_capacity((header_bytes + RECORD_HEADER_BYTES) as usize + payload.len());
        if !self.header_written {
            buf.extend_from_slice(&file_header());
        }
        buf.extend_from_slice(&record_crc(len_bytes, payload).to_le_bytes());
        buf.extend_from_slice(&len_bytes);
        buf.extend_from_slice(payload);
        self.guarded(|f| f.append(&buf))?;
        self.header_written = true;
        Ok(())
    }

    /// Makes every record added so far durable.
    pub fn sync(&mut self) -> Result<()> {
        if !self.header_written {
            self.guarded(|f| f.append(&file_header()))?;
            self.header_written = true;
        }
        self.guarded(|f| f.sync())
    }

    /// Bytes written to the file so far (header included).
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The intact records of a log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogContents {
    pub records: Vec<Vec<u8>>,
    /// Bytes from the start of the file through the last intact record (or the header).
    pub valid_len: u64,
    /// Set when bytes follow `valid_len`: a torn tail or damage (`tail::classify`). The records
    /// are those before it; recovery decides by its mode whether to cut the file to `valid_len`
    /// or to fail.
    pub bad_tail: Option<BadTail>,
}

/// The record framing (crc32c | length | payload, [`record_crc`]) for `tail::classify`, with
/// the largest payload a record may claim: this log's ([`MAX_RECORD_BYTES`]), or another log's
/// that frames its records the same way (FineStore's).
#[derive(Debug, Clone, Copy)]
pub struct RecordFraming {
    pub max_payload: u64,
}

/// This log's framing.
const LOG_FRAMING: RecordFraming = RecordFraming {
    max_payload: MAX_RECORD_BYTES,
};

/// Where a walk over framed records stopped.
#[derive(Debug, Default)]
pub struct RecordsEnd {
    /// Bytes from the start of the file through the last intact record.
    pub valid_len: u64,
    /// Set when bytes follow `valid_len`: a torn tail or damage, as [`classify`] found.
    pub bad_tail: Option<BadTail>,
}

impl RecordFraming {
    /// Hands each intact record of `bytes` from offset `start` on (after the file's header) to
    /// `each` with its offset, until the end of the bytes or the first bad record (header torn,
    /// length over the limit, payload torn, checksum failing), whose tail it classifies.
    /// Err: what `each` returned for a record it refused.
    pub fn walk(
        &self,
        bytes: &[u8],
        start: u64,
        mut each: impl FnMut(u64, &[u8]) -> std::result::Result<(), String>,
    ) -> std::result::Result<RecordsEnd, String> {
        let mut pos = start;
        loop {
            // Only `start` can be past the end: every step below moves over a whole record.
            let Some(rest) = bytes.get(pos as usize..) else {
                return Err(format!(
                    "the records start at offset {pos}, past the end of the {} bytes",
                    bytes.len()
                ));
            };
            if rest.is_empty() {
                return Ok(RecordsEnd {
                    valid_len: pos,
                    bad_tail: None,
                });
            }
            let bad = |detail: String| RecordsEnd {
                valid_len: pos,
                bad_tail: Some(self.bad_tail(bytes, pos, &detail)),
            };
            let Some((crc, len_bytes)) = split_header(rest) else {
                return Ok(bad(format!(
                    "record header torn ({} of 8 bytes)",
                    rest.len()
                )));
            };
            let len = u64::from(u32::from_le_bytes(len_bytes));
            if len > self.max_payload {
                let limit = self.max_payload;
                return Ok(bad(format!(
                    "record length {len} exceeds the limit of {limit}"
                )));
            }
            let body = RECORD_HEADER_BYTES as usize;
            let Some(payload) = rest.get(body..body + len as usize) else {
                let present = rest.len() - body;
                return Ok(bad(format!(
                    "record of {len} bytes torn ({present} bytes present)"
                )));
            };
            if record_crc(len_bytes, payload) != crc {
                return Ok(bad(format!("record of {len} bytes fails its checksum")));
            }
            each(pos, payload)?;
            pos += RECORD_HEADER_BYTES + len;
        }
    }

    /// The bad tail of `bytes` from `offset` on (`detail`: why the record there is bad),
    /// classified as torn or damage by this framing.
    pub fn bad_tail(&self, bytes: &[u8], offset: u64, detail: &str) -> BadTail {
        debug_assert!(
            offset <= bytes.len() as u64,
            "a bad record starts inside the bytes it was found in"
        );
        let tail = bytes.get(offset as usize..).unwrap_or_default();
        classify(self, tail, offset, bytes.len() as u64, detail)
    }
}

impl Framing for RecordFraming {
    fn claimed_len(&self, rest: &[u8]) -> Option<u64> {
        let (_, len_bytes) = split_header(rest)?;
        let len = u64::from(u32::from_le_bytes(len_bytes));
        (len <= self.max_payload).then_some(RECORD_HEADER_BYTES + len)
    }

    fn intact(&self, rest: &[u8], len: u64) -> bool {
        let Some((crc, len_bytes)) = split_header(rest) else {
            return false;
        };
        rest.get(RECORD_HEADER_BYTES as usize..len as usize)
            .is_some_and(|payload| record_crc(len_bytes, payload) == crc)
    }

    fn max_len(&self) -> u64 {
        RECORD_HEADER_BYTES + self.max_payload
    }
}

/// Reads every intact record of the log at `path`.
///
/// Errors: `Io` if the file cannot be read; `Corruption` if the file header is neither a valid
/// header nor a torn one (a prefix of it or zeros), or names an unknown format version.
pub fn read_log(storage: &dyn Storage, path: &Path) -> Result<LogContents> {
    let bytes = storage.read_all(path)?;
    parse_log(&bytes).map_err(|detail| corruption(path, detail))
}

/// Parses the bytes of a log (see [`read_log`]); the error is the corruption detail.
pub fn parse_log(bytes: &[u8]) -> std::result::Result<LogContents, String> {
    if bytes.is_empty() {
        return Ok(LogContents::default());
    }
    let expected = file_header();
    let header = bytes.get(..LOG_HEADER_BYTES as usize);
    match header {
        Some(h) if h == expected => {}
        Some(h) if h.get(..LOG_MAGIC.len()) == Some(LOG_MAGIC.as_slice()) => {
            debug_assert!(!h.is_empty(), "the header slice is LOG_HEADER_BYTES long");
            let version = h.last().copied().unwrap_or_default();
            if version != 0 {
                return Err(format!(
                    "log format version {version} is not supported (this build reads version \
                     {LOG_FORMAT_VERSION})"
                ));
            }
            // A zero version byte is a header torn before its last byte landed.
            return Ok(bad_at(bytes, 0, "the log header is torn"));
        }
        _ => {
            let head = header.unwrap_or(bytes);
            let is_prefix = expected.starts_with(head);
            if is_prefix || head.iter().all(|&b| b == 0) {
                return Ok(bad_at(bytes, 0, "the log header is torn"));
            }
            return Err(format!(
                "not a lidb log: the file starts with {head:02x?}, expected the magic \"LIDBLOG\""
            ));
        }
    }
    let mut records = Vec::new();
    let end = LOG_FRAMING.walk(bytes, LOG_HEADER_BYTES, |_, payload| {
        records.push(payload.to_vec());
        Ok(())
    })?;
    Ok(LogContents {
        records,
        valid_len: end.valid_len,
        bad_tail: end.bad_tail,
    })
}

/// A record header's checksum and length bytes, or `None` when fewer than 8 bytes remain.
fn split_header(rest: &[u8]) -> Option<(u32, [u8; 4])> {
    let crc: [u8; 4] = rest.get(0..4)?.try_into().ok()?;
    let len: [u8; 4] = rest.get(4..8)?.try_into().ok()?;
    Some((u32::from_le_bytes(crc), len))
}

fn bad_at(bytes: &[u8], offset: u64, detail: &str) -> LogContents {
    LogContents {
        records: Vec::new(),
        valid_len: offset,
        bad_tail: Some(LOG_FRAMING.bad_tail(bytes, offset, detail)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_that_starts_past_the_end_is_an_error_not_an_empty_log() {
        let framing = RecordFraming { max_payload: 64 };
        let mut seen = 0;
        let end = framing.walk(b"short", 8, |_, _| {
            seen += 1;
            Ok(())
        });
        assert!(end.is_err_and(|e| e.contains("offset 8")));
        assert_eq!(seen, 0);
        let at_end = framing.walk(b"12345678", 8, |_, _| Ok(()));
        assert!(at_end.is_ok_and(|e| e.valid_len == 8 && e.bad_tail.is_none()));
    }
}
