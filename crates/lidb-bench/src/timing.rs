//! Timing helpers: the timer's own cost, measured so callers can remove it, and the median of a
//! few repeated runs' means. Means are taken from un-instrumented loops by the callers;
//! per-operation latencies and their percentiles go into [`crate::kv::hist::Histogram`].

use std::hint::black_box;
use std::time::Instant;

/// The median cost of reading the clock twice around nothing, in nanoseconds.
pub fn timer_overhead_ns() -> f64 {
    let mut samples: Vec<u64> = (0..10_001)
        .map(|_| {
            let t = Instant::now();
            black_box(());
            t.elapsed().as_nanos() as u64
        })
        .collect();
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or(0) as f64
}

/// The median of a few repeated measurements (the lower middle one for an even count); 0 for
/// none. Sorts `runs`.
pub fn median(runs: &mut [f64]) -> f64 {
    if runs.is_empty() {
        return 0.0;
    }
    runs.sort_unstable_by(f64::total_cmp);
    runs.get((runs.len() - 1) / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_runs() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(median(&mut v), 50.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median(&mut [5.0]), 5.0);
    }
}
