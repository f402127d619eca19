//! Micro-benchmark of pgm's routing: the time to find the leaf segment of a key through the
//! recursive levels, beside a plain binary search over the same leaf segment keys, on one SOSD
//! file at B = 16. Usage:
//! `cargo run --release -p lidb-index --example pgm_route -- ../shared/datasets/tweetids_10M_uint64.zst`

use std::hint::black_box;
use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: pgm_route <SOSD u64 file>");
        std::process::exit(2);
    };
    let keys = match lidb_data::sosd::read_u64(&path) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("pgm_route: {e}");
            std::process::exit(1);
        }
    };
    let idx = match lidb_index::pgm::Pgm::build(&keys, &lidb_index::Params::new(16)) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("pgm_route: {e}");
            std::process::exit(1);
        }
    };
    let qs = lidb_data::queries::existing(&keys, 200_000, 1);
    for round in 0..3 {
        let mut acc = 0usize;
        let t = Instant::now();
        for &q in &qs {
            acc = acc.wrapping_add(idx.leaf_route(black_box(q)));
        }
        let recursive = t.elapsed().as_nanos() as f64 / qs.len() as f64;
        let t = Instant::now();
        for &q in &qs {
            acc = acc.wrapping_add(idx.leaf_binary(black_box(q)));
        }
        let flat = t.elapsed().as_nanos() as f64 / qs.len() as f64;
        println!(
            "round {round}: levels {recursive:.1} ns, binary search of leaf keys {flat:.1} ns ({acc})"
        );
    }
}
