//! The one conformance check every [`ConcurrentIndex`] passes, lidb's own (lidb-bench's
//! `tests/concurrent_conformance.rs`) and the peers a binary registers (lidb-peers' tests):
//! sequential random operations (insert, update, get, remove, scan) over a bulk-loaded start,
//! compared with a `BTreeMap`. Keys come from a small range so that operations hit present,
//! removed and never-seen keys; keys and values avoid `u64::MAX` (congee's exclusive range end,
//! li+delta's tombstone).
//!
//! Pure and single-threaded: a function of its arguments, replayable from the seed that every
//! failure message names.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::index::IndexKind;

/// Bulk-loads `loaded` entries of keys below `3 * key_space` into `kind`, runs `ops` random
/// operations against it and a `BTreeMap`, then reads every key back; the first difference, with
/// the kind, seed and operation, is the error.
pub fn check(
    kind: IndexKind,
    seed: u64,
    loaded: usize,
    ops: usize,
    key_space: u64,
) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    while model.len() < loaded {
        model.insert(rng.gen_range(0..key_space) * 3, rng.gen_range(0..u64::MAX));
    }
    let entries: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    let index = kind.build(&entries)?;
    let differ =
        |i: usize, what: String| Err(format!("{} seed {seed} op {i}: {what}", kind.name()));
    let mut out = Vec::new();
    for i in 0..ops {
        let k = rng.gen_range(0..key_space * 3);
        let v = rng.gen_range(0..u64::MAX);
        match rng.gen_range(0..10) {
            0..=2 => {
                let (got, want) = (index.insert(k, v), model.insert(k, v));
                if got != want {
                    return differ(i, format!("insert {k}: {got:?}, want {want:?}"));
                }
            }
            3 => {
                let want = model.get_mut(&k).map(|x| std::mem::replace(x, v));
                let got = index.update(k, v);
                if got != want {
                    return differ(i, format!("update {k}: {got:?}, want {want:?}"));
                }
            }
            4..=5 => {
                let (got, want) = (index.get(k), model.get(&k).copied());
                if got != want {
                    return differ(i, format!("get {k}: {got:?}, want {want:?}"));
                }
            }
            6 => {
                let (got, want) = (index.remove(k), model.remove(&k));
                if got != want {
                    return differ(i, format!("remove {k}: {got:?}, want {want:?}"));
                }
            }
            _ => {
                let limit = rng.gen_range(1..40);
                out.clear();
                index.scan(k, limit, &mut out);
                let want: Vec<(u64, u64)> = model
                    .range(k..)
                    .take(limit)
                    .map(|(&a, &b)| (a, b))
                    .collect();
                if out != want {
                    return differ(
                        i,
                        format!("scan from {k} limit {limit}: {out:?}, want {want:?}"),
                    );
                }
            }
        }
    }
    for (&k, &v) in &model {
        if index.get(k) != Some(v) {
            return Err(format!(
                "{} seed {seed}: final get {k} is not {v}",
                kind.name()
            ));
        }
    }
    Ok(())
}
