//! YCSB's skewed generators, ported from `site.ycsb.generator` (YCSB 0.17): `ZipfianGenerator`
//! (Gray et al., "Quickly generating billion-record synthetic databases", SIGMOD 1994),
//! `ScrambledZipfianGenerator` and `SkewedLatestGenerator`, plus YCSB's `Utils.fnvhash64`.
//!
//! Faithful to YCSB, including its quirks:
//! 1. `eta` is always computed from the item count given at construction (`items`), also after
//!    the count grows; `zeta` grows incrementally (`zeta(countforzeta, itemcount)`) and is never
//!    recomputed for a smaller count.
//! 2. [`ScrambledZipfian`] draws from a Zipfian over 10^10 items (with YCSB's precomputed
//!    `zeta = 26.46902820178302` for theta 0.99) and maps a draw `v` to
//!    `min + fnvhash64(v) % item_count`, so popular items are scattered over the range.
//! 3. [`SkewedLatest`] returns `max - zipfian.next_long(max)`: the newest records are hottest.
//!
//! Deviations (each to avoid a panic or a multi-minute start-up, none changes the shape):
//! - draws are clamped to `[base, base + itemcount - 1]` (YCSB can return `base + itemcount`
//!   when floating point rounds up);
//! - zeta over more than [`EXACT_ZETA_LIMIT`] items is the exact sum of the first
//!   [`EXACT_ZETA_LIMIT`] terms plus an Euler-Maclaurin tail (relative error below 1e-12), used
//!   by the scrambled generator for theta other than 0.99 where YCSB sums 10^10 terms;
//! - `fnvhash64` returns the unsigned absolute value (YCSB's `Math.abs` leaves `i64::MIN`
//!   negative);
//! - the random source is the caller's seeded RNG instead of `ThreadLocalRandom`, and
//!   construction does not consume a draw.
//!
//! Single-threaded: callers own a generator and pass it their RNG.

use rand::Rng;

use crate::error::{Error, Result};

/// YCSB's default Zipfian constant (theta).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The item count of YCSB's scrambled Zipfian (`ScrambledZipfianGenerator.ITEM_COUNT`).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// YCSB's precomputed zeta(10^10, 0.99) (`ScrambledZipfianGenerator.ZETAN`).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// Zeta over more items than this uses an Euler-Maclaurin tail past this many exact terms.
pub const EXACT_ZETA_LIMIT: u64 = 10_000_000;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a 64 over the 8 little-endian bytes of `value`, then the
/// absolute value as a signed 64-bit integer.
pub fn fnvhash64(value: u64) -> u64 {
    let hash = value
        .to_le_bytes()
        .iter()
        .fold(FNV_OFFSET_BASIS_64, |h, &octet| {
            (h ^ u64::from(octet)).wrapping_mul(FNV_PRIME_64)
        });
    (hash as i64).unsigned_abs()
}

/// `sum_{i=start}^{n-1} 1 / (i + 1)^theta + initial`, YCSB's `zetastatic`.
pub fn zeta_range(start: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let exact = |to: u64| {
        (start..to)
            .map(|i| 1.0 / ((i + 1) as f64).powf(theta))
            .sum::<f64>()
    };
    if n <= EXACT_ZETA_LIMIT {
        return initial + exact(n);
    }
    // The terms below the limit exactly, the rest (all of it when `start` is past the limit, as
    // when a Zipfian over more items grows) by the tail: terms start+1..=n are the tail from
    // `start`.
    let exact_to = start.max(EXACT_ZETA_LIMIT);
    initial + exact(exact_to) + euler_maclaurin_tail(exact_to, n, theta)
}

/// `zeta(n, theta) = sum_{i=1}^{n} 1 / i^theta`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    zeta_range(0, n, theta, 0.0)
}

/// `sum_{i=m+1}^{n} i^-theta` by Euler-Maclaurin with two correction terms.
fn euler_maclaurin_tail(m: u64, n: u64, theta: f64) -> f64 {
    let (m, n) = (m as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (n / m).ln()
    } else {
        (n.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta)
    };
    integral + (f(n) - f(m)) / 2.0 + (df(n) - df(m)) / 12.0
}

/// Checks that theta is one Gray's algorithm handles: finite, strictly between 0 and 1.
pub fn check_theta(theta: f64) -> Result<()> {
    if theta.is_finite() && theta > 0.0 && theta < 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidSpec(format!(
            "zipfian theta must be strictly between 0 and 1, got {theta}"
        )))
    }
}

/// YCSB's `ZipfianGenerator`: item `base + i` has probability proportional to `1/(i+1)^theta`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `min..=max` with Zipfian constant `theta`; computes zeta over the item count.
    pub fn new(min: u64, max: u64, theta: f64) -> Result<Zipfian> {
        let items = item_count(min, max)?;
        check_theta(theta)?;
        Ok(Zipfian::with_zetan(min, max, theta, zeta(items, theta)))
    }

    /// Like [`Zipfian::new`] with a precomputed `zetan` (YCSB's four-argument constructor).
    /// `min <= max` and a valid theta are the caller's promise.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max.saturating_sub(min).saturating_add(1);
        let zeta2theta = zeta(2, theta);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: eta(items, theta, zeta2theta, zetan),
            count_for_zeta: items,
        }
    }

    /// The item count given at construction.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// A draw over the constructed item count.
    pub fn next_value(&mut self, rng: &mut impl Rng) -> u64 {
        self.next_long(self.items, rng)
    }

    /// A draw over `item_count` items (YCSB's `nextLong(itemcount)`): a larger count than
    /// before extends zeta incrementally; a smaller one is used without recomputing zeta.
    pub fn next_long(&mut self, item_count: u64, rng: &mut impl Rng) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta_range(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            self.eta = eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }
        let u: f64 = rng.r#gen();
        let uz = u * self.zetan;
        let offset = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        self.base + offset.min(item_count.saturating_sub(1))
    }
}

fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
}

fn item_count(min: u64, max: u64) -> Result<u64> {
    if min > max {
        return Err(Error::InvalidSpec(format!(
            "zipfian range is empty: min {min} > max {max}"
        )));
    }
    Ok((max - min).saturating_add(1))
}

/// YCSB's `ScrambledZipfianGenerator`: Zipfian popularity, popular items scattered by hashing.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// Items `min..=max`, constant `theta`.
    pub fn new(min: u64, max: u64, theta: f64) -> Result<ScrambledZipfian> {
        let item_count = item_count(min, max)?;
        check_theta(theta)?;
        let zetan = if theta == ZIPFIAN_CONSTANT {
            SCRAMBLED_ZETAN
        } else {
            zeta(SCRAMBLED_ITEM_COUNT.saturating_add(1), theta)
        };
        Ok(ScrambledZipfian {
            min,
            item_count,
            zipfian: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, theta, zetan),
        })
    }

    /// A draw in `min..=max`.
    pub fn next_value(&mut self, rng: &mut impl Rng) -> u64 {
        let v = self.zipfian.next_value(rng);
        self.min + fnvhash64(v) % self.item_count
    }
}

/// YCSB's `SkewedLatestGenerator`: `max - zipfian(max)`, so the most recent records are hot.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// For records `0..=last` (YCSB builds its Zipfian over `last` items; at least 1 here).
    pub fn new(last: u64, theta: f64) -> Result<SkewedLatest> {
        Ok(SkewedLatest {
            zipfian: Zipfian::new(0, last.max(1) - 1, theta)?,
        })
    }

    /// A record in `0..=last`, skewed towards `last`.
    pub fn next_value(&mut self, last: u64, rng: &mut impl Rng) -> u64 {
        if last == 0 {
            return 0;
        }
        last - self.zipfian.next_long(last, rng).min(last)
    }
}

#[cfg(test)]
#[path = "zipf_tests.rs"]
mod tests;
