//! Latency percentiles, one way everywhere: a thin wrapper over the hdrhistogram crate (the
//! HdrHistogram of Gil Tene, as Rust's `hdrhistogram`) that keeps the sum for exact means and
//! answers in the units the rows print. Millions of operations fit in a few KiB; a percentile is
//! within 0.1% of the exact nearest-rank value (three significant digits), and exact for the
//! smallest and largest values recorded.
//!
//! One histogram per worker thread and operation type; [`Histogram::merge`] combines them.
//! Values are nanoseconds from 0 to 2^63; larger values are recorded as 2^63 (no latency comes
//! near).

/// Three significant digits: a bucket is at most 1/1000 of its value wide.
const SIGFIG: u8 = 3;
/// The largest value recorded as itself.
const HIGHEST_NS: u64 = 1 << 63;

/// Nanosecond latencies.
#[derive(Debug, Clone)]
pub struct Histogram {
    h: hdrhistogram::Histogram<u64>,
    sum_ns: u128,
    /// The exact extremes (hdrhistogram keeps them to its precision only).
    min_ns: u64,
    max_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        // Bounds and precision are constants in range: the constructor cannot fail; it grows
        // its counts array as values arrive (auto-resize), so an idle histogram stays small.
        let mut h = hdrhistogram::Histogram::new(SIGFIG)
            .unwrap_or_else(|_| unreachable!("3 significant digits are in hdrhistogram's range"));
        h.auto(true);
        Histogram {
            h,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    pub fn record(&mut self, ns: u64) {
        let ns = ns.min(HIGHEST_NS);
        // With auto-resize on, a value in 0..=2^63 is always recordable (the counts grow to
        // cover it); were it ever refused, the value would be counted at the top instead.
        if self.h.record(ns).is_err() {
            self.h.saturating_record(ns);
        }
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn merge(&mut self, other: &Histogram) {
        // Both auto-resize with the same precision: adding cannot fail.
        let _added = self.h.add(&other.h);
        debug_assert!(_added.is_ok(), "histograms of one precision add");
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Sum of all values recorded.
    pub fn sum_ns(&self) -> f64 {
        self.sum_ns as f64
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        self.sum_ns as f64 / self.count() as f64
    }

    /// The p-th percentile (0..=100) in nanoseconds, by nearest rank to within the precision
    /// above, clamped to the smallest and largest values recorded; 0 when empty.
    pub fn percentile_ns(&self, p: f64) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        if p >= 100.0 {
            return self.max_ns as f64;
        }
        let v = self.h.value_at_percentile(p.max(0.0));
        v.clamp(self.min_ns, self.max_ns) as f64
    }

    /// A histogram of latencies given in nanoseconds as floating point (rounded to whole
    /// nanoseconds; negative values, a timer's overhead over-subtracted, count as 0).
    pub fn of_ns(samples: &[f64]) -> Histogram {
        let mut h = Histogram::new();
        for &ns in samples {
            h.record(ns.max(0.0).round() as u64);
        }
        h
    }

    /// A histogram of latencies given in microseconds as floating point.
    pub fn of_us(samples: &[f64]) -> Histogram {
        let mut h = Histogram::new();
        for &us in samples {
            h.record((us * 1e3).max(0.0).round() as u64);
        }
        h
    }

    /// The p-th percentile in microseconds.
    pub fn percentile_us(&self, p: f64) -> f64 {
        self.percentile_ns(p) / 1e3
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The oracle: the p-th percentile of the samples by nearest rank, exactly.
    fn percentile(samples: &mut [f64], p: f64) -> f64 {
        samples.sort_unstable_by(f64::total_cmp);
        let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
        samples
            .get(rank.clamp(1, samples.len()) - 1)
            .copied()
            .unwrap_or(0.0)
    }

    fn check_against_sorted(samples: &[u64]) {
        let mut h = Histogram::new();
        for &s in samples {
            h.record(s);
        }
        let mut exact: Vec<f64> = samples.iter().map(|&s| s as f64).collect();
        for p in [0.1, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
            let want = percentile(&mut exact, p);
            let got = h.percentile_ns(p);
            assert!(
                (got - want).abs() <= want / 1000.0 + 0.5,
                "p{p}: histogram {got}, sorted samples {want}"
            );
        }
        assert_eq!(
            h.percentile_ns(100.0),
            *samples.iter().max().unwrap_or(&0) as f64
        );
        assert_eq!(h.count(), samples.len() as u64);
    }

    #[test]
    fn percentiles_match_sorted_samples() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // Latency-like: mostly around 2-20 us, a tail up to 50 ms.
        let samples: Vec<u64> = (0..200_000)
            .map(|_| {
                let base: f64 = rng.gen_range(7.5f64..10.0).exp();
                if rng.gen_bool(0.002) {
                    rng.gen_range(1_000_000..50_000_000)
                } else {
                    base as u64
                }
            })
            .collect();
        check_against_sorted(&samples);
        check_against_sorted(&[5]);
        check_against_sorted(&(0..1000).collect::<Vec<u64>>());
        check_against_sorted(&[u64::MAX / 4, 1, 1 << 40]);
        assert_eq!(Histogram::new().percentile_ns(99.0), 0.0);
    }

    #[test]
    fn merged_histograms_equal_one_over_all_samples() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for ns in 0..10_000u64 {
            let v = ns * ns % 99_991;
            if ns % 3 == 0 { &mut a } else { &mut b }.record(v);
            all.record(v);
        }
        a.merge(&b);
        for p in [50.0, 99.0, 99.9] {
            assert_eq!(a.percentile_ns(p), all.percentile_ns(p));
        }
        assert_eq!(a.mean_ns(), all.mean_ns());
    }
}
