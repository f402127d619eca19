//! A forward iterator over one table's entries. `seek` asks the learned index for the range that
//! holds the first slot `>= target`, reads that range once and binary-searches it; from there the
//! iterator reads forward sequentially in chunks of about [`SCAN_CHUNK_BYTES`]. All its reads
//! bypass the page cache, so scans do not evict the pages of point lookups; they are counted in
//! the iterator's own [`ReadStats`] ([`TableIter::stats`]), and an iterator made with a
//! [`ScanReads`] sink adds its reads there when it drops (the database's scan counter).
//!
//! Tables with a slot index (mapped keys retained, or unclustered) seek by its lower-bound
//! path instead: the first slot whose image is `>= image(target)` (LITS: whose key is
//! `>= target`), then forward past keys of an equal image that are still smaller.
//!
//! One iterator belongs to one thread at a time (`Send`); it pins its table with an `Arc`.
//! Invariant: while valid, `pos` is inside `[buf_start, buf_start + slots in buf)` and `cur` is
//! the decoded, checksum-verified slot `pos`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::table::format::decode_slot;
use crate::table::reader::{Table, Via};
use crate::types::{EntryKind, ReadStats, SortedIter};
use lidb_storage::error::{Result, corruption};

/// Bytes read per sequential step of a scan (at least one slot).
pub const SCAN_CHUNK_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy)]
struct Current {
    kind: EntryKind,
    seq: u64,
    key: (usize, usize),
    value: (usize, usize),
}

/// Storage reads of scans and the bytes they moved, summed over every iterator that reports
/// here (any thread; relaxed counters, read for statistics only).
#[derive(Debug, Default)]
pub struct ScanReads {
    reads: AtomicU64,
    bytes: AtomicU64,
}

impl ScanReads {
    fn add(&self, stats: &ReadStats) {
        self.reads.fetch_add(stats.data_reads, Ordering::Relaxed);
        self.bytes.fetch_add(stats.bytes_read, Ordering::Relaxed);
    }

    /// (reads, bytes) so far.
    pub fn get(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Iterator over a table; see the module doc.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    buf: Vec<u8>,
    buf_start: u64,
    pos: u64,
    cur: Option<Current>,
    stats: ReadStats,
    /// Where the reads go when the iterator drops (scans of the database).
    sink: Option<Arc<ScanReads>>,
}

impl Table {
    /// An iterator over the table, not positioned yet (call `seek` or `seek_to_first`).
    pub fn iter(self: &Arc<Table>) -> TableIter {
        TableIter {
            table: Arc::clone(self),
            buf: Vec::new(),
            buf_start: 0,
            pos: 0,
            cur: None,
            stats: ReadStats::default(),
            sink: None,
        }
    }

    /// [`Table::iter`] whose reads are added to `sink` when it drops.
    pub fn iter_counted(self: &Arc<Table>, sink: &Arc<ScanReads>) -> TableIter {
        let mut it = self.iter();
        it.sink = Some(Arc::clone(sink));
        it
    }
}

impl Drop for TableIter {
    fn drop(&mut self) {
        if let Some(sink) = &self.sink {
            sink.add(&self.stats);
        }
    }
}

impl TableIter {
    /// Reads done by this iterator so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Slot position of the current entry (only meaningful while valid).
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn buf_slots(&self) -> u64 {
        self.buf.len() as u64 / self.table.slot_width()
    }

    /// Loads the chunk starting at slot `p` (which must be inside the table).
    fn load_chunk(&mut self, p: u64) -> Result<()> {
        let per_chunk = (SCAN_CHUNK_BYTES / self.table.slot_width()).max(1);
        let hi = p.saturating_add(per_chunk).min(self.table.entries());
        self.buf = self
            .table
            .read_slots(p, hi, Via::Storage, &mut self.stats)?;
        self.buf_start = p;
        Ok(())
    }

    /// Positions at slot `p`, reading a new chunk if `p` is outside the buffer.
    fn go_to(&mut self, p: u64) -> Result<()> {
        self.cur = None;
        self.pos = p;
        if p >= self.table.entries() {
            return Ok(());
        }
        if p < self.buf_start || p >= self.buf_start + self.buf_slots() {
            self.load_chunk(p)?;
        }
        let w = self.table.slot_width();
        let off = ((p - self.buf_start) * w) as usize;
        let slot = self
            .buf
            .get(off..off + w as usize)
            .ok_or_else(|| corruption(self.table.path(), format!("slot {p} outside the buffer")))?;
        let s = decode_slot(slot, p).map_err(|d| corruption(self.table.path(), d))?;
        let key_off = off + crate::table::format::SLOT_HEADER_LEN as usize;
        let value_off = key_off + s.key.len();
        self.cur = Some(Current {
            kind: s.kind,
            seq: s.seq,
            key: (key_off, s.key.len()),
            value: (value_off, s.value.len()),
        });
        Ok(())
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        let table = Arc::clone(&self.table);
        let meta = table.meta();
        if target <= meta.smallest.as_slice() {
            return self.go_to(0);
        }
        if target > meta.largest.as_slice() {
            return self.go_to(table.entries());
        }
        if let Some(p) = table.lower_bound_slot(target) {
            self.go_to(p)?;
            while self.valid() && self.key() < target {
                self.go_to(self.pos + 1)?;
            }
            return Ok(());
        }
        let start = match table.predict(target) {
            Some((lo, hi)) if lo < hi => {
                let buf = table.read_slots(lo, hi, Via::Storage, &mut self.stats)?;
                let p = table.search_buf(&buf, lo, target)?;
                self.buf = buf;
                self.buf_start = lo;
                p
            }
            Some((lo, _)) => lo,
            None => table.probe(target, 0, table.entries(), Via::Storage, &mut self.stats)?,
        };
        self.go_to(start)?;
        // Keys whose image ties with the target's may precede it past the index range.
        while self.valid() && self.key() < target {
            self.go_to(self.pos + 1)?;
        }
        Ok(())
    }
}

impl SortedIter for TableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.go_to(0);
        if r.is_err() {
            self.cur = None;
        }
        r
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_inner(target);
        if r.is_err() {
            self.cur = None;
        }
        r
    }

    fn next(&mut self) -> Result<()> {
        if self.cur.is_none() {
            return Ok(());
        }
        let r = self.go_to(self.pos + 1);
        if r.is_err() {
            self.cur = None;
        }
        r
    }

    fn key(&self) -> &[u8] {
        let (off, len) = self.cur.map_or((0, 0), |c| c.key);
        self.buf.get(off..off + len).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        let (off, len) = self.cur.map_or((0, 0), |c| c.value);
        self.buf.get(off..off + len).unwrap_or_default()
    }

    fn kind(&self) -> EntryKind {
        self.cur.map_or(EntryKind::Put, |c| c.kind)
    }

    fn seq(&self) -> u64 {
        self.cur.map_or(0, |c| c.seq)
    }
}
