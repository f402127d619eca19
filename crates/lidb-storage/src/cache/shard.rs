//! One shard of the page cache: a hash index over an LRU list of cached pages and entries, with
//! a capacity of its own (the pool's divided among its shards; see the module above).
//!
//! Threads: a [`Shard`] lives inside its pool's `RwLock`. [`Shard::lookup`] and
//! [`Shard::peek`] take `&Shard`, so any number of readers run them together under the read
//! lock, and they write nothing at all: not the order, not a bit, only the `Arc` count of the
//! bytes they return. Everything that changes the index, the list or the usage takes
//! `&mut Shard`, that is, the write lock.
//!
//! Recency without a write per hit: every move to the front of the list takes a stamp from the
//! shard's `clock`, which counts moves, so `clock - 1 - stamp` bounds how many slots went in
//! front of a slot since its last move. A hit on a slot at most [`Shard::recent_window`] moves
//! from the front (an eighth of the shard's slots, none below 32 slots) leaves it where it is:
//! a hot page read by 16 threads stays at the front without any of them writing the list, and a
//! slot hit again soon after its move is not moved again. A hit on an older slot answers
//! [`Lookup::Stale`] and the caller moves it with [`Shard::touch`] under the write lock. A shard
//! of fewer than 32 slots is therefore an exact LRU; a larger one keeps a slot that is hit at
//! least once per 7/8 of the shard's turnover (an exact LRU: once per whole turnover).
//!
//! Invariants (each holds whenever the write lock is free):
//! 1. `index` maps each cached key to the position in `nodes` holding it; the occupied positions
//!    are exactly those on the list from `head` (most recent) to `tail` (least recent), linked
//!    both ways; `free` lists exactly the empty positions.
//! 2. Stamps strictly decrease from `head` to `tail`, and are below `clock`.
//! 3. `usage_bytes` is the sum of [`Slot::charge`] over the occupied positions, and
//!    `usage_bytes <= capacity_bytes`.
//! 4. `pages` and `entries` count the occupied positions of each kind.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use super::ENTRY_OVERHEAD_BYTES;

/// What a key names: a page of a table file, or an entry (one answer) under a key's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Page,
    Entry,
}

/// A cached thing: (namespace, table, page index or key hash) and which of the two it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    pub namespace: u64,
    pub table: u64,
    pub id: u64,
    pub kind: Kind,
}

impl Key {
    /// A 64-bit mix of every field (the MurmurHash3 finalizer over a product sum). The pool
    /// picks the shard from bits 40 and up, the shard's map its bucket from the low bits and its
    /// tag from the top 7, so the three never draw on the same bits.
    pub fn hash64(&self) -> u64 {
        let mut h = self.namespace.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ self.table.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ self.id.wrapping_mul(0x1656_67b1_9e37_79f9)
            ^ u64::from(self.kind == Kind::Entry);
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

/// A hasher that passes [`Key::hash64`] through (the key mixes itself once).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl BuildHasher for PassThrough {
    type Hasher = PassThrough;
    fn build_hasher(&self) -> PassThrough {
        PassThrough(0)
    }
}

/// One cached page or entry.
#[derive(Debug)]
pub(super) struct Slot {
    pub key: Key,
    pub bytes: Arc<[u8]>,
}

impl Slot {
    /// Bytes the slot counts against the capacity: a page its length, an entry its length and
    /// [`ENTRY_OVERHEAD_BYTES`].
    pub fn charge(&self) -> u64 {
        charge(self.key.kind, self.bytes.len())
    }
}

pub(super) fn charge(kind: Kind, len: usize) -> u64 {
    match kind {
        Kind::Page => len as u64,
        Kind::Entry => len as u64 + ENTRY_OVERHEAD_BYTES,
    }
}

/// No position (the end of the list).
const NIL: u32 = u32::MAX;

/// A slot on the LRU list.
#[derive(Debug)]
struct Node {
    slot: Slot,
    /// Towards the head (more recent), or `NIL`.
    prev: u32,
    /// Towards the tail (less recent), or `NIL`.
    next: u32,
    /// `clock` when it last went to the front.
    stamp: u64,
}

/// What a hit under the read lock found.
#[derive(Debug)]
pub(super) enum Lookup {
    /// Cached and recent: the bytes, with nothing written.
    Hit(Arc<[u8]>),
    /// Cached but far from the front: move it with [`Shard::touch`] under the write lock.
    Stale,
    Miss,
}

#[derive(Debug)]
pub(super) struct Shard {
    index: HashMap<Key, u32, PassThrough>,
    nodes: Vec<Option<Node>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    clock: u64,
    pub usage_bytes: u64,
    pub capacity_bytes: u64,
    pub pages: u64,
    pub entries: u64,
}

impl Shard {
    pub fn with_capacity(capacity_bytes: u64) -> Shard {
        Shard {
            index: HashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            clock: 0,
            usage_bytes: 0,
            capacity_bytes,
            pages: 0,
            entries: 0,
        }
    }

    fn node(&self, i: u32) -> Option<&Node> {
        self.nodes.get(i as usize)?.as_ref()
    }

    fn node_mut(&mut self, i: u32) -> Option<&mut Node> {
        self.nodes.get_mut(i as usize)?.as_mut()
    }

    /// Moves (stamps) within which a hit leaves a slot where it is.
    pub fn recent_window(&self) -> u64 {
        match self.index.len() as u64 {
            len @ 32.. => len / 8,
            _ => 0,
        }
    }

    /// The bytes under `key` when they are recent enough to need no move (read lock).
    pub fn lookup(&self, key: &Key) -> Lookup {
        let Some(node) = self.index.get(key).and_then(|&i| self.node(i)) else {
            return Lookup::Miss;
        };
        let moves_since = self.clock.saturating_sub(node.stamp + 1);
        if moves_since <= self.recent_window() {
            Lookup::Hit(Arc::clone(&node.slot.bytes))
        } else {
            Lookup::Stale
        }
    }

    /// The bytes under `key`, moving it to the front (write lock).
    pub fn touch(&mut self, key: &Key) -> Option<Arc<[u8]>> {
        let i = *self.index.get(key)?;
        self.unlink(i);
        self.push_front(i);
        self.node(i).map(|n| Arc::clone(&n.slot.bytes))
    }

    /// The bytes under `key`, leaving the order as it is (read lock).
    pub fn peek(&self, key: &Key) -> Option<Arc<[u8]>> {
        let node = self.node(*self.index.get(key)?)?;
        Some(Arc::clone(&node.slot.bytes))
    }

    /// Takes position `i` off the list (it stays occupied).
    fn unlink(&mut self, i: u32) {
        let Some(&Node { prev, next, .. }) = self.node(i) else {
            return;
        };
        match self.node_mut(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.node_mut(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    /// Puts occupied position `i` at the front with a fresh stamp.
    fn push_front(&mut self, i: u32) {
        let (head, stamp) = (self.head, self.clock);
        self.clock += 1;
        if let Some(node) = self.node_mut(i) {
            node.prev = NIL;
            node.next = head;
            node.stamp = stamp;
        }
        match self.node_mut(head) {
            Some(h) => h.prev = i,
            None => self.tail = i,
        }
        self.head = i;
    }

    /// Caches `bytes` under `key`, replacing what was there and evicting from the tail until it
    /// fits. Not cached when larger than the shard's capacity.
    pub fn insert(&mut self, key: Key, bytes: Arc<[u8]>) {
        self.remove(&key);
        let charge = charge(key.kind, bytes.len());
        if charge > self.capacity_bytes {
            return;
        }
        self.evict_for(charge);
        self.place(Slot { key, bytes });
    }

    /// Puts `slot` at the front in a free position (or a new one) without evicting.
    fn place(&mut self, slot: Slot) {
        let key = slot.key;
        let charge = slot.charge();
        let node = Node {
            slot,
            prev: NIL,
            next: NIL,
            stamp: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                if let Some(hole) = self.nodes.get_mut(i as usize) {
                    debug_assert!(hole.is_none(), "a free position is empty");
                    *hole = Some(node);
                }
                i
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_front(i);
        self.index.insert(key, i);
        self.usage_bytes += charge;
        match key.kind {
            Kind::Page => self.pages += 1,
            Kind::Entry => self.entries += 1,
        }
    }

    /// Drops what is under `key`, if anything.
    pub fn remove(&mut self, key: &Key) {
        if let Some(i) = self.index.get(key).copied() {
            self.take(i);
        }
    }

    /// Empties occupied position `i`, keeping the invariants; the slot that was there.
    fn take(&mut self, i: u32) -> Option<Slot> {
        self.unlink(i);
        let slot = self.nodes.get_mut(i as usize)?.take()?.slot;
        self.index.remove(&slot.key);
        self.free.push(i);
        self.usage_bytes -= slot.charge();
        match slot.key.kind {
            Kind::Page => self.pages -= 1,
            Kind::Entry => self.entries -= 1,
        }
        if self.index.is_empty() {
            // Nothing cached: give back the list's memory (after a shrink or a removal).
            *self = Shard::with_capacity(self.capacity_bytes);
        }
        Some(slot)
    }

    /// Drops every slot whose key `doomed` picks (a table's or a namespace's).
    pub fn remove_where(&mut self, doomed: impl Fn(&Key) -> bool) {
        for i in 0..self.nodes.len() as u32 {
            if self.node(i).is_some_and(|n| doomed(&n.slot.key)) {
                self.take(i);
            }
        }
    }

    /// Every cached slot, in no particular order.
    pub fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.nodes.iter().flatten().map(|n| &n.slot)
    }

    /// Takes every slot out, least recent first, leaving the shard empty with its capacity.
    pub fn drain(&mut self) -> Vec<Slot> {
        let mut slots = Vec::with_capacity(self.index.len());
        while let Some(slot) = self.take(self.tail) {
            slots.push(slot);
        }
        slots
    }

    /// Puts a slot [`Shard::drain`] took at the front, without evicting (the caller evicts down
    /// afterwards with [`Shard::set_capacity`]); restored least recent first, slots keep their
    /// order.
    pub fn restore(&mut self, slot: Slot) {
        if !self.index.contains_key(&slot.key) {
            self.place(slot);
        }
    }

    /// Makes the capacity `bytes`, evicting until the usage fits.
    pub fn set_capacity(&mut self, bytes: u64) {
        self.capacity_bytes = bytes;
        self.evict_for(0);
    }

    /// Evicts from the tail until `extra` more bytes fit within the capacity (or none is left).
    fn evict_for(&mut self, extra: u64) {
        while self.usage_bytes + extra > self.capacity_bytes && self.take(self.tail).is_some() {}
    }

    /// Checks invariants 1 to 4 (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let mut order = Vec::new();
        let (mut i, mut prev) = (self.head, NIL);
        while let Some(node) = self.node(i) {
            assert_eq!(node.prev, prev, "linked both ways");
            assert!(order.len() < self.nodes.len(), "the list has no cycle");
            order.push(node.stamp);
            (prev, i) = (i, node.next);
        }
        assert_eq!(self.tail, prev, "the tail ends the list");
        assert!(
            order.windows(2).all(|w| w.first() > w.get(1)),
            "stamps decrease"
        );
        assert!(
            order.first().is_none_or(|&s| s < self.clock),
            "stamps below the clock"
        );
        let occupied = self.slots().count();
        assert_eq!(occupied, order.len(), "every slot on the list");
        assert_eq!(occupied, self.index.len(), "one index entry per slot");
        assert_eq!(
            occupied + self.free.len(),
            self.nodes.len(),
            "free lists the holes"
        );
        for (k, &i) in &self.index {
            assert_eq!(
                self.node(i).map(|n| n.slot.key),
                Some(*k),
                "the index finds its key"
            );
        }
        let usage: u64 = self.slots().map(Slot::charge).sum();
        assert_eq!(usage, self.usage_bytes, "usage is the sum of the charges");
        assert!(
            self.usage_bytes <= self.capacity_bytes,
            "usage within capacity"
        );
        let pages = self.slots().filter(|s| s.key.kind == Kind::Page).count() as u64;
        assert_eq!((pages, occupied as u64 - pages), (self.pages, self.entries));
    }
}
