//! Point lookups of a packed generation in ONE device read (docs/format/static-tier.md,
//! "One-read lookup"): the svlog page model names a window of svlog pages that holds the key's
//! record, which is read in one positional read and parsed from the page-start table. Called
//! from any thread through `StaticTier::get` (`&self`, no state besides the read counters),
//! which takes this path unless the tier's page cache can hold the whole key list (then the
//! cached key list plus one read of the record alone is the smaller read).
//!
//! With `with_cache`, the window's svlog pages are cached as key-list pages are
//! (`reader::pages_through_cache`), in a namespace of their own in the same pool: pages in the
//! cache are not read, the span from the first to the last missing page is one read, and its
//! pages join the cache.

use lidb_index::LearnedIndex;
use lidb_storage::RandomAccessFile;
use lidb_storage::error::corruption;

use super::StaticTier;
use super::format::PAGE_BYTES;
use super::page_model::{Found, Window, find_in_window};
use super::reader::pages_through_cache;
use crate::Pointer;
use crate::Result;
use crate::vlog::decode_pointed;

impl StaticTier {
    /// The value of `key` through the svlog page model `index` (spec, "Lookup" 1-6).
    pub(super) fn get_one_read(
        &self,
        index: &dyn LearnedIndex,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let model = self.model();
        let Some(sm) = model.svlog.as_ref() else {
            return Ok(None);
        };
        if key < model.smallest.as_slice() || key > model.largest.as_slice() {
            return Ok(None);
        }
        let Some(file) = self.file_handle(0) else {
            return Ok(None);
        };
        let path = self.file_path(0).to_path_buf();
        let file_bytes = file.len();
        let b = index.search(model.keymap.image(key));
        // The record's first byte is in pages [lo, search_end); it ends at most tail_pages later.
        let search_end = b.hi.saturating_add(sm.max_lead).min(sm.pages);
        let read_end = search_end.saturating_add(sm.tail_pages).min(sm.pages);
        let lo = b.lo.min(search_end);
        let buf = self.read_svlog_pages(file, lo, read_end)?;
        let w = Window {
            buf: &buf,
            first_page: lo,
            search_end,
            file_bytes,
        };
        match find_in_window(w, &sm.page_starts, key).map_err(|d| corruption(&path, d))? {
            Found::Value { start, end } => match buf.get(start..end) {
                Some(v) => Ok(Some(v.to_vec())),
                None => Err(corruption(
                    &path,
                    format!("value at [{start}, {end}) not read"),
                )),
            },
            Found::Absent => Ok(None),
            Found::Tail { offset, len } => {
                // A record spanning more than `tail_pages` pages: a second read, counted.
                let mut rec = vec![0u8; len as usize];
                file.read_at(offset, &mut rec)?;
                self.count_svlog(rec.len() as u64);
                let p = Pointer {
                    file: self.generation(),
                    offset,
                    len,
                };
                let (k, v) = decode_pointed(&rec, p).map_err(|d| corruption(&path, d))?;
                Ok((k == key).then(|| v.to_vec()))
            }
        }
    }

    /// Svlog pages `[lo, hi)` (the last page of the file may be short): through the page cache
    /// when the tier has one, else one read.
    fn read_svlog_pages(&self, file: &dyn RandomAccessFile, lo: u64, hi: u64) -> Result<Vec<u8>> {
        let file_bytes = file.len();
        let span = |a: u64, b: u64| {
            (
                a * PAGE_BYTES,
                (b * PAGE_BYTES).min(file_bytes).max(a * PAGE_BYTES),
            )
        };
        let read = |a: u64, b: u64| -> Result<Vec<u8>> {
            let (from, to) = span(a, b);
            let mut buf = vec![0u8; (to - from) as usize];
            file.read_at(from, &mut buf)?;
            self.count_svlog(buf.len() as u64);
            Ok(buf)
        };
        let Some(cache) = self.svlog_cache() else {
            return read(lo, hi);
        };
        let page_len = |p: u64| {
            let (from, to) = span(p, p + 1);
            (to - from) as usize
        };
        pages_through_cache(cache, self.generation(), lo, hi, page_len, read)
    }
}
