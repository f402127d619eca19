//! The conformance checks for every finder layout PLEX can store, not only the ones its tuner
//! picks for the shared distributions of `common` (small sets tune to a radix table): contract,
//! width, round trip, exact size. Hist-trees of 1 to 16 bits a node over keys spanning all 64
//! bits, duplicate runs and the extremes of the domain.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

mod common;

use common::{cases, queries};
use lidb_index::plex::Plex;
use lidb_index::plex::tune::Layout;
use lidb_index::{LearnedIndex, bound, decode};

const LAYOUTS: [Layout; 7] = [
    Layout::Radix { bits: 0 },
    Layout::Radix { bits: 5 },
    Layout::Radix { bits: 14 },
    Layout::Tree {
        bin_bits: 1,
        max_error: 1,
    },
    Layout::Tree {
        bin_bits: 3,
        max_error: 7,
    },
    Layout::Tree {
        bin_bits: 8,
        max_error: 2,
    },
    Layout::Tree {
        bin_bits: 16,
        max_error: 255,
    },
];

#[test]
fn every_layout_over_every_distribution() {
    for case in cases() {
        let qs = queries(&case.keys, case.seed);
        for b in [2u64, 3, 16, 64] {
            for layout in LAYOUTS {
                let idx = Plex::build_with(&case.keys, b, layout).unwrap();
                let bytes = idx.encode();
                assert_eq!(idx.size_bytes(), bytes.len() as u64);
                let back = decode(&bytes).unwrap();
                for &q in &qs {
                    let got = idx.search(q);
                    assert!(
                        bound::holds(&case.keys, q, got) && got.width() <= b,
                        "{layout:?} B={b} case={} (seed {}) q={q} got={got:?}",
                        case.name,
                        case.seed
                    );
                    assert_eq!(back.search(q), got);
                }
            }
        }
    }
}
