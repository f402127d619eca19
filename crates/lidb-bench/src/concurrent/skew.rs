//! The skewed workload (FINEdex paper, section 5.4): inserts and then reads confined to a hot
//! window of the loaded key range. The *hotspot ratio* R is the window's width over the range of
//! the loaded (trained) keys, `0 < R <= 1`; a small R is a strong skew.
//!
//! Everything here is a pure function of the loaded keys, R and the seed, so a run can be
//! replayed from its seed. Called by the runner's thread before the workers start.
//!
//! Invariants of a [`HotWindow`] built over loaded keys with minimum `min` and maximum `max`:
//! 1. `min <= lo <= hi <= max` and `hi - lo = floor(R * (max - min))`.
//! 2. [`HotWindow::fresh_keys`] returns distinct keys in `[lo, hi]`, none of them loaded and
//!    none `u64::MAX` (congee's exclusive range end), in a seeded random order; or an error
//!    naming the shortfall when the window has fewer such keys than asked.

use std::collections::HashSet;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Parses a comma-separated list of hotspot ratios, each in (0, 1].
pub fn parse_hotspots(text: &str) -> Result<Vec<f64>, String> {
    text.split(',')
        .map(|r| {
            let r = r.trim();
            r.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0 && *x <= 1.0)
                .ok_or_else(|| format!("\"{r}\": want ratios in (0, 1], e.g. 0.01,0.1,1"))
        })
        .collect()
}

/// The hot key window of one hotspot ratio (invariant 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotWindow {
    /// Smallest key of the window.
    pub lo: u64,
    /// Largest key of the window (inclusive).
    pub hi: u64,
}

/// Seed of the window's place and of its fresh keys: the run seed mixed with the ratio, so that
/// two ratios of one sweep get independent windows.
fn mix(seed: u64, ratio: f64, salt: u64) -> u64 {
    seed ^ ratio.to_bits().rotate_left(17) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl HotWindow {
    /// Places a window of width `ratio * (max - min)` at a seeded random point inside the range
    /// of `sorted_loaded` (sorted, non-empty); `None` when it is empty.
    pub fn new(sorted_loaded: &[u64], ratio: f64, seed: u64) -> Option<HotWindow> {
        let (&min, &max) = (sorted_loaded.first()?, sorted_loaded.last()?);
        let range = max - min;
        let width = ((range as f64 * ratio) as u64).min(range);
        let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, ratio, 1));
        let lo = min + rng.gen_range(0..=range - width);
        Some(HotWindow { lo, hi: lo + width })
    }

    /// Whether `key` lies in the window.
    pub fn contains(&self, key: u64) -> bool {
        (self.lo..=self.hi).contains(&key)
    }

    /// The loaded keys inside the window (a slice of `sorted_loaded`).
    pub fn loaded_in<'a>(&self, sorted_loaded: &'a [u64]) -> &'a [u64] {
        let a = sorted_loaded.partition_point(|&k| k < self.lo);
        let b = sorted_loaded.partition_point(|&k| k <= self.hi);
        sorted_loaded.get(a..b).unwrap_or(&[])
    }

    /// `count` distinct keys of the window that are not loaded (invariant 2). The threads of a
    /// run take consecutive chunks of them.
    pub fn fresh_keys(
        &self,
        sorted_loaded: &[u64],
        count: usize,
        ratio: f64,
        seed: u64,
    ) -> Result<Vec<u64>, String> {
        let loaded_in = self.loaded_in(sorted_loaded);
        let slots = u128::from(self.hi - self.lo) + 1 - u128::from(self.hi == u64::MAX);
        let free = slots - loaded_in.len() as u128;
        if free < count as u128 {
            return Err(format!(
                "--hotspot {ratio}: the hot window [{}, {}] holds {free} keys that are not \
                 loaded; --ops {count} needs {count}: {} short (use a larger --hotspot or a \
                 smaller --ops)",
                self.lo,
                self.hi,
                count as u128 - free
            ));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, ratio, 2));
        let is_loaded = |k: u64| loaded_in.binary_search(&k).is_ok();
        if free <= 4 * count as u128 {
            // A crowded window: list its free keys (at most 4 * count + the loaded keys inside)
            // and shuffle them, instead of drawing with more and more repeats.
            let mut keys: Vec<u64> = (self.lo..=self.hi)
                .filter(|&k| k != u64::MAX && !is_loaded(k))
                .collect();
            keys.shuffle(&mut rng);
            keys.truncate(count);
            return Ok(keys);
        }
        // At least three of four draws are new: rejection sampling ends quickly.
        let mut seen = HashSet::with_capacity(count);
        let mut keys = Vec::with_capacity(count);
        while keys.len() < count {
            let k = rng.gen_range(self.lo..=self.hi);
            if k != u64::MAX && !is_loaded(k) && seen.insert(k) {
                keys.push(k);
            }
        }
        Ok(keys)
    }
}
