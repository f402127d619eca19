//! A server's model layout as a client caches it: route a key to its region and predict the
//! window of records that holds it (docs/format/fine-wire.md, "The layout").
//!
//! Plain data owned by one client; pure functions.

use lidb_fine::{WORDS_PER_RECORD, predict_window};

use crate::codec::msg::{WireLayout, WireRegion};

/// Where a key's window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub region: u64,
    pub lo: u64,
    pub hi: u64,
    pub records: u64,
}

/// What a validated window says about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// A trained record holds the key (value, or `None` when removed), at this position.
    Trained(Option<u64>, u32),
    /// Not trained: the key is in the gap below record `position`.
    InGap(u32),
}

pub(crate) fn region_for(layout: &WireLayout, key: u64) -> Option<&WireRegion> {
    let i = layout
        .regions
        .partition_point(|r| r.first_key <= key)
        .checked_sub(1)?;
    layout.regions.get(i)
}

pub(crate) fn window(layout: &WireLayout, key: u64) -> Option<Window> {
    let r = region_for(layout, key)?;
    let n = u64::from(r.records);
    let (lo, hi) = predict_window(&r.segments, layout.eps, n, key);
    Some(Window {
        region: r.id,
        lo,
        hi,
        records: n,
    })
}

/// Reads the record words of a validated copy of `[w.lo, ..)` (head and tail stripped).
/// `None` when the words cannot place the key (a bug or a lying server: the caller falls back).
pub(crate) fn find(w: &Window, body: &[u64], key: u64) -> Option<Found> {
    let mut p = w.lo;
    for rec in body.chunks_exact(WORDS_PER_RECORD) {
        let [k, flags, value] = [rec.first()?, rec.get(1)?, rec.get(2)?];
        if *k == key {
            let pos = u32::try_from(p).ok()?;
            return Some(Found::Trained((flags & 1 == 0).then_some(*value), pos));
        }
        if *k > key {
            break;
        }
        p += 1;
    }
    let below = p.checked_sub(1)?;
    u32::try_from(below).ok().map(Found::InGap)
}
