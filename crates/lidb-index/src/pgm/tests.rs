//! Tests of the pgm family beyond the conformance harness: optimality of the streaming model
//! against a brute-force dynamic programme, verification of every segment of every level, exact
//! internal routing, and decode validation. Every random case prints its seed on failure.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::codec::{self, PutLe};
use crate::family::{Params, decode};
use crate::points::staircase;
use crate::segment::Segment;

// ---------------------------------------------------------------------------------------------
// Brute force.

/// Whether some real line L has `max(y - eps, 0) <= L(x) <= y + eps` at every point (the model's
/// tolerance: within eps and non-negative), decided exactly. A non-empty feasible set of points
/// with distinct x has a vertex: a feasible line through one bound of point i and one bound of
/// point j for some i < j, so trying every such line decides it.
fn feasible(xs: &[u64], ys: &[u32], eps: u64) -> bool {
    if xs.len() <= 1 {
        return true;
    }
    let x: Vec<i128> = xs.iter().map(|&v| i128::from(v)).collect();
    let y: Vec<i128> = ys.iter().map(|&v| i128::from(v)).collect();
    let e = i128::from(eps);
    let low = |y: i128| (y - e).max(0);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            for y1 in [low(y[i]), y[i] + e] {
                for y2 in [low(y[j]), y[j] + e] {
                    let x1 = x[i];
                    let d = x[j] - x1;
                    // L(x_k) * d = y1 * d + (y2 - y1) * (x_k - x1)
                    let ok = x.iter().zip(&y).all(|(&xk, &yk)| {
                        let l = y1 * d + (y2 - y1) * (xk - x1);
                        low(yk) * d <= l && l <= (yk + e) * d
                    });
                    if ok {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// The minimum number of segments, by dynamic programming over prefixes: `reach[j]` is the end of
/// the longest feasible run starting at j (monotone in j, found by two pointers), and
/// `best[i] = min { best[j] + 1 : j < i <= reach[j] }`.
fn brute_min_segments(xs: &[u64], ys: &[u32], eps: u64) -> usize {
    let n = xs.len();
    let mut reach = vec![0; n];
    let mut e = 0;
    for j in 0..n {
        e = e.max(j + 1);
        while e < n && feasible(&xs[j..=e], &ys[j..=e], eps) {
            e += 1;
        }
        reach[j] = e;
    }
    let mut best = vec![usize::MAX; n + 1];
    best[0] = 0;
    for i in 1..=n {
        for j in 0..i {
            if reach[j] >= i && best[j] != usize::MAX {
                best[i] = best[i].min(best[j] + 1);
            }
        }
    }
    best[n]
}

/// The greedy segmentation of the exact model alone (no finalize): segment ends.
fn exact_greedy(xs: &[u64], ys: &[u32], eps: u64) -> Vec<usize> {
    let mut model = OptimalPla::new(eps);
    let mut ends = Vec::new();
    let mut start = 0;
    while start < xs.len() {
        model.reset(eps);
        let mut end = start;
        while end < xs.len() && model.add_point(xs[end], ys[end]) {
            end += 1;
        }
        assert_eq!(model.len(), end - start);
        ends.push(end);
        start = end;
    }
    ends
}

// ---------------------------------------------------------------------------------------------
// Small random inputs.

/// Small point sets with distinct increasing x, of several shapes; `kind` picks the shape.
fn small_points(rng: &mut ChaCha8Rng, kind: u32) -> (Vec<u64>, Vec<u32>) {
    let n = rng.gen_range(1..=40);
    match kind % 5 {
        // Non-decreasing random walk.
        0 => {
            let (mut x, mut y) = (rng.gen_range(0..10u64), rng.gen_range(0..10u32));
            (0..n)
                .map(|_| {
                    x += rng.gen_range(1..=4);
                    y += rng.gen_range(0..=3);
                    (x, y)
                })
                .unzip()
        }
        // The staircase of small keys with duplicates.
        1 => {
            let hi = rng.gen_range(2..60u64);
            let mut keys: Vec<u64> = (0..n).map(|_| rng.gen_range(0..hi)).collect();
            keys.sort_unstable();
            let p = staircase(&keys);
            (p.xs, p.ys)
        }
        // A walk that also goes down (the model takes any y).
        2 => {
            let (mut x, mut y) = (0u64, 30i64);
            (0..n)
                .map(|_| {
                    x += rng.gen_range(1..=3);
                    y = (y + rng.gen_range(-4..=4)).max(0);
                    (x, y as u32)
                })
                .unzip()
        }
        // Huge coordinates: near the top of the domain, with huge gaps.
        3 => {
            let gap = 1u64 << rng.gen_range(0..58);
            let base = u64::MAX - gap * 45;
            let mut y = 0u32;
            (0..n)
                .map(|i| {
                    y += rng.gen_range(0..=2);
                    (base + gap * i as u64 + rng.gen_range(0..gap.min(3)), y)
                })
                .unzip()
        }
        // Unit steps in y with random x gaps (a unique-key staircase).
        _ => {
            let mut x = 0u64;
            (0..n as u32)
                .map(|i| {
                    x += rng.gen_range(1..=6);
                    (x, i)
                })
                .unzip()
        }
    }
}

#[test]
fn streaming_segmentation_is_optimal_and_exact() {
    for seed in 0..600u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (xs, ys) = small_points(&mut rng, seed as u32);
        for eps in [0u64, 1, 2, 3, 5] {
            let ctx = format!(
                "seed={seed} kind={} eps={eps} xs={xs:?} ys={ys:?}",
                seed % 5
            );
            let ends = exact_greedy(&xs, &ys, eps);
            // Every answer of the model is the exact one: each segment is feasible and the point
            // that ended it is not feasible with it.
            let mut start = 0;
            for &end in &ends {
                assert!(feasible(&xs[start..end], &ys[start..end], eps), "{ctx}");
                if end < xs.len() {
                    assert!(
                        !feasible(&xs[start..=end], &ys[start..=end], eps),
                        "model refused a feasible point at {end}: {ctx}"
                    );
                }
                start = end;
            }
            assert_eq!(
                ends.len(),
                brute_min_segments(&xs, &ys, eps),
                "not optimal: {ctx}"
            );
            // With finalize (f32 slopes, integer intercepts) the count can only grow, and only
            // where stored slopes must be non-negative (kind 2 goes down).
            let mut model = OptimalPla::new(eps);
            let fitted = fit_level(&mut model, &xs, &ys, eps);
            assert!(fitted.len() >= ends.len(), "{ctx}");
            if seed % 5 != 2 {
                // On non-decreasing points (every staircase) the f32 slope and the integer
                // intercept never cut a segment of these inputs.
                assert_eq!(fitted.len(), ends.len(), "finalize cut a segment: {ctx}");
            }
        }
    }
}

/// Whether slope `dy / dx` (dx > 0) admits an intercept within the model's tolerance.
fn slope_feasible(xs: &[u64], ys: &[u32], eps: u64, dy: i128, dx: i128) -> bool {
    let e = i128::from(eps);
    // c * dx in [max(low_k * dx - dy * x_k), min((y_k + e) * dx - dy * x_k)]
    let (mut lo, mut hi) = (i128::MIN, i128::MAX);
    for (&x, &y) in xs.iter().zip(ys) {
        let (x, y) = (i128::from(x - xs[0]), i128::from(y));
        lo = lo.max((y - e).max(0) * dx - dy * x);
        hi = hi.min((y + e) * dx - dy * x);
    }
    lo <= hi
}

#[test]
fn the_slope_range_is_exactly_the_feasible_one() {
    // Both extreme lines of the rectangle are feasible, and no candidate slope outside their
    // range is (the extremes of a feasible set are attained at lines through two bound points).
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (xs, ys) = small_points(&mut rng, seed as u32);
        let eps = seed % 4;
        let e = i128::from(eps);
        let mut model = OptimalPla::new(eps);
        for k in 0..xs.len() {
            if !model.add_point(xs[k], ys[k]) {
                break;
            }
            let Some(((ldy, ldx), (hdy, hdx))) = model.slope_range() else {
                continue;
            };
            let (px, py) = (&xs[..=k], &ys[..=k]);
            let ctx = format!("seed={seed} k={k} eps={eps}");
            assert!(ldx > 0 && hdx > 0, "{ctx}");
            assert!(
                slope_feasible(px, py, eps, ldy, ldx),
                "min slope infeasible: {ctx}"
            );
            assert!(
                slope_feasible(px, py, eps, hdy, hdx),
                "max slope infeasible: {ctx}"
            );
            for i in 0..=k {
                for j in i + 1..=k {
                    let bounds = |y: u32| [(i128::from(y) - e).max(0), i128::from(y) + e];
                    for y1 in bounds(py[i]) {
                        for y2 in bounds(py[j]) {
                            let (dy, dx) = (y2 - y1, i128::from(px[j] - px[i]));
                            if slope_feasible(px, py, eps, dy, dx) {
                                assert!(ldy * dx <= dy * ldx, "below min: {ctx}");
                                assert!(dy * hdx <= hdy * dx, "above max: {ctx}");
                            }
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Built indexes.

/// Key sets of several shapes, sorted.
fn random_keys(rng: &mut ChaCha8Rng, kind: u32, n: usize) -> Vec<u64> {
    let mut keys: Vec<u64> = match kind % 4 {
        0 => (0..n).map(|_| rng.r#gen()).collect(),
        1 => (0..n)
            .map(|_| rng.gen_range(0..(n as u64 / 3).max(1)))
            .collect(),
        2 => {
            let mut k = 0u64;
            (0..n)
                .map(|_| {
                    k = k.saturating_add(1 << rng.gen_range(0..30));
                    k
                })
                .collect()
        }
        _ => (0..n)
            .map(|_| u64::MAX - rng.gen_range(0..n as u64 * 4))
            .collect(),
    };
    keys.sort_unstable();
    keys
}

/// Every point of every level is predicted within the level's error by the segment it routes to.
fn check_levels(pgm: &Pgm, keys: &[u64], ctx: &str) {
    let levels = pgm.levels();
    let pts = staircase(keys);
    let n = keys.len() as u64;
    for (&x, &y) in pts.xs.iter().zip(&pts.ys) {
        let leaf = &levels[0];
        let p = leaf.predict(leaf.route(x), x, n);
        let y = u64::from(y);
        assert!(
            p + pgm.eps_fit >= y && p <= y + pgm.eps_fit,
            "leaf x={x} y={y} p={p}: {ctx}"
        );
    }
    for pair in levels.windows(2) {
        let (below, level) = (&pair[0], &pair[1]);
        assert!(level.len() < below.len(), "{ctx}");
        assert_eq!(level.keys[0], below.keys[0], "{ctx}");
        for (y, &x) in below.keys.iter().enumerate() {
            let p = level.predict(level.route(x), x, below.len() as u64);
            let y = y as u64;
            assert!(
                p + pgm.eps_rec_fit >= y && p <= y + pgm.eps_rec_fit,
                "internal x={x} y={y} p={p}: {ctx}"
            );
        }
    }
    assert_eq!(levels.last().map(Segments::len), Some(1), "root: {ctx}");
}

/// The descent finds the exact route at every level, and the internal models alone already put
/// it in the predicted window (galloping is a safety net, not the mechanism).
fn check_descent(pgm: &Pgm, q: u64, ctx: &str) {
    let levels = pgm.levels();
    let mut j = 0;
    for pair in levels.windows(2).rev() {
        let (below, level) = (&pair[0], &pair[1]);
        assert_eq!(j, level.route(q), "q={q}: {ctx}");
        let p = level.predict(j, q, below.len() as u64);
        j = route_near(&below.keys, q, p, pgm.eps_rec_fit);
        assert_eq!(j, below.route(q), "q={q}: {ctx}");
        let e = pgm.eps_rec_fit;
        assert!(
            j as u64 + e + 1 >= p && (j as u64) < p + e + 2,
            "route {j} outside the window of {p}: q={q}: {ctx}"
        );
    }
    assert_eq!(pgm.leaf_route(q), levels[0].route(q), "q={q}: {ctx}");
}

#[test]
fn every_segment_of_every_level_is_verified_and_routing_is_exact() {
    for seed in 0..48u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(1..20_000);
        let keys = random_keys(&mut rng, seed as u32, n);
        for b in [2u64, 3, 8, 16, 100] {
            for eps_rec in [1u64, 2, 4, 16] {
                let mut params = Params::new(b);
                params.pgm_epsilon_recursive = eps_rec;
                let pgm = Pgm::build(&keys, &params).unwrap();
                let ctx = format!("seed={seed} n={n} B={b} eps_rec={eps_rec}");
                check_levels(&pgm, &keys, &ctx);
                let mut qs = vec![0, 1, u64::MAX, u64::MAX - 1, keys[0], keys[n - 1]];
                qs.extend((0..300).map(|_| rng.r#gen::<u64>()));
                qs.extend((0..300).map(|_| {
                    keys[rng.gen_range(0..n)]
                        .wrapping_add(rng.gen_range(0..3))
                        .wrapping_sub(1)
                }));
                for q in qs {
                    check_descent(&pgm, q, &ctx);
                    assert!(crate::bound::holds(&keys, q, pgm.search(q)), "q={q}: {ctx}");
                }
            }
        }
    }
}

#[test]
fn route_near_is_exact_for_any_prediction() {
    for seed in 0..200u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let len = rng.gen_range(0..300);
        let mut keys: Vec<u64> = (0..len).map(|_| rng.gen_range(0..1000)).collect();
        keys.sort_unstable();
        keys.dedup();
        let eps = rng.gen_range(0..6);
        for _ in 0..50 {
            let q = if rng.gen_bool(0.1) {
                u64::MAX
            } else {
                rng.gen_range(0..1100)
            };
            let want = keys.partition_point(|&k| k <= q).saturating_sub(1);
            for p in [0, 1, rng.gen_range(0..400), keys.len() as u64, u64::MAX] {
                assert_eq!(
                    route_near(&keys, q, p, eps),
                    want,
                    "seed={seed} q={q} p={p}"
                );
            }
        }
    }
}

#[test]
fn recursion_ends_in_one_root_and_stats_describe_it() {
    let keys: Vec<u64> = (0..200_000u64).map(|i| i * i / 7).collect();
    let pgm = Pgm::build(&keys, &Params::new(16)).unwrap();
    let per_level = pgm.segments_per_level();
    assert!(per_level.len() >= 2, "{per_level:?}");
    assert_eq!(per_level.last(), Some(&1));
    assert!(per_level.windows(2).all(|w| w[1] < w[0]), "{per_level:?}");
    let stats = pgm.stats();
    assert_eq!(stats.models, per_level[0]);
    assert_eq!(
        stats.details,
        vec![
            ("epsilon", StatValue::U64(7)),
            ("epsilon_recursive", StatValue::U64(4)),
            ("segments_per_level", StatValue::List(per_level.clone())),
            ("levels", StatValue::U64(per_level.len() as u64)),
        ]
    );
    // A straight line is one segment: the leaf is the root.
    let line: Vec<u64> = (0..10_000u64).map(|i| 1_000 + 3 * i).collect();
    let pgm = Pgm::build(&line, &Params::new(2)).unwrap();
    assert_eq!(pgm.segments_per_level(), vec![1]);
    let empty = Pgm::build(&[], &Params::new(16)).unwrap();
    assert!(empty.segments_per_level().is_empty());
    assert_eq!(empty.search(5), Bound { lo: 0, hi: 0 });
}

#[test]
fn huge_errors_are_clamped_for_fitting_only() {
    let keys: Vec<u64> = (0..5_000u64).map(|i| i * i).collect();
    let mut params = Params::new(u64::MAX);
    params.pgm_epsilon_recursive = u64::MAX;
    let pgm = Pgm::build(&keys, &params).unwrap();
    assert_eq!(pgm.segments_per_level(), vec![1]);
    let back = decode(&pgm.encode()).unwrap();
    assert_eq!(back.stats(), pgm.stats());
    for q in [0, 7, 24_999_999, u64::MAX] {
        assert!(crate::bound::holds(&keys, q, pgm.search(q)));
    }
}

// ---------------------------------------------------------------------------------------------
// Decode validation.

/// Frames a hand-made payload as a pgm encoding over `n` keys with boundary `b`.
fn framed(n: u64, b: u64, payload: &[u8]) -> Vec<u8> {
    let header = Header {
        family_tag: Family::Pgm.tag(),
        key_count: n,
        boundary: b,
        payload_len: payload.len() as u64,
    };
    codec::frame(header, payload)
}

fn seg(key: u64, intercept: u32) -> Segment {
    Segment {
        key,
        slope: 0.5,
        intercept,
    }
}

fn payload(eps: u64, eps_rec: u64, levels: &[Vec<Segment>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_u64(eps);
    out.put_u64(eps_rec);
    out.put_u64(levels.len() as u64);
    for l in levels {
        let mut s = Segments::default();
        l.iter().for_each(|&x| s.push(x));
        s.write(&mut out);
    }
    out
}

#[test]
fn decode_accepts_a_valid_hand_made_structure() {
    let p = payload(
        7,
        4,
        &[vec![seg(10, 0), seg(20, 5), seg(30, 9)], vec![seg(10, 0)]],
    );
    let idx = decode(&framed(12, 16, &p)).unwrap();
    assert_eq!(idx.stats().models, 3);
}

#[test]
fn decode_rejects_broken_structures() {
    let leaf = vec![seg(10, 0), seg(20, 5), seg(30, 9)];
    let bad: Vec<(&str, Vec<u8>, u64)> = vec![
        (
            "eps not the boundary's",
            payload(6, 4, &[leaf.clone(), vec![seg(10, 0)]]),
            12,
        ),
        (
            "eps_rec zero",
            payload(7, 0, &[leaf.clone(), vec![seg(10, 0)]]),
            12,
        ),
        ("levels for no keys", payload(7, 4, &[vec![seg(10, 0)]]), 0),
        ("no levels for keys", payload(7, 4, &[]), 12),
        (
            "root of three",
            payload(7, 4, std::slice::from_ref(&leaf)),
            12,
        ),
        ("empty level", payload(7, 4, &[leaf.clone(), vec![]]), 12),
        (
            "level does not shrink",
            payload(7, 4, &[vec![seg(10, 0)], vec![seg(10, 0)]]),
            12,
        ),
        (
            "root starts elsewhere",
            payload(7, 4, &[leaf.clone(), vec![seg(11, 0)]]),
            12,
        ),
        (
            "internal intercept past the level below",
            payload(7, 4, &[leaf.clone(), vec![seg(10, 4)]]),
            12,
        ),
        (
            "more leaf segments than keys",
            payload(7, 4, &[leaf.clone(), vec![seg(10, 0)]]),
            2,
        ),
        (
            "trailing bytes",
            {
                let mut p = payload(7, 4, &[leaf.clone(), vec![seg(10, 0)]]);
                p.push(0);
                p
            },
            12,
        ),
        (
            "level count too large",
            {
                let mut p = payload(7, 4, &[leaf.clone(), vec![seg(10, 0)]]);
                p[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
                p
            },
            12,
        ),
    ];
    for (what, p, n) in bad {
        assert!(decode(&framed(n, 16, &p)).is_err(), "{what} decoded");
    }
}

#[test]
fn the_streamed_staircase_is_the_staircase() {
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(0..200);
        let mut keys = random_keys(&mut rng, seed as u32, n);
        if seed % 3 == 0 {
            // Runs next to each other and at the top of the domain.
            keys = keys.iter().map(|k| u64::MAX - k % 8).collect();
            keys.sort_unstable();
        }
        let want = staircase(&keys);
        let (xs, ys): (Vec<u64>, Vec<u32>) = Staircase::new(&keys).unzip();
        assert_eq!((xs, ys), (want.xs, want.ys), "seed={seed} keys={keys:?}");
    }
}

#[test]
fn fitting_from_the_stream_equals_fitting_the_materialised_staircase() {
    for seed in 0..40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(1..5_000);
        let keys = random_keys(&mut rng, seed as u32, n);
        let pts = staircase(&keys);
        for eps in [0u64, 1, 7, 31] {
            let mut model = OptimalPla::new(eps);
            let a = fit_level(&mut model, &pts.xs, &pts.ys, eps);
            let b = fit::fit_levels(&keys, eps, 4);
            assert_eq!(a, b[0], "seed={seed} eps={eps}");
        }
    }
}

#[test]
fn decoding_mutated_payloads_never_panics_and_decoded_indexes_search_safely() {
    let keys: Vec<u64> = (0..3_000u64).map(|i| i * i * 13).collect();
    let n = keys.len() as u64;
    let pgm = Pgm::build(&keys, &Params::new(8)).unwrap();
    let mut valid = Vec::new();
    pgm.write_payload(&mut valid);
    let mut accepted = 0;
    for seed in 0..3_000u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut p = valid.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..p.len());
            p[at] = match rng.gen_range(0..3) {
                0 => rng.r#gen(),
                1 => p[at] ^ (1 << rng.gen_range(0..8)),
                _ => 0xff,
            };
        }
        if rng.gen_bool(0.1) {
            p.truncate(rng.gen_range(0..p.len()));
        }
        // Re-framed, so the checksum holds and only the structure checks stand in the way.
        if let Ok(idx) = decode(&framed(n, 8, &p)) {
            accepted += 1;
            for q in [0, 1, keys[7], u64::MAX, rng.r#gen()] {
                let b = idx.search(q);
                assert!(b.lo <= b.hi && b.hi <= n, "seed={seed} q={q} {b:?}");
            }
        }
    }
    // Mutations of slopes and intercepts within range are structurally valid: some decode.
    assert!(accepted > 0);
}
