//! Seeded synthetic key sets, and the `synthetic:NAME:N` spec that names one.
//!
//! Invariants:
//! 1. [`generate`] returns exactly `n` keys in non-decreasing order.
//! 2. The same `(distribution, n, seed)` gives the same keys on every run and machine: the
//!    generator is ChaCha8 seeded with `seed_from_u64`, and the integer distributions use no
//!    floating point. (`normal` and `lognormal` call `exp`/`ln` of the platform's libm; libms
//!    agree to the last bit on the usual platforms, and a difference of one ulp would move a key
//!    by at most one unit.)
//! 3. Duplicates occur only where the distribution makes them: never in `uniform_dense` or the
//!    Table II sets (`lineargen`, `piecewise`, `randomgen`),
//!    rarely after rounding in `normal`/`lognormal`, and always in `clustered` (for n >= 2),
//!    which has duplicate runs of random lengths, some longer than 100.
//!
//! | name | keys |
//! |---|---|
//! | `uniform_dense` | consecutive integers from a random start |
//! | `uniform_sparse` | uniform over the whole u64 range |
//! | `normal` | N(2^52, 2^48), rounded |
//! | `lognormal` | exp(N(0, 2)) * 1e9, rounded (SOSD's lognormal shape, sigma 2) |
//! | `piecewise_linear` | a CDF of 5-8 linear pieces whose densities differ by up to 10^4 |
//! | `clustered` | 3-6 dense clusters far apart, with duplicate runs (some > 100 long) |
//! | `lineargen` | LearnedStore Table II: one line `start + i * stride`, stride 1-1024 |
//! | `piecewise` | LearnedStore Table II: 4-16 exact lines of seeded lengths, strides and gaps |
//! | `randomgen` | LearnedStore Table II: uniform u64, sorted, duplicates removed and redrawn |
//!
//! The three Table II sets are strictly increasing; [`crate::table2`] says exactly how each is
//! generated and how it differs from its neighbour above (`uniform_dense`, `piecewise_linear`,
//! `uniform_sparse`).

use std::fmt;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use crate::error::{Error, Result};

/// Largest key count a spec may ask for (keys are addressed by u32 positions downstream).
pub const MAX_KEYS: u64 = 1 << 32;

/// The prefix that marks a synthetic spec, as opposed to a file path.
pub const SPEC_PREFIX: &str = "synthetic:";

/// A synthetic key distribution (see the module doc for each shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Distribution {
    UniformDense,
    UniformSparse,
    Normal,
    Lognormal,
    PiecewiseLinear,
    Clustered,
    Lineargen,
    Piecewise,
    Randomgen,
}

impl Distribution {
    /// Every distribution, in the order of the module table.
    pub const ALL: [Distribution; 9] = [
        Distribution::UniformDense,
        Distribution::UniformSparse,
        Distribution::Normal,
        Distribution::Lognormal,
        Distribution::PiecewiseLinear,
        Distribution::Clustered,
        Distribution::Lineargen,
        Distribution::Piecewise,
        Distribution::Randomgen,
    ];

    /// The LearnedStore paper's Table II synthetic sets, in the table's order.
    pub const TABLE2: [Distribution; 3] = [
        Distribution::Lineargen,
        Distribution::Piecewise,
        Distribution::Randomgen,
    ];

    /// The name used in specs and output rows.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::UniformDense => "uniform_dense",
            Distribution::UniformSparse => "uniform_sparse",
            Distribution::Normal => "normal",
            Distribution::Lognormal => "lognormal",
            Distribution::PiecewiseLinear => "piecewise_linear",
            Distribution::Clustered => "clustered",
            Distribution::Lineargen => "lineargen",
            Distribution::Piecewise => "piecewise",
            Distribution::Randomgen => "randomgen",
        }
    }

    /// The distribution called `name`; `InvalidSpec` listing the known names otherwise.
    pub fn from_name(name: &str) -> Result<Distribution> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                Error::InvalidSpec(format!(
                    "unknown distribution '{name}'; known: {}",
                    known_names()
                ))
            })
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn known_names() -> String {
    Distribution::ALL.map(Distribution::name).join(", ")
}

/// `n` sorted keys of `dist`, from `seed`.
pub fn generate(dist: Distribution, n: u64, seed: u64) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let len = usize::try_from(n).unwrap_or(usize::MAX);
    let mut keys = match dist {
        Distribution::UniformDense => {
            let start = rng.gen_range(0..=u64::MAX - n);
            return (0..n).map(|i| start + i).collect();
        }
        Distribution::UniformSparse => (0..len).map(|_| rng.r#gen::<u64>()).collect(),
        Distribution::Normal => {
            const MEAN: f64 = (1u64 << 52) as f64;
            const SD: f64 = (1u64 << 48) as f64;
            (0..len)
                .map(|_| {
                    let z: f64 = rng.sample(StandardNormal);
                    (MEAN + z * SD).round() as u64
                })
                .collect()
        }
        Distribution::Lognormal => (0..len)
            .map(|_| {
                let z: f64 = rng.sample(StandardNormal);
                ((2.0 * z).exp() * 1e9).round() as u64
            })
            .collect(),
        Distribution::PiecewiseLinear => piecewise_linear(&mut rng, n),
        Distribution::Clustered => return clustered(&mut rng, n),
        Distribution::Lineargen => return crate::table2::lineargen(&mut rng, n),
        Distribution::Piecewise => return crate::table2::piecewise(&mut rng, n),
        Distribution::Randomgen => return crate::table2::randomgen(&mut rng, n),
    };
    keys.sort_unstable();
    keys
}

/// Unsorted keys whose CDF is 5-8 linear pieces over random breakpoints, each piece holding a
/// share of the keys drawn from 10^U(0,4) weights.
fn piecewise_linear(rng: &mut ChaCha8Rng, n: u64) -> Vec<u64> {
    let pieces = rng.gen_range(5..=8usize);
    let mut bounds: Vec<u64> = (0..=pieces).map(|_| rng.r#gen::<u64>()).collect();
    bounds.sort_unstable();
    let weights: Vec<f64> = (0..pieces)
        .map(|_| 10f64.powf(rng.gen_range(0.0..4.0)))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut counts: Vec<u64> = weights
        .iter()
        .map(|w| (n as f64 * w / total) as u64)
        .collect();
    let assigned: u64 = counts.iter().sum();
    if let Some(last) = counts.last_mut() {
        *last += n.saturating_sub(assigned);
    }
    let mut keys = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 26));
    for ((&lo, &hi), &count) in bounds.iter().zip(bounds.iter().skip(1)).zip(&counts) {
        let hi = hi.max(lo);
        keys.extend((0..count).map(|_| rng.gen_range(lo..=hi)));
    }
    keys
}

/// Sorted keys in 3-6 dense clusters, one per equal slice of the domain, with duplicate runs.
/// The first run of every cluster is 101-400 keys long (so duplicates always exist).
fn clustered(rng: &mut ChaCha8Rng, n: u64) -> Vec<u64> {
    // At most n/2 clusters, so some cluster holds two or more keys and duplicates exist.
    let clusters = rng.gen_range(3..=6u64).min((n / 2).max(1));
    let slice = u64::MAX / clusters;
    let shares: Vec<u64> = (0..clusters).map(|_| rng.gen_range(1..=4u64)).collect();
    let total: u64 = shares.iter().sum();
    let mut keys = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 26));
    let mut left = n;
    for (c, &share) in shares.iter().enumerate() {
        let last = c as u64 + 1 == clusters;
        let quota = if last {
            left
        } else {
            ((n as u128 * share as u128 / total as u128) as u64).min(left)
        };
        left -= quota;
        let mut value = c as u64 * slice + rng.gen_range(0..slice / 2);
        let mut remaining = quota;
        let mut first_run = true;
        while remaining > 0 {
            let run = if first_run {
                rng.gen_range(101..=400u64)
            } else {
                match rng.gen_range(0..100u32) {
                    0 => rng.gen_range(11..=300u64),
                    1..=9 => rng.gen_range(2..=10u64),
                    _ => 1,
                }
            };
            first_run = false;
            let run = run.min(remaining);
            keys.extend(std::iter::repeat_n(
                value,
                usize::try_from(run).unwrap_or(0),
            ));
            remaining -= run;
            value = value.saturating_add(rng.gen_range(1..=3u64));
        }
    }
    keys
}

/// Parses a key count: a plain integer or one with a `K` (10^3) or `M` (10^6) suffix.
pub fn parse_count(text: &str) -> Result<u64> {
    let bad = || {
        Error::InvalidSpec(format!(
            "bad key count '{text}': expected an integer with an optional K or M suffix, e.g. 10M"
        ))
    };
    let (digits, scale) = match text.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1_000u64),
        None => match text.strip_suffix(['M', 'm']) {
            Some(d) => (d, 1_000_000u64),
            None => (text, 1u64),
        },
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n = digits
        .parse::<u64>()
        .ok()
        .and_then(|d| d.checked_mul(scale))
        .ok_or_else(bad)?;
    if n > MAX_KEYS {
        return Err(Error::InvalidSpec(format!(
            "key count {text} is too large (at most {MAX_KEYS})"
        )));
    }
    Ok(n)
}

/// Parses `synthetic:NAME:N` into a distribution and a key count.
pub fn parse_spec(spec: &str) -> Result<(Distribution, u64)> {
    let usage = || {
        Error::InvalidSpec(format!(
            "'{spec}' is not a synthetic spec: expected synthetic:NAME:N with NAME one of {} and N like 1000, 100K or 10M",
            known_names()
        ))
    };
    let rest = spec.strip_prefix(SPEC_PREFIX).ok_or_else(usage)?;
    let (name, count) = rest.split_once(':').ok_or_else(usage)?;
    let dist = Distribution::from_name(name)
        .map_err(|e| Error::InvalidSpec(format!("in '{spec}': {}", inner(e))))?;
    let n =
        parse_count(count).map_err(|e| Error::InvalidSpec(format!("in '{spec}': {}", inner(e))))?;
    Ok((dist, n))
}

fn inner(e: Error) -> String {
    match e {
        Error::InvalidSpec(msg) => msg,
        other => other.to_string(),
    }
}

/// Loads a key set: a `synthetic:NAME:N` spec is generated from `seed`; anything else is the
/// path of a sorted SOSD u64 file (plain or zstd; `seed` is then unused).
pub fn load(spec_or_path: &str, seed: u64) -> Result<Vec<u64>> {
    if spec_or_path.starts_with(SPEC_PREFIX) {
        let (dist, n) = parse_spec(spec_or_path)?;
        Ok(generate(dist, n, seed))
    } else {
        crate::sosd::read_u64(spec_or_path)
    }
}

#[cfg(test)]
#[path = "synthetic_tests.rs"]
mod tests;
