//! A bucket of FineStore: the full keys of one index image, sorted, with their values, behind a
//! slot that readers load without writing anything other readers write.
//!
//! A [`BucketSlot`] publishes its [`Bucket`] through an `ArcSwap`: a reader loads it into a guard
//! held in a slot of its own thread (no lock, no shared reference count) and copies what it needs
//! out. A writer takes the slot's writer mutex, builds the next bucket from the current one and
//! publishes it (copy on write). The entries are `Arc`s, so the copy clones pointers, not keys
//! and values; most buckets hold one key.
//!
//! Threads: any. Invariants:
//! 1. Only the holder of `writer` stores to `current`, so no write is lost to another.
//! 2. A bucket once published is never changed; a reader's guard keeps it alive.
//! 3. A write is visible to every read that starts after the writer's store returned (the
//!    store and the loads are `SeqCst`), and never in part: a read sees the old bucket or the
//!    new one.
//!
//! Lock order: a bucket's writer mutex is taken after the store's `files` and before the
//! logger's state (see `store/mod.rs`); readers take nothing.

use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::{ArcSwap, Guard};

/// A full key and its value.
pub type Entry = (Box<[u8]>, Box<[u8]>);

/// Full keys of one image, sorted, with their values.
#[derive(Debug, Default, Clone)]
pub struct Bucket {
    entries: Vec<Arc<Entry>>,
}

impl Bucket {
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.entries.binary_search_by(|e| e.0.as_ref().cmp(key))
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.find(key).ok()?;
        self.entries.get(i).map(|e| e.1.as_ref())
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; the old entry.
    pub fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) -> Option<Arc<Entry>> {
        let entry = Arc::new((key.into_boxed_slice(), value.into_boxed_slice()));
        match self.find(&entry.0) {
            Ok(i) => self.entries.get_mut(i).map(|e| std::mem::replace(e, entry)),
            Err(i) => {
                self.entries.insert(i, entry);
                None
            }
        }
    }

    /// Removes `key`; its entry. An emptied bucket frees its entry array.
    pub fn remove(&mut self, key: &[u8]) -> Option<Arc<Entry>> {
        let i = self.find(key).ok()?;
        let e = self.entries.remove(i);
        if self.entries.is_empty() {
            self.entries = Vec::new();
        }
        Some(e)
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
            .map(|e| (e.0.as_ref(), e.1.as_ref()))
            .take_while(move |(k, _)| match upper {
                Bound::Included(u) => *k <= u,
                Bound::Excluded(u) => *k < u,
                Bound::Unbounded => true,
            })
    }

    /// Capacity of the entry array (a test checks that an emptied bucket gives it back).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }
}

/// A published bucket and the mutex of its writers (see the module documentation).
#[derive(Debug)]
pub struct BucketSlot {
    writer: Mutex<()>,
    current: ArcSwap<Bucket>,
}

impl BucketSlot {
    pub fn new(bucket: Bucket) -> BucketSlot {
        BucketSlot {
            writer: Mutex::new(()),
            current: ArcSwap::from_pointee(bucket),
        }
    }

    /// The bucket now, for a short read (hold the guard briefly).
    pub fn read(&self) -> Guard<Arc<Bucket>> {
        self.current.load()
    }

    /// Takes the writers' mutex: changes through the guard are published one by one.
    pub fn write(&self) -> BucketWrite<'_> {
        // A writer that panicked published whole buckets only: nothing is half-written.
        let guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        BucketWrite {
            slot: self,
            _guard: guard,
        }
    }
}

/// The writer's hold of a [`BucketSlot`].
#[derive(Debug)]
pub struct BucketWrite<'a> {
    slot: &'a BucketSlot,
    _guard: MutexGuard<'a, ()>,
}

impl BucketWrite<'_> {
    /// The bucket now (no other writer can change it while this guard is held).
    pub fn bucket(&self) -> Guard<Arc<Bucket>> {
        self.slot.current.load()
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.bucket().contains_key(key)
    }

    /// Publishes the bucket with `key` set to `value`; the old entry.
    pub fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) -> Option<Arc<Entry>> {
        let mut next = Bucket::clone(&self.bucket());
        let old = next.insert(key, value);
        self.slot.current.store(Arc::new(next));
        old
    }

    /// Publishes the bucket without `key`; its entry (nothing is published when it is absent).
    pub fn remove(&mut self, key: &[u8]) -> Option<Arc<Entry>> {
        let cur = self.bucket();
        if !cur.contains_key(key) {
            return None;
        }
        let mut next = Bucket::clone(&cur);
        drop(cur);
        let old = next.remove(key);
        self.slot.current.store(Arc::new(next));
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_keeps_keys_sorted_and_distinct() {
        let mut b = Bucket::default();
        assert!(b.insert(b"k2".to_vec(), b"2".to_vec()).is_none());
        assert!(b.insert(b"k1".to_vec(), b"1".to_vec()).is_none());
        assert!(b.insert(b"k3".to_vec(), b"3".to_vec()).is_none());
        let old = b.insert(b"k2".to_vec(), b"22".to_vec());
        assert_eq!(old.as_deref().map(|e| &*e.1), Some(&b"2"[..]));
        assert_eq!(b.get(b"k2"), Some(&b"22"[..]));
        let all: Vec<_> = b.range(b"k1", Bound::Excluded(b"k3")).collect();
        assert_eq!(all, vec![(&b"k1"[..], &b"1"[..]), (&b"k2"[..], &b"22"[..])]);
        let from: Vec<_> = b.range(b"k15", Bound::Unbounded).map(|e| e.0).collect();
        assert_eq!(from, vec![&b"k2"[..], &b"k3"[..]]);
        for k in [&b"k1"[..], b"k2", b"k3"] {
            assert!(b.remove(k).is_some());
        }
        assert!(!b.contains_key(b"k1"));
        assert_eq!(b.capacity(), 0, "an emptied bucket keeps its array");
    }

    #[test]
    fn a_reader_keeps_the_bucket_it_loaded_while_a_writer_publishes_the_next() {
        let slot = BucketSlot::new(Bucket::default());
        let mut w = slot.write();
        assert!(w.insert(b"k".to_vec(), b"1".to_vec()).is_none());
        let before = slot.read();
        let old = w.insert(b"k".to_vec(), b"2".to_vec());
        assert_eq!(old.as_deref().map(|e| &*e.1), Some(&b"1"[..]));
        assert_eq!(
            before.get(b"k"),
            Some(&b"1"[..]),
            "a loaded bucket never changes"
        );
        assert_eq!(slot.read().get(b"k"), Some(&b"2"[..]));
        assert!(w.remove(b"absent").is_none());
        assert!(w.remove(b"k").is_some());
        drop(w);
        assert_eq!(slot.read().get(b"k"), None);
    }
}
