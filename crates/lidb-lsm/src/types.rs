//! Types shared by every part of the engine: entry kinds, table metadata, the sorted iterator
//! trait, and the read-path counters.

use std::time::Duration;

/// What an entry says about its key. DO NOT CHANGE THESE VALUES: they are stored on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    Put = 1,
    Delete = 2,
}

impl EntryKind {
    pub fn from_u8(v: u8) -> Option<EntryKind> {
        match v {
            1 => Some(EntryKind::Put),
            2 => Some(EntryKind::Delete),
            _ => None,
        }
    }
}

/// What the manifest records of one SSTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    /// File number: the table lives in `{number:06}.sst`.
    pub number: u64,
    pub file_size: u64,
    pub entries: u64,
    /// Smallest and largest user keys (inclusive).
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

/// A forward iterator over entries sorted by user key, one entry per user key (the newest).
///
/// After any positioning call the iterator is either valid (key/value/kind/seq may be read) or
/// exhausted. Errors (I/O, corruption) are returned by the positioning calls.
pub trait SortedIter: Send {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self) -> crate::Result<()>;
    /// Positions at the first entry whose key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> crate::Result<()>;
    fn next(&mut self) -> crate::Result<()>;
    /// Only while valid.
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    fn kind(&self) -> EntryKind;
    fn seq(&self) -> u64;
}

/// Counters of the read path, added up per lookup by whoever performs it. Times follow the papers'
/// breakdown: finding the table, predicting the range, I/O, searching inside the range.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReadStats {
    /// Tables whose key range covered the key (candidates consulted).
    pub tables_probed: u64,
    /// Tables skipped because their Bloom filter said no.
    pub filter_negatives: u64,
    /// Physical reads issued to storage (cache misses; one per table range at most).
    pub data_reads: u64,
    /// Bytes those reads transferred (after page alignment under direct I/O).
    pub bytes_read: u64,
    /// Reads served entirely from the page cache.
    pub cache_hits: u64,
    pub table_lookup_time: Duration,
    pub predict_time: Duration,
    pub io_time: Duration,
    pub search_time: Duration,
}

impl ReadStats {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &ReadStats) {
        self.tables_probed += other.tables_probed;
        self.filter_negatives += other.filter_negatives;
        self.data_reads += other.data_reads;
        self.bytes_read += other.bytes_read;
        self.cache_hits += other.cache_hits;
        self.table_lookup_time += other.table_lookup_time;
        self.predict_time += other.predict_time;
        self.io_time += other.io_time;
        self.search_time += other.search_time;
    }
}
