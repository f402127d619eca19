//! The memtable: every write of the engine lands here (after the WAL) until the table is flushed
//! to an L0 SSTable.
//!
//! Threads: all methods take `&self`, and any number of threads may call any of them at once.
//! The engine's write path inserts the batches of one write group from several threads in
//! parallel ([`MemTable::insert`]); readers on any thread call [`MemTable::get`] and iterate. Inside
//! is a lock-free skiplist (`crossbeam_skiplist::base::SkipList`, the concurrent skiplist of
//! "A Pragmatic Implementation of Non-Blocking Linked-Lists" lifted to towers): an insert never
//! blocks a reader or another insert, and a lookup or an iterator step writes no shared cache
//! line. Lookups use the skiplist's borrowed entries under an epoch guard, never its
//! reference-counted ones (a count on a hot key's node would be written by every reader).
//! Iterators copy up to `CHUNK_ENTRIES` entries per guard and keep a cursor key, so no guard is
//! held between iterator calls (a held guard would stop memory reclamation, and a guard cannot
//! cross threads while an iterator can).
//!
//! Invariants:
//! 1. The list is ordered by (user key ascending, sequence number descending): the first entry of
//!    a user key is its newest version.
//! 2. Entries are never modified or removed once inserted. The engine gives every entry its own
//!    sequence number; if a (key, seq) pair were inserted twice the second insert would replace
//!    the first (the later write of a batch wins).
//! 3. A snapshot at sequence `s` sees, for each key, the newest version with seq <= s. The engine
//!    hands out `s` only once every entry with seq <= s is inserted, and inserts only sequence
//!    numbers above every snapshot handed out, so a snapshot iterator's view never changes while
//!    it runs, whatever other threads insert.

use std::borrow::Borrow;
use std::cell::Cell;
use std::cmp::Ordering;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering as MemOrder};

use crossbeam_epoch::{self as epoch, Guard};
use crossbeam_skiplist::base::{Entry, SkipList};

use crate::error::Result;
use crate::types::{EntryKind, SortedIter};

/// Bytes counted per entry on top of its key and value (list node share, sequence, kind, vectors).
pub const ENTRY_OVERHEAD_BYTES: u64 = 48;

/// Entries an iterator copies out per epoch guard.
const CHUNK_ENTRIES: usize = 256;
/// List entries (visible or not) an iterator scans per epoch guard, at most (the scan only stops
/// between user keys, so one key with many versions may exceed it).
const CHUNK_SCAN_LIMIT: usize = 4 * CHUNK_ENTRIES;

/// A memtable key: user key ascending, then sequence number descending.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InternalKey {
    /// `prefix_of(&user)`, kept in the list node so most comparisons of a search do not follow
    /// `user` to the heap (a second cache miss per node visited).
    prefix: u64,
    user: Vec<u8>,
    seq: u64,
}

impl InternalKey {
    fn new(user: &[u8], seq: u64) -> InternalKey {
        InternalKey {
            prefix: prefix_of(user),
            user: user.to_vec(),
            seq,
        }
    }
}

/// The first 8 bytes of `user`, big-endian, zero-padded. Comparing prefixes orders keys as
/// comparing the bytes does, except that equal prefixes say nothing: `compare` then compares
/// the bytes (a key shorter than 8 bytes pads with zeros, which only ties with real zeros).
fn prefix_of(user: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    for (d, s) in bytes.iter_mut().zip(user) {
        *d = *s;
    }
    u64::from_be_bytes(bytes)
}

/// What the list holds for one internal key.
#[derive(Debug, Clone)]
struct Slot {
    kind: EntryKind,
    value: Vec<u8>,
}

/// A borrowed or owned internal key, so the list can be searched without allocating a key.
trait Lookup {
    fn prefix(&self) -> u64;
    fn user(&self) -> &[u8];
    fn seq(&self) -> u64;
}

impl Lookup for InternalKey {
    fn prefix(&self) -> u64 {
        self.prefix
    }
    fn user(&self) -> &[u8] {
        &self.user
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// A search key borrowing the caller's user key.
struct Probe<'a> {
    prefix: u64,
    user: &'a [u8],
    seq: u64,
}

impl Probe<'_> {
    fn new(user: &[u8], seq: u64) -> Probe<'_> {
        Probe {
            prefix: prefix_of(user),
            user,
            seq,
        }
    }
}

impl Lookup for Probe<'_> {
    fn prefix(&self) -> u64 {
        self.prefix
    }
    fn user(&self) -> &[u8] {
        self.user
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

fn compare(a: &dyn Lookup, b: &dyn Lookup) -> Ordering {
    a.prefix()
        .cmp(&b.prefix())
        .then_with(|| a.user().cmp(b.user()))
        .then_with(|| b.seq().cmp(&a.seq()))
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self, other)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<'a> Borrow<dyn Lookup + 'a> for InternalKey {
    fn borrow(&self) -> &(dyn Lookup + 'a) {
        self
    }
}

impl PartialEq for dyn Lookup + '_ {
    fn eq(&self, other: &Self) -> bool {
        compare(self, other) == Ordering::Equal
    }
}

impl Eq for dyn Lookup + '_ {}

impl PartialOrd for dyn Lookup + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Lookup + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self, other)
    }
}

type List = SkipList<InternalKey, Slot>;

/// The first entry of `list` after `from` (`Unbounded`: the first entry), borrowed for as long as
/// `guard` lives.
fn first_from<'l: 'g, 'g>(
    list: &'l List,
    from: Bound<&(dyn Lookup + '_)>,
    guard: &'g Guard,
) -> Option<Entry<'l, 'g, InternalKey, Slot>> {
    list.lower_bound::<dyn Lookup>(from, guard)
}

/// Saturates a length into the u32 the table format records.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Sequence-numbered versions of keys, in memory. See the module documentation.
pub struct MemTable {
    list: List,
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
            list: SkipList::new(epoch::default_collector().clone()),
            approximate_bytes: AtomicU64::new(0),
            entries: AtomicUsize::new(0),
            max_key_len: AtomicU32::new(0),
            max_value_len: AtomicU32::new(0),
        }
    }

    /// Adds version `seq` of `key`. A Delete's value is normally empty.
    pub fn insert(&self, seq: u64, kind: EntryKind, key: &[u8], value: &[u8]) {
        let internal = InternalKey::new(key, seq);
        let slot = Slot {
            kind,
            value: value.to_vec(),
        };
        // The comparison closure runs only when the (key, seq) pair is already there.
        let replaced = Cell::new(false);
        let guard = &epoch::pin();
        self.list
            .compare_insert(
                internal,
                slot,
                |_| {
                    replaced.set(true);
                    true
                },
                guard,
            )
            .release(guard);
        if !replaced.get() {
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
        let probe = Probe::new(key, snapshot_seq);
        let guard = &epoch::pin();
        let found = first_from(&self.list, Bound::Included(&probe), guard)?;
        let (internal, slot) = (found.key(), found.value());
        (internal.user == key).then(|| (slot.kind, internal.seq, slot.value.clone()))
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
    /// At the first user key > this one.
    After(Vec<u8>),
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
/// `CHUNK_ENTRIES` entries per epoch guard and resumes after the last user key copied.
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
        let probe = match &self.resume {
            Resume::Start => None,
            Resume::At(key) => Some((Probe::new(key, u64::MAX), true)),
            // (key, 0) is the last possible version of `key`: everything after it is a later key.
            Resume::After(key) => Some((Probe::new(key, 0), false)),
            Resume::Done => return Resume::Done,
        };
        let from: Bound<&dyn Lookup> = match &probe {
            None => Bound::Unbounded,
            Some((p, true)) => Bound::Included(p),
            Some((p, false)) => Bound::Excluded(p),
        };
        let guard = &epoch::pin();
        let mut previous: Option<&[u8]> = None;
        let mut emitted_current = false;
        let mut cursor = first_from(&self.table.list, from, guard);
        let mut scanned = 0usize;
        while let Some(entry) = cursor {
            let (key, slot) = (entry.key(), entry.value());
            if previous != Some(key.user.as_slice()) {
                if let Some(prev) = previous
                    && (self.chunk.len() >= CHUNK_ENTRIES || scanned >= CHUNK_SCAN_LIMIT)
                {
                    return Resume::After(prev.to_vec());
                }
                previous = Some(&key.user);
                emitted_current = false;
            }
            if !emitted_current && key.seq <= self.snapshot_seq {
                emitted_current = true;
                let key_start = self.arena.len();
                self.arena.extend_from_slice(&key.user);
                let value_start = self.arena.len();
                self.arena.extend_from_slice(&slot.value);
                self.chunk.push(ChunkEntry {
                    key_start,
                    value_start,
                    value_end: self.arena.len(),
                    kind: slot.kind,
                    seq: key.seq,
                });
            }
            scanned += 1;
            cursor = entry.next();
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
