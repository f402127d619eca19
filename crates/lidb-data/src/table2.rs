//! The synthetic key sets of the LearnedStore paper's Table II: `lineargen`, `piecewise` and
//! `randomgen`. [`crate::synthetic::generate`] calls these; nothing else should.
//!
//! Invariants (each checked by `synthetic_tests.rs`):
//! 1. Every generator returns exactly `n` keys, strictly increasing (no duplicates): the paper
//!    loads them as the distinct keys of a key-value store.
//! 2. The same `(n, seed)` gives the same keys everywhere: ChaCha8 seeded with `seed_from_u64`,
//!    integer arithmetic only.
//! 3. No arithmetic overflows for any `n <= MAX_KEYS` (2^32): the bounds below keep the largest
//!    key under 2^63.
//!
//! How each is generated:
//! - `lineargen`: one linear function `key(i) = start + i * stride` for `i` in `0..n`, with
//!   `start` uniform in `[0, 2^32)` and `stride` uniform in `[1, 1024]`. A learned model fits it
//!   exactly. (`uniform_dense` is the special case `stride = 1`; lineargen's stride makes keys
//!   sparse, as 8-byte keys of a real table are.)
//! - `piecewise`: several linear functions one after another. The keys are cut into `s` segments,
//!   `s` uniform in `[4, 16]` (at most `n`), of seeded lengths (weights uniform in `[1, 100]`,
//!   the last segment takes the rounding remainder); segment `j` has its own stride `2^e`, `e`
//!   uniform in `[0, 20]` (densities differ by up to 10^6), and starts after a seeded gap
//!   uniform in `[1, 2^32]` above the previous segment's last key. Unlike `piecewise_linear`
//!   (keys drawn at random inside each piece, so its CDF is noisy and may repeat keys), every
//!   segment here is an exact line.
//! - `randomgen`: uniform random u64 keys (the `uniform_sparse` draw), sorted, duplicates removed
//!   and redrawn until `n` distinct keys remain.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Largest lineargen stride.
const LINEAR_MAX_STRIDE: u64 = 1024;
/// Largest exponent of a piecewise segment's stride (2^20).
const PIECE_MAX_STRIDE_LOG2: u32 = 20;
/// Largest gap between two piecewise segments.
const PIECE_MAX_GAP: u64 = 1 << 32;

/// `n` keys on one line: `start + i * stride`.
pub(crate) fn lineargen(rng: &mut ChaCha8Rng, n: u64) -> Vec<u64> {
    let start = rng.gen_range(0..1u64 << 32);
    let stride = rng.gen_range(1..=LINEAR_MAX_STRIDE);
    (0..n).map(|i| start + i * stride).collect()
}

/// `n` keys on 4-16 lines of seeded lengths, strides and gaps.
pub(crate) fn piecewise(rng: &mut ChaCha8Rng, n: u64) -> Vec<u64> {
    let segments = rng.gen_range(4..=16u64).min(n.max(1));
    let weights: Vec<u64> = (0..segments).map(|_| rng.gen_range(1..=100u64)).collect();
    let total: u64 = weights.iter().sum();
    let mut keys = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 26));
    let mut left = n;
    let mut next = rng.gen_range(0..1u64 << 32);
    for (j, &w) in weights.iter().enumerate() {
        let len = if j as u64 + 1 == segments {
            left
        } else {
            ((u128::from(n) * u128::from(w) / u128::from(total)) as u64).min(left)
        };
        left -= len;
        let stride = 1u64 << rng.gen_range(0..=PIECE_MAX_STRIDE_LOG2);
        keys.extend((0..len).map(|i| next + i * stride));
        if let Some(&last) = keys.last() {
            next = last + rng.gen_range(1..=PIECE_MAX_GAP);
        }
    }
    keys
}

/// `n` distinct uniform u64 keys, sorted.
pub(crate) fn randomgen(rng: &mut ChaCha8Rng, n: u64) -> Vec<u64> {
    let want = usize::try_from(n).unwrap_or(usize::MAX);
    let mut keys: Vec<u64> = Vec::with_capacity(want.min(1 << 26));
    while keys.len() < want {
        let missing = want - keys.len();
        keys.extend((0..missing).map(|_| rng.r#gen::<u64>()));
        keys.sort_unstable();
        keys.dedup();
    }
    keys
}
