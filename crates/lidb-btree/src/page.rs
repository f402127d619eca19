//! The common page header and its checksum (docs/format/btree-pagefile.md, "Page header").
//!
//! Every slot of the data file starts with this 32-byte header; the constants below are shared by
//! writer and reader — DO NOT CHANGE THESE VALUES without a new format version.
//!
//! ```text
//! 0..4   crc32c (Castagnoli) of bytes 4..page_size
//! 4..6   format version (u16 LE) = FORMAT_VERSION
//! 6      kind (u8): 1 leaf, 2 inner, 3 file header, 4 translation table, 5 extra blob
//! 7      reserved (0)
//! 8..16  id (u64 LE): the page id of a node; the slot number of a header, table or blob page
//! 16..32 reserved (0)
//! ```
//!
//! Pure functions over byte slices; any thread.

use std::path::Path;

use crate::error::{Error, Result};

/// Version of the page format (header and node layout).
pub const FORMAT_VERSION: u16 = 1;
/// Length of the common header.
pub const HEADER_LEN: usize = 32;

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    Leaf = 1,
    Inner = 2,
    FileHeader = 3,
    Table = 4,
    Blob = 5,
}

impl PageKind {
    pub fn from_u8(b: u8) -> Option<PageKind> {
        match b {
            1 => Some(PageKind::Leaf),
            2 => Some(PageKind::Inner),
            3 => Some(PageKind::FileHeader),
            4 => Some(PageKind::Table),
            5 => Some(PageKind::Blob),
            _ => None,
        }
    }
}

/// Reads a little-endian u16 at `off` (0 past the end: callers validate lengths first).
pub fn get_u16(page: &[u8], off: usize) -> u16 {
    page.get(off..off + 2)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

/// Reads a little-endian u32 at `off` (0 past the end).
pub fn get_u32(page: &[u8], off: usize) -> u32 {
    page.get(off..off + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// Reads a little-endian u64 at `off` (0 past the end).
pub fn get_u64(page: &[u8], off: usize) -> u64 {
    page.get(off..off + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Writes `bytes` at `off`; a write past the end is a bug (callers size pages).
pub fn put_bytes(page: &mut [u8], off: usize, bytes: &[u8]) {
    let dst = page.get_mut(off..off + bytes.len());
    debug_assert!(dst.is_some(), "page write past the end");
    if let Some(dst) = dst {
        dst.copy_from_slice(bytes);
    }
}

pub fn put_u16(page: &mut [u8], off: usize, v: u16) {
    put_bytes(page, off, &v.to_le_bytes());
}

pub fn put_u32(page: &mut [u8], off: usize, v: u32) {
    put_bytes(page, off, &v.to_le_bytes());
}

pub fn put_u64(page: &mut [u8], off: usize, v: u64) {
    put_bytes(page, off, &v.to_le_bytes());
}

/// Writes the header fields (version, kind, id) and leaves the checksum to [`seal`].
pub fn init_header(page: &mut [u8], kind: PageKind, id: u64) {
    put_u16(page, 4, FORMAT_VERSION);
    if let Some(b) = page.get_mut(6) {
        *b = kind as u8;
    }
    put_u64(page, 8, id);
}

pub fn kind(page: &[u8]) -> Option<PageKind> {
    page.get(6).and_then(|b| PageKind::from_u8(*b))
}

pub fn id(page: &[u8]) -> u64 {
    get_u64(page, 8)
}

/// Sets the id field (a node's page id).
pub fn set_id(page: &mut [u8], id: u64) {
    put_u64(page, 8, id);
}

/// Stores the checksum of the page (call last, before writing it out).
pub fn seal(page: &mut [u8]) {
    debug_assert!(page.len() >= HEADER_LEN, "pages are sized by the pager");
    if let Some(crc) = page.get(4..).map(crc32c::crc32c) {
        put_u32(page, 0, crc);
    }
}

/// Checks a page read from `slot` of `file`: checksum, version, and that it is a page of kind
/// `expect` (any of them) with id `id`. The error names the file, slot and id.
pub fn verify(
    page: &[u8],
    file: &Path,
    slot: u64,
    id: u64,
    expect: &[PageKind],
) -> Result<PageKind> {
    let fail = |what: String| Error::Corruption {
        file: file.to_path_buf(),
        detail: format!("slot {slot} (page {id}): {what}"),
    };
    let Some(covered) = page.get(4..).filter(|_| page.len() >= HEADER_LEN) else {
        return Err(fail(format!(
            "a page of {} bytes is shorter than its {HEADER_LEN}-byte header",
            page.len()
        )));
    };
    let stored = get_u32(page, 0);
    let computed = crc32c::crc32c(covered);
    if stored != computed {
        return Err(fail(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    let version = get_u16(page, 4);
    if version != FORMAT_VERSION {
        return Err(fail(format!(
            "format version {version}, this build reads {FORMAT_VERSION}"
        )));
    }
    let kind = kind(page).ok_or_else(|| fail(format!("unknown page kind {:?}", page.get(6))))?;
    if !expect.contains(&kind) {
        return Err(fail(format!(
            "page kind {kind:?}, expected one of {expect:?}"
        )));
    }
    let found = get_u64(page, 8);
    if found != id {
        return Err(fail(format!("holds page {found} (misdirected write)")));
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_page_verifies_and_a_flip_is_named() {
        let mut page = vec![0u8; 4096];
        init_header(&mut page, PageKind::Leaf, 42);
        seal(&mut page);
        let file = Path::new("x.db");
        assert_eq!(
            verify(&page, file, 7, 42, &[PageKind::Leaf]).ok(),
            Some(PageKind::Leaf)
        );
        assert!(verify(&page, file, 7, 43, &[PageKind::Leaf]).is_err());
        if let Some(b) = page.get_mut(1000) {
            *b ^= 1;
        }
        let err = verify(&page, file, 7, 42, &[PageKind::Leaf])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("slot 7 (page 42)") && err.contains("x.db"),
            "{err}"
        );
    }

    /// A page cut anywhere inside its header is refused as short, not checked as if the
    /// missing bytes were zeros (an empty page's checksum would match a zero stored one).
    #[test]
    fn a_page_shorter_than_its_header_is_named_short() {
        let mut page = vec![0u8; 4096];
        init_header(&mut page, PageKind::Leaf, 42);
        seal(&mut page);
        for len in 0..HEADER_LEN {
            let cut = page.iter().take(len).copied().collect::<Vec<u8>>();
            let err = match verify(&cut, Path::new("x.db"), 7, 42, &[PageKind::Leaf]) {
                Ok(kind) => panic!("{len}: a cut page verified as {kind:?}"),
                Err(e) => e.to_string(),
            };
            assert!(
                err.contains("shorter than its 32-byte header"),
                "{len}: {err}"
            );
        }
        // Zeros (which check as a matching empty checksum when cut to 4 bytes) are refused too.
        let err = verify(&[0u8; 4], Path::new("x.db"), 7, 0, &[PageKind::Leaf]).err();
        assert!(err.is_some_and(|e| e.to_string().contains("shorter")));
    }
}
