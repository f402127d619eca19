//! The harness proper, generic over a small adapter ([`Subject`]) so that one model-based run
//! drives both the u64 trait ([`UpdatableIndex`], through [`U64`]) and the byte-string trait
//! ([`UpdatableBytesIndex`], through [`Bytes`]); a [`KeyGen`] draws the keys of each kind.

use std::collections::BTreeMap;
use std::fmt::Debug;

use lidb_updatable::{BulkLoadError, UpdatableBytesIndex, UpdatableIndex};
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// How a case draws the keys it inserts (u64 cases; byte-string cases always mix).
#[derive(Clone, Copy, Debug)]
pub enum Fresh {
    /// Anywhere in the domain, near present keys, or at the extremes.
    Mixed,
    /// Strictly increasing from the largest key (append-heavy).
    Ascending,
    /// Strictly decreasing from the smallest key.
    Descending,
}

pub struct Case<'a, K> {
    pub name: &'a str,
    pub keys: &'a [K],
    pub seed: u64,
    pub ops: usize,
    pub fresh: Fresh,
}

/// One index seen through the operations the harness needs, over its own key type.
pub trait Subject {
    type Key: Ord + Clone + Debug;
    fn get(&self, key: &Self::Key) -> Option<u64>;
    fn insert(&mut self, key: &Self::Key, value: u64) -> Option<u64>;
    fn remove(&mut self, key: &Self::Key) -> Option<u64>;
    /// At most `n` pairs from the lower-bound seek of `key`.
    fn seek(&self, key: &Self::Key, n: usize) -> Vec<(Self::Key, u64)>;
    /// Whether a full iteration equals `model`.
    fn iterates_as(&self, model: &BTreeMap<Self::Key, u64>) -> bool;
    fn len(&self) -> u64;
    fn assert_invariants(&self);
}

/// Adapter for the u64 trait.
pub struct U64<I>(pub I);

impl<I: UpdatableIndex> Subject for U64<I> {
    type Key = u64;
    fn get(&self, key: &u64) -> Option<u64> {
        self.0.get(*key)
    }
    fn insert(&mut self, key: &u64, value: u64) -> Option<u64> {
        self.0.insert(*key, value)
    }
    fn remove(&mut self, key: &u64) -> Option<u64> {
        self.0.remove(*key)
    }
    fn seek(&self, key: &u64, n: usize) -> Vec<(u64, u64)> {
        let got: Vec<(u64, u64)> = self.0.range_from(*key).take(n).collect();
        // The lower bound without an iterator must be the seek's first pair.
        if n > 0 {
            assert_eq!(
                self.0.first_from(*key),
                got.first().copied(),
                "{}: first_from({key}) differs from range_from({key}).next()",
                I::NAME
            );
        }
        got
    }
    fn iterates_as(&self, model: &BTreeMap<u64, u64>) -> bool {
        self.0.range_from(0).eq(model.iter().map(|(k, v)| (*k, *v)))
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn assert_invariants(&self) {
        self.0.assert_invariants();
    }
}

/// Adapter for the byte-string trait.
pub struct Bytes<I>(pub I);

impl<I: UpdatableBytesIndex> Subject for Bytes<I> {
    type Key = Vec<u8>;
    fn get(&self, key: &Vec<u8>) -> Option<u64> {
        self.0.get(key)
    }
    fn insert(&mut self, key: &Vec<u8>, value: u64) -> Option<u64> {
        self.0.insert(key, value)
    }
    fn remove(&mut self, key: &Vec<u8>) -> Option<u64> {
        self.0.remove(key)
    }
    fn seek(&self, key: &Vec<u8>, n: usize) -> Vec<(Vec<u8>, u64)> {
        self.0
            .range_from(key)
            .take(n)
            .map(|(k, v)| (k.to_vec(), v))
            .collect()
    }
    fn iterates_as(&self, model: &BTreeMap<Vec<u8>, u64>) -> bool {
        self.0
            .range_from(&[])
            .eq(model.iter().map(|(k, v)| (k.as_slice(), *v)))
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn assert_invariants(&self) {
        self.0.assert_invariants();
    }
}

/// Draws keys of one kind.
pub trait KeyGen<K> {
    /// A key to insert (new or not), drawn as `fresh` says.
    fn fresh(&self, rng: &mut ChaCha8Rng, model: &BTreeMap<K, u64>, fresh: Fresh) -> K;
    /// A key from anywhere in the domain.
    fn random(&self, rng: &mut ChaCha8Rng) -> K;
    /// A seek probe just around a present key (the key, or a neighbour of it).
    fn near(&self, rng: &mut ChaCha8Rng, key: K) -> K;
    /// Keys inserted after draining the index (edges of the domain).
    fn refill(&self) -> Vec<K>;
    /// The value bulk-loaded with `key`.
    fn value_of(&self, key: &K) -> u64;
}

/// A random present key: the first key at or after a random point, else the last.
pub fn existing_key<K: Ord + Clone>(
    keys: &impl KeyGen<K>,
    rng: &mut ChaCha8Rng,
    model: &BTreeMap<K, u64>,
) -> Option<K> {
    if model.is_empty() {
        return None;
    }
    let probe = keys.random(rng);
    model
        .range(probe..)
        .next()
        .or_else(|| model.last_key_value())
        .map(|(k, _)| k.clone())
}

fn check_content<S: Subject>(index: &S, model: &BTreeMap<S::Key, u64>, ctx: &str) {
    index.assert_invariants();
    assert_eq!(index.len(), model.len() as u64, "{ctx}: len");
    assert!(index.iterates_as(model), "{ctx}: full iteration differs");
}

/// Runs `case` on one index; any panic (an assertion here or an invariant check inside the
/// index) first prints the case, the index and the seed.
pub fn run<S: Subject>(
    case: &Case<'_, S::Key>,
    name: &str,
    keys: &impl KeyGen<S::Key>,
    make: impl Fn(&[(S::Key, u64)]) -> Result<S, BulkLoadError>,
) {
    let ctx = format!("case {} index {name} seed {}", case.name, case.seed);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_case(case, &ctx, keys, make);
    }));
    if let Err(panic) = outcome {
        eprintln!("FAILED {ctx}");
        std::panic::resume_unwind(panic);
    }
}

fn run_case<S: Subject>(
    case: &Case<'_, S::Key>,
    ctx: &str,
    keys: &impl KeyGen<S::Key>,
    make: impl Fn(&[(S::Key, u64)]) -> Result<S, BulkLoadError>,
) {
    let pairs: Vec<(S::Key, u64)> = case
        .keys
        .iter()
        .map(|k| (k.clone(), keys.value_of(k)))
        .collect();
    let mut index = make(&pairs).unwrap_or_else(|e| panic!("{ctx}: bulk load: {e}"));
    let mut model: BTreeMap<S::Key, u64> = pairs.iter().cloned().collect();
    check_content(&index, &model, ctx);
    for (k, v) in pairs.iter().step_by(7) {
        assert_eq!(index.get(k), Some(*v), "{ctx}: get {k:?} after bulk load");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(case.seed);
    let check_every = (case.ops / 8).max(50);
    for op in 0..case.ops {
        let roll = rng.gen_range(0..100);
        let what = if roll < 45 {
            let key = match existing_key(keys, &mut rng, &model) {
                Some(k) if rng.gen_range(0..5) == 0 => k,
                _ => keys.fresh(&mut rng, &model, case.fresh),
            };
            let value: u64 = rng.r#gen();
            let got = index.insert(&key, value);
            assert_eq!(
                got,
                model.insert(key.clone(), value),
                "{ctx} op {op}: insert {key:?}"
            );
            "insert"
        } else if roll < 65 {
            let key = match existing_key(keys, &mut rng, &model) {
                Some(k) if rng.gen_bool(0.8) => k,
                _ => keys.random(&mut rng),
            };
            assert_eq!(
                index.remove(&key),
                model.remove(&key),
                "{ctx} op {op}: remove {key:?}"
            );
            "remove"
        } else if roll < 85 {
            let key = match existing_key(keys, &mut rng, &model) {
                Some(k) if rng.gen_bool(0.5) => k,
                _ => keys.fresh(&mut rng, &model, Fresh::Mixed),
            };
            assert_eq!(
                index.get(&key),
                model.get(&key).copied(),
                "{ctx} op {op}: get {key:?}"
            );
            "get"
        } else {
            let key = match existing_key(keys, &mut rng, &model) {
                Some(k) if rng.gen_bool(0.5) => keys.near(&mut rng, k),
                _ => keys.fresh(&mut rng, &model, Fresh::Mixed),
            };
            let want: Vec<(S::Key, u64)> = model
                .range(key.clone()..)
                .take(8)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            assert_eq!(index.seek(&key, 8), want, "{ctx} op {op}: seek {key:?}");
            "seek"
        };
        if op % check_every == 0 {
            check_content(&index, &model, &format!("{ctx} after op {op} ({what})"));
        }
    }
    check_content(&index, &model, &format!("{ctx} at the end"));
    // Empty it completely, then refill a little: removal paths down to zero keys.
    if model.len() <= 5000 {
        let present: Vec<S::Key> = model.keys().cloned().collect();
        for key in present {
            assert_eq!(
                index.remove(&key),
                model.remove(&key),
                "{ctx}: drain {key:?}"
            );
        }
        check_content(&index, &model, &format!("{ctx} drained"));
        for key in keys.refill() {
            let value = keys.value_of(&key);
            assert_eq!(
                index.insert(&key, value),
                model.insert(key, value),
                "{ctx}: refill"
            );
        }
        check_content(&index, &model, &format!("{ctx} refilled"));
    }
}
