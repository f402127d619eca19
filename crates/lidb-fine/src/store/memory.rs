//! The in-memory data of a FineStore: byte keys over layers of [`FineIndex`]es, each indexing
//! one 8-byte slice of the key (Masstree's layering: Mao, Kohler and Morris, "Cache craftiness
//! for fast multicore key-value storage", EuroSys 2012).
//!
//! A layer at depth `d` indexes its keys by their *image* there, `lidb_data::keymap::image(key,
//! d)`: the 8 bytes from byte `d`, big-endian, zero-padded. The index value is the id of a
//! *slot*, which holds either a bucket, every full key with that image (sorted, with its value),
//! or, once the bucket grew to [`SPLIT_AT`] keys that differ in the next slice, a layer at depth
//! `d + 8` over them. The root layer is at depth 0.
//!
//! Why layers: real key sets share long prefixes (`key:000000012345`, `user...`, zero-padded
//! decimal ids). With one image per key, every key sharing its first 8 bytes lands in one bucket,
//! a `Mutex` over a sorted `Vec`: redis-benchmark's keys all fall in one, and 24-byte YCSB keys
//! (4 or 5 zeros and the digits of a u64) in fewer than 2,000 buckets, more than 150 keys each on
//! average for 300K keys. A layer gives such a bucket a
//! learned index of its own over the next slice, so buckets stay small whatever the shape, and a
//! key shape without shared prefixes keeps its one index probe. Other choices and why not: an
//! image taken after the store's common prefix collapses again as soon as two prefixes mix
//! (`user:` and `session:`), and re-keying the whole store when the prefix changes would stop
//! every writer; an order-preserving compression (HOPE) has the same problem with its dictionary.
//!
//! Order: images are monotone (`a <= b` implies `image(a, d) <= image(b, d)` when `a` and `b`
//! share their zero-padded bytes before `d`, which every two keys of one layer do), so walking
//! each layer in image order, each bucket in key order and each sub-layer in place yields keys in
//! byte order. Distinct keys with equal images share a bucket and stay distinct.
//!
//! Depth is bounded by [`MAX_DEPTH`] bytes: keys that share longer prefixes stay in one bucket
//! (correct, only slower), so a walk costs at most `MAX_DEPTH / 8 + 1` index probes and building
//! layers recurses at most that deep.
//!
//! A bucket that empties keeps its slot and its image in its layer (a later write of that image
//! reuses it) but gives a spilled entry array back; a layer is never merged back into a bucket.
//!
//! Slots live in an append-only table of segments that double in size ([`Table`]): an id finds
//! its slot without a lock, and the table hands out plain references since a slot, once made,
//! lives as long as the store.
//!
//! Threads: any. A layer's `create` lock serialises the creation of its buckets, so an image
//! never gets two. A bucket turns into a layer under its own lock (the writer whose insert filled
//! it): the new layer is built complete, then published in the slot (a `OnceLock`), then the
//! bucket is marked `split` and emptied before its lock is released. So every entry is in exactly
//! one place at every instant: a walker that sees the layer finds the entries there, and one that
//! locks the bucket before the split sees them in the bucket, after it sees `split` and follows
//! the layer. Writes of one key are serialised by the lock of the bucket holding it, and a write
//! logs and applies itself under that lock (the store's ordering argument, `mod.rs`).
//!
//! Lock order: a bucket's lock, then a layer's `create`, then the table's push lock or the
//! layer index's own locks (the install of a rebuild, [`REBUILD_FROM_IMAGES`], whose training
//! holds none); the lock of a bucket that no other thread can reach yet may be taken under any
//! of them.

use std::ops::{Bound, Deref};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use lidb_data::keymap::image;
use smallvec::SmallVec;

use crate::{Config, FineIndex};

/// A full key and its value, in one allocation (the key's bytes, then the value's): a get finds
/// the key and copies the value from the same few cache lines, where a key and a value boxed
/// apart cost a cache miss each.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    bytes: Box<[u8]>,
    key_len: u32,
}

impl Entry {
    fn new(key: &[u8], value: &[u8]) -> Entry {
        let mut bytes = Vec::with_capacity(key.len() + value.len());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
        Entry {
            bytes: bytes.into_boxed_slice(),
            // Keys are at most a log record's payload (`format::fits`), far below 4 GiB.
            key_len: u32::try_from(key.len()).unwrap_or(u32::MAX),
        }
    }

    fn key(&self) -> &[u8] {
        self.parts().0
    }

    fn value(&self) -> &[u8] {
        self.parts().1
    }

    fn parts(&self) -> (&[u8], &[u8]) {
        self.bytes
            .split_at_checked(self.key_len as usize)
            .unwrap_or((&self.bytes, &[]))
    }
}

/// Bytes of key one layer indexes.
const SLICE: usize = 8;

/// Keys a bucket holds before it becomes a layer (if they differ in the next slice): small
/// enough that a bucket's binary search and `Vec` insert stay a few cache lines, large enough
/// that layers (a [`FineIndex`] each) stay few.
pub const SPLIT_AT: usize = 16;

/// Deepest layer, in key bytes: eight layers below the root.
pub const MAX_DEPTH: usize = 8 * SLICE;

/// Full keys of one image, sorted, with their values.
#[derive(Debug, Default)]
pub struct Bucket {
    /// Inline while the bucket holds one key, as most do (every bucket of 8-byte keys, and of
    /// longer keys once layers spread them): a get then finds the entry in its slot's cache line
    /// instead of following a pointer to an array.
    entries: SmallVec<[Entry; 1]>,
    /// The entries moved to the slot's layer; this bucket is empty for good.
    split: bool,
}

impl Bucket {
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.entries.binary_search_by(|e| e.key().cmp(key))
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.find(key).ok()?;
        self.entries.get(i).map(Entry::value)
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.find(key).is_ok()
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Sets `key` to `value`; the old entry (one allocation either way: the new entry).
    fn insert(&mut self, key: &[u8], value: &[u8]) -> Option<Entry> {
        let entry = Entry::new(key, value);
        match self.find(key) {
            Ok(i) => self.entries.get_mut(i).map(|e| std::mem::replace(e, entry)),
            Err(i) => {
                self.entries.insert(i, entry);
                None
            }
        }
    }

    /// Removes `key`; its entry. An emptied bucket frees its entry array.
    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let i = self.find(key).ok()?;
        let old = self.entries.remove(i);
        if self.entries.is_empty() {
            self.entries = SmallVec::new();
        }
        Some(old)
    }

    /// Entries with `start <= key` and below `upper`, in key order.
    pub fn range<'a>(
        &'a self,
        start: &[u8],
        upper: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let from = self.find(start).unwrap_or_else(|i| i);
        self.entries
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(Entry::parts)
            .take_while(move |(k, _)| match upper {
                Bound::Included(u) => *k <= u,
                Bound::Excluded(u) => *k < u,
                Bound::Unbounded => true,
            })
    }
}

/// Locks a mutex; a panic elsewhere while holding it (a failed test) does not hide the data.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One image's place in a layer: its bucket, or the layer its bucket became.
#[derive(Debug, Default)]
struct Slot {
    layer: OnceLock<Box<Layer>>,
    bucket: Mutex<Bucket>,
}

/// The index of one key slice: images at `depth` to slot ids.
#[derive(Debug)]
struct Layer {
    index: FineIndex,
    /// Bytes of key before this layer's slice (shared, zero-padded, by all its keys).
    depth: usize,
    /// Held while a bucket of this layer is created (the only writes of `index`), with the
    /// layer's growth.
    create: Mutex<Growth>,
}

/// Images in a layer's index, and how many it had when the index was last trained over all of
/// them.
#[derive(Debug, Default)]
struct Growth {
    images: u64,
    trained: u64,
    /// While a rebuild trains a copy of the index: the images created since it read them.
    pending: Option<Vec<(u64, u64)>>,
    /// Rebuilds of the index over all its images, their total and their longest time (µs).
    rebuilds: u64,
    rebuild_us: u64,
    longest_rebuild_us: u64,
    /// The longest a rebuild held the `create` lock to install its copy (µs).
    longest_install_us: u64,
}

/// A layer's index is rebuilt over all its images each time it holds twice the images it was
/// last trained over, and at least twice this many. A layer starts from the few keys of the
/// bucket it replaced and grows by inserts, which FINEdex keeps in level bins under its trained
/// keys, where a lookup costs a bin search after the model's: with redis-benchmark's keys (every
/// key in one second layer) 67,711 of 95,000 keys sat in bins. Doubling keeps the rebuilds'
/// cost proportional to the inserts (each image is trained about twice).
///
/// The rebuild runs beside the live index ([`Memory::rebuild`]): the creator of the image that
/// made it due trains a copy without any lock ([`FineIndex::trained_copy`]) while other writers
/// go on creating images, which the layer's `Growth::pending` keeps; then, under the `create`
/// lock, the copy takes those too and replaces the index ([`FineIndex::install`]). So a write
/// that creates an image waits for an install (the pending inserts and a publication), never for
/// a training, unless it made the rebuild due itself; reads never wait.
const REBUILD_FROM_IMAGES: u64 = 64;

/// Images created during a rebuild's training that its install inserts under the `create` lock;
/// with more, the rebuild inserts them into its copy without the lock first, at most
/// [`CATCH_UP_ROUNDS`] times.
const INSTALL_UNDER_LOCK: usize = 256;
const CATCH_UP_ROUNDS: usize = 8;

/// A locked bucket, ready for a write: what [`Memory::bucket`] and [`Memory::bucket_or_create`]
/// return. Reads go through `Deref`; writes through [`Locked::insert`] and [`Locked::remove`],
/// which keep the byte count and turn a full bucket into a layer.
#[derive(Debug)]
pub struct Locked<'a> {
    memory: &'a Memory,
    slot: &'a Slot,
    depth: usize,
    guard: MutexGuard<'a, Bucket>,
}

impl Deref for Locked<'_> {
    type Target = Bucket;
    fn deref(&self) -> &Bucket {
        &self.guard
    }
}

impl Locked<'_> {
    /// Sets `key` (which belongs to this bucket) to `value`; whether it replaced a value.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> bool {
        let old = self.guard.insert(key, value);
        self.memory
            .account_insert(key, value, old.as_ref().map(Entry::value));
        let n = self.guard.len();
        // Checked at each doubling from SPLIT_AT on: keys that do not differ in the next slice
        // (or sit at MAX_DEPTH) cost one look per doubling, not one per insert.
        if old.is_none() && n >= SPLIT_AT && n.is_power_of_two() {
            self.memory.split(self.slot, self.depth, &mut self.guard);
        }
        old.is_some()
    }

    /// Removes `key`; whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let old = self.guard.remove(key);
        self.memory
            .account_remove(key, old.as_ref().map(Entry::value));
        old.is_some()
    }
}

/// Slots in the first segment of the table; segment `s` holds `FIRST_SEGMENT << s`.
const FIRST_SEGMENT: u64 = 1024;
/// Segments: room for `FIRST_SEGMENT * (2^SEGMENTS - 1)` slots, beyond any memory.
const SEGMENTS: usize = 40;

/// The slots of one segment of the table.
type Segment = Box<[OnceLock<Slot>]>;

/// The append-only slot table: segment `s` holds ids `FIRST_SEGMENT * (2^s - 1)` up to the
/// next segment's first, allocated when the first of them is pushed. Reads take no lock; pushes
/// take the push lock.
#[derive(Debug)]
struct Table {
    segments: [OnceLock<Segment>; SEGMENTS],
    len: AtomicU64,
    push: Mutex<()>,
}

impl Table {
    fn new() -> Table {
        Table {
            segments: std::array::from_fn(|_| OnceLock::new()),
            len: AtomicU64::new(0),
            push: Mutex::new(()),
        }
    }

    /// The segment and the offset in it of `id`.
    fn place(id: u64) -> (usize, usize) {
        let s = (id / FIRST_SEGMENT + 1).ilog2();
        let first = FIRST_SEGMENT * ((1u64 << s) - 1);
        (s as usize, (id - first) as usize)
    }

    fn get(&self, id: u64) -> Option<&Slot> {
        let (s, at) = Table::place(id);
        self.segments.get(s)?.get()?.get(at)?.get()
    }

    /// Appends `slot`; its id.
    fn push(&self, slot: Slot) -> (u64, &Slot) {
        let _one = lock(&self.push);
        let id = self.len.load(Ordering::Relaxed);
        let (s, at) = Table::place(id);
        let Some(segment) = self.segments.get(s) else {
            // FIRST_SEGMENT * 2^40 slots: memory runs out long before.
            panic!("the slot table is full");
        };
        let segment =
            segment.get_or_init(|| (0..FIRST_SEGMENT << s).map(|_| OnceLock::new()).collect());
        let Some(cell) = segment.get(at) else {
            panic!("slot {id} outside its segment");
        };
        let set = cell.set(slot);
        debug_assert!(set.is_ok(), "slot {id} pushed twice");
        self.len.store(id + 1, Ordering::Relaxed);
        match cell.get() {
            Some(slot) => (id, slot),
            None => panic!("slot {id} vanished"),
        }
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }
}

/// How the keys spread over buckets and layers (walks every slot: for statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BucketStats {
    /// Buckets holding at least one key.
    pub buckets: u64,
    /// Keys held (in all buckets).
    pub keys: u64,
    /// Keys of the largest bucket.
    pub largest: u64,
    /// Layers, the root included.
    pub layers: u64,
    /// Layers on the longest path from the root (1: the root alone).
    pub deepest: u64,
    /// Heap bytes of the layers' indexes (`FineStats::heap_bytes` summed).
    pub index_heap_bytes: u64,
    /// Rebuilds of a layer's index over all its images ([`REBUILD_FROM_IMAGES`]), all layers.
    pub rebuilds: u64,
    /// Their total time, in microseconds.
    pub rebuild_us: u64,
    /// The longest of them, in microseconds: what the write that made it due waited.
    pub longest_rebuild_us: u64,
    /// The longest a rebuild held its layer's `create` lock, in microseconds: the longest
    /// another write creating a bucket in that layer waited for one (reads, and writes of
    /// existing buckets, never wait for a rebuild).
    pub longest_install_us: u64,
}

impl BucketStats {
    /// Counts the rebuilds of `layer`'s index (takes its `create` lock).
    fn add_rebuilds(&mut self, layer: &Layer) {
        let g = lock(&layer.create);
        self.rebuilds += g.rebuilds;
        self.rebuild_us += g.rebuild_us;
        self.longest_rebuild_us = self.longest_rebuild_us.max(g.longest_rebuild_us);
        self.longest_install_us = self.longest_install_us.max(g.longest_install_us);
    }

    /// Keys per non-empty bucket (0 with none).
    pub fn mean(&self) -> f64 {
        if self.buckets == 0 {
            0.0
        } else {
            self.keys as f64 / self.buckets as f64
        }
    }
}

impl std::fmt::Display for BucketStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} keys in {} buckets (mean {:.2}, largest {}), {} layers, {} deep, {} layer \
             rebuilds in {:.1} ms (longest {:.1} ms, holding other creators {:.2} ms at most)",
            self.keys,
            self.buckets,
            self.mean(),
            self.largest,
            self.layers,
            self.deepest,
            self.rebuilds,
            self.rebuild_us as f64 / 1e3,
            self.longest_rebuild_us as f64 / 1e3,
            self.longest_install_us as f64 / 1e3
        )
    }
}

#[derive(Debug)]
pub struct Memory {
    root: Layer,
    slots: Table,
    cfg: Config,
    /// Bytes of the keys and values held, kept by every insert and removal.
    data_bytes: AtomicU64,
}

impl Memory {
    /// Memory holding `entries` (sorted by key, keys distinct), bulk-loaded into the layers.
    pub fn load(entries: Vec<(Vec<u8>, Vec<u8>)>, cfg: Config) -> crate::Result<Memory> {
        let data_bytes = entries
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        let entries: Vec<Entry> = entries
            .into_iter()
            .map(|(k, v)| Entry::new(&k, &v))
            .collect();
        let empty = Layer {
            index: FineIndex::new(cfg.clone())?,
            depth: 0,
            create: Mutex::default(),
        };
        let mut memory = Memory {
            root: empty,
            slots: Table::new(),
            cfg,
            data_bytes: AtomicU64::new(data_bytes),
        };
        memory.root = memory.build(entries, 0).map_err(|(e, _)| e)?;
        Ok(memory)
    }

    /// A layer at `depth` over `entries` (sorted, distinct, sharing their zero-padded bytes
    /// before `depth`): one slot per image, and for each image with [`SPLIT_AT`] keys or more
    /// that differ in the next slice, a layer of its own. Nothing built is reachable until the
    /// caller publishes the layer. The entries come back with the error if the index cannot be
    /// built (which a validated configuration and at most 2^32 - 1 images rule out).
    fn build(
        &self,
        entries: Vec<Entry>,
        depth: usize,
    ) -> Result<Layer, (crate::FineError, Vec<Entry>)> {
        // Images and group sizes first, so a failure hands the entries back whole.
        let mut groups: Vec<(u64, usize)> = Vec::new();
        for e in &entries {
            let img = image(e.key(), depth);
            match groups.last_mut() {
                Some((last, n)) if *last == img => *n += 1,
                _ => groups.push((img, 1)),
            }
        }
        let slots: Vec<(u64, &Slot)> = groups
            .iter()
            .map(|_| self.slots.push(Slot::default()))
            .collect();
        let trained: Vec<(u64, u64)> = groups
            .iter()
            .zip(&slots)
            .map(|(&(img, _), &(id, _))| (img, id))
            .collect();
        let index = match FineIndex::bulk_load(&trained, self.cfg.clone()) {
            Ok(index) => index,
            // The pushed slots stay empty and unreachable.
            Err(e) => return Err((e, entries)),
        };
        let mut entries = entries.into_iter();
        for (&(_, n), &(_, slot)) in groups.iter().zip(&slots) {
            let group: Vec<Entry> = entries.by_ref().take(n).collect();
            let mut bucket = lock(&slot.bucket);
            if depth + SLICE <= MAX_DEPTH && n >= SPLIT_AT && differ_after(&group, depth) {
                match self.build(group, depth + SLICE) {
                    Ok(layer) => {
                        let _ = slot.layer.set(Box::new(layer));
                        bucket.split = true;
                    }
                    Err((_, group)) => bucket.entries = group.into_iter().collect(),
                }
            } else {
                bucket.entries = group.into_iter().collect();
            }
        }
        let images = groups.len() as u64;
        Ok(Layer {
            index,
            depth,
            create: Mutex::new(Growth {
                images,
                trained: images,
                ..Growth::default()
            }),
        })
    }

    /// Turns the full bucket of `slot` (at `depth`, locked as `bucket`) into a layer over its
    /// keys, if they differ in the next slice and the next layer is not below [`MAX_DEPTH`].
    fn split(&self, slot: &Slot, depth: usize, bucket: &mut MutexGuard<'_, Bucket>) {
        if depth + SLICE > MAX_DEPTH || !differ_after(&bucket.entries, depth) {
            return;
        }
        let entries = std::mem::take(&mut bucket.entries).into_vec();
        match self.build(entries, depth + SLICE) {
            Ok(layer) => {
                // Published before `split`, both under the bucket's lock (module docs).
                let set = slot.layer.set(Box::new(layer));
                debug_assert!(set.is_ok(), "a bucket split twice");
                bucket.split = true;
            }
            Err((_, entries)) => bucket.entries = entries.into_iter().collect(),
        }
    }

    fn slot(&self, id: u64) -> Option<&Slot> {
        let s = self.slots.get(id);
        debug_assert!(s.is_some(), "index value {id} names no slot");
        s
    }

    /// The bucket of `key`, locked, if one was ever made (`create`: made, empty, if not).
    fn walk(&self, key: &[u8], create: bool) -> Option<Locked<'_>> {
        let mut layer = &self.root;
        loop {
            let img = image(key, layer.depth);
            let slot = match self.index_get(layer, img) {
                Some(slot) => slot,
                None if create => self.create(layer, img),
                None => return None,
            };
            if let Some(sub) = slot.layer.get() {
                layer = sub;
                continue;
            }
            let guard = lock(&slot.bucket);
            if guard.split {
                // It split after the look above; the layer was published before `split`.
                layer = slot.layer.get()?;
                continue;
            }
            return Some(Locked {
                memory: self,
                slot,
                depth: layer.depth,
                guard,
            });
        }
    }

    fn index_get(&self, layer: &Layer, img: u64) -> Option<&Slot> {
        self.slot(layer.index.get(img)?)
    }

    /// The slot of `img` in `layer`, made with an empty bucket if there is none.
    fn create(&self, layer: &Layer, img: u64) -> &Slot {
        let mut growth = lock(&layer.create);
        if let Some(slot) = self.index_get(layer, img) {
            return slot;
        }
        let (id, slot) = self.slots.push(Slot::default());
        // Published after the slot is in the table, so a reader finding the id finds it.
        layer.index.insert(img, id);
        growth.images += 1;
        if let Some(pending) = growth.pending.as_mut() {
            pending.push((img, id));
        }
        let due = growth.pending.is_none()
            && growth.images >= 2 * growth.trained.max(REBUILD_FROM_IMAGES);
        if due {
            growth.pending = Some(Vec::new());
        }
        drop(growth);
        if due {
            self.rebuild(layer);
        }
        slot
    }

    /// Rebuilds `layer`'s index over all its images beside the live one
    /// ([`REBUILD_FROM_IMAGES`]); the caller made `Growth::pending` `Some` under the `create`
    /// lock and holds no lock now.
    fn rebuild(&self, layer: &Layer) {
        let started = std::time::Instant::now();
        let (copy, trained) = layer.index.trained_copy();
        let mut growth = lock(&layer.create);
        // Images created during the training go into the copy without the lock while they are
        // many (the copy is this thread's alone), so the install holds it for a few at most.
        for _ in 0..CATCH_UP_ROUNDS {
            let pending = growth.pending.replace(Vec::new()).unwrap_or_default();
            if pending.len() <= INSTALL_UNDER_LOCK {
                growth.pending = Some(pending);
                break;
            }
            drop(growth);
            for &(img, id) in &pending {
                copy.insert(img, id);
            }
            growth = lock(&layer.create);
        }
        let installing = std::time::Instant::now();
        let pending = growth.pending.take().unwrap_or_default();
        layer.index.install(copy, &pending);
        growth.trained = trained;
        let install_us = installing.elapsed().as_micros() as u64;
        let us = started.elapsed().as_micros() as u64;
        growth.rebuilds += 1;
        growth.rebuild_us += us;
        growth.longest_rebuild_us = growth.longest_rebuild_us.max(us);
        growth.longest_install_us = growth.longest_install_us.max(install_us);
    }

    /// The bucket of `key`, locked, if one was ever made.
    pub fn bucket(&self, key: &[u8]) -> Option<Locked<'_>> {
        self.walk(key, false)
    }

    /// The bucket of `key`, locked, made (empty) if there is none.
    pub fn bucket_or_create(&self, key: &[u8]) -> Locked<'_> {
        match self.walk(key, true) {
            Some(b) => b,
            // A walk that may create always ends at a bucket (a split publishes its layer
            // before marking the bucket).
            None => panic!("no bucket for a key after creating it"),
        }
    }

    /// How the keys spread over buckets and layers (locks each bucket in turn).
    pub fn bucket_stats(&self) -> BucketStats {
        let mut s = BucketStats {
            layers: 1,
            deepest: 1,
            index_heap_bytes: self.root.index.stats().heap_bytes,
            ..BucketStats::default()
        };
        s.add_rebuilds(&self.root);
        for id in 0..self.slots.len() {
            let Some(slot) = self.slots.get(id) else {
                continue;
            };
            if let Some(layer) = slot.layer.get() {
                s.layers += 1;
                s.deepest = s.deepest.max((layer.depth / SLICE) as u64 + 1);
                s.index_heap_bytes += layer.index.stats().heap_bytes;
                s.add_rebuilds(layer);
                continue;
            }
            let n = lock(&slot.bucket).len() as u64;
            if n > 0 {
                s.buckets += 1;
                s.keys += n;
                s.largest = s.largest.max(n);
            }
        }
        s
    }

    /// The root layer's index (images of the first 8 bytes to slot ids).
    pub fn index(&self) -> &FineIndex {
        &self.root.index
    }

    /// Bytes of the keys and values held now.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes.load(Ordering::Relaxed)
    }

    /// Counts an insert of `key` with `value` that replaced `old` (if any).
    fn account_insert(&self, key: &[u8], value: &[u8], old: Option<&[u8]>) {
        match old {
            None => self
                .data_bytes
                .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed),
            Some(o) if o.len() <= value.len() => self
                .data_bytes
                .fetch_add((value.len() - o.len()) as u64, Ordering::Relaxed),
            Some(o) => self
                .data_bytes
                .fetch_sub((o.len() - value.len()) as u64, Ordering::Relaxed),
        };
    }

    /// Counts the removal of `key`, whose value was `old` (nothing if it was absent).
    fn account_remove(&self, key: &[u8], old: Option<&[u8]>) {
        if let Some(o) = old {
            self.data_bytes
                .fetch_sub((key.len() + o.len()) as u64, Ordering::Relaxed);
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.bucket(key)?.get(key).map(<[u8]>::to_vec)
    }

    /// Applies a write without logging it (recovery's replay).
    pub fn apply(&self, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(v) => {
                self.bucket_or_create(key).insert(key, v);
            }
            None => {
                if let Some(mut b) = self.bucket(key) {
                    b.remove(key);
                }
            }
        }
    }

    /// Entries with `start <= key < end` (no end: to the last key) in key order, at most
    /// `limit`. Each bucket is read under its lock; keys written during the scan may or may not
    /// appear.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        if end.is_some_and(|e| e <= start) || limit == 0 {
            return out;
        }
        let bounds = Bounds {
            start,
            end,
            upper: end.map_or(Bound::Unbounded, Bound::Excluded),
            limit,
        };
        self.scan_layer(&self.root, &bounds, true, true, &mut out);
        out
    }

    /// Appends to `out` the entries of `layer` within `b`, in key order, until `out` holds
    /// `b.limit`; whether it does. `start_tight` / `end_tight`: the start / end key shares this
    /// layer's bytes before its slice, so its image here bounds the scan (otherwise every key of
    /// the layer is above the start / below the end, as the images that led here show).
    fn scan_layer(
        &self,
        layer: &Layer,
        b: &Bounds<'_>,
        start_tight: bool,
        end_tight: bool,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> bool {
        const CHUNK: usize = 64;
        let lo_img = if start_tight {
            image(b.start, layer.depth)
        } else {
            0
        };
        let hi_img = match b.end {
            Some(e) if end_tight => image(e, layer.depth),
            _ => u64::MAX,
        };
        let mut lo = lo_img;
        let mut chunk = Vec::with_capacity(CHUNK);
        while lo <= hi_img {
            chunk.clear();
            layer.index.range_into(lo, hi_img, CHUNK, &mut chunk);
            for &(img, id) in &chunk {
                let Some(slot) = self.slot(id) else {
                    continue;
                };
                let (st, et) = (start_tight && img == lo_img, end_tight && img == hi_img);
                let full = match slot.layer.get() {
                    Some(sub) => self.scan_layer(sub, b, st, et, out),
                    None => {
                        let bucket = lock(&slot.bucket);
                        if bucket.split {
                            drop(bucket);
                            match slot.layer.get() {
                                Some(sub) => self.scan_layer(sub, b, st, et, out),
                                None => false,
                            }
                        } else {
                            for (k, v) in bucket.range(b.start, b.upper).take(b.limit - out.len()) {
                                out.push((k.to_vec(), v.to_vec()));
                            }
                            out.len() >= b.limit
                        }
                    }
                };
                if full {
                    return true;
                }
            }
            match chunk.last() {
                Some(&(img, _)) if chunk.len() == CHUNK && img < u64::MAX => lo = img + 1,
                _ => break,
            }
        }
        false
    }

    /// Every entry in key order (the caller keeps writers out).
    pub fn snapshot(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.scan(&[], None, usize::MAX)
    }
}

/// The bounds of one scan.
struct Bounds<'a> {
    start: &'a [u8],
    end: Option<&'a [u8]>,
    upper: Bound<&'a [u8]>,
    limit: usize,
}

/// Whether `entries` (sorted, sharing their bytes before `depth`) differ in the slice after
/// `depth`'s: their first and last images there differ (images are monotone).
fn differ_after(entries: &[Entry], depth: usize) -> bool {
    let next = depth + SLICE;
    match (entries.first(), entries.last()) {
        (Some(a), Some(z)) => image(a.key(), next) != image(z.key(), next),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_places_ids_in_doubling_segments() {
        assert_eq!(Table::place(0), (0, 0));
        assert_eq!(Table::place(1023), (0, 1023));
        assert_eq!(Table::place(1024), (1, 0));
        assert_eq!(Table::place(3071), (1, 2047));
        assert_eq!(Table::place(3072), (2, 0));
        let t = Table::new();
        for i in 0..5_000u64 {
            assert_eq!(t.push(Slot::default()).0, i);
        }
        assert!(t.get(4_999).is_some());
        assert!(t.get(5_000).is_none());
    }

    /// redis-benchmark's key shape: every key in one second layer, created key by key. The
    /// layer's index is rebuilt as it doubles, so most of its images are trained keys, not level
    /// bin entries, and every key is found, also by readers running during the rebuilds.
    #[test]
    fn a_growing_layer_trains_its_images() {
        let memory = Memory::load(Vec::new(), Config::default()).unwrap_or_else(|e| panic!("{e}"));
        let key = |i: u64| format!("key:{:012}", (i * 7_919) % 100_000).into_bytes();
        const KEYS: u64 = 20_000;
        let done = std::sync::atomic::AtomicBool::new(false);
        for i in 0..64 {
            memory.bucket_or_create(&key(i)).insert(&key(i), b"v");
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut rounds = 0u64;
                while !done.load(Ordering::Relaxed) || rounds == 0 {
                    for i in 0..64 {
                        assert_eq!(memory.get(&key(i)).as_deref(), Some(&b"v"[..]), "key {i}");
                    }
                    rounds += 1;
                }
            });
            for i in 64..KEYS {
                memory.bucket_or_create(&key(i)).insert(&key(i), b"v");
            }
            done.store(true, Ordering::Relaxed);
        });
        let layer = memory
            .slot(memory.root.index.get(image(&key(0), 0)).unwrap_or(u64::MAX))
            .and_then(|slot| slot.layer.get())
            .unwrap_or_else(|| panic!("no second layer"));
        let stats = layer.index.stats();
        let growth = lock(&layer.create);
        assert_eq!(growth.images, KEYS);
        assert!(growth.trained * 2 > growth.images, "{growth:?}");
        // Built from the 16 keys of the bucket it replaced, the layer is rebuilt at 128 images
        // and at each doubling after: 128 to 16,384, eight times; the statistics count them.
        assert_eq!(growth.rebuilds, 8, "{growth:?}");
        drop(growth);
        let counted = memory.bucket_stats();
        assert_eq!(counted.rebuilds, 8, "{counted}");
        assert!(
            counted.longest_rebuild_us <= counted.rebuild_us,
            "{counted}"
        );
        assert!(
            stats.bin_entries * 2 < KEYS,
            "{} of {KEYS} images in level bins",
            stats.bin_entries
        );
        for i in 0..KEYS {
            assert_eq!(memory.get(&key(i)).as_deref(), Some(&b"v"[..]), "key {i}");
        }
    }

    /// Rebuilds run beside the live index while other writers create images in the same layer:
    /// every image created during a rebuild's training reaches the installed index (through
    /// `pending`), and every finished write stays readable throughout.
    #[test]
    fn images_created_during_a_rebuild_reach_the_new_index() {
        const WRITERS: u64 = 4;
        const PER_WRITER: u64 = 25_000;
        let memory = memory();
        // 8-byte keys: every image is in the root layer.
        let key =
            |t: u64, i: u64| ((i * WRITERS + t).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
        let finished: Vec<AtomicU64> = (0..WRITERS).map(|_| AtomicU64::new(0)).collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|t| {
                    let (m, finished) = (&memory, &finished);
                    s.spawn(move || {
                        for i in 0..PER_WRITER {
                            m.apply(&key(t, i), Some(b"v"));
                            if let Some(f) = finished.get(t as usize) {
                                f.store(i + 1, Ordering::Release);
                            }
                        }
                    })
                })
                .collect();
            let (m, finished, done) = (&memory, &finished, &done);
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(1);
                while !done.load(Ordering::Acquire) {
                    let t = rng.gen_range(0..WRITERS);
                    let n = finished
                        .get(t as usize)
                        .map_or(0, |f| f.load(Ordering::Acquire));
                    if n > 0 {
                        let i = rng.gen_range(0..n);
                        assert!(m.get(&key(t, i)).is_some(), "writer {t} key {i} lost");
                    }
                }
            });
            for w in writers {
                assert!(w.join().is_ok());
            }
            done.store(true, Ordering::Release);
        });
        let growth = lock(&memory.root.create);
        assert_eq!(growth.images, WRITERS * PER_WRITER);
        assert!(growth.pending.is_none(), "a rebuild never installed");
        assert!(growth.rebuilds >= 8, "{growth:?}");
        assert!(growth.trained * 2 > growth.images, "{growth:?}");
        drop(growth);
        for t in 0..WRITERS {
            for i in 0..PER_WRITER {
                assert!(memory.get(&key(t, i)).is_some(), "writer {t} key {i} lost");
                assert!(memory.root.index.get(image(&key(t, i), 0)).is_some());
            }
        }
    }

    #[test]
    fn a_bucket_keeps_keys_sorted_and_distinct() {
        let mut b = Bucket::default();
        assert_eq!(b.insert(b"k2", b"2"), None);
        assert_eq!(b.insert(b"k1", b"1"), None);
        assert_eq!(b.insert(b"k3", b"3"), None);
        assert_eq!(
            b.insert(b"k2", b"22").as_ref().map(Entry::value),
            Some(&b"2"[..])
        );
        assert_eq!(b.get(b"k2"), Some(&b"22"[..]));
        let all: Vec<_> = b.range(b"k1", Bound::Excluded(b"k3")).collect();
        assert_eq!(all, vec![(&b"k1"[..], &b"1"[..]), (&b"k2"[..], &b"22"[..])]);
        let from: Vec<_> = b.range(b"k15", Bound::Unbounded).map(|e| e.0).collect();
        assert_eq!(from, vec![&b"k2"[..], &b"k3"[..]]);
        for k in [&b"k1"[..], b"k2", b"k3"] {
            assert!(b.remove(k).is_some());
        }
        assert!(!b.contains_key(b"k1"));
        assert!(!b.entries.spilled(), "an emptied bucket keeps its array");
    }

    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn memory() -> Memory {
        Memory::load(Vec::new(), Config::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The key shapes that collapse a single 8-byte image: redis-benchmark's, 24-byte YCSB
    /// keys (zero-padded decimal), two prefixes mixed, keys differing only in length or in
    /// trailing zero bytes, and keys sharing more than `MAX_DEPTH` bytes.
    fn shaped_key(rng: &mut ChaCha8Rng, space: u64) -> Vec<u8> {
        let n = rng.gen_range(0..space);
        match rng.gen_range(0..7) {
            0 => format!("key:{n:012}").into_bytes(),
            1 => format!(
                "{:024}",
                n.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 10u64.pow(19)
            )
            .into_bytes(),
            2 => format!("user:{n}").into_bytes(),
            3 => format!("session:{n:08}").into_bytes(),
            4 => {
                let mut k = b"pad".to_vec();
                k.extend(std::iter::repeat_n(0u8, (n % 20) as usize));
                k
            }
            5 => {
                let mut k = vec![b'p'; MAX_DEPTH + 16];
                k.extend_from_slice(format!("{n}").as_bytes());
                k
            }
            _ => n.to_be_bytes().to_vec(),
        }
    }

    fn scan_all(m: &Memory) -> Vec<(Vec<u8>, Vec<u8>)> {
        m.scan(&[], None, usize::MAX)
    }

    fn model_scan(
        model: &BTreeMap<Vec<u8>, Vec<u8>>,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        model
            .range(start.to_vec()..)
            .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn model_based_over_key_shapes_that_share_prefixes() {
        for seed in 0..6u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let m = memory();
            let mut model = BTreeMap::new();
            for op in 0..6_000u32 {
                let key = shaped_key(&mut rng, 3_000);
                if rng.gen_bool(0.8) {
                    let v = op.to_le_bytes().to_vec();
                    m.apply(&key, Some(&v));
                    model.insert(key, v);
                } else {
                    m.apply(&key, None);
                    model.remove(&key);
                }
                if op % 500 == 0 {
                    let a = shaped_key(&mut rng, 3_000);
                    let z = shaped_key(&mut rng, 3_000);
                    let end = rng.gen_bool(0.8).then_some(z.as_slice());
                    let limit = rng.gen_range(1..400);
                    assert_eq!(
                        m.scan(&a, end, limit),
                        model_scan(&model, &a, end, limit),
                        "seed {seed} op {op}: scan from {a:?} to {end:?}"
                    );
                }
            }
            for (k, v) in &model {
                assert_eq!(m.get(k).as_ref(), Some(v), "seed {seed}: {k:?}");
            }
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(scan_all(&m), want, "seed {seed}: full scan");
            let bytes: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
            assert_eq!(m.data_bytes(), bytes as u64, "seed {seed}");
            // The same data bulk-loaded reads the same.
            let loaded =
                Memory::load(want.clone(), Config::default()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(scan_all(&loaded), want, "seed {seed}: loaded");
            let s = m.bucket_stats();
            assert!(s.layers > 1, "seed {seed}: {s}");
            assert_eq!(s.keys, model.len() as u64, "seed {seed}: {s}");
        }
    }

    /// Buckets stay small for every common shape; only keys that share more than `MAX_DEPTH`
    /// bytes may fill one.
    #[test]
    fn prefixed_keys_spread_over_small_buckets() {
        type Shape = (&'static str, fn(u64) -> Vec<u8>);
        let shapes: [Shape; 4] = [
            ("redis-benchmark", |n| format!("key:{n:012}").into_bytes()),
            ("ycsb 24 bytes", |n| {
                format!(
                    "{:024}",
                    n.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 10u64.pow(19)
                )
                .into_bytes()
            }),
            ("user and session", |n| {
                if n % 2 == 0 {
                    format!("user:{n:010}").into_bytes()
                } else {
                    format!("session:{n:010}").into_bytes()
                }
            }),
            ("8 bytes", |n| {
                n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes().to_vec()
            }),
        ];
        for (name, key) in shapes {
            let m = memory();
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let mut keys: Vec<Vec<u8>> = (0..20_000u64).map(key).collect();
            for i in (1..keys.len()).rev() {
                keys.swap(i, rng.gen_range(0..=i));
            }
            for k in &keys {
                m.apply(k, Some(b"v"));
            }
            let s = m.bucket_stats();
            assert_eq!(s.keys, 20_000, "{name}: {s}");
            assert!(s.largest < SPLIT_AT as u64, "{name}: {s}");
            keys.sort();
            let loaded: Vec<(Vec<u8>, Vec<u8>)> =
                keys.iter().map(|k| (k.clone(), b"v".to_vec())).collect();
            let l =
                Memory::load(loaded.clone(), Config::default()).unwrap_or_else(|e| panic!("{e}"));
            let ls = l.bucket_stats();
            assert!(ls.largest < SPLIT_AT as u64, "{name} loaded: {ls}");
            assert_eq!(scan_all(&m), loaded, "{name}");
            assert_eq!(scan_all(&l), loaded, "{name} loaded");
        }
        // Layers stop at MAX_DEPTH: keys that differ in one bit of every slice split at each
        // depth into two, down to buckets at MAX_DEPTH that no longer split.
        let m = memory();
        let bits = |n: u32| -> Vec<u8> {
            (0..13)
                .flat_map(|j| {
                    let mut slice = vec![b'x'; SLICE - 1];
                    slice.push(b'0' + ((n >> j) & 1) as u8);
                    slice
                })
                .collect()
        };
        for n in 0..1u32 << 13 {
            m.apply(&bits(n), Some(b"v"));
        }
        let s = m.bucket_stats();
        let deepest = (MAX_DEPTH / SLICE) as u64 + 1;
        assert_eq!(s.deepest, deepest, "{s}");
        assert_eq!(s.largest, (1u64 << 13) >> deepest, "{s}");
        assert_eq!(m.get(&bits(4242)).as_deref(), Some(&b"v"[..]));
        assert_eq!(scan_all(&m).len(), 1 << 13);
    }

    /// Writers fill buckets until they split while readers and scanners run: no entry is lost
    /// or seen twice, scans stay sorted.
    #[test]
    fn buckets_split_under_concurrent_readers_and_writers() {
        let m = memory();
        let key = |t: u64, i: u64| format!("key:{:012}", i * 4 + t).into_bytes();
        let per_thread = 3_000u64;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let m = &m;
                s.spawn(move || {
                    for i in 0..per_thread {
                        m.apply(&key(t, i), Some(&i.to_le_bytes()));
                        // A key written is readable at once by its writer.
                        assert_eq!(m.get(&key(t, i)), Some(i.to_le_bytes().to_vec()));
                    }
                });
            }
            let m = &m;
            s.spawn(move || {
                for _ in 0..200 {
                    let all = m.scan(b"key:", None, usize::MAX);
                    assert!(all.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)));
                }
            });
        });
        let all = scan_all(&m);
        assert_eq!(all.len() as u64, 4 * per_thread);
        for t in 0..4 {
            for i in 0..per_thread {
                assert_eq!(m.get(&key(t, i)), Some(i.to_le_bytes().to_vec()));
            }
        }
        assert!(m.bucket_stats().largest < SPLIT_AT as u64);
    }

    /// The interleaving the concurrent test can only hope to hit: a writer found the slot
    /// without a layer and waits on the bucket's lock while the holder's insert splits the
    /// bucket. Once in, it must see `split` and follow the layer, or its write would land in the
    /// emptied bucket, where no walk looks any more.
    #[test]
    fn a_writer_waiting_on_a_bucket_that_splits_follows_the_layer() {
        let m = memory();
        let key = |n: usize| format!("key:{n:012}").into_bytes();
        m.apply(&key(0), Some(b"0"));
        let mut held = m.bucket_or_create(&key(1));
        std::thread::scope(|s| {
            let waiter = s.spawn(|| m.apply(&key(999), Some(b"w")));
            // Give the waiter time to pass the layer check and block on the lock.
            std::thread::sleep(std::time::Duration::from_millis(200));
            for n in 1..SPLIT_AT {
                held.insert(&key(n), b"h");
            }
            assert!(
                held.guard.split,
                "the bucket did not split at {SPLIT_AT} keys"
            );
            drop(held);
            assert!(waiter.join().is_ok());
        });
        assert_eq!(m.get(&key(999)).as_deref(), Some(&b"w"[..]));
        assert_eq!(scan_all(&m).len(), SPLIT_AT + 1);
        assert!(m.bucket_stats().layers > 1);
    }
}
