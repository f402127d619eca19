//! Point lookups through the page cache at page granularity. The index's window of
//! slots `[lo, hi)` is first clipped by whichever of its pages are cached; then the contiguous
//! span of uncached pages that can still hold the key is read once; only the page(s) of the slot
//! that answered are put in the cache, not every page of the window.
//!
//! ```text
//! window [lo, hi) ─► peek its pages ─► slots lying wholly in cached pages are "known"
//!   ─► binary search of the known slots: a = 1 + last known < q, b = first known >= q
//!   ─► known slot b == q: the answer, no read     a == b: the position is b, no read
//!   ─► otherwise ONE read of the uncached pages covering [a, b) ─► binary search ─► position p
//!   ─► cache the page(s) of slot p when it holds q; when q is absent, those of slots p - 1
//!      and p (inside the window), which prove it absent
//! ```
//!
//! Entries ([`CacheMode::Entries`]): after the filter passes, a lookup first asks the
//! cache for the entry of (table, hash of the key). An entry is the slot's position (`u64` LE)
//! then the answering slot's bytes, or [`ABSENT`] then the key for a key the table proved
//! absent. A hit whose key equals the query answers with no read and no page touch (one
//! `cache_hits`); another key under the same hash is a miss. After a miss the lookup reads as
//! above and caches the answer as an entry: the slot that holds the key, or the key alone when
//! it is absent (a filter false positive: a few bytes instead of the neighbour pages, and the
//! memory-only tier can still prove it absent). Pages are kept only in the modes that keep them.
//!
//! Thread-safety: as `Table` (any thread; the cache locks itself). A page evicted between the
//! peek and the end of the lookup stays valid for it (pages are `Arc`s).
//!
//! Invariants relied on: keys strictly increase with the slot index and slots are fixed-width,
//! so a known slot whose key is < q rules out every slot up to it and one whose key is >= q every
//! slot after it: the position returned is the one a full read of `[lo, hi)` would give. Every
//! slot used (known or read) has its CRC checked by `decode_slot`. Counting: a lookup that reads
//! adds one `data_reads` and exactly the span's bytes to `bytes_read`; one that does not read
//! adds one `cache_hits`. `Via::CacheOnly` never reads: a needed page not cached is
//! `Error::NotInMemory`, so it answers whenever the answering page(s) are cached.

use std::sync::Arc;
use std::time::Instant;

use crate::options::CacheMode;
use crate::table::format::decode_slot;
use crate::table::reader::{Found, Table, Via};
use crate::types::ReadStats;
use lidb_storage::PAGE_SIZE;
use lidb_storage::cache::{PageCache, entry_hash};
use lidb_storage::error::{Error, Result, corruption};

/// The window's pages a scan's seek hands on: consecutive pages from page `first`, each with
/// whether it was read and is not cached yet.
pub(crate) struct SeekPages {
    pub first: u64,
    pub pages: Vec<(Arc<[u8]>, bool)>,
}

/// What a lookup through the window keeps in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// A point lookup's answer, as the cache mode says.
    Answer,
    /// A scan's seek: the pages of the slots on both sides of the position found.
    Position,
}

/// First and last page holding bytes `[start, end)` (`start < end`).
fn pages_of(start: u64, end: u64) -> (u64, u64) {
    (start / PAGE_SIZE, (end - 1) / PAGE_SIZE)
}

/// A run of consecutive pages of one table, each cached, read by this lookup, or absent.
pub(super) struct PageRun {
    first: u64,
    /// Page `first + i`: its bytes and whether this lookup read it (it is not in the cache).
    pages: Vec<Option<(Arc<[u8]>, bool)>>,
}

impl PageRun {
    fn page(&self, page: u64) -> Option<&(Arc<[u8]>, bool)> {
        let i = usize::try_from(page.checked_sub(self.first)?).ok()?;
        self.pages.get(i)?.as_ref()
    }

    /// Whether every page of bytes `[start, end)` is present.
    fn holds(&self, start: u64, end: u64) -> bool {
        let (a, b) = pages_of(start, end);
        (a..=b).all(|p| self.page(p).is_some())
    }

    /// Bytes `[start, end)`, or `None` when a page is absent or too short.
    fn bytes(&self, start: u64, end: u64) -> Option<Vec<u8>> {
        let (a, b) = pages_of(start, end);
        let mut buf = Vec::with_capacity((end - start) as usize);
        for p in a..=b {
            let (page, _) = self.page(p)?;
            let page_start = p * PAGE_SIZE;
            let from = start.saturating_sub(page_start) as usize;
            let to = (end - page_start).min(page.len() as u64) as usize;
            buf.extend_from_slice(page.get(from..to)?);
        }
        (buf.len() as u64 == end - start).then_some(buf)
    }

    /// Records page `page` as read by this lookup, unless it is already present.
    fn fill(&mut self, page: u64, bytes: &[u8]) {
        let Some(i) = page
            .checked_sub(self.first)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return;
        };
        if let Some(slot @ None) = self.pages.get_mut(i) {
            *slot = Some((bytes.into(), true));
        }
    }
}

/// The position word of an entry for a key the table does not hold.
pub(super) const ABSENT: u64 = u64::MAX;

impl Table {
    /// The cache, when lookups through `via` keep entries in it.
    fn entry_cache(&self, via: Via) -> Option<&PageCache> {
        match (self.cache(), via) {
            (Some(c), Via::Cache | Via::CacheOnly) if c.mode().keeps_entries() => Some(c),
            _ => None,
        }
    }

    /// The answer an entry of this table holds for `key`: `Some(answer)` on a hit (`None`
    /// inside: the table does not hold the key), `None` on a miss or when entries are off.
    pub(super) fn entry_answer(
        &self,
        key: &[u8],
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Option<Found>>> {
        let Some(cache) = self.entry_cache(via) else {
            return Ok(None);
        };
        let t = Instant::now();
        let Some(bytes) = cache.get_entry(self.number(), entry_hash(key)) else {
            stats.search_time += t.elapsed();
            return Ok(None);
        };
        let answer = self.decode_entry(&bytes, key)?;
        stats.search_time += t.elapsed();
        if answer.is_some() {
            stats.cache_hits += 1;
        }
        Ok(answer)
    }

    /// What entry `bytes` says of `key`: `None` when it is another key's (same hash).
    pub(super) fn decode_entry(&self, bytes: &[u8], key: &[u8]) -> Result<Option<Option<Found>>> {
        let bad = || corruption(self.path(), "cached entry shorter than its position");
        let (head, body) = bytes.split_at_checked(8).ok_or_else(bad)?;
        let pos = u64::from_le_bytes(head.try_into().map_err(|_| bad())?);
        if pos == ABSENT {
            return Ok((body == key).then_some(None));
        }
        let s = decode_slot(body, pos).map_err(|d| corruption(self.path(), d))?;
        Ok((s.key == key).then(|| {
            Some(Found {
                kind: s.kind,
                seq: s.seq,
                value: s.value.to_vec(),
            })
        }))
    }

    /// Caches the answer for `key` as an entry, when lookups through `via` keep entries:
    /// `Some((position, slot bytes))` of the slot holding it, or `None` when it is absent.
    pub(super) fn keep_entry(&self, key: &[u8], via: Via, slot: Option<(u64, &[u8])>) {
        let Some(cache) = self.entry_cache(via) else {
            return;
        };
        let (pos, body) = slot.unwrap_or((ABSENT, key));
        let mut bytes = Vec::with_capacity(8 + body.len());
        bytes.extend_from_slice(&pos.to_le_bytes());
        bytes.extend_from_slice(body);
        cache.insert_entry(self.number(), entry_hash(key), bytes.into());
    }

    /// A scan's seek through the cache: the first position `p` in `[lo, hi)` (`lo < hi <=
    /// entries`) whose key is `>= key` (`hi` if none), found as a point lookup finds it, keeping
    /// the pages of the slots on both sides of `p` in every cache mode and no entry, so the same
    /// seek again is answered by those pages. With it come the window's pages from `p`'s first
    /// on that the lookup had (cached or read), for the scan to go on from: the first page's
    /// number and each page with whether it was read and is not cached yet.
    pub(crate) fn seek_window_cached(
        &self,
        cache: &PageCache,
        key: &[u8],
        lo: u64,
        hi: u64,
        stats: &mut ReadStats,
    ) -> Result<(u64, SeekPages)> {
        let (p, _, run) =
            self.search_window_cached(cache, key, lo, hi, Via::Cache, Keep::Position, stats)?;
        let w = self.slot_width();
        let from = p * w / PAGE_SIZE;
        // keep_answer cached the pages up to the one slot p ends in.
        let kept = ((p + 1) * w - 1) / PAGE_SIZE;
        let pages = (from..)
            .map_while(|page| run.page(page).cloned())
            .zip(from..)
            .map(|((bytes, fresh), page)| (bytes, fresh && page > kept))
            .collect();
        Ok((p, SeekPages { first: from, pages }))
    }

    /// The first position in `[lo, hi)` (`lo < hi <= entries`) whose key is `>= key` (`hi` if
    /// none), and the entry there if it holds `key`; reads through `cache` as the module doc says,
    /// keeping what `keep` says. With them, the window's pages the lookup had.
    #[expect(
        clippy::too_many_arguments,
        reason = "the window, the read path and what to keep, all needed by one search"
    )]
    pub(super) fn search_window_cached(
        &self,
        cache: &PageCache,
        key: &[u8],
        lo: u64,
        hi: u64,
        via: Via,
        keep: Keep,
        stats: &mut ReadStats,
    ) -> Result<(u64, Option<Found>, PageRun)> {
        debug_assert!(lo < hi && hi <= self.entries(), "window inside the table");
        let w = self.slot_width();
        let short = |what: &str| corruption(self.path(), format!("{what} of slots [{lo}, {hi})"));
        let t = Instant::now();
        let (first, last) = pages_of(lo * w, hi * w);
        let mut run = PageRun {
            first,
            pages: cache
                .peek_pages(self.number(), first, last)
                .into_iter()
                .map(|p| p.map(|b| (b, false)))
                .collect(),
        };
        let known: Vec<u64> = (lo..hi)
            .filter(|&i| run.holds(i * w, (i + 1) * w))
            .collect();
        let (a, b) = self.clip_by_known(&run, &known, key, lo, hi)?;
        if b < hi {
            // Slot b is known and its key is >= key: equal means the answer is cached.
            let slot = run
                .bytes(b * w, (b + 1) * w)
                .ok_or_else(|| short("cached page"))?;
            let found = self.match_slot(&slot, b, b, key)?;
            if found.is_some() && keep == Keep::Answer {
                self.keep_entry(key, via, Some((b, &slot)));
            }
            if found.is_some() || a == b {
                self.keep_answer(cache, &run, lo, hi, b, found.is_some(), keep);
                stats.cache_hits += 1;
                stats.search_time += t.elapsed();
                return Ok((b, found, run));
            }
        } else if a == b {
            // Slot hi - 1 is known and smaller than key: no slot of the window holds it.
            self.keep_answer(cache, &run, lo, hi, b, false, keep);
            stats.cache_hits += 1;
            stats.search_time += t.elapsed();
            return Ok((b, None, run));
        }
        stats.search_time += t.elapsed();

        let t = Instant::now();
        let (span_first, span_last) = pages_of(a * w, b * w);
        let mut missing = (span_first..=span_last).filter(|&p| run.page(p).is_none());
        match missing.next() {
            Some(m0) => {
                let m1 = missing.next_back().unwrap_or(m0);
                if via == Via::CacheOnly {
                    return Err(Error::NotInMemory);
                }
                let span_start = m0 * PAGE_SIZE;
                let span_end = ((m1 + 1) * PAGE_SIZE).min(self.file_len());
                let mut span = vec![0u8; span_end.saturating_sub(span_start) as usize];
                self.read_exact_at(span_start, &mut span)?;
                stats.data_reads += 1;
                stats.bytes_read += span.len() as u64;
                for (k, chunk) in span.chunks(PAGE_SIZE as usize).enumerate() {
                    run.fill(m0 + k as u64, chunk);
                }
            }
            None => stats.cache_hits += 1,
        }
        stats.io_time += t.elapsed();

        let t = Instant::now();
        let buf = run.bytes(a * w, b * w).ok_or_else(|| short("pages read"))?;
        let p = self.search_buf(&buf, a, key)?;
        let found = if p < b {
            self.match_slot(&buf, a, p, key)?
        } else {
            None
        };
        if found.is_some() && keep == Keep::Answer {
            self.keep_entry(key, via, Some((p, self.slot_in(&buf, p - a)?)));
        }
        stats.search_time += t.elapsed();
        self.keep_answer(cache, &run, lo, hi, p, found.is_some(), keep);
        Ok((p, found, run))
    }

    /// Caches the pages that answered position `p` of `[lo, hi)`: slot `p` when it holds the
    /// key; when the key is absent, the slots on either side of `p` inside the window (`p - 1`,
    /// smaller, and `p`, larger), which together prove it absent on a later lookup. Those that
    /// were cached are marked used before those this lookup read are inserted, so an insert
    /// never evicts a page of the same answer.
    /// Nothing in [`CacheMode::Entries`] for a point lookup's answer; a seek's position
    /// ([`Keep::Position`]) keeps the slots on both sides of `p` in every mode.
    #[expect(
        clippy::too_many_arguments,
        reason = "the window, its pages, the answer and what to keep"
    )]
    fn keep_answer(
        &self,
        cache: &PageCache,
        run: &PageRun,
        lo: u64,
        hi: u64,
        p: u64,
        hit: bool,
        keep: Keep,
    ) {
        if keep == Keep::Answer && cache.mode() == CacheMode::Entries {
            return;
        }
        let hit = hit && keep == Keep::Answer;
        let w = self.slot_width();
        let first_slot = if !hit && p > lo { p - 1 } else { p };
        let last_slot = p.min(hi - 1);
        if first_slot > last_slot {
            return;
        }
        let (a, b) = pages_of(first_slot * w, (last_slot + 1) * w);
        for fresh in [false, true] {
            for page in a..=b {
                match run.page(page) {
                    Some((bytes, true)) if fresh => {
                        cache.insert(self.number(), page, Arc::clone(bytes));
                    }
                    Some((_, false)) if !fresh => {
                        cache.get(self.number(), page);
                    }
                    _ => {}
                }
            }
        }
    }

    /// `[a, b]`: the positions the first slot `>= key` can still have, given the known slots
    /// (sorted positions inside `[lo, hi)`). `b < hi` means slot `b` is known.
    fn clip_by_known(
        &self,
        run: &PageRun,
        known: &[u64],
        key: &[u8],
        lo: u64,
        hi: u64,
    ) -> Result<(u64, u64)> {
        let w = self.slot_width();
        let (mut x, mut y) = (0usize, known.len());
        while x < y {
            let mid = x + (y - x) / 2;
            let Some(&i) = known.get(mid) else { break };
            let slot = run.bytes(i * w, (i + 1) * w).ok_or_else(|| {
                corruption(self.path(), format!("cached page of slot {i} is short"))
            })?;
            let s = decode_slot(&slot, i).map_err(|d| corruption(self.path(), d))?;
            if s.key < key {
                x = mid + 1;
            } else {
                y = mid;
            }
        }
        let a = x
            .checked_sub(1)
            .and_then(|j| known.get(j))
            .map_or(lo, |&i| i + 1);
        let b = known.get(x).copied().unwrap_or(hi);
        Ok((a, b))
    }
}
