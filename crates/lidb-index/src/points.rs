//! The lower-bound staircase: the points a learned model is fitted to.
//!
//! `lower_bound(q)` over sorted keys is a step function of q. Its steps are described exactly by
//! these points, for each distinct key value `k` whose first position is `p` and which repeats `r`
//! times:
//!
//! - `(k, p)`: at `q = k` the answer is `p`;
//! - `(k + 1, p + r)`, only when `r > 1` and `k + 1` is not itself the next key (nor past
//!   `u64::MAX`): just above a duplicate run the answer jumps by `r`.
//!
//! Invariants: x is strictly increasing, y is non-decreasing, every y is `<= n`.
//!
//! Why this works: a model that is monotone between two consecutive points and within `eps` of
//! both is within `eps + 1` of `lower_bound(q)` for every q between them (the `+ 1` is the step
//! after a key that occurs once). A duplicate run adds the second point so that the jump of `r` is
//! fitted rather than tolerated, which keeps the window at most `B` wide even for long runs.

use crate::error::{Error, Result};

/// The largest number of keys one index addresses; positions are stored as u32.
pub const MAX_KEYS: u64 = u32::MAX as u64;

/// Staircase points in structure-of-arrays form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Points {
    pub xs: Vec<u64>,
    pub ys: Vec<u32>,
}

impl Points {
    pub fn len(&self) -> usize {
        self.xs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.xs.is_empty()
    }
}

/// Checks that `keys` is non-decreasing and small enough to index.
pub fn validate_keys(keys: &[u64]) -> Result<()> {
    let n = keys.len() as u64;
    if n > MAX_KEYS {
        return Err(Error::TooManyKeys {
            keys: n,
            max: MAX_KEYS,
        });
    }
    if let Some(i) = keys.windows(2).position(|w| matches!(w, [a, b] if b < a)) {
        return Err(Error::Unsorted {
            position: i as u64 + 1,
        });
    }
    Ok(())
}

/// Builds the staircase of `keys`, which must already be validated.
pub fn staircase(keys: &[u64]) -> Points {
    let mut pts = Points {
        xs: Vec::with_capacity(keys.len()),
        ys: Vec::with_capacity(keys.len()),
    };
    let mut i = 0usize;
    while let Some(&k) = keys.get(i) {
        let mut j = i + 1;
        while keys.get(j) == Some(&k) {
            j += 1;
        }
        pts.xs.push(k);
        pts.ys.push(i as u32);
        let run = j - i;
        let next_is_adjacent = keys
            .get(j)
            .is_some_and(|&next| Some(next) == k.checked_add(1));
        if run > 1 && k < u64::MAX && !next_is_adjacent {
            pts.xs.push(k + 1);
            pts.ys.push(j as u32);
        }
        i = j;
    }
    pts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_keys_give_one_point_each() {
        let p = staircase(&[3, 5, 9]);
        assert_eq!(p.xs, vec![3, 5, 9]);
        assert_eq!(p.ys, vec![0, 1, 2]);
    }

    #[test]
    fn a_duplicate_run_adds_the_step_after_it() {
        let p = staircase(&[3, 5, 5, 5, 9]);
        assert_eq!(p.xs, vec![3, 5, 6, 9]);
        assert_eq!(p.ys, vec![0, 1, 4, 4]);
    }

    #[test]
    fn no_step_point_when_the_next_key_is_adjacent_or_at_the_top() {
        let p = staircase(&[5, 5, 6, u64::MAX, u64::MAX]);
        assert_eq!(p.xs, vec![5, 6, u64::MAX]);
        assert_eq!(p.ys, vec![0, 2, 3]);
    }

    #[test]
    fn a_trailing_run_steps_to_n() {
        let p = staircase(&[7, 7]);
        assert_eq!(p.xs, vec![7, 8]);
        assert_eq!(p.ys, vec![0, 2]);
    }

    #[test]
    fn validation_names_the_first_unsorted_position() {
        assert_eq!(
            validate_keys(&[1, 2, 2, 1]),
            Err(Error::Unsorted { position: 3 })
        );
        assert_eq!(validate_keys(&[]), Ok(()));
    }
}
