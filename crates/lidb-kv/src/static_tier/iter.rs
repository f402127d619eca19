//! Range scans of the static tier: seek with the model, then read the key list forward in chunks
//! of pages and the svlog forward in large chunks (the records of consecutive keys are
//! contiguous). A `TierIter` is used by one thread; many may run over one tier.

use std::sync::Arc;

use lidb_lsm::error::corruption;

use super::StaticTier;
use super::reader::PageRun;
use crate::Result;
use crate::vlog::decode_pointed;

/// Key-list pages read per chunk by a scan.
pub const SCAN_KEYLIST_PAGES: u64 = 64;
/// Least bytes of the svlog read per chunk by a scan.
pub const SCAN_SVLOG_BYTES: u64 = 1 << 20;

/// Sorted `(key, value)` pairs of a tier from the first key `>= start`. Stops after the first
/// error.
#[derive(Debug)]
pub struct TierIter {
    tier: Arc<StaticTier>,
    next: u64,
    pages: PageRun,
    values: Vec<u8>,
    values_start: u64,
    done: bool,
    /// Yield keys with empty values and never read the svlog (`StaticTier::keys`).
    keys_only: bool,
}

impl StaticTier {
    /// Sorted `(key, value)` pairs from the first key `>= start`.
    pub fn iter(self: &Arc<Self>, start: &[u8]) -> Result<TierIter> {
        let (next, run) = self.seek(start)?;
        Ok(TierIter {
            tier: Arc::clone(self),
            next,
            pages: run.unwrap_or_default(),
            values: Vec::new(),
            values_start: 0,
            done: false,
            keys_only: false,
        })
    }

    /// Every key in order, with empty values: reads the key list only (rebuilding in-memory
    /// filters at open must not read gigabytes of values).
    pub fn keys(self: &Arc<Self>) -> Result<TierIter> {
        Ok(TierIter {
            keys_only: true,
            ..self.iter(b"")?
        })
    }
}

impl TierIter {
    fn page_loaded(&self, page: u64) -> bool {
        let held = self.pages.bytes.len() as u64 / super::format::PAGE_BYTES;
        page >= self.pages.first_page && page < self.pages.first_page + held
    }

    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let tier = Arc::clone(&self.tier);
        let header = tier.header();
        if self.next >= header.entries {
            return Ok(None);
        }
        let page = self.next / u64::from(header.layout.entries_per_page);
        if !self.page_loaded(page) {
            self.pages = tier.read_pages_uncached(page, page + SCAN_KEYLIST_PAGES)?;
        }
        let (key, p) = tier.entry(&self.pages, self.next)?;
        if self.keys_only {
            self.next += 1;
            return Ok(Some((key.to_vec(), Vec::new())));
        }
        let end = p.offset + u64::from(p.len);
        let held_end = self.values_start + self.values.len() as u64;
        if p.offset < self.values_start || end > held_end {
            let len = u64::from(p.len)
                .max(SCAN_SVLOG_BYTES)
                .min(header.svlog_bytes - p.offset);
            let mut buf = vec![0u8; len as usize];
            tier.svlog_handle().read_at(p.offset, &mut buf)?;
            tier.count_svlog(len);
            self.values = buf;
            self.values_start = p.offset;
        }
        let at = (p.offset - self.values_start) as usize;
        let rec = self.values.get(at..at + p.len as usize).unwrap_or_default();
        let (k, v) = decode_pointed(rec, p).map_err(|d| corruption(tier.svlog_path(), d))?;
        if k != key {
            return Err(corruption(
                tier.svlog_path(),
                format!(
                    "record at offset {}: holds another key than its entry",
                    p.offset
                ),
            ));
        }
        self.next += 1;
        Ok(Some((k.to_vec(), v.to_vec())))
    }
}

impl Iterator for TierIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
