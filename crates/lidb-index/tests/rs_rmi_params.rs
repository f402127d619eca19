//! The conformance checks for the non-default parameters of rs (radix bits) and rmi (cubic
//! root), over the shared distributions of `common`: contract, width, round trip.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

mod common;

use common::{cases, queries};
use lidb_index::{Family, Params, RmiRoot, bound, build, decode};

fn run(family: Family, params: impl Fn(u64) -> Params) {
    for case in cases() {
        let qs = queries(&case.keys, case.seed);
        for b in [2u64, 3, 8, 16, 64, 4096] {
            let p = params(b);
            let idx = build(family, &case.keys, &p).unwrap();
            let back = decode(&idx.encode()).unwrap();
            assert_eq!(idx.size_bytes(), idx.encode().len() as u64);
            for &q in &qs {
                let got = idx.search(q);
                assert!(
                    bound::holds(&case.keys, q, got) && got.width() <= b,
                    "{family} {p:?} case={} q={q} got={got:?}",
                    case.name
                );
                assert_eq!(back.search(q), got);
            }
        }
    }
}

#[test]
fn rmi_cubic_root() {
    run(Family::Rmi, |b| {
        let mut p = Params::new(b);
        p.rmi_root = RmiRoot::Cubic;
        p
    });
}

#[test]
fn rs_radix_bits() {
    for bits in [0u32, 2, 8, 18, 30] {
        run(Family::Rs, |b| {
            let mut p = Params::new(b);
            p.rs_radix_bits = bits;
            p
        });
    }
}
