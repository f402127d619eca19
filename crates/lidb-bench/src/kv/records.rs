//! Records of the engine benchmarks: which key record `r` has, how it is rendered, and the
//! self-describing values that let every read be checked.
//!
//! Shared read-only by all worker threads. Invariants:
//! 1. Record `r` always has the same key within a run: `record_key(r)` (YCSB's hashed insert
//!    order) without a dataset, the r-th key of a seeded permutation of the dataset's distinct
//!    keys with one.
//! 2. A value is `key` (u64 big-endian), `version` (u64 little-endian), then a splitmix64 stream
//!    seeded by `(key, version)`; [`Records::check_value`] accepts exactly the values
//!    [`Records::value`] can produce for that key, whatever the version, so an update racing a read
//!    on another thread is still a correct answer, while a value of another key is not.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::Error;
use crate::lsm::load::{check_key_size, parse_key, render_key, value_of};

/// Bytes of a value's header (key and version).
pub const VALUE_HEADER_BYTES: u32 = 16;

/// Where record keys come from.
#[derive(Debug, Clone)]
enum Source {
    Hashed,
    /// Distinct dataset keys in a seeded random order; record `r` is `order[r]`.
    Dataset(Vec<u64>),
}

/// Record numbers to keys, and values.
#[derive(Debug, Clone)]
pub struct Records {
    source: Source,
    pub key_size: u32,
    pub value_size: u32,
}

impl Records {
    /// YCSB's hashed keys (`lidb_data::record_key`).
    pub fn hashed(key_size: u32, value_size: u32) -> Result<Records, Error> {
        check_key_size(key_size, u64::MAX).map_err(Error::Invalid)?;
        Records::checked(Source::Hashed, key_size, value_size)
    }

    /// The keys of a dataset (any order, duplicates allowed) in a permutation seeded by `seed`.
    pub fn dataset(
        mut keys: Vec<u64>,
        seed: u64,
        key_size: u32,
        value_size: u32,
    ) -> Result<Records, Error> {
        keys.sort_unstable();
        keys.dedup();
        let Some(&max) = keys.last() else {
            return Err(Error::Invalid("the dataset holds no keys".into()));
        };
        check_key_size(key_size, max).map_err(Error::Invalid)?;
        keys.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0x5045_524D));
        Records::checked(Source::Dataset(keys), key_size, value_size)
    }

    fn checked(source: Source, key_size: u32, value_size: u32) -> Result<Records, Error> {
        if value_size < VALUE_HEADER_BYTES {
            return Err(Error::Invalid(format!(
                "value size {value_size} is below {VALUE_HEADER_BYTES} bytes (key and version \
                 header of the checked values)"
            )));
        }
        Ok(Records {
            source,
            key_size,
            value_size,
        })
    }

    /// Records there are keys for (None: unlimited).
    pub fn capacity(&self) -> Option<u64> {
        match &self.source {
            Source::Hashed => None,
            Source::Dataset(keys) => Some(keys.len() as u64),
        }
    }

    /// The u64 key of record `r`; an error once a dataset runs out of keys.
    pub fn key(&self, r: u64) -> Result<u64, Error> {
        match &self.source {
            Source::Hashed => Ok(lidb_data::record_key(r)),
            Source::Dataset(keys) => usize::try_from(r)
                .ok()
                .and_then(|i| keys.get(i).copied())
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "record {r} has no key: the dataset holds {} distinct keys; use fewer \
                         --records or operations that insert",
                        keys.len()
                    ))
                }),
        }
    }

    /// Renders `key` into `out` (cleared first).
    pub fn render(&self, key: u64, out: &mut Vec<u8>) {
        render_key(key, self.key_size, out);
    }

    /// The key bytes back to the u64 key.
    pub fn parse(&self, bytes: &[u8]) -> Option<u64> {
        parse_key(bytes, self.key_size)
    }

    /// The value of `key` at `version` into `out` (cleared first).
    pub fn value(&self, key: u64, version: u64, out: &mut Vec<u8>) {
        value_of(
            body_seed(key, version),
            self.value_size - VALUE_HEADER_BYTES,
            out,
        );
        let mut header = [0u8; VALUE_HEADER_BYTES as usize];
        let (k, v) = header.split_at_mut(8);
        k.copy_from_slice(&key.to_be_bytes());
        v.copy_from_slice(&version.to_le_bytes());
        out.splice(0..0, header);
    }

    /// Whether `got` is a value [`Records::value`] makes for `key` (any version); `scratch` is a
    /// reusable buffer. The error says what is wrong.
    pub fn check_value(&self, key: u64, got: &[u8], scratch: &mut Vec<u8>) -> Result<(), String> {
        if got.len() != self.value_size as usize {
            return Err(format!(
                "got a {}-byte value, stored {}-byte values",
                got.len(),
                self.value_size
            ));
        }
        let (head, body) = got.split_at(VALUE_HEADER_BYTES as usize);
        let (k, v) = head.split_at(8);
        let owner = u64::from_be_bytes(k.try_into().unwrap_or_default());
        if owner != key {
            return Err(format!("got the value of key {owner}"));
        }
        let version = u64::from_le_bytes(v.try_into().unwrap_or_default());
        value_of(
            body_seed(key, version),
            self.value_size - VALUE_HEADER_BYTES,
            scratch,
        );
        if body != scratch.as_slice() {
            return Err(format!("the value of version {version} is corrupt"));
        }
        Ok(())
    }
}

fn body_seed(key: u64, version: u64) -> u64 {
    key ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_check_for_their_key_only() {
        let r = Records::hashed(8, 100).unwrap_or_else(|e| panic!("{e}"));
        let (mut v, mut s) = (Vec::new(), Vec::new());
        r.value(7, 3, &mut v);
        assert_eq!(v.len(), 100);
        assert_eq!(r.check_value(7, &v, &mut s), Ok(()));
        assert!(r.check_value(8, &v, &mut s).is_err());
        if let Some(b) = v.last_mut() {
            *b ^= 1;
        }
        assert!(r.check_value(7, &v, &mut s).is_err());
        assert!(r.check_value(7, v.split_at(50).0, &mut s).is_err());
    }

    #[test]
    fn dataset_records_are_a_permutation_of_distinct_keys() {
        let r = Records::dataset(vec![5, 1, 5, 9, 3], 1, 8, 32).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.capacity(), Some(4));
        let mut got: Vec<u64> = (0..4).filter_map(|i| r.key(i).ok()).collect();
        got.sort_unstable();
        assert_eq!(got, vec![1, 3, 5, 9]);
        assert!(r.key(4).is_err());
        assert!(Records::hashed(8, 8).is_err());
        assert!(Records::hashed(12, 100).is_err());
    }
}
