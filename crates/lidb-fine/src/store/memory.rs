//! The in-memory data of a FineStore: byte keys over a [`FineIndex`].
//!
//! A key's image (`lidb_data::keymap::image(key, 0)`, order-preserving: `a <= b` implies
//! `image(a) <= image(b)`) is the index key; the index value is the id of a *bucket* holding,
//! sorted, every full key with that image and its value. Distinct keys with equal images (for
//! example keys sharing their first 8 bytes) share a bucket and stay distinct, and walking the
//! index in image order and each bucket in key order yields keys in byte order.
//!
//! A bucket is a `Mutex` over a sorted `Vec` (most hold one key: a `BTreeMap` would allocate a
//! whole node for it). Buckets live in an append-only table of segments that double in size
//! ([`Table`]): an id finds its bucket without a lock, and the table hands out plain references
//! since a bucket, once made, lives as long as the store. A bucket that empties keeps its slot
//! and its image in the index (a later write of that image reuses it) but gives its `Vec` back.
//!
//! Threads: any. `create` serialises the creation of buckets, so an image never gets two.
//!
//! Lock order: `create`, then a bucket's lock (only the new, unshared one); a bucket's lock is
//! never held while taking `create`.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use lidb_data::keymap::image;

use crate::{Config, FineIndex};

/// A full key and its value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// Full keys of one image, sorted, with their values.
#[derive(Debug, Default)]
pub struct Bucket {
    entries: Vec<Entry>,
}

impl Bucket {
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.find(key).ok()?;
        self.entries.get(i).map(|(_, v)| v.as_ref())
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; the old value.
    pub fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) -> Option<Box<[u8]>> {
        let value = value.into_boxed_slice();
        match self.find(&key) {
            Ok(i) => self
                .entries
                .get_mut(i)
                .map(|e| std::mem::replace(&mut e.1, value)),
            Err(i) => {
                self.entries.insert(i, (key.into_boxed_slice(), value));
                None
            }
        }
    }

    /// Removes `key`; its value. An emptied bucket frees its entry array.
    pub fn remove(&mut self, key: &[u8]) -> Option<Box<[u8]>> {
        let i = self.find(key).ok()?;
        let (_, v) = self.entries.remove(i);
        if self.entries.is_empty() {
            self.entries = Vec::new();
        }
        Some(v)
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
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .take_while(move |(k, _)| match upper {
                Bound::Included(u) => *k <= u,
                Bound::Excluded(u) => *k < u,
                Bound::Unbounded => true,
            })
    }
}

/// The image of a byte key in the index.
pub fn key_image(key: &[u8]) -> u64 {
    image(key, 0)
}

/// Locks a mutex; a panic elsewhere while holding it (a failed test) does not hide the data.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Slots in the first segment of the table; segment `s` holds `FIRST_SEGMENT << s`.
const FIRST_SEGMENT: u64 = 1024;
/// Segments: room for `FIRST_SEGMENT * (2^SEGMENTS - 1)` buckets, beyond any memory.
const SEGMENTS: usize = 40;

/// The slots of one segment of the table.
type Segment = Box<[OnceLock<Mutex<Bucket>>]>;

/// The append-only bucket table: segment `s` holds ids `FIRST_SEGMENT * (2^s - 1)` up to the
/// next segment's first, allocated when the first of them is pushed. Reads take no lock; pushes
/// are serialised by the caller (`Memory::create`).
#[derive(Debug)]
struct Table {
    segments: [OnceLock<Segment>; SEGMENTS],
    len: AtomicU64,
}

impl Table {
    fn new() -> Table {
        Table {
            segments: std::array::from_fn(|_| OnceLock::new()),
            len: AtomicU64::new(0),
        }
    }

    /// The segment and the offset in it of `id`.
    fn place(id: u64) -> (usize, usize) {
        let s = (id / FIRST_SEGMENT + 1).ilog2();
        let first = FIRST_SEGMENT * ((1u64 << s) - 1);
        (s as usize, (id - first) as usize)
    }

    fn get(&self, id: u64) -> Option<&Mutex<Bucket>> {
        let (s, at) = Table::place(id);
        self.segments.get(s)?.get()?.get(at)?.get()
    }

    /// Appends `bucket`; its id. The caller holds the push lock.
    fn push(&self, bucket: Bucket) -> Option<(u64, &Mutex<Bucket>)> {
        let id = self.len.load(Ordering::Relaxed);
        let (s, at) = Table::place(id);
        let segment = self
            .segments
            .get(s)?
            .get_or_init(|| (0..FIRST_SEGMENT << s).map(|_| OnceLock::new()).collect());
        let slot = segment.get(at)?;
        let set = slot.set(Mutex::new(bucket));
        debug_assert!(set.is_ok(), "bucket {id} pushed twice");
        self.len.store(id + 1, Ordering::Relaxed);
        slot.get().map(|b| (id, b))
    }
}

#[derive(Debug)]
pub struct Memory {
    index: FineIndex,
    buckets: Table,
    create: Mutex<()>,
    /// Bytes of the keys and values held, kept by every insert and removal.
    data_bytes: AtomicU64,
}

impl Memory {
    /// Memory holding `entries` (sorted by key, keys distinct), bulk-loaded into the index.
    pub fn load(entries: Vec<(Vec<u8>, Vec<u8>)>, cfg: Config) -> crate::Result<Memory> {
        let buckets = Table::new();
        let mut trained: Vec<(u64, u64)> = Vec::new();
        let mut current: Option<(u64, Bucket)> = None;
        let close = |cur: Option<(u64, Bucket)>, trained: &mut Vec<(u64, u64)>| {
            if let Some((img, b)) = cur
                && let Some((id, _)) = buckets.push(b)
            {
                trained.push((img, id));
            }
        };
        let mut data_bytes = 0u64;
        for (k, v) in entries {
            data_bytes += (k.len() + v.len()) as u64;
            let img = key_image(&k);
            match &mut current {
                Some((cur, b)) if *cur == img => {
                    b.insert(k, v);
                }
                _ => {
                    close(current.take(), &mut trained);
                    let mut b = Bucket::default();
                    b.insert(k, v);
                    current = Some((img, b));
                }
            }
        }
        close(current.take(), &mut trained);
        let index = FineIndex::bulk_load(&trained, cfg)?;
        Ok(Memory {
            index,
            buckets,
            create: Mutex::new(()),
            data_bytes: AtomicU64::new(data_bytes),
        })
    }

    /// The index of images to bucket ids.
    pub fn index(&self) -> &FineIndex {
        &self.index
    }

    fn bucket_by_id(&self, id: u64) -> Option<&Mutex<Bucket>> {
        let b = self.buckets.get(id);
        debug_assert!(b.is_some(), "index value {id} names no bucket");
        b
    }

    /// The bucket of `key`'s image, if one was ever made.
    pub fn bucket(&self, key: &[u8]) -> Option<&Mutex<Bucket>> {
        self.bucket_by_id(self.index.get(key_image(key))?)
    }

    /// The bucket of `key`'s image, made (empty) if there is none.
    pub fn bucket_or_create(&self, key: &[u8]) -> &Mutex<Bucket> {
        let img = key_image(key);
        if let Some(b) = self.index.get(img).and_then(|id| self.bucket_by_id(id)) {
            return b;
        }
        let _one_creator = lock(&self.create);
        if let Some(b) = self.index.get(img).and_then(|id| self.bucket_by_id(id)) {
            return b;
        }
        let Some((id, b)) = self.buckets.push(Bucket::default()) else {
            // 2^50 buckets: memory runs out long before.
            panic!("the bucket table is full");
        };
        // Published after the bucket is in the table, so a reader finding the id finds it.
        self.index.insert(img, id);
        b
    }

    /// Bytes of the keys and values held now.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes.load(Ordering::Relaxed)
    }

    /// Counts an insert of `key` with `value` that replaced `old` (if any).
    pub fn account_insert(&self, key: &[u8], value: &[u8], old: Option<&[u8]>) {
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
    pub fn account_remove(&self, key: &[u8], old: Option<&[u8]>) {
        if let Some(o) = old {
            self.data_bytes
                .fetch_sub((key.len() + o.len()) as u64, Ordering::Relaxed);
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        lock(self.bucket(key)?).get(key).map(<[u8]>::to_vec)
    }

    /// Applies a write without logging it (recovery's replay).
    pub fn apply(&self, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(v) => {
                let old = lock(self.bucket_or_create(key)).insert(key.to_vec(), v.to_vec());
                self.account_insert(key, v, old.as_deref());
            }
            None => {
                if let Some(b) = self.bucket(key) {
                    let old = lock(b).remove(key);
                    self.account_remove(key, old.as_deref());
                }
            }
        }
    }

    /// Entries with `start <= key < end` (no end: to the last key) in key order, at most
    /// `limit`. Each bucket is read under its lock; keys written during the scan may or may not
    /// appear.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        const CHUNK: usize = 64;
        let mut out = Vec::new();
        if end.is_some_and(|e| e <= start) {
            return out;
        }
        let hi = end.map_or(u64::MAX, key_image);
        let mut lo = key_image(start);
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        let mut chunk = Vec::with_capacity(CHUNK);
        while out.len() < limit && lo <= hi {
            chunk.clear();
            self.index.range_into(lo, hi, CHUNK, &mut chunk);
            for &(_, id) in &chunk {
                let Some(b) = self.bucket_by_id(id) else {
                    continue;
                };
                let b = lock(b);
                for (k, v) in b.range(start, upper).take(limit - out.len()) {
                    out.push((k.to_vec(), v.to_vec()));
                }
                if out.len() >= limit {
                    return out;
                }
            }
            match chunk.last() {
                Some(&(img, _)) if chunk.len() == CHUNK && img < u64::MAX => lo = img + 1,
                _ => break,
            }
        }
        out
    }

    /// Every entry in key order (the caller keeps writers out).
    pub fn snapshot(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.scan(&[], None, usize::MAX)
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
            let got = t.push(Bucket::default()).map(|(id, _)| id);
            assert_eq!(got, Some(i));
        }
        assert!(t.get(4_999).is_some());
        assert!(t.get(5_000).is_none());
    }

    #[test]
    fn a_bucket_keeps_keys_sorted_and_distinct() {
        let mut b = Bucket::default();
        assert_eq!(b.insert(b"k2".to_vec(), b"2".to_vec()), None);
        assert_eq!(b.insert(b"k1".to_vec(), b"1".to_vec()), None);
        assert_eq!(b.insert(b"k3".to_vec(), b"3".to_vec()), None);
        assert_eq!(
            b.insert(b"k2".to_vec(), b"22".to_vec()).as_deref(),
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
        assert_eq!(b.entries.capacity(), 0, "an emptied bucket keeps its array");
    }
}
