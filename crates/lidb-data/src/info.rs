//! Summary statistics of a u64 key set, and the shared sortedness check.
//!
//! [`info`] accepts keys in any order. `distinct` and `longest_run` describe the multiset of
//! values: `longest_run` is the largest number of times one value occurs, which for sorted keys
//! is the longest run of equal neighbours (the quantity the position boundary contract cares
//! about). Unsorted input is summarised through a sorted copy.

use std::fmt;

/// What a key set looks like.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyInfo {
    /// Number of keys, duplicates included.
    pub count: u64,
    /// Smallest key (`None` for an empty set).
    pub min: Option<u64>,
    /// Largest key (`None` for an empty set).
    pub max: Option<u64>,
    /// Number of distinct values.
    pub distinct: u64,
    /// The largest number of times one value occurs (0 for an empty set).
    pub longest_run: u64,
    /// Whether the keys are in non-decreasing order.
    pub sorted: bool,
    /// The first position whose key is smaller than the one before it, if any.
    pub first_unsorted: Option<u64>,
}

/// The first position `i` with `items[i] < items[i - 1]`, or `None` if `items` is non-decreasing.
pub fn first_unsorted<T: Ord>(items: &[T]) -> Option<u64> {
    items
        .iter()
        .zip(items.iter().skip(1))
        .position(|(prev, next)| next < prev)
        .map(|p| p as u64 + 1)
}

/// Summarises `keys` (any order).
pub fn info(keys: &[u64]) -> KeyInfo {
    let first_unsorted = first_unsorted(keys);
    let sorted_copy;
    let sorted: &[u64] = if first_unsorted.is_some() {
        let mut copy = keys.to_vec();
        copy.sort_unstable();
        sorted_copy = copy;
        &sorted_copy
    } else {
        keys
    };
    let (distinct, longest_run) = runs(sorted);
    KeyInfo {
        count: keys.len() as u64,
        min: sorted.first().copied(),
        max: sorted.last().copied(),
        distinct,
        longest_run,
        sorted: first_unsorted.is_none(),
        first_unsorted,
    }
}

/// Number of runs of equal values and the length of the longest, for sorted keys.
fn runs(sorted: &[u64]) -> (u64, u64) {
    let mut iter = sorted.iter();
    let Some(&first) = iter.next() else {
        return (0, 0);
    };
    let (mut distinct, mut longest, mut current, mut prev) = (1u64, 1u64, 1u64, first);
    for &k in iter {
        if k == prev {
            current += 1;
        } else {
            distinct += 1;
            current = 1;
            prev = k;
        }
        longest = longest.max(current);
    }
    (distinct, longest)
}

impl fmt::Display for KeyInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        write!(
            f,
            "count={} min={} max={} distinct={} longest_run={} sorted={}",
            self.count,
            show(self.min),
            show(self.max),
            self.distinct,
            self.longest_run,
            self.sorted
        )?;
        if let Some(p) = self.first_unsorted {
            write!(f, " first_unsorted={p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_set() {
        let i = info(&[]);
        assert_eq!(i.count, 0);
        assert_eq!((i.min, i.max), (None, None));
        assert_eq!((i.distinct, i.longest_run), (0, 0));
        assert!(i.sorted);
        assert_eq!(i.first_unsorted, None);
    }

    #[test]
    fn sorted_with_duplicates() {
        let i = info(&[1, 1, 2, 5, 5, 5, 9]);
        assert_eq!(i.count, 7);
        assert_eq!((i.min, i.max), (Some(1), Some(9)));
        assert_eq!((i.distinct, i.longest_run), (4, 3));
        assert!(i.sorted);
        assert_eq!(
            i.to_string(),
            "count=7 min=1 max=9 distinct=4 longest_run=3 sorted=true"
        );
    }

    #[test]
    fn unsorted_reports_first_position_and_multiset_stats() {
        let i = info(&[3, 4, 2, 4, 1, 4]);
        assert!(!i.sorted);
        assert_eq!(i.first_unsorted, Some(2));
        assert_eq!((i.min, i.max), (Some(1), Some(4)));
        assert_eq!((i.distinct, i.longest_run), (4, 3));
    }

    #[test]
    fn first_unsorted_positions() {
        assert_eq!(first_unsorted::<u64>(&[]), None);
        assert_eq!(first_unsorted(&[5u64]), None);
        assert_eq!(first_unsorted(&[5u64, 5, 6]), None);
        assert_eq!(first_unsorted(&[5u64, 4]), Some(1));
        assert_eq!(first_unsorted(&[b"b".to_vec(), b"a".to_vec()]), Some(1));
    }
}
