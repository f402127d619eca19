//! Frames: `len u32 | crc32c u32 | body` (docs/format/fine-wire.md, "Frames"), and the checked
//! little-endian reader every decoder uses.
//!
//! Pure functions over byte slices plus two blocking helpers over `Read`/`Write`; any thread.
//! Invariant: no function here panics on any input; a bad frame is a [`WireError`].

use std::io::{Read, Write};

use super::consts::{FRAME_HEADER_BYTES, MAX_FRAME_BODY, MIN_FRAME_BODY};
use crate::error::WireError;
use lidb_storage::bytes::{ByteReader, Truncated};

/// Appends a frame holding `body` to `out`.
pub fn encode_frame(body: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(body);
}

/// Checks a frame header: the body length it announces.
pub fn check_header(header: [u8; FRAME_HEADER_BYTES]) -> Result<(u32, u32), WireError> {
    let [a, b, c, d, e, f, g, h] = header;
    let len = u32::from_le_bytes([a, b, c, d]);
    let crc = u32::from_le_bytes([e, f, g, h]);
    if !(MIN_FRAME_BODY..=MAX_FRAME_BODY).contains(&len) {
        return Err(WireError::malformed(format!(
            "frame body of {len} bytes outside {MIN_FRAME_BODY}..={MAX_FRAME_BODY}"
        )));
    }
    Ok((len, crc))
}

/// A frame's body and the bytes after the frame.
pub type Split<'a> = (&'a [u8], &'a [u8]);

/// Splits one whole frame off the front of `bytes`: its body and the bytes after it; `Ok(None)`
/// when `bytes` holds only a prefix of a frame.
pub fn split_frame(bytes: &[u8]) -> Result<Option<Split<'_>>, WireError> {
    let Some((header, rest)) = bytes.split_first_chunk::<FRAME_HEADER_BYTES>() else {
        return Ok(None);
    };
    let (len, crc) = check_header(*header)?;
    let Some((body, after)) = rest.split_at_checked(len as usize) else {
        return Ok(None);
    };
    if crc32c::crc32c(body) != crc {
        return Err(WireError::malformed("frame checksum mismatch"));
    }
    Ok(Some((body, after)))
}

/// Reads one frame's body from `r` into `body` (replacing its content).
pub fn read_frame(r: &mut impl Read, body: &mut Vec<u8>) -> Result<(), WireError> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    r.read_exact(&mut header)?;
    let (len, crc) = check_header(header)?;
    body.clear();
    body.resize(len as usize, 0);
    r.read_exact(body)?;
    if crc32c::crc32c(body) != crc {
        return Err(WireError::malformed("frame checksum mismatch"));
    }
    Ok(())
}

/// Writes `frame` (already framed) to `w`.
pub fn write_frame(w: &mut impl Write, frame: &[u8]) -> Result<(), WireError> {
    w.write_all(frame)?;
    Ok(())
}

/// A checked little-endian reader over a body: lidb-storage's cursor, with the wire's error.
#[derive(Debug)]
pub struct Cursor<'a> {
    r: ByteReader<'a>,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor {
            r: ByteReader::new(bytes),
        }
    }

    fn inside<T>(read: Result<T, Truncated>, what: &str) -> Result<T, WireError> {
        read.map_err(|_| WireError::malformed(format!("body ends inside {what}")))
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, WireError> {
        Self::inside(self.r.u8(), what)
    }

    pub fn u16(&mut self, what: &str) -> Result<u16, WireError> {
        Self::inside(self.r.u16(), what)
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, WireError> {
        Self::inside(self.r.u32(), what)
    }

    pub fn u64(&mut self, what: &str) -> Result<u64, WireError> {
        Self::inside(self.r.u64(), what)
    }

    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], WireError> {
        Self::inside(self.r.take(n), what)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.r.remaining()
    }

    /// Fails unless the body was consumed exactly.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.r.remaining() {
            0 => Ok(()),
            left => Err(WireError::malformed(format!(
                "{left} trailing bytes after the payload"
            ))),
        }
    }
}

/// Little-endian writers.
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
