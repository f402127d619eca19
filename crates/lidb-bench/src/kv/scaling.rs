//! Scaling over thread counts: each row's throughput over the one-thread figure of the same
//! measurement (same engine, phase, operation and workload; for `lidb bench btree` the same
//! engine, experiment and operation). Used by `lidb bench ycsb` and `lidb bench btree` once all
//! their rows are in; pure, any thread.
//!
//! Invariants:
//! 1. A row's scaling is `kops_per_s / base`, where base is the `kops_per_s` of the one row of
//!    the same key at 1 thread; so the 1-thread row itself gets exactly 1.0 (when its figure is
//!    above 0).
//! 2. `None` when the run had no 1-thread row of that key (1 not in `--threads`), when the base
//!    figure is 0, or when the row has no key (a single-threaded load row, which runs on one
//!    thread whatever the count).

/// A row that can carry a scaling figure.
pub trait ScaledRow {
    /// What must match for two rows to be the same measurement at different thread counts.
    type Key: PartialEq;
    /// `None`: the row has no scaling (invariant 2).
    fn scaling_key(&self) -> Option<Self::Key>;
    fn threads(&self) -> usize;
    fn kops_per_s(&self) -> f64;
    fn set_scaling(&mut self, scaling: Option<f64>);
}

/// Sets the scaling of every row of `rows` (invariants 1 and 2).
pub fn fill<R: ScaledRow>(rows: &mut [R]) {
    let bases: Vec<(R::Key, f64)> = rows
        .iter()
        .filter(|r| r.threads() == 1)
        .filter_map(|r| Some((r.scaling_key()?, r.kops_per_s())))
        .collect();
    for r in rows.iter_mut() {
        let scaling = r.scaling_key().and_then(|key| {
            let base = bases.iter().find(|(k, _)| *k == key)?.1;
            (base > 0.0).then(|| r.kops_per_s() / base)
        });
        r.set_scaling(scaling);
    }
}

/// `scaling` for a table cell: "1.87x", or "-" for none.
pub fn cell(scaling: Option<f64>) -> String {
    scaling.map_or("-".to_string(), |s| format!("{s:.2}x"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct R {
        key: Option<&'static str>,
        threads: usize,
        kops: f64,
        scaling: Option<f64>,
    }

    impl ScaledRow for R {
        type Key = &'static str;
        fn scaling_key(&self) -> Option<&'static str> {
            self.key
        }
        fn threads(&self) -> usize {
            self.threads
        }
        fn kops_per_s(&self) -> f64 {
            self.kops
        }
        fn set_scaling(&mut self, scaling: Option<f64>) {
            self.scaling = scaling;
        }
    }

    fn r(key: Option<&'static str>, threads: usize, kops: f64) -> R {
        R {
            key,
            threads,
            kops,
            scaling: Some(-1.0),
        }
    }

    #[test]
    fn each_row_is_over_its_own_one_thread_figure() {
        let mut rows = vec![
            r(Some("lsm"), 1, 100.0),
            r(Some("kv"), 1, 50.0),
            r(Some("lsm"), 2, 180.0),
            r(Some("kv"), 2, 40.0),
            r(None, 2, 10.0),
            r(Some("only-two"), 2, 10.0),
            r(Some("zero"), 1, 0.0),
            r(Some("zero"), 2, 5.0),
        ];
        fill(&mut rows);
        let got: Vec<Option<f64>> = rows.iter().map(|r| r.scaling).collect();
        assert_eq!(
            got,
            vec![
                Some(1.0),
                Some(1.0),
                Some(1.8),
                Some(0.8),
                None,
                None,
                None,
                None
            ]
        );
        assert_eq!(cell(Some(1.834)), "1.83x");
        assert_eq!(cell(None), "-");
    }
}
