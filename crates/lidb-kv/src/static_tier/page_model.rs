//! The svlog page model of a packed generation (docs/format/static-tier.md, "One-read lookup",
//! the only specification): the page-start table, how the builder derives it from the records'
//! places, and how a reader finds a key among the records of one window of svlog pages. Pure
//! functions shared by the builder and the reader, used from any thread.
//!
//! Invariants: a decoded model has `page_starts.len() == pages`, `page_starts[0] == 32`, every
//! start `< 4096` or `NO_RECORD_START`, `tail_pages <= MAX_TAIL_PAGES`, `max_lead < pages`.
//! Decoders and `find_in_window` take untrusted bytes, never panic, and return a detail string
//! the caller wraps into `Corruption` naming the file.

use lidb_storage::bytes::ByteReader;

use super::format::PAGE_BYTES;
use crate::vlog::{RECORD_HEADER_BYTES, RecordError, VLOG_HEADER_BYTES, decode_record};

/// `page_starts` value of a page in which no record starts (inside a long value).
pub const NO_RECORD_START: u16 = 0xFFFF;
/// The most pages a lookup reads past its search window for a record's end; a record spanning
/// more pages is read whole by a second read.
pub const MAX_TAIL_PAGES: u64 = 16;

/// The svlog page model stored in a version-3 model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SvlogModel {
    /// S: the svlog's pages from byte 0, `ceil(svlog bytes / 4096)`.
    pub pages: u64,
    pub family_tag: u8,
    pub page_boundary: u64,
    /// Pages before a record's start page whose image ties with its key's (see the spec).
    pub max_lead: u64,
    pub tail_pages: u64,
    pub max_record_len: u32,
    /// Offset of the first record starting in each page, or `NO_RECORD_START`.
    pub page_starts: Vec<u16>,
    /// The lidb-index encoding of the index over the pages' last-key images.
    pub index: Vec<u8>,
}

impl SvlogModel {
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pages.to_le_bytes());
        out.push(self.family_tag);
        out.extend_from_slice(&self.page_boundary.to_le_bytes());
        out.extend_from_slice(&self.max_lead.to_le_bytes());
        out.extend_from_slice(&self.tail_pages.to_le_bytes());
        out.extend_from_slice(&self.max_record_len.to_le_bytes());
        for s in &self.page_starts {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.index);
    }

    /// Decodes the model from `r` and checks its own invariants.
    pub fn decode_from(r: &mut ByteReader<'_>) -> Result<SvlogModel, String> {
        let pages = r.u64()?;
        let family_tag = r.u8()?;
        let (page_boundary, max_lead, tail_pages) = (r.u64()?, r.u64()?, r.u64()?);
        let max_record_len = r.u32()?;
        let table_bytes = pages
            .checked_mul(2)
            .ok_or_else(|| format!("svlog page model of {pages} pages"))?;
        let page_starts: Vec<u16> = r
            .bytes(table_bytes)?
            .chunks_exact(2)
            .map(|c| {
                u16::from_le_bytes([
                    c.first().copied().unwrap_or(0),
                    c.get(1).copied().unwrap_or(0),
                ])
            })
            .collect();
        let index_len = r.u64()?;
        let index = r.bytes(index_len)?.to_vec();
        let starts_ok = page_starts.first() == Some(&(VLOG_HEADER_BYTES as u16))
            && page_starts
                .iter()
                .all(|&s| s == NO_RECORD_START || u64::from(s) < PAGE_BYTES);
        let ok = pages >= 1
            && starts_ok
            && max_lead < pages
            && tail_pages <= MAX_TAIL_PAGES
            && u64::from(max_record_len) >= RECORD_HEADER_BYTES
            && !index.is_empty();
        if !ok {
            return Err(format!(
                "inconsistent svlog page model: {pages} pages, first start {:?}, lead {max_lead}, \
                 tail {tail_pages}, longest record {max_record_len}, index of {index_len} bytes",
                page_starts.first()
            ));
        }
        Ok(SvlogModel {
            pages,
            family_tag,
            page_boundary,
            max_lead,
            tail_pages,
            max_record_len,
            page_starts,
            index,
        })
    }
}

/// What the builder derives from the records' places before training.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePlan {
    pub page_starts: Vec<u16>,
    /// For each page, the number of the last record starting at or before its end.
    pub last_record: Vec<u64>,
    /// For each record, the page it starts in.
    pub start_page: Vec<u64>,
    pub tail_pages: u64,
    pub max_record_len: u32,
}

/// The page-start table and the training points of an svlog of `file_bytes` bytes whose records
/// are `records` (offset, len), contiguous from byte 32, in file order. None when there is no
/// record or the records are not contiguous (a builder bug: the caller debug-asserts).
pub fn plan_pages(records: &[(u64, u32)], file_bytes: u64) -> Option<PagePlan> {
    let pages = file_bytes.div_ceil(PAGE_BYTES);
    let mut page_starts = vec![NO_RECORD_START; pages as usize];
    let mut last_record = vec![0u64; pages as usize];
    let mut start_page = Vec::with_capacity(records.len());
    let (mut next, mut max_span, mut max_len) = (VLOG_HEADER_BYTES, 0u64, 0u32);
    for (i, &(offset, len)) in records.iter().enumerate() {
        if offset != next || len == 0 {
            return None;
        }
        next = offset + u64::from(len);
        let (first, last) = (offset / PAGE_BYTES, (next - 1) / PAGE_BYTES);
        let slot = page_starts.get_mut(first as usize)?;
        if *slot == NO_RECORD_START {
            *slot = (offset % PAGE_BYTES) as u16;
        }
        start_page.push(first);
        // The last record starting in page `first` so far; pages without a record start take
        // their predecessor's below (one pass, not one per record: a pass per record was
        // quadratic, a second for a 200K-record tier and minutes for millions).
        if let Some(l) = last_record.get_mut(first as usize) {
            *l = i as u64;
        }
        max_span = max_span.max(last - first);
        max_len = max_len.max(len);
    }
    if records.is_empty() || next != file_bytes {
        return None;
    }
    // A page where no record starts ends inside the record that the page before it ends in.
    let mut carried = 0;
    for (l, &start) in last_record.iter_mut().zip(&page_starts) {
        if start == NO_RECORD_START {
            *l = carried;
        } else {
            carried = *l;
        }
    }
    Some(PagePlan {
        page_starts,
        last_record,
        start_page,
        tail_pages: max_span.min(MAX_TAIL_PAGES),
        max_record_len: max_len,
    })
}

/// `max_lead` of the spec: over records (start page, key image), the number of pages just before
/// the start page whose image equals the record's. `page_images` is non-decreasing.
pub fn max_lead(page_images: &[u64], records: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut run_start = Vec::with_capacity(page_images.len());
    let mut prev: Option<u64> = None;
    for (p, &img) in page_images.iter().enumerate() {
        let start = match (prev, run_start.last()) {
            (Some(x), Some(&s)) if x == img => s,
            _ => p as u64,
        };
        run_start.push(start);
        prev = Some(img);
    }
    let mut best = 0;
    for (page, image) in records {
        let Some(before) = page.checked_sub(1) else {
            continue;
        };
        if page_images.get(before as usize) == Some(&image) {
            let s = run_start.get(before as usize).copied().unwrap_or(page);
            best = best.max(page - s);
        }
    }
    best
}

/// Where `find_in_window` found the key sought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The value is `buf[start..end]`.
    Value { start: usize, end: usize },
    /// No record of the key starts in the search pages.
    Absent,
    /// A record starting in the search pages runs past the window: the caller reads the record
    /// (`len` bytes at `offset` of the file) whole and compares its key.
    Tail { offset: u64, len: u32 },
}

/// The window one lookup read: svlog bytes from page `first_page` on (`buf`), of a file of
/// `file_bytes` bytes, and the page `search_end` before which the record sought must start.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub buf: &'a [u8],
    pub first_page: u64,
    pub search_end: u64,
    pub file_bytes: u64,
}

/// Finds `key` among the records starting in pages `[first_page, search_end)` of `w`, checking
/// the page-start table, key order and each whole record's CRC on the way (spec, "Lookup" 5-6).
pub fn find_in_window(w: Window<'_>, starts: &[u16], key: &[u8]) -> Result<Found, String> {
    let base = w.first_page * PAGE_BYTES;
    let end_page = w.search_end.min(starts.len() as u64);
    let Some(first) = (w.first_page..end_page).find(|&p| {
        starts
            .get(p as usize)
            .is_some_and(|&s| s != NO_RECORD_START)
    }) else {
        return Ok(Found::Absent);
    };
    let start_of = |p: u64| u64::from(starts.get(p as usize).copied().unwrap_or(0));
    let mut at = first * PAGE_BYTES + start_of(first);
    let mut prev: Option<(u64, &[u8])> = None;
    loop {
        let page = at / PAGE_BYTES;
        if page >= end_page || at >= w.file_bytes {
            return Ok(Found::Absent);
        }
        if let Some((prev_page, _)) = prev
            && prev_page < page
        {
            // The record at `at` is the first one starting in `page`; those between start none.
            let skipped = (prev_page + 1..page).any(|p| start_of(p) != u64::from(NO_RECORD_START));
            if skipped || start_of(page) != at % PAGE_BYTES {
                return Err(format!(
                    "record at offset {at}: the page-start table of page {page} disagrees"
                ));
            }
        }
        let rel = (at - base) as usize;
        let rest = w.buf.get(rel..).ok_or_else(|| {
            format!(
                "record at offset {at}: starts past the {} bytes read from offset {base}",
                w.buf.len()
            )
        })?;
        let (rec_key, len) = record_key(rest, at)?;
        if at.checked_add(len).is_none_or(|e| e > w.file_bytes) {
            return Err(format!(
                "record at offset {at}: {len} bytes run past the file's {} bytes",
                w.file_bytes
            ));
        }
        if prev.is_some_and(|(_, k)| rec_key <= k) {
            return Err(format!("record at offset {at}: keys do not increase"));
        }
        if rest.len() as u64 >= len {
            let (k, v, _) = decode_record(rest).map_err(|e| match e {
                RecordError::Bad(d) => format!("record at offset {at}: {d}"),
                RecordError::Truncated { need } => {
                    format!("record at offset {at}: truncated ({need} bytes)")
                }
            })?;
            match k.cmp(key) {
                std::cmp::Ordering::Equal => {
                    let start = rel + (len as usize - v.len());
                    return Ok(Found::Value {
                        start,
                        end: rel + len as usize,
                    });
                }
                std::cmp::Ordering::Greater => return Ok(Found::Absent),
                std::cmp::Ordering::Less => {}
            }
        } else {
            // Past the window: the next record would start past the search pages too.
            return Ok(Found::Tail {
                offset: at,
                len: len as u32,
            });
        }
        prev = Some((page, rec_key));
        at += len;
    }
}

/// The key and whole length of the record at the start of `rest` (file offset `at`), from its
/// header and key bytes only (the CRC is checked once the record is whole).
fn record_key(rest: &[u8], at: u64) -> Result<(&[u8], u64), String> {
    let u32_at = |i: usize| {
        let mut a = [0u8; 4];
        for (d, s) in a.iter_mut().zip(rest.iter().skip(i)) {
            *d = *s;
        }
        u32::from_le_bytes(a)
    };
    if (rest.len() as u64) < RECORD_HEADER_BYTES {
        return Err(format!(
            "record at offset {at}: its header is not in the pages read"
        ));
    }
    let (key_len, value_len) = (u32_at(4), u32_at(8));
    let len = RECORD_HEADER_BYTES + u64::from(key_len) + u64::from(value_len);
    if u64::from(key_len) > crate::vlog::MAX_KEY_BYTES
        || u64::from(value_len) > crate::vlog::MAX_VALUE_BYTES
    {
        return Err(format!(
            "record at offset {at}: lengths out of range (key {key_len}, value {value_len})"
        ));
    }
    let k_end = RECORD_HEADER_BYTES as usize + key_len as usize;
    let key = rest
        .get(RECORD_HEADER_BYTES as usize..k_end)
        .ok_or_else(|| format!("record at offset {at}: its key is not in the pages read"))?;
    Ok((key, len))
}

#[cfg(test)]
mod tests;
