//! The one conformance harness for the index contract (src/bound.rs): every family, every
//! boundary in BOUNDARIES, every distribution in `cases()` (plus the real datasets when the data
//! directory exists), with present, absent and extreme queries, checked against binary search.
//! It also checks the encoding: size_bytes() == encode().len(), decode answers identically, and
//! truncated or bit-flipped bytes decode to an error without panicking.
//!
//! Run one family with `cargo test -p lidb-index --test conformance pgm`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

mod common;

use common::{Case, cases, queries};
use lidb_index::{Family, LearnedIndex, Params, bound, build, decode, lower_bound_with};

const BOUNDARIES: [u64; 7] = [2, 4, 8, 16, 64, 256, 4096];

/// Checks the contract for every query; panics with everything needed to replay a failure.
fn check_search(idx: &dyn LearnedIndex, case: &Case, b: u64, qs: &[u64]) {
    let keys = &case.keys;
    for &q in qs {
        let got = idx.search(q);
        let lb = bound::lower_bound(keys, q);
        let ctx = || {
            format!(
                "family={} case={} (seed {}) n={} B={b} q={q}: search={got:?} lower_bound={lb}",
                idx.family(),
                case.name,
                case.seed,
                keys.len()
            )
        };
        assert!(
            bound::holds(keys, q, got),
            "range misses the answer: {}",
            ctx()
        );
        if idx.family().is_bounded() {
            assert!(got.width() <= b, "range wider than B: {}", ctx());
        }
        assert_eq!(
            lower_bound_with(idx, keys, q),
            lb,
            "last-mile lookup: {}",
            ctx()
        );
    }
}

/// Round trip and corruption checks of one built index.
fn check_encoding(idx: &dyn LearnedIndex, case: &Case, b: u64, qs: &[u64]) {
    let name = format!("family={} case={} B={b}", idx.family(), case.name);
    let bytes = idx.encode();
    assert_eq!(
        bytes.len() as u64,
        idx.size_bytes(),
        "size_bytes != encoding: {name}"
    );
    let back = decode(&bytes).unwrap_or_else(|e| panic!("decode failed: {name}: {e}"));
    assert_eq!(back.family(), idx.family(), "{name}");
    assert_eq!(back.key_count(), idx.key_count(), "{name}");
    assert_eq!(back.stats(), idx.stats(), "{name}");
    for &q in qs {
        assert_eq!(
            back.search(q),
            idx.search(q),
            "decoded index answers differently: {name} q={q}"
        );
    }
    // Truncation at a spread of lengths, every length for small encodings.
    let step = (bytes.len() / 64).max(1);
    for len in (0..bytes.len()).step_by(step) {
        assert!(
            decode(&bytes[..len]).is_err(),
            "truncated to {len} bytes decoded: {name}"
        );
    }
    // Single bit flips are always caught (CRC-32C detects every one), and must not panic.
    let step = (bytes.len() * 8 / 96).max(1);
    for bit in (0..bytes.len() * 8).step_by(step) {
        let mut bad = bytes.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(decode(&bad).is_err(), "bit {bit} flipped decoded: {name}");
    }
}

fn run_family(family: Family) {
    for case in cases() {
        let qs = queries(&case.keys, case.seed);
        for b in BOUNDARIES {
            let idx = build(family, &case.keys, &Params::new(b)).unwrap_or_else(|e| {
                panic!(
                    "build failed: family={family} case={} B={b}: {e}",
                    case.name
                )
            });
            check_search(idx.as_ref(), &case, b, &qs);
            check_encoding(idx.as_ref(), &case, b, &qs);
        }
    }
}

fn run_family_real(family: Family) {
    let Some(sets) = common::real_cases("conformance_real") else {
        return;
    };
    for case in sets {
        let qs = queries(&case.keys, case.seed);
        for b in BOUNDARIES {
            let idx = build(family, &case.keys, &Params::new(b)).unwrap_or_else(|e| {
                panic!(
                    "build failed: family={family} case={} B={b}: {e}",
                    case.name
                )
            });
            check_search(idx.as_ref(), &case, b, &qs);
        }
    }
}

macro_rules! conformance {
    ($($name:ident => $family:expr),* $(,)?) => {
        mod synthetic {
            use super::*;
            $( #[test] fn $name() { run_family($family); } )*
        }
        mod real_data {
            use super::*;
            $( #[test] fn $name() { run_family_real($family); } )*
        }
        mod property {
            use super::*;
            use proptest::prelude::*;
            use proptest::test_runner::{Config, RngSeed};
            $(
                proptest! {
                    #![proptest_config(Config {
                        cases: 96,
                        rng_seed: RngSeed::Fixed(0x11db),
                        failure_persistence: None,
                        ..Config::default()
                    })]
                    #[test]
                    fn $name(keys in common::sorted_keys(), b in 2u64..300, extra in proptest::collection::vec(any::<u64>(), 0..64)) {
                        let case = Case { name: "proptest".into(), seed: 0x11db, keys };
                        let idx = build($family, &case.keys, &Params::new(b)).unwrap();
                        let mut qs = queries(&case.keys, 7);
                        qs.extend(extra);
                        check_search(idx.as_ref(), &case, b, &qs);
                        let back = decode(&idx.encode()).unwrap();
                        for &q in &qs {
                            prop_assert_eq!(back.search(q), idx.search(q));
                        }
                    }
                }
            )*
        }
    };
}

conformance! {
    fp => Family::Fp,
    binary => Family::Binary,
    plr => Family::Plr,
    fiting => Family::Fiting,
    pgm => Family::Pgm,
    rs => Family::Rs,
    rmi => Family::Rmi,
    lpa => Family::Lpa,
    plex => Family::Plex,
}

#[test]
fn every_family_is_in_the_harness() {
    // The macro above lists the families by hand; this fails when one is added without a line.
    assert_eq!(Family::ALL.len(), 9);
}

#[test]
fn bad_parameters_and_unsorted_keys_are_errors() {
    for family in Family::ALL {
        assert!(
            build(family, &[1, 2, 3], &Params::new(1)).is_err(),
            "{family} took B = 1"
        );
        let err = build(family, &[1, 3, 2], &Params::new(16)).err();
        assert_eq!(
            err,
            Some(lidb_index::Error::Unsorted { position: 2 }),
            "{family}"
        );
    }
}
