//! The byte encoding shared by every family: a fixed header, the family's payload, a checksum.
//! The layout is specified in docs/format/index.md; the constants here are the ones the reader and
//! the writer share. DO NOT CHANGE THESE VALUES without a new format version.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "LIDX"
//! 4       2     format version (u16 LE), currently 1
//! 6       1     family tag (see Family::tag)
//! 7       1     reserved, 0
//! 8       8     key count n (u64 LE)
//! 16      8     position boundary B (u64 LE)
//! 24      8     payload length P (u64 LE)
//! 32      P     payload, family-specific
//! 32+P    4     CRC-32C of bytes [0, 32+P) (u32 LE)
//! ```
//!
//! The [`Reader`] never panics: every read is bounds-checked and reports `Corruption`.

use crate::error::{Result, corrupt};

pub const MAGIC: [u8; 4] = *b"LIDX";
pub const FORMAT_VERSION: u16 = 1;
pub const HEADER_LEN: u64 = 32;
pub const TRAILER_LEN: u64 = 4;
/// Bytes of framing around a payload.
pub const FRAME_LEN: u64 = HEADER_LEN + TRAILER_LEN;

/// The decoded fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub family_tag: u8,
    pub key_count: u64,
    pub boundary: u64,
    pub payload_len: u64,
}

/// Frames a payload: header, payload, checksum.
pub fn frame(header: Header, payload: &[u8]) -> Vec<u8> {
    debug_assert_eq!(header.payload_len, payload.len() as u64);
    let mut out = Vec::with_capacity((FRAME_LEN as usize) + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(header.family_tag);
    out.push(0);
    out.extend_from_slice(&header.key_count.to_le_bytes());
    out.extend_from_slice(&header.boundary.to_le_bytes());
    out.extend_from_slice(&header.payload_len.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks the frame and returns the header and the payload bytes.
pub fn unframe(bytes: &[u8]) -> Result<(Header, &[u8])> {
    let total = bytes.len() as u64;
    if total < FRAME_LEN {
        return Err(corrupt(format!(
            "{total} bytes is shorter than the {FRAME_LEN}-byte frame"
        )));
    }
    let mut r = Reader::new(bytes);
    let magic = r.bytes(4)?;
    if magic != MAGIC {
        return Err(corrupt(format!(
            "bad magic {magic:02x?}, expected \"LIDX\""
        )));
    }
    let version = r.u16()?;
    if version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {version} is not supported (this build reads version {FORMAT_VERSION})"
        )));
    }
    let family_tag = r.u8()?;
    let reserved = r.u8()?;
    if reserved != 0 {
        return Err(corrupt(format!(
            "reserved header byte is {reserved}, expected 0"
        )));
    }
    let key_count = r.u64()?;
    let boundary = r.u64()?;
    let payload_len = r.u64()?;
    let expected = payload_len.checked_add(FRAME_LEN);
    if expected != Some(total) {
        return Err(corrupt(format!(
            "payload length {payload_len} does not match the {total} bytes given"
        )));
    }
    let body_len = (HEADER_LEN + payload_len) as usize;
    let (body, trailer) = bytes.split_at(body_len);
    let stored = Reader::new(trailer).u32()?;
    let actual = crc32c::crc32c(body);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    // The reader stands after the header; the length check above leaves exactly the payload
    // and the trailer behind it.
    let payload = r.bytes(payload_len as usize)?;
    let header = Header {
        family_tag,
        key_count,
        boundary,
        payload_len,
    };
    Ok((header, payload))
}

/// Little-endian writes onto a byte vector.
pub trait PutLe {
    fn put_u8(&mut self, v: u8);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_f32(&mut self, v: f32);
    fn put_f64(&mut self, v: f64);
}

impl PutLe for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_f32(&mut self, v: f32) {
        self.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    fn put_f64(&mut self, v: f64) {
        self.extend_from_slice(&v.to_bits().to_le_bytes());
    }
}

/// A bounds-checked little-endian reader over untrusted bytes. Every other decoder of lidb reads
/// through lidb-storage's `bytes::ByteReader`; lidb-index sits below lidb-storage (whose error
/// wraps this crate's), so the index codec keeps its own reader with its own error.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn bytes(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(len).filter(|&e| e <= self.bytes.len());
        match end.and_then(|e| self.bytes.get(self.pos..e)) {
            Some(s) => {
                self.pos += len;
                Ok(s)
            }
            None => Err(corrupt(format!(
                "truncated: wanted {len} bytes at offset {}, {} left",
                self.pos,
                self.remaining()
            ))),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_bits(self.u32()?))
    }
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// Reads a count of items of `item_len` bytes each, refusing counts the remaining bytes
    /// cannot hold (so a corrupt count never triggers a huge allocation).
    pub fn count(&mut self, item_len: usize, what: &str) -> Result<usize> {
        let c = self.u64()?;
        let fits = usize::try_from(c)
            .ok()
            .and_then(|c| c.checked_mul(item_len))
            .is_some_and(|bytes| bytes <= self.remaining());
        if !fits {
            return Err(corrupt(format!(
                "{what} count {c} does not fit in the {} bytes left",
                self.remaining()
            )));
        }
        Ok(c as usize)
    }

    pub fn u64_vec(&mut self, len: usize) -> Result<Vec<u64>> {
        (0..len).map(|_| self.u64()).collect()
    }
    pub fn u32_vec(&mut self, len: usize) -> Result<Vec<u32>> {
        (0..len).map(|_| self.u32()).collect()
    }
    pub fn f32_vec(&mut self, len: usize) -> Result<Vec<f32>> {
        (0..len).map(|_| self.f32()).collect()
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self, what: &str) -> Result<()> {
        if self.remaining() != 0 {
            return Err(corrupt(format!(
                "{} unexpected trailing bytes after the {what} payload",
                self.remaining()
            )));
        }
        Ok(())
    }
}
