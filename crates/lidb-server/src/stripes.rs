//! Striped key locks: what orders the commands of different connections that touch the same
//! keys, with no lock that every command takes.
//!
//! A key hashes to one of [`STRIPES`] stripes. Each stripe is a small hybrid latch (the design of
//! LeanStore's `HybridLatch`, from "LeanStore: In-Memory Data Management Beyond Main Memory"): a
//! reader-writer lock that writers and waiting readers take, plus a version word that optimistic
//! readers only load. A stripe sits alone on its cache lines ([`CachePadded`]), so two stripes never share one.
//!
//! Who takes what (the commands are in `commands.rs` and `on_worker.rs`):
//! - A command that reads a key and then writes it (SETNX, GETSET, SET NX|XX|GET) holds its
//!   key's stripe exclusively ([`Stripes::lock`]) across its read and its write.
//! - A plain SET holds its key's stripe shared ([`Stripes::lock_shared`]); a pipelined run of
//!   plain SETs holds the stripes of all its keys shared. Plain SETs do not exclude each other
//!   (the engine's `put` is atomic per key), but one must not fall between a SETNX's check and
//!   its write: the SETNX would overwrite a SET acknowledged after the key existed, an order no
//!   serial run gives.
//! - A write of several keys (MSET, DEL, FLUSHDB) holds its stripes exclusively and makes their
//!   versions odd while it writes ([`Stripes::lock_publishing`]), so readers see all of it or none of it, as
//!   Redis promises for MSET.
//! - A read (GET, MGET, EXISTS) writes nothing: it loads its stripes' versions, reads the engine,
//!   and checks the versions again ([`Stripes::read`]); a version that was odd or moved is a
//!   [`Restart`]. The engine pool then reads under [`Stripes::lock_shared`] (it may wait); the async
//!   memory-read path never waits and hands the request to the pool instead.
//!
//! A single-key write does not touch the version: the engine's own `put` and `get` are atomic per
//! key (each engine's contract), so a reader sees a single-key write whole either way, and
//! readers of hot keys are not sent to the lock by writes to other keys of their stripe.
//!
//! Lock order: stripes are taken in ascending stripe index, each at most once ([`order`] sorts
//! and removes duplicates; the lock methods take only its output), and a command releases all of
//! its stripes before the next command runs. So two commands never wait on each other in a
//! cycle. Stripes come before every engine lock and before the SCAN cursor map (`state.rs`).
//!
//! Threads: any. Invariants:
//! 1. A stripe's version is odd exactly while a [`Stripes::lock_publishing`] holder of it writes;
//!    only the exclusive holder of the stripe's lock changes it, and it only grows.
//! 2. A [`Stripes::read`] that returns `Ok` saw no publishing write of its stripes begin or end
//!    while it read: whatever the engine returned is from before or after each such write whole.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use lidb_sync::CachePadded;

/// How many stripes: enough that a few hundred connections rarely meet on one.
pub const STRIPES: usize = 1024;

/// An optimistic read saw a multi-key write on one of its stripes: read again, or under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart;

#[derive(Debug, Default)]
struct Stripe {
    version: AtomicU64,
    lock: RwLock<()>,
}

/// The stripes of one server.
#[derive(Debug)]
pub struct Stripes {
    stripes: Box<[CachePadded<Stripe>; STRIPES]>,
}

impl Default for Stripes {
    fn default() -> Stripes {
        Stripes {
            stripes: Box::new(std::array::from_fn(|_| CachePadded(Stripe::default()))),
        }
    }
}

/// The stripe of `key` (FNV-1a over the key's bytes).
pub fn stripe_of(key: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    ((h ^ (h >> 32)) % STRIPES as u64) as usize
}

/// The stripes of `keys`, ascending and each once: the lock order.
pub fn order<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> Vec<usize> {
    let mut stripes: Vec<usize> = keys.into_iter().map(stripe_of).collect();
    stripes.sort_unstable();
    stripes.dedup();
    stripes
}

/// Every stripe, in the lock order (FLUSHDB).
pub fn all() -> Vec<usize> {
    (0..STRIPES).collect()
}

/// One stripe's lock as a command holds it (kept for its drop).
#[derive(Debug)]
enum Guard<'a> {
    Shared(#[expect(dead_code, reason = "held for its drop")] RwLockReadGuard<'a, ()>),
    Exclusive(#[expect(dead_code, reason = "held for its drop")] RwLockWriteGuard<'a, ()>),
}

/// Stripes held by one command; dropping it releases them (and ends a publishing write).
#[derive(Debug)]
pub struct Held<'a> {
    guards: Vec<(Guard<'a>, &'a AtomicU64)>,
    publishing: bool,
}

/// How a command holds its stripes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Shared,
    Exclusive,
    Publishing,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.publishing {
            for (_, version) in &self.guards {
                // Even again; Release: a reader that sees it sees the whole write.
                version.fetch_add(1, Ordering::Release);
            }
        }
        // The locks are released after this body, when `guards` drops.
    }
}

/// Checks (in debug builds) that `ordered` came from [`order`]: the lock order.
fn debug_assert_ordered(ordered: &[usize]) {
    debug_assert!(
        ordered.windows(2).all(|w| w.first() < w.get(1)),
        "stripes must come from `order`: ascending, no duplicates"
    );
}

impl Stripes {
    #[expect(
        clippy::indexing_slicing,
        reason = "index % STRIPES is below the array's length"
    )]
    fn stripe(&self, index: usize) -> &Stripe {
        debug_assert!(index < STRIPES, "a stripe index from `order`");
        &self.stripes[index % STRIPES].0
    }

    fn take(&self, ordered: &[usize], mode: Mode) -> Held<'_> {
        debug_assert_ordered(ordered);
        let mut guards = Vec::with_capacity(ordered.len());
        for &index in ordered {
            let stripe = self.stripe(index);
            // A panic in another command poisons nothing: the lock guards no data.
            let guard = match mode {
                Mode::Shared => {
                    Guard::Shared(stripe.lock.read().unwrap_or_else(PoisonError::into_inner))
                }
                Mode::Exclusive | Mode::Publishing => {
                    Guard::Exclusive(stripe.lock.write().unwrap_or_else(PoisonError::into_inner))
                }
            };
            if mode == Mode::Publishing {
                stripe.version.fetch_add(1, Ordering::Relaxed);
            }
            guards.push((guard, &stripe.version));
        }
        let publishing = mode == Mode::Publishing;
        if publishing {
            // Orders the odd versions before the writes that follow (the seqlock writer fence).
            fence(Ordering::Release);
        }
        Held { guards, publishing }
    }

    /// Holds `ordered` (from [`order`]) exclusively, for a command that reads a key and then
    /// writes it.
    pub fn lock(&self, ordered: &[usize]) -> Held<'_> {
        self.take(ordered, Mode::Exclusive)
    }

    /// Holds `ordered` shared, for plain SETs and for readers that must not restart.
    pub fn lock_shared(&self, ordered: &[usize]) -> Held<'_> {
        self.take(ordered, Mode::Shared)
    }

    /// Holds `ordered` shared if none of them is held exclusively now; `None` (holding nothing)
    /// otherwise. Never waits: for plain SETs written on an async worker, which must not wait
    /// behind a command that holds a stripe across a storage read.
    pub fn try_lock_shared(&self, ordered: &[usize]) -> Option<Held<'_>> {
        debug_assert_ordered(ordered);
        let mut guards = Vec::with_capacity(ordered.len());
        for &index in ordered {
            let stripe = self.stripe(index);
            let guard = match stripe.lock.try_read() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                // Dropping `guards` releases what was taken.
                Err(TryLockError::WouldBlock) => return None,
            };
            guards.push((Guard::Shared(guard), &stripe.version));
        }
        Some(Held {
            guards,
            publishing: false,
        })
    }

    /// Holds `ordered` for a write of several keys: optimistic readers of these stripes restart
    /// until it is dropped.
    pub fn lock_publishing(&self, ordered: &[usize]) -> Held<'_> {
        self.take(ordered, Mode::Publishing)
    }

    /// Runs `read` optimistically over the stripes `ordered`: `Err(Restart)` when a publishing
    /// write held one of them before or during it (its result is then dropped). Never waits.
    pub fn read<T>(&self, ordered: &[usize], read: impl FnOnce() -> T) -> Result<T, Restart> {
        match ordered {
            [one] => {
                let stripe = self.stripe(*one);
                let before = stripe.version.load(Ordering::Acquire);
                if before % 2 == 1 {
                    return Err(Restart);
                }
                let value = read();
                fence(Ordering::Acquire);
                if stripe.version.load(Ordering::Relaxed) == before {
                    Ok(value)
                } else {
                    Err(Restart)
                }
            }
            _ => {
                let mut before = Vec::with_capacity(ordered.len());
                for &index in ordered {
                    let v = self.stripe(index).version.load(Ordering::Acquire);
                    if v % 2 == 1 {
                        return Err(Restart);
                    }
                    before.push(v);
                }
                let value = read();
                fence(Ordering::Acquire);
                let unchanged = ordered
                    .iter()
                    .zip(&before)
                    .all(|(&i, &v)| self.stripe(i).version.load(Ordering::Relaxed) == v);
                if unchanged { Ok(value) } else { Err(Restart) }
            }
        }
    }

    /// [`Stripes::read`], falling back to reading under [`Stripes::lock_shared`] when it restarts (for
    /// the engine pool, which may wait).
    pub fn read_or_lock<T>(&self, ordered: &[usize], mut read: impl FnMut() -> T) -> T {
        match self.read(ordered, &mut read) {
            Ok(value) => value,
            Err(Restart) => {
                let _held = self.lock_shared(ordered);
                read()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_ascending_without_duplicates() {
        let keys: Vec<Vec<u8>> = (0..5000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut with_repeats: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        with_repeats.extend(keys.iter().take(100).map(Vec::as_slice));
        let got = order(with_repeats.iter().copied());
        assert!(got.windows(2).all(|w| w.first() < w.get(1)), "{got:?}");
        assert!(got.iter().all(|&s| s < STRIPES));
        // 5000 keys cover nearly every stripe: the hash spreads them.
        assert!(got.len() > STRIPES * 9 / 10, "{} stripes", got.len());
        let same: [&[u8]; 3] = [b"k", b"k", b"k"];
        assert_eq!(order(same), vec![stripe_of(b"k")]);
        assert!(order(std::iter::empty::<&[u8]>()).is_empty());
        assert_eq!(all().len(), STRIPES);
    }

    #[test]
    fn a_publishing_write_restarts_readers_of_its_stripes_only() {
        let stripes = Stripes::default();
        let a = order([b"a".as_slice()]);
        let b: Vec<usize> = order([b"b".as_slice()]);
        let other = vec![(a.first().copied().unwrap_or(0) + 1) % STRIPES];
        assert_eq!(stripes.read(&a, || 1), Ok(1));
        let held = stripes.lock_publishing(&order([b"a".as_slice(), b"b".as_slice()]));
        assert_eq!(stripes.read(&a, || 1), Err(Restart));
        assert_eq!(stripes.read(&b, || 1), Err(Restart));
        if !b.contains(other.first().unwrap_or(&0)) {
            assert_eq!(stripes.read(&other, || 1), Ok(1));
        }
        drop(held);
        assert_eq!(stripes.read(&a, || 2), Ok(2));
        // A write that starts during the read makes it restart.
        let got = stripes.read(&a, || drop(stripes.lock_publishing(&a)));
        assert_eq!(got, Err(Restart));
        // A single-key lock leaves readers alone; shared holders do not exclude each other.
        let held = stripes.lock(&a);
        assert_eq!(stripes.read(&a, || 3), Ok(3));
        drop(held);
        let s = stripes.stripe(a.first().copied().unwrap_or(0));
        let (first, second) = (stripes.lock_shared(&a), stripes.lock_shared(&a));
        assert!(s.lock.try_write().is_err());
        drop((first, second));
        assert!(s.lock.try_write().is_ok());
        assert_eq!(stripes.read_or_lock(&a, || 4), 4);
    }

    #[test]
    fn try_lock_shared_never_waits_and_keeps_nothing_when_it_fails() {
        let stripes = Stripes::default();
        let both = order([b"a".as_slice(), b"b".as_slice()]);
        let (Some(&first), Some(&last)) = (both.first(), both.last()) else {
            panic!("two stripes");
        };
        // Shared holders do not exclude a try.
        let shared = stripes.lock_shared(&both);
        let tried = stripes.try_lock_shared(&both);
        assert!(tried.is_some());
        drop((shared, tried));
        // One stripe held exclusively: the try fails and leaves the other stripe free.
        let held = stripes.lock(&[last]);
        assert!(stripes.try_lock_shared(&both).is_none());
        if first != last {
            assert!(stripes.stripe(first).lock.try_write().is_ok());
        }
        drop(held);
        let tried = stripes.try_lock_shared(&both);
        assert!(tried.is_some());
        assert!(stripes.stripe(last).lock.try_write().is_err());
        drop(tried);
        assert!(stripes.stripe(last).lock.try_write().is_ok());
    }
}
