//! Tests of the LPA models: every router the probe makes holds the error bound for present and
//! absent keys of many shapes, and the probe decides as the old one did (a fresh least-squares
//! pass and a `finalize` per proposal, kept here as the reference). Seeded; each failure names
//! its shape, seed and configuration.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use lidb_index::bound::holds;
use lidb_index::segment::finalize;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
#[path = "../tests/common/key_shapes.rs"]
mod key_shapes;
use crate::layout::MAX_NODE_RECORDS;
use key_shapes::{SHAPES, keys_of};

/// Least-squares slope of the points `start..end` (on deltas from the first one), or `None` if
/// the range is empty or out of bounds.
fn ls_slope(xs: &[u64], ys: &[u32], start: usize, end: usize) -> Option<f64> {
    let (sx, sy) = (xs.get(start..end)?, ys.get(start..end)?);
    let (&x0, &y0) = (sx.first()?, sy.first()?);
    let (mut m, mut x, mut y, mut xx, mut xy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (&px, &py) in sx.iter().zip(sy) {
        let dx = (px - x0) as f64;
        let dy = f64::from(py) - f64::from(y0);
        m += 1.0;
        x += dx;
        y += dy;
        xx += dx * dx;
        xy += dx * dy;
    }
    let var = m * xx - x * x;
    let cov = m * xy - x * y;
    Some(if var > 0.0 { cov / var } else { 0.0 })
}

/// The old probe's check: the slope of a fresh least-squares pass over `start..end`, if the
/// model `finalize` makes of it holds them all.
fn reference_fits(xs: &[u64], ys: &[u32], start: usize, end: usize, eps: u64) -> Option<f64> {
    let slope = ls_slope(xs, ys, start, end)?;
    let (sx, sy) = (xs.get(start..end)?, ys.get(start..end)?);
    (finalize(sx, sy, slope, eps).1 == end - start).then_some(slope)
}

/// The probe as it was before its incremental checks: a fresh least-squares pass and a
/// `finalize` per proposal, otherwise the same steps.
fn reference_propose(
    xs: &[u64],
    ys: &[u32],
    start: usize,
    step: usize,
    rate: f64,
    eps: u64,
) -> (usize, f64) {
    let n = xs.len();
    // The slope of the least-squares line over start..end if its stored form holds them all.
    let fits = |end: usize| reference_fits(xs, ys, start, end, eps);
    // One point always holds.
    let (mut good, mut good_slope) = (start + 1, 0.0);
    if good >= n {
        return (good.min(n).max(start + 1), good_slope);
    }
    // Forward, doubling the step, while the model holds.
    let mut step = step.max(1);
    let mut bad = loop {
        let end = start.saturating_add(step).min(n);
        if end <= good {
            step = step.saturating_mul(2);
            continue;
        }
        match fits(end) {
            Some(slope) => {
                (good, good_slope) = (end, slope);
                if end == n {
                    return (good, good_slope);
                }
                step = step.saturating_mul(2);
            }
            None => break end,
        }
    };
    // Backward: between the last length that held and the first that did not, steps shrinking
    // by `rate`, each repeated while it holds.
    let mut gap = bad - good;
    while bad - good > 1 {
        gap = ((gap as f64 * rate) as usize).clamp(1, bad - good - 1);
        let mut at = good + gap;
        while at < bad {
            match fits(at) {
                Some(slope) => {
                    (good, good_slope) = (at, slope);
                    at += gap;
                }
                None => {
                    bad = at;
                    break;
                }
            }
        }
        if gap == 1 {
            break;
        }
    }
    (good, good_slope)
}

/// `Router::train` with the old probe.
fn reference_train(keys: &[u64], cfg: &Config) -> Segments {
    let pts = staircase(keys);
    let mut step = usize::try_from(cfg.learning_step).unwrap().max(1);
    Segments::fit_all(&pts.xs, &pts.ys, cfg.threshold, |start| {
        let rate = cfg.learning_rate;
        let (end, slope) = reference_propose(&pts.xs, &pts.ys, start, step, rate, cfg.threshold);
        step = power_of_ten_at_most(end.saturating_sub(start));
        (end, slope)
    })
}

/// Configurations: the paper's parameters, and tiny bounds and steps that make many models.
fn configs() -> Vec<Config> {
    let with = |threshold, learning_step, learning_rate| Config {
        threshold,
        learning_step,
        learning_rate,
        ..Config::default()
    };
    vec![
        Config::default(),
        with(0, 4, 0.5),
        with(1, 1, 0.9),
        with(4, 100, 0.1),
    ]
}

/// Checks `router` (trained over `keys`) for every key, its neighbours and a few other queries:
/// the model's window holds the lower bound (the lidb-index contract) and `lower_bound` is exact.
fn assert_exact(router: &Router, keys: &[u64], rng: &mut ChaCha8Rng, ctx: &str) {
    let n = keys.len() as u64;
    let mut queries = vec![0, u64::MAX, rng.r#gen()];
    for &k in keys {
        queries.extend([k, k.wrapping_sub(1), k.wrapping_add(1)]);
    }
    for q in queries {
        let want = keys.partition_point(|&k| k < q);
        if !router.segs.is_empty() {
            let j = route(&router.segs.keys, q);
            let b = window(router.segs.predict(j, q, n), router.eps, n);
            assert!(
                holds(keys, q, b),
                "{ctx}: window {b:?} misses q = {q} (lower bound {want})"
            );
        }
        assert_eq!(router.lower_bound(keys, q), want, "{ctx}: q = {q}");
    }
}

#[test]
fn branch_free_route_matches_partition_point() {
    let firsts = [3u64, 9, 20, 21, 100];
    for q in 0..120 {
        let want = firsts.partition_point(|&k| k <= q).saturating_sub(1);
        assert_eq!(route(&firsts, q), want, "q = {q}");
    }
    assert_eq!(route(&[], 5), 0);
}

#[test]
fn a_short_dense_run_before_sparse_keys_is_one_model() {
    // 256 consecutive keys, then sparse ones: the run must not become one model per key.
    let mut keys: Vec<u64> = (0..256u64).map(|i| (1 << 50) + i).collect();
    keys.extend((1..2_000u64).map(|i| (1 << 50) + i * 1_000_003));
    let router = Router::train(&keys, &Config::default());
    assert!(router.models() <= 8, "{} models", router.models());
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(router.lower_bound(&keys, k), i);
    }
}

#[test]
fn powers_of_ten() {
    assert_eq!(power_of_ten_at_most(0), 1);
    assert_eq!(power_of_ten_at_most(9), 1);
    assert_eq!(power_of_ten_at_most(10), 10);
    assert_eq!(power_of_ten_at_most(256), 100);
    assert_eq!(power_of_ten_at_most(1_000_000), 1_000_000);
}

#[test]
fn lower_bound_is_exact_for_present_and_absent_keys() {
    let cfg = Config::default();
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * i / 7 + 3 * i).collect();
    let router = Router::train(&keys, &cfg);
    assert!(router.models() >= 1);
    for q in (0..keys[keys.len() - 1] + 5).step_by(97) {
        assert_eq!(
            router.lower_bound(&keys, q),
            keys.partition_point(|&k| k < q)
        );
    }
    for (i, &k) in keys.iter().enumerate().step_by(13) {
        assert_eq!(router.lower_bound(&keys, k), i);
    }
}

#[test]
fn every_router_holds_its_keys_on_every_shape() {
    for (c, cfg) in configs().iter().enumerate() {
        for (shape, name) in SHAPES.iter().enumerate() {
            for seed in 0..4 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let keys = keys_of(shape, 3_000, &mut rng);
                let ctx = format!("{name} seed {seed} config {c}");
                let router = Router::train(&keys, cfg);
                assert!(router.models() >= 1, "{ctx}");
                assert_exact(&router, &keys, &mut rng, &ctx);
                for max_len in [1, 3, 64, MAX_NODE_RECORDS] {
                    let pieces = Router::train_pieces(&keys, cfg, max_len);
                    let mut at = 0;
                    for (range, router) in &pieces {
                        let ctx = format!("{ctx} pieces of {max_len}: {range:?}");
                        assert_eq!(range.start, at, "{ctx}: pieces do not tile the keys");
                        assert!(!range.is_empty() && range.len() <= max_len, "{ctx}");
                        assert!(router.models() >= 1, "{ctx}");
                        assert_exact(router, &keys[range.clone()], &mut rng, &ctx);
                        at = range.end;
                    }
                    assert_eq!(at, keys.len(), "{ctx} pieces of {max_len}");
                }
            }
        }
    }
}

#[test]
fn no_keys_make_no_pieces() {
    assert!(Router::train_pieces(&[], &Config::default(), 8).is_empty());
    let router = Router::train(&[], &Config::default());
    assert_eq!(router.lower_bound(&[], 7), 0);
}

#[test]
fn a_long_linear_run_is_cut_into_pieces_of_one_model() {
    let keys: Vec<u64> = (0..200_000u64).map(|i| 5 + 3 * i).collect();
    let pieces = Router::train_pieces(&keys, &Config::default(), MAX_NODE_RECORDS);
    let lens: Vec<usize> = pieces.iter().map(|(r, _)| r.len()).collect();
    assert_eq!(lens, [65_536, 65_536, 65_536, 3_392]);
    for (range, router) in &pieces {
        assert_eq!(router.models(), 1, "{range:?}");
        let piece = &keys[range.clone()];
        for (i, &k) in piece.iter().enumerate().step_by(97) {
            assert_eq!(router.lower_bound(piece, k), i);
            assert_eq!(router.lower_bound(piece, k + 1), i + 1);
        }
    }
}

#[test]
fn the_probe_accepts_what_finalize_accepts() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (mut checked, mut held, mut carried) = (0, 0, 0);
    for eps in [0, 2, 32] {
        for (shape, name) in SHAPES.iter().enumerate() {
            let keys = keys_of(shape, 20_000, &mut rng);
            let pts = staircase(&keys);
            let (xs, ys, n) = (&pts.xs, &pts.ys, pts.len());
            let probe = Probe::new(xs, ys, eps);
            for _ in 0..100 {
                if n < 3 {
                    break;
                }
                let start = rng.gen_range(0..n - 2);
                let end = n.min(start + 1 + (1 << rng.gen_range(0..13)));
                let ctx = format!("{name} eps {eps}: {start}..{end}");
                let want = reference_fits(xs, ys, start, end, eps).map(f64::to_bits);
                let got = probe.fits(&probe.one_point(start), end);
                assert_eq!(got.map(|(_, s)| s.to_bits()), want, "{ctx}");
                // Grown through shorter proposals that held (their points then read through
                // the hulls): the same answer, and the same slope bit for bit.
                let mut grown = probe.one_point(start);
                for _ in 0..4 {
                    let mid = grown.end + rng.gen_range(0..=(end - grown.end) / 10);
                    if mid > grown.end {
                        let Some((sums, slope)) = probe.fits(&grown, mid) else {
                            break;
                        };
                        probe.grow(&mut grown, mid, sums, slope);
                    }
                }
                let got = probe.fits(&grown, end);
                assert_eq!(
                    got.map(|(_, s)| s.to_bits()),
                    want,
                    "{ctx} via {}",
                    grown.end
                );
                checked += 1;
                held += usize::from(want.is_some());
                carried += usize::from(grown.end > start + 1);
            }
        }
    }
    // Both answers occur often enough to mean something, and many checks went through hulls.
    println!("{held} of {checked} held, {carried} through hulls");
    assert!(
        held * 5 > checked && held * 5 < checked * 4,
        "{held} of {checked} held"
    );
    assert!(carried * 3 > checked, "{carried} of {checked} carried");
}

#[test]
fn the_probe_makes_as_many_models_as_the_reference() {
    let (mut new_total, mut old_total, mut same) = (0, 0, 0);
    let mut cases = 0;
    for (c, cfg) in configs().iter().enumerate() {
        for (shape, name) in SHAPES.iter().enumerate() {
            for seed in 0..3 {
                let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
                let keys = keys_of(shape, 5_000, &mut rng);
                let new = Router::train(&keys, cfg);
                let old = reference_train(&keys, cfg);
                let (a, b) = (new.models(), old.len());
                assert!(
                    a <= b * 3 / 2 + 1 && b <= a * 3 / 2 + 1,
                    "{name} seed {seed} config {c}: {a} models, the reference {b}"
                );
                (new_total, old_total) = (new_total + a, old_total + b);
                same += usize::from(new.segs == old);
                cases += 1;
            }
        }
    }
    println!("{new_total} models, the reference {old_total}; {same} of {cases} sets the same");
    assert!(
        new_total.abs_diff(old_total) * 100 <= old_total,
        "{new_total} vs {old_total}"
    );
}

/// Twice the signed area of `a, b, p`, for any three points.
fn cross(a: Point, b: Point, p: Point) -> i128 {
    let (ax, bx, px) = (i128::from(a.x), i128::from(b.x), i128::from(p.x));
    let (ay, by, py) = (i128::from(a.y), i128::from(b.y), i128::from(p.y));
    (bx - ax) * (py - ay) - (by - ay) * (px - ax)
}

#[test]
fn every_point_of_a_grown_model_lies_between_its_hulls() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (shape, name) in SHAPES.iter().enumerate() {
        let keys = keys_of(shape, 3_000, &mut rng);
        let pts = staircase(&keys);
        let probe = Probe::new(&pts.xs, &pts.ys, 0);
        for _ in 0..20 {
            let start = rng.gen_range(0..pts.len());
            let end = rng.gen_range(start + 1..=pts.len());
            let mut grown = probe.one_point(start);
            while grown.end < end {
                let to = rng.gen_range(grown.end + 1..=end);
                probe.grow(&mut grown, to, Sums::default(), 0.0);
            }
            let points: Vec<Point> = (start..end)
                .map(|i| Point {
                    x: pts.xs[i],
                    y: pts.ys[i],
                })
                .collect();
            let ctx = format!("{name} {start}..{end}");
            for hull in [&grown.upper, &grown.lower] {
                assert_eq!(hull.first().map(|p| p.x), Some(points[0].x), "{ctx}");
                assert_eq!(
                    hull.last().map(|p| p.x),
                    points.last().map(|p| p.x),
                    "{ctx}"
                );
            }
            for p in &points {
                for w in grown.upper.windows(2) {
                    assert!(cross(w[0], w[1], *p) <= 0, "{ctx}: {p:?} above {w:?}");
                }
                for w in grown.lower.windows(2) {
                    assert!(cross(w[0], w[1], *p) >= 0, "{ctx}: {p:?} below {w:?}");
                }
            }
            // The binary search over a hull finds the largest residual of all the points.
            for slope in [0.0, 1e-12, 1e-6, 0.01, 1.0, 100.0] {
                let value = |p: Point| f64::from(p.y) - slope * (p.x - points[0].x) as f64;
                let all = points.iter().map(|&p| value(p)).fold(f64::MIN, f64::max);
                let top = peak(&grown.upper, value);
                assert!(
                    top <= all && top >= all - 1e-6 * all.abs().max(1.0),
                    "{ctx}"
                );
                let low = points.iter().map(|&p| value(p)).fold(f64::MAX, f64::min);
                let bottom = -peak(&grown.lower, |p| -value(p));
                assert!(
                    bottom >= low && bottom <= low + 1e-6 * low.abs().max(1.0),
                    "{ctx}"
                );
            }
        }
    }
}
