//! The memtable: every write of the engine lands here (after the WAL) until the table is flushed
//! to an L0 SSTable.
//!
//! Threads: all methods take `&self`. The writers of a write group (db/write.rs) call
//! [`MemTable::insert`], each under the write lock; readers on any thread call [`MemTable::get`]
//! and iterate. Inside is one `RwLock` over two indexes of the user keys: a `BTreeSet` in key
//! order, where iterators seek and step, and a `HashMap` from user key to the key's versions,
//! where a point lookup finds them with one hash probe. Iterators take the read lock per chunk of
//! entries and keep a cursor, so no lock is held between iterator calls and a long scan never
//! blocks a writer.
//!
//! Why the hash map: every get of the engine looks in the memtable first, and a B-tree lookup of
//! 100K keys is some 35 key comparisons, each a pointer to a key elsewhere in memory. Under
//! `lidb serve` with every key in the memtable, `perf` put half of the server's CPU samples in
//! that search (memcmp and the B-tree's descent); the hash probe is one hash and one comparison.
//! Its price: a second entry per key, and a resize that rehashes every key under the write lock
//! once each time the key count doubles (amortized, as any hash table's; Redis resizes
//! incrementally instead).
//!
//! Why not a lock-free skiplist, which would spare a get the read lock's shared write: one was
//! built (crossbeam's `base::SkipList`, borrowed entries under an epoch guard, an 8-byte key
//! prefix in each node) and measured. On a memtable of 100K keys it took about 1.6x the B-tree's
//! CPU per get, and through `lidb serve` (redis-benchmark SET and GET, 100K keys, all in the
//! memtable) server CPU per request rose from 1.9-2.4 to 3.1 ms per 1,000 GETs and from 2.6-2.8 to
//! 3.7-4.6 per 1,000 SETs, in one run (docs/bench-log/10-many-cores.md). A skiplist pays on many cores
//! only when its nodes are as compact as LevelDB's and RocksDB's (an arena, keys inline); that is
//! the next step, measured on a many-core machine.
//!
//! Invariants:
//! 1. `order` and `by_key` hold the same user keys; a key's versions are `Versions::newest`
//!    and, older than it, `Versions::older` in ascending sequence order.
//! 2. Versions are never modified or removed once inserted. The engine gives every entry its own
//!    sequence number; if a (key, seq) pair were inserted twice the second insert would replace
//!    the first (the later write of a batch wins).
//! 3. A snapshot at sequence `s` sees, for each key, the newest version with seq <= s. Writers
//!    only insert sequence numbers above every snapshot handed out, so a snapshot iterator's view
//!    never changes while it runs, whatever other threads insert.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering as MemOrder};
use std::sync::{Arc, PoisonError, RwLock};

use smallvec::SmallVec;

use crate::types::{EntryKind, SortedIter};
use lidb_storage::error::Result;

/// Bytes counted per entry on top of its key and value (index entries' share, sequence, kind,
/// vectors).
pub const ENTRY_OVERHEAD_BYTES: u64 = 48;

/// Entries an iterator copies out per read-lock acquisition.
const CHUNK_ENTRIES: usize = 256;
/// User keys an iterator scans per read-lock acquisition, at most.
const CHUNK_SCAN_LIMIT: usize = 4 * CHUNK_ENTRIES;

/// One version of a user key.
#[derive(Debug, Clone)]
struct Version {
    seq: u64,
    kind: EntryKind,
    /// Inline up to 16 bytes (Redis's default value is 3), in the 24 bytes a `Vec` takes.
    value: SmallVec<[u8; 16]>,
}

/// The versions of one user key. The newest is in the hash map's entry, so a get of the newest
/// (nearly every get) and a write of a newer version (nearly every write) touch no other
/// allocation: with the newest at the end of one list, which spills to an allocation of its own
/// once a key has two versions, `perf annotate` of `lidb serve --engine lsm` put a third of
/// `MemTable::insert`'s samples, and of `MemTable::get_at`'s, on loading it.
#[derive(Debug)]
struct Versions {
    newest: Version,
    /// The older versions, oldest first (ascending sequence numbers).
    older: Vec<Version>,
}

/// The newest of `versions` with seq <= `snapshot_seq`.
fn visible(versions: &Versions, snapshot_seq: u64) -> Option<&Version> {
    if versions.newest.seq <= snapshot_seq {
        return Some(&versions.newest);
    }
    versions.older.iter().rev().find(|v| v.seq <= snapshot_seq)
}

/// Adds `version` to `versions` in sequence order; true when it replaced a version of the same
/// sequence number (invariant 2). The newest version usually comes last: one group's batches may
/// be inserted by their writers in any order, so an older one can still arrive.
fn place(versions: &mut Versions, version: Version) -> bool {
    if version.seq > versions.newest.seq {
        let older = std::mem::replace(&mut versions.newest, version);
        versions.older.push(older);
        return false;
    }
    if version.seq == versions.newest.seq {
        versions.newest = version;
        return true;
    }
    let older = &mut versions.older;
    match older.binary_search_by(|v| v.seq.cmp(&version.seq)) {
        Ok(at) => {
            if let Some(slot) = older.get_mut(at) {
                *slot = version;
            }
            true
        }
        Err(at) => {
            older.insert(at, version);
            false
        }
    }
}

/// Bytes of a user key the hash map holds in its entry (longer keys get an allocation).
const INLINE_KEY_BYTES: usize = 24;

/// A user key as the hash map holds it: inline up to [`INLINE_KEY_BYTES`] bytes (redis-benchmark's
/// 16-byte keys, YCSB's 24-byte ones), so a probe compares the key in the entry it lands on. With
/// the key behind a pointer, `perf annotate` of `lidb serve --engine lsm` under SETs put 54% of
/// `MemTable::insert`'s samples on the load of the key's bytes. It hashes as the `[u8]` it
/// derefs to, so the map is probed with a plain slice.
type MapKey = SmallVec<[u8; INLINE_KEY_BYTES]>;

/// What the lock guards: every user key twice, in order for iterators and by hash for point
/// lookups, and each key's versions once, in the hash map.
#[derive(Debug, Default)]
struct Inner {
    /// User keys in order: where iterators seek and step.
    order: BTreeSet<Arc<[u8]>>,
    /// User key to its versions: a point lookup's one probe.
    by_key: HashMap<MapKey, Versions>,
}

/// Saturates a length into the u32 the table format records.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// An in-memory sorted table of versioned entries; see the module documentation.
pub struct MemTable {
    inner: RwLock<Inner>,
    approximate_bytes: AtomicU64,
    entries: AtomicUsize,
    max_key_len: AtomicU32,
    max_value_len: AtomicU32,
}

impl fmt::Debug for MemTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTable")
            .field("entries", &self.len())
            .field("approximate_bytes", &self.approximate_bytes())
            .finish_non_exhaustive()
    }
}

impl Default for MemTable {
    fn default() -> Self {
        MemTable::new()
    }
}

impl MemTable {
    pub fn new() -> MemTable {
        MemTable {
            inner: RwLock::new(Inner::default()),
            approximate_bytes: AtomicU64::new(0),
            entries: AtomicUsize::new(0),
            max_key_len: AtomicU32::new(0),
            max_value_len: AtomicU32::new(0),
        }
    }

    /// Adds version `seq` of `key`. A Delete's value is normally empty.
    pub fn insert(&self, seq: u64, kind: EntryKind, key: &[u8], value: &[u8]) {
        let version = Version {
            seq,
            kind,
            value: SmallVec::from_slice(value),
        };
        let replaced = {
            let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
            match inner.by_key.get_mut(key) {
                Some(versions) => place(versions, version),
                None => {
                    inner.order.insert(Arc::from(key));
                    inner.by_key.insert(
                        MapKey::from_slice(key),
                        Versions {
                            newest: version,
                            older: Vec::new(),
                        },
                    );
                    false
                }
            }
        };
        if !replaced {
            self.entries.fetch_add(1, MemOrder::Relaxed);
        }
        self.approximate_bytes.fetch_add(
            key.len() as u64 + value.len() as u64 + ENTRY_OVERHEAD_BYTES,
            MemOrder::Relaxed,
        );
        self.max_key_len
            .fetch_max(len_u32(key.len()), MemOrder::Relaxed);
        self.max_value_len
            .fetch_max(len_u32(value.len()), MemOrder::Relaxed);
    }

    /// The newest version of `key`: (kind, seq, value).
    pub fn get(&self, key: &[u8]) -> Option<(EntryKind, u64, Vec<u8>)> {
        self.get_at(key, u64::MAX)
    }

    /// The newest version of `key` with seq <= `snapshot_seq`: (kind, seq, value).
    pub fn get_at(&self, key: &[u8], snapshot_seq: u64) -> Option<(EntryKind, u64, Vec<u8>)> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let found = visible(inner.by_key.get(key)?, snapshot_seq)?;
        Some((found.kind, found.seq, found.value.to_vec()))
    }

    /// Keys + values + [`ENTRY_OVERHEAD_BYTES`] per insert: what a flush compares with the write
    /// buffer size.
    pub fn approximate_bytes(&self) -> u64 {
        self.approximate_bytes.load(MemOrder::Relaxed)
    }

    /// Entries (versions, not distinct keys).
    pub fn len(&self) -> usize {
        self.entries.load(MemOrder::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The longest key inserted (saturated at u32::MAX): a flush sizes its table's slots with it.
    pub fn max_key_len(&self) -> u32 {
        self.max_key_len.load(MemOrder::Relaxed)
    }

    /// The longest value inserted (saturated at u32::MAX).
    pub fn max_value_len(&self) -> u32 {
        self.max_value_len.load(MemOrder::Relaxed)
    }

    /// An iterator over the newest version <= `snapshot_seq` of each key, deletions included
    /// (kind Delete). It starts unpositioned: call `seek` or `seek_to_first`.
    pub fn iter(self: &Arc<Self>, snapshot_seq: u64) -> MemTableIter {
        MemTableIter {
            table: Arc::clone(self),
            snapshot_seq,
            resume: Resume::Done,
            arena: Vec::new(),
            chunk: Vec::new(),
            pos: 0,
        }
    }
}

/// Where the next chunk of an iterator starts.
#[derive(Debug, Clone)]
enum Resume {
    /// At the smallest key.
    Start,
    /// At the first user key >= this one.
    At(Vec<u8>),
    /// Nothing is left.
    Done,
}

/// One entry of a chunk: its key and value are `arena[key_start..value_start]` and
/// `arena[value_start..value_end]`.
#[derive(Debug, Clone, Copy)]
struct ChunkEntry {
    key_start: usize,
    value_start: usize,
    value_end: usize,
    kind: EntryKind,
    seq: u64,
}

/// A snapshot iterator over a [`MemTable`] (see [`MemTable::iter`]). It copies up to
/// `CHUNK_ENTRIES` entries per read-lock acquisition and resumes after the last user key copied.
pub struct MemTableIter {
    table: Arc<MemTable>,
    snapshot_seq: u64,
    resume: Resume,
    arena: Vec<u8>,
    chunk: Vec<ChunkEntry>,
    pos: usize,
}

impl fmt::Debug for MemTableIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTableIter")
            .field("snapshot_seq", &self.snapshot_seq)
            .field("resume", &self.resume)
            .field("chunk_entries", &self.chunk.len())
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

impl MemTableIter {
    /// Replaces the chunk with the next visible entries after `self.resume`, until one is found or
    /// the table ends.
    fn fill(&mut self) {
        self.arena.clear();
        self.chunk.clear();
        self.pos = 0;
        while self.chunk.is_empty() && !matches!(self.resume, Resume::Done) {
            self.resume = self.fill_once();
        }
    }

    /// Copies one chunk starting at `self.resume`; returns where the following chunk starts.
    fn fill_once(&mut self) -> Resume {
        let inner = self
            .table
            .inner
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let from: Bound<&[u8]> = match &self.resume {
            Resume::Start => Bound::Unbounded,
            Resume::At(key) => Bound::Included(key),
            Resume::Done => return Resume::Done,
        };
        let keys = inner
            .order
            .range::<[u8], _>((from, Bound::Unbounded))
            .enumerate();
        for (scanned, user) in keys {
            if self.chunk.len() >= CHUNK_ENTRIES || scanned >= CHUNK_SCAN_LIMIT {
                return Resume::At(user.to_vec());
            }
            let Some(version) = inner
                .by_key
                .get(&**user)
                .and_then(|versions| visible(versions, self.snapshot_seq))
            else {
                continue;
            };
            let key_start = self.arena.len();
            self.arena.extend_from_slice(user);
            let value_start = self.arena.len();
            self.arena.extend_from_slice(&version.value);
            self.chunk.push(ChunkEntry {
                key_start,
                value_start,
                value_end: self.arena.len(),
                kind: version.kind,
                seq: version.seq,
            });
        }
        Resume::Done
    }

    fn entry(&self) -> Option<&ChunkEntry> {
        self.chunk.get(self.pos)
    }
}

impl SortedIter for MemTableIter {
    fn valid(&self) -> bool {
        self.pos < self.chunk.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.resume = Resume::Start;
        self.fill();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.resume = Resume::At(target.to_vec());
        self.fill();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.pos < self.chunk.len() {
            self.pos += 1;
            if self.pos == self.chunk.len() {
                self.fill();
            }
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.entry()
            .and_then(|e| self.arena.get(e.key_start..e.value_start))
            .unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.entry()
            .and_then(|e| self.arena.get(e.value_start..e.value_end))
            .unwrap_or_default()
    }

    fn kind(&self) -> EntryKind {
        self.entry().map_or(EntryKind::Put, |e| e.kind)
    }

    fn seq(&self) -> u64 {
        self.entry().map_or(0, |e| e.seq)
    }
}
