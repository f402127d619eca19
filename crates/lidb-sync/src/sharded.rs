//! Per-thread shards of counters and statistics (see the crate documentation).
//!
//! Invariants:
//! 1. A total ([`Counter::get`], [`Sharded::fold`]) is the sum of every update whose call
//!    returned before the total was asked for; updates racing with it may or may not be in it.
//! 2. Each shard sits alone on its cache lines ([`CachePadded`]), so two threads of different
//!    shards never write one line.
//! 3. A thread's shard never changes during its life.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Shards per counter or value. A power of two at least the core count of the machines lidb is
/// measured on (16 and more), so threads up to this many never share one.
pub const SHARDS: usize = 64;

/// Pads and aligns a value to 128 bytes: two 64-byte lines, because Intel's adjacent-line
/// prefetcher pulls lines in pairs (crossbeam's `CachePadded` uses 128 on x86-64 for this reason).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The next shard to hand to a thread that has none yet.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard, given on first use.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// The calling thread's shard index, in `0..SHARDS`.
pub fn shard_index() -> usize {
    SHARD.with(|s| *s)
}

/// A `u64` counter split into per-thread shards: `add` writes only the caller's shard, `get` sums
/// them all.
#[derive(Debug)]
pub struct Counter {
    shards: Box<[CachePadded<AtomicU64>]>,
}

impl Default for Counter {
    fn default() -> Counter {
        Counter::new()
    }
}

impl Counter {
    pub fn new() -> Counter {
        Counter {
            shards: (0..SHARDS)
                .map(|_| CachePadded(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Adds `n` to the caller's shard.
    pub fn add(&self, n: u64) {
        if let Some(s) = self.shards.get(shard_index()) {
            s.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn incr(&self) {
        self.add(1);
    }

    /// The sum of every shard.
    pub fn get(&self) -> u64 {
        self.shards
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.load(Ordering::Relaxed)))
    }
}

/// A value of `T` per shard. A thread updates its own shard under that shard's lock, which no
/// other thread takes except a reader folding the total, so the lock costs one uncontended atomic
/// on a line of the caller's own.
#[derive(Debug)]
pub struct Sharded<T> {
    shards: Box<[CachePadded<Mutex<T>>]>,
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Sharded<T> {
        Sharded::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the shard consistent at its unlock point, so a panic inside one leaves
    // nothing half-written that a later reader could see.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Default> Sharded<T> {
    pub fn new() -> Sharded<T> {
        Sharded {
            shards: (0..SHARDS)
                .map(|_| CachePadded(Mutex::new(T::default())))
                .collect(),
        }
    }

    /// Runs `f` on the caller's shard.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let i = shard_index() % self.shards.len().max(1);
        match self.shards.get(i) {
            Some(s) => f(&mut lock(s)),
            None => f(&mut T::default()),
        }
    }

    /// Folds every shard into `init` with `f`, one shard locked at a time.
    pub fn fold<A>(&self, init: A, mut f: impl FnMut(A, &T) -> A) -> A {
        self.shards.iter().fold(init, |acc, s| f(acc, &lock(s)))
    }

    /// Resets every shard to `T::default()`.
    pub fn reset(&self) {
        for s in self.shards.iter() {
            *lock(s) = T::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_counter_sums_the_adds_of_every_thread() {
        let c = Arc::new(Counter::new());
        let threads: Vec<_> = (0..(SHARDS as u64 + 8))
            .map(|t| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(t + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| "worker panicked")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let n = SHARDS as u64 + 8;
        assert_eq!(c.get(), 1000 * n * (n + 1) / 2);
    }

    #[test]
    fn sharded_values_fold_to_the_total_and_reset() {
        let s: Arc<Sharded<(u64, u64)>> = Arc::new(Sharded::new());
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        s.with(|v| {
                            v.0 += 1;
                            v.1 += t;
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| "worker panicked")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let (ops, sum) = s.fold((0, 0), |(a, b), v| (a + v.0, b + v.1));
        assert_eq!(ops, 4000);
        assert_eq!(sum, 500 * (0..8).sum::<u64>());
        s.reset();
        assert_eq!(s.fold(0, |a, v| a + v.0), 0);
    }

    #[test]
    fn a_thread_keeps_its_shard_and_shards_are_cache_line_apart() {
        let first = shard_index();
        assert_eq!(shard_index(), first);
        assert!(first < SHARDS);
        assert_eq!(std::mem::align_of::<CachePadded<AtomicU64>>(), 128);
        assert_eq!(std::mem::size_of::<CachePadded<AtomicU64>>(), 128);
    }
}
