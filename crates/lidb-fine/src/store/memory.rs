//! The in-memory data of a FineStore: byte keys over a [`FineIndex`].
//!
//! A key's image (`lidb_data::keymap::image(key, 0)`, order-preserving: `a <= b` implies
//! `image(a) <= image(b)`) is the index key; the index value is the id of a *bucket* holding,
//! sorted, every full key with that image and its value. Distinct keys with equal images (for
//! example keys sharing their first 8 bytes) share a bucket and stay distinct, and walking the
//! index in image order and each bucket in key order yields keys in byte order.
//!
//! Threads: any. A bucket is a `Mutex<BTreeMap>`; the bucket table is append-only (`RwLock`
//! held only to push or to clone one `Arc`); `create` serialises the creation of buckets, so an
//! image never gets two. A bucket is never removed: once emptied it stays (and is skipped).
//!
//! Lock order: `create`, then the table's write lock; a bucket's lock is never held while taking
//! the others.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use lidb_data::keymap::image;

use crate::{Config, FineIndex};

/// Full keys of one image, sorted, with their values.
pub type Bucket = BTreeMap<Vec<u8>, Vec<u8>>;

/// The image of a byte key in the index.
pub fn key_image(key: &[u8]) -> u64 {
    image(key, 0)
}

/// Locks a mutex; a panic elsewhere while holding it (a failed test) does not hide the data.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
pub struct Memory {
    index: FineIndex,
    buckets: RwLock<Vec<Arc<Mutex<Bucket>>>>,
    create: Mutex<()>,
}

impl Memory {
    /// Memory holding `entries` (sorted by key, keys distinct), bulk-loaded into the index.
    pub fn load(entries: Vec<(Vec<u8>, Vec<u8>)>, cfg: Config) -> crate::Result<Memory> {
        let mut trained: Vec<(u64, u64)> = Vec::new();
        let mut buckets: Vec<Arc<Mutex<Bucket>>> = Vec::new();
        let mut current: Option<(u64, Bucket)> = None;
        let mut close = |cur: Option<(u64, Bucket)>, trained: &mut Vec<(u64, u64)>| {
            if let Some((img, b)) = cur {
                trained.push((img, buckets.len() as u64));
                buckets.push(Arc::new(Mutex::new(b)));
            }
        };
        for (k, v) in entries {
            let img = key_image(&k);
            match &mut current {
                Some((cur, b)) if *cur == img => {
                    b.insert(k, v);
                }
                _ => {
                    close(current.take(), &mut trained);
                    current = Some((img, BTreeMap::from([(k, v)])));
                }
            }
        }
        close(current.take(), &mut trained);
        let index = FineIndex::bulk_load(&trained, cfg)?;
        Ok(Memory {
            index,
            buckets: RwLock::new(buckets),
            create: Mutex::new(()),
        })
    }

    /// The index of images to bucket ids.
    pub fn index(&self) -> &FineIndex {
        &self.index
    }

    fn bucket_by_id(&self, id: u64) -> Arc<Mutex<Bucket>> {
        let table = self.buckets.read().unwrap_or_else(PoisonError::into_inner);
        let b = table.get(id as usize);
        debug_assert!(b.is_some(), "index value {id} names no bucket");
        b.cloned().unwrap_or_default()
    }

    /// The bucket of `key`'s image, if one was ever made.
    pub fn bucket(&self, key: &[u8]) -> Option<Arc<Mutex<Bucket>>> {
        self.index
            .get(key_image(key))
            .map(|id| self.bucket_by_id(id))
    }

    /// The bucket of `key`'s image, made (empty) if there is none.
    pub fn bucket_or_create(&self, key: &[u8]) -> Arc<Mutex<Bucket>> {
        let img = key_image(key);
        if let Some(id) = self.index.get(img) {
            return self.bucket_by_id(id);
        }
        let _one_creator = lock(&self.create);
        if let Some(id) = self.index.get(img) {
            return self.bucket_by_id(id);
        }
        let b: Arc<Mutex<Bucket>> = Arc::default();
        let id = {
            let mut table = self.buckets.write().unwrap_or_else(PoisonError::into_inner);
            table.push(Arc::clone(&b));
            table.len() as u64 - 1
        };
        // Published after the bucket is in the table, so a reader finding the id finds it.
        self.index.insert(img, id);
        b
    }

    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let b = self.bucket(key)?;
        lock(&b).get(key).cloned()
    }

    /// Applies a write without logging it (recovery's replay).
    pub fn apply(&self, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(v) => {
                lock(&self.bucket_or_create(key)).insert(key.to_vec(), v.to_vec());
            }
            None => {
                if let Some(b) = self.bucket(key) {
                    lock(&b).remove(key);
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
        while out.len() < limit && lo <= hi {
            let chunk = self.index.range(lo, hi, CHUNK);
            for &(_, id) in &chunk {
                let b = self.bucket_by_id(id);
                let b = lock(&b);
                let range = b.range::<[u8], _>((Bound::Included(start), upper));
                for (k, v) in range.take(limit - out.len()) {
                    out.push((k.clone(), v.clone()));
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
