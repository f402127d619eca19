//! Timing helpers: per-operation latencies with the timer's own cost measured and removed, and
//! percentiles. Means are taken from un-instrumented loops by the callers; per-operation timings
//! are used only for tails.

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

/// The p-th percentile (0..=100) of unsorted samples, by nearest rank; 0 for no samples.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable_by(f64::total_cmp);
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples
        .get(rank.clamp(1, samples.len()) - 1)
        .copied()
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 99.0), 99.0);
        assert_eq!(percentile(&mut v, 50.0), 50.0);
        assert_eq!(percentile(&mut v, 100.0), 100.0);
        assert_eq!(percentile(&mut [], 99.0), 0.0);
        assert_eq!(percentile(&mut [5.0], 1.0), 5.0);
    }
}
