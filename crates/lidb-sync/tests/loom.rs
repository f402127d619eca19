//! Loom model of the hybrid latch's protocol: a writer updates two words that must stay equal;
//! a reader that validates must have seen them equal, and one writer's section excludes another.
//! Build with `RUSTFLAGS="--cfg loom" cargo test -p lidb-sync --release --test loom`. Removing
//! the reader's `fence(Acquire)` in `validate` (or making the writer's first store after its data
//! stores) makes `a_validated_read_sees_one_write` fail.

#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;

use lidb_sync::latch::HybridLatch;

#[derive(Debug, Default)]
struct Protected {
    latch: HybridLatch,
    a: AtomicU64,
    b: AtomicU64,
}

fn write(p: &Protected, value: u64) {
    let _w = p.latch.lock();
    p.a.store(value, Ordering::Relaxed);
    p.b.store(value, Ordering::Relaxed);
}

#[test]
fn a_validated_read_sees_one_write() {
    loom::model(|| {
        let p = Arc::new(Protected::default());
        let writer = {
            let p = Arc::clone(&p);
            thread::spawn(move || {
                write(&p, 1);
                write(&p, 2);
            })
        };
        if let Some(v) = p.latch.optimistic() {
            let a = p.a.load(Ordering::Relaxed);
            let b = p.b.load(Ordering::Relaxed);
            if p.latch.validate(v) {
                assert_eq!(a, b, "a validated read saw a torn write (version {v})");
                assert_eq!(a, v / 2, "version {v} names the write whose data was read");
            }
        }
        writer
            .join()
            .map_err(|_| "writer panicked")
            .unwrap_or_else(|e| panic!("{e}"));
    });
}

#[test]
fn writers_exclude_each_other_and_versions_count_their_sections() {
    loom::model(|| {
        let p = Arc::new(Protected::default());
        let threads: Vec<_> = (1..=2u64)
            .map(|t| {
                let p = Arc::clone(&p);
                thread::spawn(move || {
                    let _w = p.latch.lock();
                    let before = p.a.load(Ordering::Relaxed);
                    p.a.store(before + t, Ordering::Relaxed);
                })
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| "writer panicked")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(p.a.load(Ordering::Relaxed), 3, "a write section was lost");
        assert_eq!(p.latch.optimistic(), Some(4));
    });
}
