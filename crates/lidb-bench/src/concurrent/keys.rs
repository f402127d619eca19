//! The key split of `lidb bench concurrent`: a data set's distinct keys, shuffled with a seed,
//! become the loaded keys (record `r` of a YCSB generator is `loaded[r]`) and the fresh keys that
//! inserts draw from, cut into one disjoint chunk per thread. Values are derived from keys
//! ([`value_of`]) so that every answer can be checked.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// The value a key always has (never `u64::MAX`, which `li+delta` reserves).
pub fn value_of(key: u64) -> u64 {
    let v = key.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15;
    if v == u64::MAX { 0 } else { v }
}

/// Loaded and fresh keys.
#[derive(Debug, Clone)]
pub struct KeySplit {
    /// The bulk-loaded keys, in shuffled order (record numbers index it).
    pub loaded: Vec<u64>,
    /// The other keys, shuffled: inserts take them, each thread its own chunk.
    pub fresh: Vec<u64>,
}

impl KeySplit {
    /// Dedups `keys`, shuffles them with `seed`, keeps `records` as loaded keys and needs at
    /// least `fresh_needed` others (the error names the shortfall).
    pub fn new(
        mut keys: Vec<u64>,
        records: usize,
        fresh_needed: usize,
        seed: u64,
    ) -> Result<KeySplit, String> {
        keys.sort_unstable();
        keys.dedup();
        let needed = records.saturating_add(fresh_needed);
        if keys.len() < needed {
            return Err(format!(
                "the data set has {} distinct keys; {records} records plus {fresh_needed} keys to \
                 insert need {needed}: {} short (use a larger --data or smaller --records/--ops)",
                keys.len(),
                needed - keys.len()
            ));
        }
        keys.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let fresh = keys.split_off(records);
        Ok(KeySplit {
            loaded: keys,
            fresh,
        })
    }

    /// The loaded entries in key order, for bulk loading.
    pub fn sorted_entries(&self) -> Vec<(u64, u64)> {
        let mut e: Vec<(u64, u64)> = self.loaded.iter().map(|&k| (k, value_of(k))).collect();
        e.sort_unstable();
        e
    }

    /// Thread `t`'s chunk of `per_thread` fresh keys (empty past the end).
    pub fn fresh_chunk(&self, t: usize, per_thread: usize) -> &[u64] {
        let lo = t.saturating_mul(per_thread).min(self.fresh.len());
        let hi = lo.saturating_add(per_thread).min(self.fresh.len());
        self.fresh.get(lo..hi).unwrap_or(&[])
    }
}
