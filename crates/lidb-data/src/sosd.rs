//! SOSD key files: an 8-byte little-endian u64 count N, then N little-endian keys (u64, or u32
//! in the 32-bit variant), nothing else. Plain or zstd-compressed; compression is detected by the
//! zstd magic bytes, never by the name (see `fileio.rs`).
//!
//! Invariants of the readers:
//! 1. The header must match the data exactly: a file shorter than the header, with fewer or more
//!    keys than the header says, or with trailing bytes that do not make a whole key, is a
//!    `Format` error that says the numbers. Nothing is silently dropped.
//! 2. [`read_u64`] and [`read_u32`] require non-decreasing keys (duplicates allowed) and report
//!    the first position whose key is smaller than the one before it as `Unsorted`.
//!    [`read_u64_any_order`] (query files) accepts any order.
//! 3. A corrupt or truncated zstd stream is a `Format` error; a failing disk is `Io`. No input
//!    makes a reader panic, and a bogus header does not make it allocate more than a bounded
//!    amount before the data proves the keys exist.
//!
//! Writers produce zstd output when the path ends in `.zst`, plain otherwise, and write
//! atomically (temporary file in the same directory, then rename).

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result, format_error};
use crate::fileio::{Input, write_atomic};
use crate::info::first_unsorted;

/// Size of the key count header in bytes.
pub const HEADER_BYTES: u64 = 8;

/// At most this many keys are reserved up front from the header's count; beyond it the vector
/// grows as keys actually arrive (a bogus header cannot force a huge allocation).
const PREALLOC_MAX_KEYS: u64 = 1 << 24;

/// Bytes decoded per read; a multiple of every key width.
const CHUNK_BYTES: usize = 1 << 16;

/// A fixed-width little-endian key type of a SOSD file.
trait SosdKey: Copy + Ord {
    const WIDTH: usize;
    const NAME: &'static str;
    fn from_le(bytes: &[u8]) -> Self;
    fn put_le(self, out: &mut Vec<u8>);
}

impl SosdKey for u64 {
    const WIDTH: usize = 8;
    const NAME: &'static str = "u64";
    fn from_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        u64::from_le_bytes(b)
    }
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl SosdKey for u32 {
    const WIDTH: usize = 4;
    const NAME: &'static str = "u32";
    fn from_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 4];
        b.copy_from_slice(bytes);
        u32::from_le_bytes(b)
    }
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Reads a SOSD u64 file whose keys must be sorted (non-decreasing).
pub fn read_u64(path: impl AsRef<Path>) -> Result<Vec<u64>> {
    read_sorted(path.as_ref())
}

/// Reads a SOSD u64 file in whatever order its keys are (for query files).
pub fn read_u64_any_order(path: impl AsRef<Path>) -> Result<Vec<u64>> {
    read_keys(&mut Input::open(path.as_ref())?)
}

/// Reads a SOSD u32 file whose keys must be sorted (non-decreasing).
pub fn read_u32(path: impl AsRef<Path>) -> Result<Vec<u32>> {
    read_sorted(path.as_ref())
}

/// Reads a SOSD u32 file in whatever order its keys are.
pub fn read_u32_any_order(path: impl AsRef<Path>) -> Result<Vec<u32>> {
    read_keys(&mut Input::open(path.as_ref())?)
}

/// Writes `keys` as a SOSD u64 file (zstd when `path` ends in `.zst`), atomically.
pub fn write_u64(path: impl AsRef<Path>, keys: &[u64]) -> Result<()> {
    write_keys(path.as_ref(), keys)
}

/// Writes `keys` as a SOSD u32 file (zstd when `path` ends in `.zst`), atomically.
pub fn write_u32(path: impl AsRef<Path>, keys: &[u32]) -> Result<()> {
    write_keys(path.as_ref(), keys)
}

fn read_sorted<K: SosdKey>(path: &Path) -> Result<Vec<K>> {
    let keys: Vec<K> = read_keys(&mut Input::open(path)?)?;
    match first_unsorted(&keys) {
        Some(position) => Err(Error::Unsorted {
            path: path.to_path_buf(),
            position,
        }),
        None => Ok(keys),
    }
}

fn read_keys<K: SosdKey>(input: &mut Input) -> Result<Vec<K>> {
    let mut header = [0u8; HEADER_BYTES as usize];
    let got = input.fill(&mut header)?;
    if got < header.len() {
        return Err(format_error(
            input.path(),
            format!(
                "file holds {got} bytes, too short for the {HEADER_BYTES}-byte key count header"
            ),
        ));
    }
    let count = u64::from_le_bytes(header);
    let width = K::WIDTH as u64;
    let reserve = usize::try_from(count.min(PREALLOC_MAX_KEYS)).unwrap_or(0);
    let mut keys: Vec<K> = Vec::with_capacity(reserve);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut data_bytes: u64 = 0;
    loop {
        let n = input.fill(&mut buf)?;
        data_bytes += n as u64;
        let room = usize::try_from(count.saturating_sub(keys.len() as u64)).unwrap_or(usize::MAX);
        debug_assert!(n <= buf.len(), "fill counts only the bytes it put into buf");
        let chunk = buf.get(..n).unwrap_or_default();
        keys.extend(chunk.chunks_exact(K::WIDTH).take(room).map(K::from_le));
        if n < buf.len() {
            break;
        }
    }
    let whole = data_bytes / width;
    let trailing = data_bytes % width;
    if trailing != 0 {
        return Err(format_error(
            input.path(),
            format!(
                "header says {count} {} keys but the {data_bytes} bytes after it hold {whole} keys and {trailing} trailing bytes",
                K::NAME
            ),
        ));
    }
    if whole != count {
        return Err(format_error(
            input.path(),
            format!(
                "header says {count} {} keys but the file holds {whole}",
                K::NAME
            ),
        ));
    }
    Ok(keys)
}

fn write_keys<K: SosdKey>(path: &Path, keys: &[K]) -> Result<()> {
    write_atomic(path, |out: &mut dyn Write| {
        out.write_all(&(keys.len() as u64).to_le_bytes())?;
        let mut buf = Vec::with_capacity(CHUNK_BYTES);
        for chunk in keys.chunks(CHUNK_BYTES / K::WIDTH) {
            buf.clear();
            for &k in chunk {
                k.put_le(&mut buf);
            }
            out.write_all(&buf)?;
        }
        Ok(())
    })
}

#[cfg(test)]
#[path = "sosd_tests.rs"]
mod tests;
