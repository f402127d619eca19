//! The one cursor over untrusted bytes: every decoder of a lidb file or message (table blocks,
//! WAL batches, level indexes, value-log and manifest records, checkpoint blobs, expected-state
//! files, wire frames) reads fixed-width little-endian fields through it. Every read is
//! bounds-checked and a short input is an error naming where it ran out ([`Truncated`]), never a
//! panic and never silently empty data. Counts read from the input are checked against the bytes
//! left before anything is allocated for them ([`ByteReader::count`]).
//!
//! A cursor is a plain value owned by one decoder on one thread.

use std::fmt;

/// A read ran past the end of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    /// Bytes the read wanted.
    pub wanted: u64,
    /// Offset of the read in the input.
    pub at: usize,
    /// Length of the whole input.
    pub len: usize,
}

impl fmt::Display for Truncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "truncated: {} bytes wanted at offset {} of {}",
            self.wanted, self.at, self.len
        )
    }
}

impl std::error::Error for Truncated {}

impl From<Truncated> for String {
    fn from(t: Truncated) -> String {
        t.to_string()
    }
}

/// A cursor over untrusted bytes; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    pub fn new(bytes: &'a [u8]) -> ByteReader<'a> {
        ByteReader { bytes, pos: 0 }
    }

    /// Offset of the next read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: u64) -> Result<&'a [u8], Truncated> {
        let truncated = Truncated {
            wanted: n,
            at: self.pos,
            len: self.bytes.len(),
        };
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .ok_or_else(|| truncated.clone())?;
        let out = self.bytes.get(self.pos..end).ok_or(truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// The next `n` bytes (`n` as a length in memory).
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        self.bytes(n as u64)
    }

    /// Every byte not read yet; the cursor is then at the end.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = self.bytes.get(self.pos..).unwrap_or(&[]);
        self.pos = self.bytes.len();
        out
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, Truncated> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    pub fn u16(&mut self) -> Result<u16, Truncated> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, Truncated> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn f64(&mut self) -> Result<f64, Truncated> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// Checks a count read from the input: `count` items of at least `item_len` bytes each must
    /// fit in the bytes left, so a damaged count never drives a huge allocation.
    pub fn check_count(&self, count: u64, item_len: u64, what: &str) -> Result<usize, String> {
        let fits = count
            .checked_mul(item_len)
            .is_some_and(|bytes| bytes <= self.remaining() as u64);
        match usize::try_from(count) {
            Ok(c) if fits => Ok(c),
            _ => Err(format!(
                "{what} count {count} does not fit in the {} bytes left",
                self.remaining()
            )),
        }
    }

    /// Fails if bytes are left over.
    pub fn finish(&self, what: &str) -> Result<(), String> {
        match self.remaining() {
            0 => Ok(()),
            left => Err(format!("{left} trailing bytes after the {what}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn fields_read_little_endian_in_order() {
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&0x0102u16.to_le_bytes());
        bytes.extend_from_slice(&0x0304_0506u32.to_le_bytes());
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        bytes.extend_from_slice(&1.5f64.to_bits().to_le_bytes());
        bytes.extend_from_slice(b"tail");
        let mut r = ByteReader::new(&bytes);
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(r.u32(), Ok(0x0304_0506));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.f64(), Ok(1.5));
        assert_eq!(r.position(), 23);
        assert!(r.finish("record").is_err());
        assert_eq!(r.rest(), b"tail");
        assert_eq!(r.finish("record"), Ok(()));
    }

    #[test]
    fn a_short_input_says_where_it_ran_out_and_reads_nothing() {
        let mut r = ByteReader::new(&[1, 2, 3]);
        assert_eq!(r.u8(), Ok(1));
        let e = Truncated {
            wanted: 4,
            at: 1,
            len: 3,
        };
        assert_eq!(r.u32(), Err(e.clone()));
        assert_eq!(e.to_string(), "truncated: 4 bytes wanted at offset 1 of 3");
        assert_eq!(r.position(), 1, "a failed read moves nothing");
        assert!(r.bytes(u64::MAX).is_err());
        assert_eq!(r.take(2), Ok(&[2u8, 3][..]));
    }

    #[test]
    fn counts_that_cannot_fit_are_refused_before_allocating() {
        let r = ByteReader::new(&[0; 16]);
        assert_eq!(r.check_count(2, 8, "key"), Ok(2));
        assert!(r.check_count(3, 8, "key").is_err());
        assert!(r.check_count(u64::MAX, 2, "key").is_err());
        // Items of no bytes take no room: the count is the caller's to bound.
        assert_eq!(r.check_count(7, 0, "empty"), Ok(7));
    }

    proptest! {
        #[test]
        fn any_read_sequence_on_any_input_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            reads in proptest::collection::vec(0u8..6, 0..32),
        ) {
            let mut r = ByteReader::new(&bytes);
            let mut consumed = 0usize;
            for op in reads {
                let before = r.position();
                let ok = match op {
                    0 => r.u8().is_ok(),
                    1 => r.u16().is_ok(),
                    2 => r.u32().is_ok(),
                    3 => r.u64().is_ok(),
                    4 => r.take(5).is_ok(),
                    _ => { r.rest(); true }
                };
                if ok {
                    consumed = r.position();
                } else {
                    prop_assert_eq!(r.position(), before);
                }
            }
            prop_assert_eq!(consumed + r.remaining(), bytes.len());
        }
    }
}
