//! Micro benchmark of page cache hits from many threads: every `get` finds its page.
//!
//! `cargo run --release -p lidb-lsm --example cache_hits -- [threads...]` (default 1 2 8 16).
//! Two workloads per thread count: `spread`, each thread reading pages of a 1024-page working set
//! at random (xorshift, a seed per thread), and `hot`, every thread reading one page. Each thread
//! does a fixed count of gets (bounded), checks every page it gets holds the byte it was written
//! with, and the row gives the wall time over all threads. Output, one row per run:
//! `workload threads gets ns_per_get mgets_per_s`.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use lidb_storage::PAGE_SIZE;
use lidb_storage::cache::PageCache;

const PAGES: u64 = 1024;
const TABLES: u64 = 4;
const GETS_PER_THREAD: u64 = 400_000;

fn fill(p: u64) -> u8 {
    (p % 251) as u8
}

fn run(cache: &Arc<PageCache>, threads: u64, hot: bool) -> f64 {
    let barrier = Arc::new(Barrier::new(threads as usize + 1));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let cache = Arc::clone(cache);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1).wrapping_mul(0x2545_f491);
                let mut bad = 0u64;
                barrier.wait();
                for _ in 0..GETS_PER_THREAD {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let p = if hot { 7 } else { x % PAGES };
                    match cache.get(p % TABLES, p) {
                        Some(b) if b.first() == Some(&fill(p)) => {}
                        _ => bad += 1,
                    }
                }
                bad
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    let bad: u64 = workers
        .into_iter()
        .map(|w| w.join().unwrap_or(u64::MAX))
        .sum();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(bad, 0, "every get hits and holds its page's bytes");
    secs
}

fn main() {
    let mut threads: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if threads.is_empty() {
        threads = vec![1, 2, 8, 16];
    }
    let cache = Arc::new(PageCache::new(64 << 20));
    for p in 0..PAGES {
        cache.insert(p % TABLES, p, vec![fill(p); PAGE_SIZE as usize].into());
    }
    println!("workload threads gets ns_per_get mgets_per_s");
    for hot in [false, true] {
        for &n in &threads {
            let secs = run(&cache, n, hot);
            let gets = n * GETS_PER_THREAD;
            println!(
                "{} {n} {gets} {:.1} {:.2}",
                if hot { "hot" } else { "spread" },
                secs * 1e9 / gets as f64,
                gets as f64 / secs / 1e6
            );
        }
    }
}
