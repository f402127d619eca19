//! Direct I/O (`O_DIRECT`) done once: opening with a probe, page-aligned buffers without
//! `unsafe`, and the read loop. Used by `fs.rs`'s direct table reads, lidb-bench's device probe
//! and lidb-peers' redb backend.
//!
//! Under `O_DIRECT` the kernel requires the offset, the length and the buffer address of every
//! read and write to be multiples of the logical block size. [`ALIGN`] (4096) covers 512- and
//! 4096-byte sectors. A request for arbitrary bytes is widened to whole aligned blocks
//! ([`covering`]), read into an [`AlignedBuf`] (a window of a heap buffer found with the safe
//! `align_offset`), and the asked bytes are copied out. Invariants:
//! - every `pread` issued through [`read_aligned`] has an aligned offset, length and buffer when
//!   the caller passes an aligned start and an `AlignedBuf` (a short read happens only at the end
//!   of the file, and the loop stops there: reading on would be from an unaligned offset);
//! - a file system that refuses `O_DIRECT` answers EINVAL, at open or at the first read;
//!   [`open_direct`] probes one block so the refusal is seen at open, and [`is_refusal`] names it.
//!
//! Plain functions over a `File`; any thread may call them (`pread` takes no file position).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::PAGE_SIZE;

/// Alignment of offsets, lengths and buffers for `O_DIRECT`.
pub const ALIGN: u64 = PAGE_SIZE;

/// Whether `e` is a file system's refusal of `O_DIRECT` (EINVAL).
pub fn is_refusal(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Opens `path` with `options` plus `O_DIRECT` and reads one aligned block to check that the
/// file system takes direct reads. `Ok(None)`: it refuses them (the caller chooses between an
/// error and a buffered fallback); `Err`: any other failure.
pub fn open_direct(options: &OpenOptions, path: &Path) -> io::Result<Option<File>> {
    let file = match options.clone().custom_flags(libc::O_DIRECT).open(path) {
        Ok(file) => file,
        Err(e) if is_refusal(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut block = AlignedBuf::zeroed(ALIGN as usize)?;
    match read_aligned(&file, 0, block.as_mut_slice()) {
        Ok(_) => Ok(Some(file)),
        Err(e) if is_refusal(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The aligned range `[start, end)` that covers `offset .. offset + len`; `None` on overflow.
pub fn covering(offset: u64, len: u64) -> Option<(u64, u64)> {
    let end = offset.checked_add(len)?.checked_next_multiple_of(ALIGN)?;
    Some((offset / ALIGN * ALIGN, end))
}

/// A zeroed heap buffer whose bytes start at an [`ALIGN`]-aligned address.
#[derive(Debug)]
pub struct AlignedBuf {
    raw: Vec<u8>,
    shift: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes at an aligned address (`len` is the caller's to align for `O_DIRECT`).
    pub fn zeroed(len: usize) -> io::Result<AlignedBuf> {
        let align = ALIGN as usize;
        let raw = vec![0u8; len + align];
        let shift = raw.as_ptr().align_offset(align);
        if shift.checked_add(len).is_none_or(|end| end > raw.len()) {
            return Err(io::Error::other("cannot align a direct I/O buffer"));
        }
        Ok(AlignedBuf { raw, shift, len })
    }

    pub fn as_slice(&self) -> &[u8] {
        self.raw
            .get(self.shift..self.shift + self.len)
            .unwrap_or(&[])
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.raw
            .get_mut(self.shift..self.shift + self.len)
            .unwrap_or(&mut [])
    }
}

/// What [`read_aligned`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    /// Bytes read from the start of the buffer (fewer than its length at the end of the file).
    pub bytes: usize,
    /// `pread` calls issued (for callers that count device requests).
    pub preads: u64,
}

/// Fills `buf` from offset `start` of `file`, stopping early at the end of the file. Retries
/// interrupted reads. Under `O_DIRECT`, `start` and `buf` must be aligned (see the module doc).
pub fn read_aligned(file: &File, start: u64, buf: &mut [u8]) -> io::Result<Filled> {
    let mut filled = Filled {
        bytes: 0,
        preads: 0,
    };
    while let Some(rest) = buf.get_mut(filled.bytes..) {
        if rest.is_empty() {
            break;
        }
        filled.preads += 1;
        let got = match file.read_at(rest, start + filled.bytes as u64) {
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled.bytes += got;
        // A short read is the end of the file: the next offset would be unaligned.
        if got == 0 || got % ALIGN as usize != 0 {
            break;
        }
    }
    Ok(filled)
}

/// Reads exactly `out.len()` bytes at `offset` (any offset and length) through an aligned bounce
/// buffer. `UnexpectedEof` if the file ends first.
pub fn read_exact_at(file: &File, offset: u64, out: &mut [u8]) -> io::Result<Filled> {
    if out.is_empty() {
        return Ok(Filled {
            bytes: 0,
            preads: 0,
        });
    }
    let (start, end) = covering(offset, out.len() as u64)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset overflows u64"))?;
    let span = usize::try_from(end - start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "request too large"))?;
    let mut bounce = AlignedBuf::zeroed(span)?;
    let filled = read_aligned(file, start, bounce.as_mut_slice())?;
    let from = (offset - start) as usize;
    let asked = bounce
        .as_slice()
        .get(from..from + out.len())
        .filter(|_| filled.bytes >= from + out.len())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at offset {offset} is past the end of the file",
                    out.len()
                ),
            )
        })?;
    out.copy_from_slice(asked);
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn covering_widens_to_whole_blocks() {
        assert_eq!(covering(0, 1), Some((0, 4096)));
        assert_eq!(covering(4095, 2), Some((0, 8192)));
        assert_eq!(covering(4096, 4096), Some((4096, 8192)));
        assert_eq!(covering(u64::MAX, 1), None);
    }

    #[test]
    fn aligned_buffers_are_aligned_and_zeroed() {
        for len in [0usize, 1, 4096, 3 * 4096 + 5] {
            let mut b = AlignedBuf::zeroed(len).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(b.as_slice().len(), len);
            assert_eq!(b.as_mut_slice().as_ptr() as usize % ALIGN as usize, 0);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn reads_at_any_offset_match_the_file_where_direct_io_is_taken() {
        // Removed on drop, also when the test panics (`tempfile` itself: lidb-testkit depends
        // on this crate).
        let scratch = tempfile::Builder::new()
            .prefix("lidb-direct-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = scratch.path();
        let path = dir.join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        File::create(&path)
            .and_then(|mut f| f.write_all(&data))
            .unwrap_or_else(|e| panic!("{e}"));
        let file = match open_direct(OpenOptions::new().read(true), &path) {
            Ok(Some(f)) => f,
            Ok(None) => {
                eprintln!(
                    "the file system under {} refuses O_DIRECT: skipped",
                    dir.display()
                );
                return;
            }
            Err(e) => panic!("{e}"),
        };
        for (offset, len) in [
            (0u64, 1usize),
            (4095, 2),
            (100, 9_000),
            (9_999, 1),
            (0, 10_000),
        ] {
            let mut out = vec![0u8; len];
            read_exact_at(&file, offset, &mut out).unwrap_or_else(|e| panic!("{offset}: {e}"));
            assert_eq!(
                Some(out.as_slice()),
                data.get(offset as usize..offset as usize + len)
            );
        }
        let mut past = [0u8; 2];
        let e = read_exact_at(&file, 9_999, &mut past).err();
        assert_eq!(e.map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
    }
}
