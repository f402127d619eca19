//! The slotted node (docs/format/btree-node.md): header with fence keys and a linear model, a
//! slot array of 16-byte entries (key head, offset, lengths) growing up, a heap of key and value
//! bytes growing down from the page end.
//!
//! Reads are generic over [`PageRead`], so they run both on a plain byte page and, for
//! optimistic readers, on a frame's atomic words while a writer may be changing them: every read
//! then clamps offsets and lengths, never panics and never loops without bound, and its result is
//! used only after the frame's version validates. Writes run on a private byte copy of the page
//! (the tree copies the frame out under its exclusive latch, changes it, and stores it back).
//!
//! Callers: the tree (any thread), the bulk loader, the pool's write-back (child words).
//!
//! Invariants of a well-formed node:
//! 1. Keys are strictly increasing; every key `k` satisfies `lower < k <= upper` (a missing
//!    lower fence is minus infinity, a missing upper fence plus infinity).
//! 2. In an inner node, child `i` covers `(key[i-1], key[i]]` and the rightmost child covers
//!    `(key[count-1], upper]`; its children's fences are exactly those bounds.
//! 3. `NODE_HEADER + 16 * count <= heap_start <= page_size`; every entry and fence lies in
//!    `[heap_start, page_size)`; `garbage` counts heap bytes no entry uses.
//! 4. The model (slope, intercept) only guides the search: a wrong prediction costs steps of
//!    the exponential search, never a wrong answer.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as MemOrder};

use crate::page::{self, PageKind};

/// Bytes of the node header (common header included); slots start here.
pub const NODE_HEADER: usize = 96;
/// Bytes per slot.
pub const SLOT_LEN: usize = 16;

const N_COUNT: usize = 32;
const N_HEAP: usize = 36;
const N_LEVEL: usize = 40;
const N_FLAGS: usize = 41;
const N_LOWER_LEN: usize = 42;
const N_UPPER_LEN: usize = 44;
const N_PREFIX: usize = 46;
const N_LOWER_OFF: usize = 48;
const N_UPPER_OFF: usize = 52;
const N_RIGHTMOST: usize = 56;
const N_SLOPE: usize = 64;
const N_INTERCEPT: usize = 72;
const N_GARBAGE: usize = 84;

const F_LOWER: u8 = 1;
const F_UPPER: u8 = 2;

/// Read access to a page's bytes, from a byte slice or from atomic words.
pub trait PageRead {
    fn page_len(&self) -> usize;
    fn byte(&self, off: usize) -> u8;
    /// Copies `out.len()` bytes at `off` (zeros past the end).
    fn read_into(&self, off: usize, out: &mut [u8]);
    /// Compares the `len` bytes at `off` with `other`.
    fn cmp_at(&self, off: usize, len: usize, other: &[u8]) -> Ordering;

    fn u16_at(&self, off: usize) -> u16 {
        let mut b = [0u8; 2];
        self.read_into(off, &mut b);
        u16::from_le_bytes(b)
    }
    fn u32_at(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        self.read_into(off, &mut b);
        u32::from_le_bytes(b)
    }
    fn u64_at(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read_into(off, &mut b);
        u64::from_le_bytes(b)
    }
}

impl PageRead for [u8] {
    fn page_len(&self) -> usize {
        self.len()
    }
    fn byte(&self, off: usize) -> u8 {
        self.get(off).copied().unwrap_or(0)
    }
    fn read_into(&self, off: usize, out: &mut [u8]) {
        match self.get(off..off.saturating_add(out.len())) {
            Some(src) => out.copy_from_slice(src),
            None => out
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = self.byte(off + i)),
        }
    }
    fn cmp_at(&self, off: usize, len: usize, other: &[u8]) -> Ordering {
        let end = off.saturating_add(len).min(self.len());
        self.get(off.min(end)..end).unwrap_or_default().cmp(other)
    }
}

impl PageRead for [AtomicU64] {
    fn page_len(&self) -> usize {
        self.len() * 8
    }
    fn byte(&self, off: usize) -> u8 {
        (self.word(off / 8) >> (8 * (off % 8))) as u8
    }
    fn read_into(&self, off: usize, out: &mut [u8]) {
        let mut at = off;
        let mut rest = out;
        while !rest.is_empty() {
            let w = self.word(at / 8).to_le_bytes();
            let skip = at % 8;
            let n = (8 - skip).min(rest.len());
            let (dst, tail) = rest.split_at_mut(n);
            for (d, s) in dst.iter_mut().zip(w.iter().skip(skip)) {
                *d = *s;
            }
            rest = tail;
            at += n;
        }
    }
    fn u16_at(&self, off: usize) -> u16 {
        if off % 8 <= 6 {
            (self.word(off / 8) >> (8 * (off % 8))) as u16
        } else {
            let mut b = [0u8; 2];
            self.read_into(off, &mut b);
            u16::from_le_bytes(b)
        }
    }
    fn u32_at(&self, off: usize) -> u32 {
        if off % 8 <= 4 {
            (self.word(off / 8) >> (8 * (off % 8))) as u32
        } else {
            let mut b = [0u8; 4];
            self.read_into(off, &mut b);
            u32::from_le_bytes(b)
        }
    }
    fn u64_at(&self, off: usize) -> u64 {
        if off.is_multiple_of(8) {
            self.word(off / 8)
        } else {
            let mut b = [0u8; 8];
            self.read_into(off, &mut b);
            u64::from_le_bytes(b)
        }
    }
    /// Word by word, in place: each word's bytes in range are compared with `other`'s as they
    /// are loaded (no copy into a buffer first; keys and fences are compared on every probe).
    fn cmp_at(&self, off: usize, len: usize, other: &[u8]) -> Ordering {
        let len = len.min(self.page_len().saturating_sub(off));
        let common = len.min(other.len());
        let mut done = 0;
        while done < common {
            let at = off + done;
            let skip = at % 8;
            let n = (8 - skip).min(common - done);
            let word = self.word(at / 8).to_le_bytes();
            debug_assert!(
                skip + n <= word.len() && done + n <= other.len(),
                "n is cut to the rest of the word and to the common length"
            );
            let mine = word.get(skip..skip + n).unwrap_or_default();
            let theirs = other.get(done..done + n).unwrap_or_default();
            match mine.cmp(theirs) {
                Ordering::Equal => done += n,
                o => return o,
            }
        }
        len.cmp(&other.len())
    }
}

/// Word access for the atomic page (0 past the end: the reader's validation fails anyway).
trait Words {
    fn word(&self, i: usize) -> u64;
}

impl Words for [AtomicU64] {
    #[inline]
    fn word(&self, i: usize) -> u64 {
        self.get(i).map_or(0, |w| w.load(MemOrder::Relaxed))
    }
}

/// The u64 image of a key: its first 8 bytes big-endian, zero-padded (order-preserving up to
/// ties, which a full comparison breaks).
pub fn key_head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(key) {
        *d = *s;
    }
    u64::from_be_bytes(b)
}

/// The length of the prefix every key of the node shares: the common prefix of its two fences
/// (0 when a fence is infinite). Key heads are taken after it.
pub fn prefix_len<P: PageRead + ?Sized>(p: &P) -> usize {
    (p.u16_at(N_PREFIX) as usize).min(p.page_len())
}

/// The head of `key` in a node whose keys share a prefix of `prefix` bytes.
pub fn head_after(key: &[u8], prefix: usize) -> u64 {
    key_head(key.get(prefix..).unwrap_or_default())
}

/// One slot, as read (possibly torn under an optimistic read).
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub head: u64,
    pub off: usize,
    pub key_len: usize,
    pub val_len: usize,
}

pub fn kind<P: PageRead + ?Sized>(p: &P) -> Option<PageKind> {
    PageKind::from_u8(p.byte(6))
}
pub fn is_leaf<P: PageRead + ?Sized>(p: &P) -> bool {
    p.byte(6) == PageKind::Leaf as u8
}
pub fn level<P: PageRead + ?Sized>(p: &P) -> u8 {
    p.byte(N_LEVEL)
}
pub fn page_id<P: PageRead + ?Sized>(p: &P) -> u64 {
    p.u64_at(8)
}
/// The slot count, clamped to what the page can hold.
pub fn count<P: PageRead + ?Sized>(p: &P) -> usize {
    (p.u16_at(N_COUNT) as usize).min(max_slots(p.page_len()))
}
fn max_slots(page_size: usize) -> usize {
    page_size.saturating_sub(NODE_HEADER) / SLOT_LEN
}
fn heap_start<P: PageRead + ?Sized>(p: &P) -> usize {
    p.u32_at(N_HEAP) as usize
}
fn garbage<P: PageRead + ?Sized>(p: &P) -> usize {
    p.u32_at(N_GARBAGE) as usize
}
pub fn rightmost<P: PageRead + ?Sized>(p: &P) -> u64 {
    p.u64_at(N_RIGHTMOST)
}

pub fn slot<P: PageRead + ?Sized>(p: &P, i: usize) -> Slot {
    let at = NODE_HEADER + i * SLOT_LEN;
    let meta = p.u64_at(at + 8);
    Slot {
        head: p.u64_at(at),
        off: meta as u32 as usize,
        key_len: (meta >> 32) as u16 as usize,
        val_len: (meta >> 48) as u16 as usize,
    }
}

/// Key `i` (copied).
pub fn key<P: PageRead + ?Sized>(p: &P, i: usize) -> Vec<u8> {
    let s = slot(p, i);
    let mut out = vec![0u8; s.key_len.min(p.page_len())];
    p.read_into(s.off, &mut out);
    out
}

/// Value `i` of a leaf (copied).
pub fn value<P: PageRead + ?Sized>(p: &P, i: usize) -> Vec<u8> {
    let s = slot(p, i);
    let mut out = vec![0u8; s.val_len.min(p.page_len())];
    p.read_into(s.off + s.key_len, &mut out);
    out
}

/// Child word `i` of an inner node; `i == count` is the rightmost child.
pub fn child<P: PageRead + ?Sized>(p: &P, i: usize) -> u64 {
    if i >= count(p) {
        return rightmost(p);
    }
    let s = slot(p, i);
    p.u64_at(s.off + s.key_len)
}

/// The byte offset of child word `i` (for in-place swizzling by the exclusive holder).
pub fn child_offset<P: PageRead + ?Sized>(p: &P, i: usize) -> usize {
    if i >= count(p) {
        return N_RIGHTMOST;
    }
    let s = slot(p, i);
    s.off + s.key_len
}

fn fence<P: PageRead + ?Sized>(p: &P, flag: u8, off_at: usize, len_at: usize) -> Option<Vec<u8>> {
    if p.byte(N_FLAGS) & flag == 0 {
        return None;
    }
    let len = (p.u16_at(len_at) as usize).min(p.page_len());
    let mut out = vec![0u8; len];
    p.read_into(p.u32_at(off_at) as usize, &mut out);
    Some(out)
}

/// The lower fence (exclusive); `None` is minus infinity.
pub fn lower_fence<P: PageRead + ?Sized>(p: &P) -> Option<Vec<u8>> {
    fence(p, F_LOWER, N_LOWER_OFF, N_LOWER_LEN)
}

/// The upper fence (inclusive); `None` is plus infinity.
pub fn upper_fence<P: PageRead + ?Sized>(p: &P) -> Option<Vec<u8>> {
    fence(p, F_UPPER, N_UPPER_OFF, N_UPPER_LEN)
}

/// The fence compared with `key` where it lies in the page (no copy); `None`: the fence is
/// infinite. Reads as [`fence`] does, so it is safe under an optimistic read.
fn fence_cmp<P: PageRead + ?Sized>(
    p: &P,
    flag: u8,
    off_at: usize,
    len_at: usize,
    key: &[u8],
) -> Option<Ordering> {
    if p.byte(N_FLAGS) & flag == 0 {
        return None;
    }
    let len = (p.u16_at(len_at) as usize).min(p.page_len());
    Some(p.cmp_at(p.u32_at(off_at) as usize, len, key))
}

/// Whether `key` lies in the node's range `(lower, upper]`. Compares the fences in place: the
/// learned path calls it on every lookup, under the frame's optimistic latch.
pub fn covers<P: PageRead + ?Sized>(p: &P, key: &[u8]) -> bool {
    let above =
        fence_cmp(p, F_LOWER, N_LOWER_OFF, N_LOWER_LEN, key).is_none_or(|o| o == Ordering::Less);
    let below =
        fence_cmp(p, F_UPPER, N_UPPER_OFF, N_UPPER_LEN, key).is_none_or(|o| o != Ordering::Less);
    above && below
}

/// Compares key `i` with `key` (head first, full bytes on a tie). `head` is `key`'s head after
/// the node's prefix: for keys in the node's range (all share the prefix) head order is key
/// order up to ties.
fn cmp_key<P: PageRead + ?Sized>(p: &P, i: usize, key: &[u8], head: u64) -> Ordering {
    let s = slot(p, i);
    s.head
        .cmp(&head)
        .then_with(|| p.cmp_at(s.off, s.key_len, key))
}

/// The first position whose key is `>= key`, and whether it is equal. Uses the node's model to
/// start an exponential search when it has one (leaves), binary search otherwise.
pub fn lower_bound<P: PageRead + ?Sized>(p: &P, key: &[u8]) -> (usize, bool) {
    let n = count(p);
    let head = head_after(key, prefix_len(p));
    let (mut lo, mut hi) = (0usize, n);
    if let Some(guess) = predict(p, head, n) {
        // Exponential search from the guess: find [lo, hi) holding the answer.
        if guess < n && cmp_key(p, guess, key, head) == Ordering::Less {
            let mut step = 1;
            lo = guess + 1;
            while lo + step - 1 < n && cmp_key(p, lo + step - 1, key, head) == Ordering::Less {
                lo += step;
                step *= 2;
            }
            hi = (lo + step - 1).min(n);
        } else {
            let mut step = 1;
            hi = guess.min(n);
            while hi >= step && cmp_key(p, hi - step, key, head) != Ordering::Less {
                hi -= step;
                step *= 2;
            }
            lo = hi.saturating_sub(step - 1);
            hi = hi.min(n);
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cmp_key(p, mid, key, head) == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let found = lo < n && cmp_key(p, lo, key, head) == Ordering::Equal;
    (lo, found)
}

/// The position of the child that covers `key` in an inner node (`count` = rightmost).
pub fn child_index<P: PageRead + ?Sized>(p: &P, key: &[u8]) -> usize {
    lower_bound(p, key).0
}

/// The model's guess of the position of `head`, if the node has a model.
fn predict<P: PageRead + ?Sized>(p: &P, head: u64, n: usize) -> Option<usize> {
    let slope = f64::from_bits(p.u64_at(N_SLOPE));
    let intercept = f64::from_bits(p.u64_at(N_INTERCEPT));
    if n < 16 || !slope.is_finite() || !intercept.is_finite() || (slope == 0.0 && intercept == 0.0)
    {
        return None;
    }
    let guess = slope * head as f64 + intercept;
    Some(if guess <= 0.0 {
        0
    } else {
        (guess as usize).min(n.saturating_sub(1))
    })
}

/// The node's model: (slope, intercept) predicting a slot from a key head.
pub fn model<P: PageRead + ?Sized>(p: &P) -> (f64, f64) {
    (
        f64::from_bits(p.u64_at(N_SLOPE)),
        f64::from_bits(p.u64_at(N_INTERCEPT)),
    )
}

/// Fits the leaf's model by least squares over (key head, position); inner nodes keep none.
pub fn fit_model(page: &mut [u8]) {
    let n = count(page);
    let (mut slope, mut intercept) = (0.0f64, 0.0f64);
    if is_leaf(page) && n >= 2 {
        let xs: Vec<f64> = (0..n).map(|i| slot(page, i).head as f64).collect();
        let mean_x = xs.iter().sum::<f64>() / n as f64;
        let mean_y = (n as f64 - 1.0) / 2.0;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (i, x) in xs.iter().enumerate() {
            sxy += (x - mean_x) * (i as f64 - mean_y);
            sxx += (x - mean_x) * (x - mean_x);
        }
        if sxx > 0.0 {
            slope = sxy / sxx;
            intercept = mean_y - slope * mean_x;
        }
    }
    page::put_u64(page, N_SLOPE, slope.to_bits());
    page::put_u64(page, N_INTERCEPT, intercept.to_bits());
}

/// Bytes free for a new entry (after compaction).
pub fn free_space(page: &[u8]) -> usize {
    let used_slots = NODE_HEADER + count(page) * SLOT_LEN;
    heap_start(page).saturating_sub(used_slots) + garbage(page)
}

/// Bytes an entry takes (slot + key + value).
pub fn entry_size(key_len: usize, val_len: usize) -> usize {
    SLOT_LEN + key_len + val_len
}

/// Bytes the entries and fences use (for fill checks).
pub fn used_space(page: &[u8]) -> usize {
    page.len().saturating_sub(NODE_HEADER) - free_space(page)
}

/// Initialises an empty node of `kind` at `level` with the given fences.
pub fn init(
    page: &mut [u8],
    kind: PageKind,
    level: u8,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) {
    let id = page::id(page);
    page.fill(0);
    page::init_header(page, kind, id);
    let mut heap = page.len();
    let mut flags = 0u8;
    for (f, flag, off_at, len_at) in [
        (lower, F_LOWER, N_LOWER_OFF, N_LOWER_LEN),
        (upper, F_UPPER, N_UPPER_OFF, N_UPPER_LEN),
    ] {
        if let Some(f) = f {
            heap -= f.len();
            page::put_bytes(page, heap, f);
            page::put_u32(page, off_at, heap as u32);
            page::put_u16(page, len_at, f.len() as u16);
            flags |= flag;
        }
    }
    if let Some(b) = page.get_mut(N_FLAGS) {
        *b = flags;
    }
    if let Some(b) = page.get_mut(N_LEVEL) {
        *b = level;
    }
    page::put_u32(page, N_HEAP, heap as u32);
    let prefix = match (lower, upper) {
        (Some(l), Some(u)) => l.iter().zip(u).take_while(|(a, b)| a == b).count(),
        _ => 0,
    };
    page::put_u16(page, N_PREFIX, prefix as u16);
}

/// Inserts `(key, val)` at `pos` (the caller found it with `lower_bound`). Returns false when
/// the entry does not fit even after compaction.
pub fn insert(page: &mut [u8], pos: usize, key: &[u8], val: &[u8]) -> bool {
    let need = entry_size(key.len(), val.len());
    if free_space(page) < need {
        return false;
    }
    let n = count(page);
    if heap_start(page).saturating_sub(NODE_HEADER + n * SLOT_LEN) < need {
        compact(page);
    }
    let heap = heap_start(page) - key.len() - val.len();
    page::put_bytes(page, heap, key);
    page::put_bytes(page, heap + key.len(), val);
    let at = NODE_HEADER + pos * SLOT_LEN;
    page.copy_within(at..NODE_HEADER + n * SLOT_LEN, at + SLOT_LEN);
    put_slot(page, pos, key, heap, val.len());
    page::put_u32(page, N_HEAP, heap as u32);
    page::put_u16(page, N_COUNT, (n + 1) as u16);
    true
}

fn put_slot(page: &mut [u8], pos: usize, key: &[u8], off: usize, val_len: usize) {
    let at = NODE_HEADER + pos * SLOT_LEN;
    let head = head_after(key, prefix_len(page));
    page::put_u64(page, at, head);
    page::put_u32(page, at + 8, off as u32);
    page::put_u16(page, at + 12, key.len() as u16);
    page::put_u16(page, at + 14, val_len as u16);
}

/// Removes entry `pos`.
pub fn remove(page: &mut [u8], pos: usize) {
    let n = count(page);
    if pos >= n {
        return;
    }
    let s = slot(page, pos);
    let at = NODE_HEADER + pos * SLOT_LEN;
    page.copy_within(at + SLOT_LEN..NODE_HEADER + n * SLOT_LEN, at);
    page::put_u16(page, N_COUNT, (n - 1) as u16);
    let g = garbage(page) + s.key_len + s.val_len;
    page::put_u32(page, N_GARBAGE, g as u32);
}

/// Replaces the value of entry `pos`; false when the new value does not fit.
pub fn set_value(page: &mut [u8], pos: usize, val: &[u8]) -> bool {
    let s = slot(page, pos);
    if s.val_len == val.len() {
        page::put_bytes(page, s.off + s.key_len, val);
        return true;
    }
    if free_space(page) + s.key_len + s.val_len + SLOT_LEN < entry_size(s.key_len, val.len()) {
        return false;
    }
    let k = key(page, pos);
    remove(page, pos);
    insert(page, pos, &k, val)
}

/// Sets child word `i` of an inner node (`count` = rightmost).
pub fn set_child(page: &mut [u8], i: usize, word: u64) {
    let off = child_offset(page, i);
    page::put_u64(page, off, word);
}

/// The node's entries (key, value or child word bytes), in order.
pub fn entries(page: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..count(page))
        .map(|i| {
            let v = if is_leaf(page) {
                value(page, i)
            } else {
                child(page, i).to_le_bytes().to_vec()
            };
            (key(page, i), v)
        })
        .collect()
}

/// Rebuilds `page` from entries (a fresh heap, a fitted model). Returns false if they do not
/// fit (a bug in the caller's sizing; the page is then partly filled).
#[expect(
    clippy::too_many_arguments,
    reason = "a node's whole description, built in one place"
)]
pub fn build(
    page: &mut [u8],
    kind: PageKind,
    level: u8,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    entries: &[(Vec<u8>, Vec<u8>)],
    rightmost_child: u64,
    fit: bool,
) -> bool {
    init(page, kind, level, lower, upper);
    page::put_u64(page, N_RIGHTMOST, rightmost_child);
    for (i, (k, v)) in entries.iter().enumerate() {
        if !insert(page, i, k, v) {
            return false;
        }
    }
    if fit {
        fit_model(page);
    }
    true
}

/// Rewrites the heap without garbage.
pub fn compact(page: &mut [u8]) {
    let kind = kind(page).unwrap_or(PageKind::Leaf);
    let (lo, up) = (lower_fence(page), upper_fence(page));
    let (slope, icpt) = (
        page::get_u64(page, N_SLOPE),
        page::get_u64(page, N_INTERCEPT),
    );
    let es = entries(page);
    let rm = rightmost(page);
    let lvl = level(page);
    build(
        page,
        kind,
        lvl,
        lo.as_deref(),
        up.as_deref(),
        &es,
        rm,
        false,
    );
    page::put_u64(page, N_SLOPE, slope);
    page::put_u64(page, N_INTERCEPT, icpt);
}

/// Splits full node `left` into itself and the empty page `right` (its id already set).
/// Returns the separator to insert in the parent: left now covers `(lower, sep]`, right
/// `(sep, upper]`. The split point balances bytes. `None` if the node has fewer than 2 entries.
pub fn split(left: &mut [u8], right: &mut [u8]) -> Option<Vec<u8>> {
    let n = count(left);
    if n < 2 {
        return None;
    }
    let leaf = is_leaf(left);
    let es = entries(left);
    let total: usize = es.iter().map(|(k, v)| entry_size(k.len(), v.len())).sum();
    let mut acc = 0;
    let mut m = 0;
    for (k, v) in &es {
        if acc + entry_size(k.len(), v.len()) / 2 > total / 2 && m > 0 {
            break;
        }
        acc += entry_size(k.len(), v.len());
        m += 1;
    }
    // Leaves: left keeps es[..m], sep = key m-1. Inner: left keeps es[..m-1] with rightmost =
    // child m-1, sep = key m-1 moves up.
    let m = m.clamp(1, n - 1);
    let (lo, up) = (lower_fence(left), upper_fence(left));
    let kind = if leaf {
        PageKind::Leaf
    } else {
        PageKind::Inner
    };
    let lvl = level(left);
    let (left_es, right_es) = es.split_at(m);
    let sep = left_es.last().map(|(k, _)| k.clone())?;
    let right_rm = rightmost(left);
    if leaf {
        build(
            right,
            kind,
            lvl,
            Some(&sep),
            up.as_deref(),
            right_es,
            0,
            true,
        );
        build(left, kind, lvl, lo.as_deref(), Some(&sep), left_es, 0, true);
    } else {
        let (keep, moved) = left_es.split_at(m - 1);
        let left_rm = moved.first().map_or(0, |(_, v)| page::get_u64(v, 0));
        build(
            right,
            kind,
            lvl,
            Some(&sep),
            up.as_deref(),
            right_es,
            right_rm,
            false,
        );
        build(
            left,
            kind,
            lvl,
            lo.as_deref(),
            Some(&sep),
            keep,
            left_rm,
            false,
        );
    }
    Some(sep)
}

/// Whether `right` (the node after `left` under the same parent, separated by `sep`) fits into
/// `left`.
pub fn can_merge(left: &[u8], right: &[u8], sep_len: usize) -> bool {
    let sizes = |p: &[u8]| -> usize {
        (0..count(p))
            .map(|i| {
                let s = slot(p, i);
                entry_size(s.key_len, s.val_len)
            })
            .sum()
    };
    let extra = if is_leaf(left) {
        0
    } else {
        entry_size(sep_len, 8)
    };
    let fences =
        lower_fence(left).map_or(0, |f| f.len()) + upper_fence(right).map_or(0, |f| f.len());
    NODE_HEADER + sizes(left) + sizes(right) + extra + fences <= left.len()
}

/// Merges `right` into `left` (caller checked [`can_merge`]); `sep` is the parent's separator
/// between them. Left then covers `(left.lower, right.upper]`.
pub fn merge(left: &mut [u8], right: &[u8], sep: &[u8]) -> bool {
    let leaf = is_leaf(left);
    let mut es = entries(left);
    if !leaf {
        es.push((sep.to_vec(), rightmost(left).to_le_bytes().to_vec()));
    }
    es.extend(entries(right));
    let kind = if leaf {
        PageKind::Leaf
    } else {
        PageKind::Inner
    };
    let lo = lower_fence(left);
    let up = upper_fence(right);
    let lvl = level(left);
    build(
        left,
        kind,
        lvl,
        lo.as_deref(),
        up.as_deref(),
        &es,
        rightmost(right),
        leaf,
    )
}

#[cfg(test)]
mod tests;
