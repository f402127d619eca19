//! LITS's hash-enhanced prefix table (HPT): one global table of the conditional distribution of
//! a key's next symbol given the bytes before it, from which every model node computes a CDF.
//!
//! A key is read as symbols: byte `b` is symbol `b + 1`, and the end of the key is symbol 0, so
//! symbol order is byte-string order (a key sorts before every key it is a proper prefix of).
//! A row holds cumulative frequencies of the 257 symbols, scaled so that they sum to at most
//! [`TOTAL`], every symbol at least 1; the row of position i is named by i and the byte before it,
//! each taken modulo 32. [`Hpt::cdf`] narrows an integer interval (width 2^48) symbol by symbol, as arithmetic coding
//! does, for at most [`DEPTH`] symbols from a start position.
//!
//! Invariant (what model nodes rely on): for keys `a < b` that agree on their first `start`
//! bytes, `cdf(a, start) <= cdf(b, start)`, and `<` when they differ at position `start`. Proof:
//! at the first differing position both read the same row; a's symbol s_a < s_b, and everything
//! a adds afterwards stays inside its sub-interval of width `floor(r * f_a / TOTAL) >= 1`, whose
//! end `floor(r * (c_a + f_a) / TOTAL)` is at most b's start `floor(r * c_b / TOTAL)`; the
//! integer floors only shrink sub-intervals. Built once per bulk load or root rebuild; read-only
//! afterwards.

/// Buckets of the position and of the byte before it that name a row (the reference's 5-bit
/// position hash and 5-bit front-character hash).
const ROW_BUCKETS: usize = 32;
/// Rows of the table.
const ROWS: usize = ROW_BUCKETS * ROW_BUCKETS;
/// End-of-key plus 256 bytes.
const SYMBOLS: usize = 257;
/// Sum of a row's frequencies (at most).
const TOTAL: u64 = 1 << 15;
/// Symbols a CDF reads past its start.
pub(crate) const DEPTH: usize = 8;
/// Positions of a key used for training, at most.
const TRAIN_LEN: usize = 64;
/// Keys sampled for training (evenly spread).
const TRAIN_KEYS: usize = 100_000;
/// The narrowest interval a CDF reads on to: [`Hpt::cdf`] stops there, and a model node's
/// [`Hpt::cdf_to`] never reads past it.
pub(crate) const MIN_RESOLUTION: u64 = 1 << 16;
/// Width of the interval a CDF starts from (times [`TOTAL`] it still fits in u64).
const CDF_RANGE: u64 = 1 << 48;

/// The table (see the module doc).
#[derive(Debug)]
pub(crate) struct Hpt {
    /// `ROWS x (SYMBOLS + 1)` cumulative frequencies: row r's symbol s spans
    /// `[cum[r][s], cum[r][s + 1])`.
    cum: Vec<u16>,
}

fn symbol(key: &[u8], i: usize) -> usize {
    key.get(i).map_or(0, |&b| usize::from(b) + 1)
}

fn row(key: &[u8], i: usize) -> usize {
    let before = i
        .checked_sub(1)
        .and_then(|j| key.get(j))
        .map_or(ROW_BUCKETS - 1, |&b| usize::from(b) % ROW_BUCKETS);
    (i % ROW_BUCKETS) * ROW_BUCKETS + before
}

impl Hpt {
    /// Trains the table on an even sample of `keys` (sorted), counting each sampled key's
    /// distinguishing prefix only: its bytes up to and including the first one that differs
    /// from both sampled neighbours (as the reference does), since the bytes after it never
    /// decide a slot.
    pub(crate) fn train<K: AsRef<[u8]>>(keys: &[K]) -> Hpt {
        let mut counts = vec![0u32; ROWS * SYMBOLS];
        let step = (keys.len() / TRAIN_KEYS).max(1);
        let sample: Vec<&[u8]> = keys.iter().step_by(step).map(AsRef::as_ref).collect();
        let lcp = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        for (j, key) in sample.iter().enumerate() {
            let before = j.checked_sub(1).and_then(|p| sample.get(p));
            let after = sample.get(j + 1);
            let distinguishing = [before, after]
                .into_iter()
                .flatten()
                .map(|other| lcp(key, other))
                .max()
                .unwrap_or(0);
            for i in 0..=distinguishing.min(key.len()).min(TRAIN_LEN) {
                if let Some(c) = counts.get_mut(row(key, i) * SYMBOLS + symbol(key, i)) {
                    *c = c.saturating_add(1);
                }
            }
        }
        let mut cum = Vec::with_capacity(ROWS * (SYMBOLS + 1));
        for counts in counts.chunks(SYMBOLS) {
            let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            let mut at = 0u64;
            cum.push(0u16);
            for &c in counts {
                let f = (u64::from(c) * (TOTAL - SYMBOLS as u64))
                    .checked_div(total)
                    .map_or(TOTAL / SYMBOLS as u64, |share| 1 + share);
                at += f;
                cum.push(at as u16);
            }
        }
        Hpt { cum }
    }

    /// The CDF position of `key` read from byte `start` (see the module doc for its order).
    pub(crate) fn cdf(&self, key: &[u8], start: usize) -> u64 {
        self.cdf_to(key, start, MIN_RESOLUTION)
    }

    /// [`Hpt::cdf`], read only until the interval left is narrower than `resolution` (after the
    /// first symbol): a model node passes the CDF width of one of its slots, past which no
    /// further symbol can move the key by a whole slot, as the reference's `getPos` stops once
    /// the remaining probability covers less than one slot. Still monotone: two keys that
    /// differ before either stops are ordered as by `cdf`, and two that agree up to where one
    /// stops have the same interval there, so both stop at the same start.
    pub(crate) fn cdf_to(&self, key: &[u8], start: usize, resolution: u64) -> u64 {
        let (mut lo, mut range) = (0u64, CDF_RANGE);
        for i in start..start + DEPTH {
            let s = symbol(key, i);
            let base = row(key, i) * (SYMBOLS + 1) + s;
            let c = u64::from(self.cum.get(base).copied().unwrap_or(0));
            let end = u64::from(self.cum.get(base + 1).copied().unwrap_or(0));
            // range < 2^48 and c, end <= 2^15: the products fit in u64.
            lo += (range * c) >> 15;
            range = (range * end.saturating_sub(c)) >> 15;
            if s == 0 || range < resolution {
                break;
            }
        }
        lo
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        (self.cum.capacity() * std::mem::size_of::<u16>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_monotone_and_separates_at_the_start() {
        let mut keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![0, 255],
            b"a".to_vec(),
            b"ab".to_vec(),
            b"abc".to_vec(),
            b"b".to_vec(),
            vec![255; 20],
        ];
        keys.extend((0..500u32).map(|i| format!("user{i:08}").into_bytes()));
        keys.sort();
        keys.dedup();
        for hpt in [Hpt::train(&keys), Hpt::train::<Vec<u8>>(&[])] {
            let cdfs: Vec<u64> = keys.iter().map(|k| hpt.cdf(k, 0)).collect();
            assert!(cdfs.windows(2).all(|w| matches!(w, [a, b] if a <= b)));
            // Stopping early (as a model node does at its slot width) keeps the order, never
            // passes the full CDF, and still separates keys at their first byte.
            for resolution in [1u64 << 20, 1 << 32, 1 << 44] {
                let cut: Vec<u64> = keys.iter().map(|k| hpt.cdf_to(k, 0, resolution)).collect();
                assert!(cut.windows(2).all(|w| matches!(w, [a, b] if a <= b)));
                assert!(cut.iter().zip(&cdfs).all(|(c, f)| c <= f));
                for w in keys.windows(2) {
                    if let [a, b] = w
                        && a.first() != b.first()
                    {
                        assert!(hpt.cdf_to(a, 0, resolution) < hpt.cdf_to(b, 0, resolution));
                    }
                }
            }
            for w in keys.windows(2) {
                if let [a, b] = w
                    && a.first() != b.first()
                {
                    assert!(hpt.cdf(a, 0) < hpt.cdf(b, 0), "{a:?} {b:?}");
                }
            }
        }
    }
}
