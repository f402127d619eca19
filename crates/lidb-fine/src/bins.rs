//! Level bins (the paper's section 3.2): the two-level structure under one trained record that
//! takes the keys inserted between it and the next trained key.
//!
//! Shape: at first the root bin (m slots) holds entries itself ("flat"). When it overflows it
//! becomes an index ("tree"): its slots then hold, in key order, the first key and the id of up
//! to m child bins of n slots each, which hold the entries. An insert into a full child bin first
//! moves that bin's smallest entry to the end of the previous child bin if it has room (at most
//! n + 1 moves), else splits the bin in two like a B-tree node (a new root slot); when the root
//! has no free slot either, the insert reports [`Shape::upsert`] = `false` and the caller retrains
//! the whole set into a small model (level-bin retraining). Never deeper than two levels.
//!
//! Memory: a root bin of up to [`INLINE_ROOT_SLOTS`] slots sits inside the set (a gap's first
//! insert allocates the set alone, and the root's words follow the set's header); a larger root
//! bin and each child bin keep their keys and values in one boxed array, keys first.
//!
//! Concurrency (the paper's section 3.5): a [`SeqLock`] on the root bin and one on each child
//! bin. Every word is an `AtomicU64` accessed `Relaxed` inside the seqlock protocol (orderings in
//! `seqlock.rs`), so a torn read is harmless: it is bounds-checked, then discarded by validation.
//! - In-place writers ([`LevelBins::write_in_child`]: an update, an insert into a child bin with a
//!   free slot, a removal that leaves the child non-empty) read the root optimistically, take
//!   only the latch of the child bin the key routes to, validate the root, and write. The root's
//!   version does not move.
//! - Structural writers (flat root, moves between child bins, splits, emptied child bins,
//!   level-bin retraining) take the root latch and then every allocated child's latch in id
//!   order ([`LevelBins::lock_all`]), read the set into a [`Shape`], change it and store it back.
//!   Any change to which child bin a key routes to happens here, so it waits for an in-place
//!   writer of that child, and an in-place writer that read the root before it fails its root
//!   validation and starts again.
//! - Readers validate the child bin they read and then the root ([`LevelBins::get`],
//!   [`LevelBins::snapshot`]). A split moves entries under both latches, so a reader never has
//!   to follow it into the next child bin (the paper's readers do): the version change sends it
//!   back to the root.
//! - Remote readers (the on-client mode, [`LevelBins::copy_words`]) copy one bin's words with
//!   the same loads and send the versions around them; the client validates them, and a child
//!   copy carries the root's version so the client can tell its routing still holds.
//!
//! Lock order: root, then child bins by id. An in-place writer holds one child latch and never
//! waits for the root (it only reads its version), so there is no cycle. Child bins are
//! allocated lazily (only under the root latch), once per id, and reused after they empty; a
//! reader or writer that follows a stale id fails the root's validation.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::seqlock::{RETIRED, SeqLock, SeqWrite};

/// What an optimistic read found.
#[derive(Debug, PartialEq)]
pub(crate) enum Read<T> {
    Done(T),
    /// The set was retrained into a small model: read there.
    Retired,
    /// A writer interfered: back off and read again.
    Retry,
}

#[derive(Debug)]
struct ChildBin {
    latch: SeqLock,
    len: AtomicU64,
    /// The bin's keys, then its values: one allocation.
    words: Box<[AtomicU64]>,
}

fn atomics(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// The first half of `words` (keys) and the second (values).
fn halves(words: &[AtomicU64]) -> (&[AtomicU64], &[AtomicU64]) {
    words.split_at(words.len() / 2)
}

impl ChildBin {
    fn new(n: usize) -> ChildBin {
        ChildBin {
            latch: SeqLock::default(),
            len: AtomicU64::new(0),
            words: atomics(2 * n),
        }
    }

    fn keys(&self) -> &[AtomicU64] {
        halves(&self.words).0
    }

    fn vals(&self) -> &[AtomicU64] {
        halves(&self.words).1
    }
}

/// Root slots whose keys and values a set holds inline (the default root bin, the paper's m = 8):
/// a gap's first insert then allocates its set alone, and a search of the root bin reads the
/// cache lines right after the set's header.
const INLINE_ROOT_SLOTS: usize = 8;

/// A root bin's keys, then its values.
#[derive(Debug)]
enum RootWords {
    /// At most [`INLINE_ROOT_SLOTS`] slots: the first `2 * root_slots` words are used.
    Inline([AtomicU64; 2 * INLINE_ROOT_SLOTS]),
    Boxed(Box<[AtomicU64]>),
}

/// A root bin and its child bins.
#[derive(Debug)]
pub(crate) struct LevelBins {
    pub latch: SeqLock,
    /// 0: the root holds entries; 1: the root holds (first key, child id) per child bin.
    tree: AtomicU64,
    root_len: AtomicU64,
    root_words: RootWords,
    /// The child bins by id, allocated at the first overflow of the root, each child on first
    /// use.
    children: OnceLock<Box<[OnceLock<ChildBin>]>>,
    root_slots: usize,
    child_slots: usize,
}

/// Where `q` is or would go, as read now (exact under the write section, validated otherwise).
pub(crate) struct Spot<'a> {
    keys: &'a [AtomicU64],
    vals: &'a [AtomicU64],
    len_word: &'a AtomicU64,
    len: usize,
    /// Position of the first key `>= q` in the bin.
    pos: usize,
    found: bool,
    /// The child bin's latch (tree shape) and its version when the child was read.
    child_latch: Option<&'a SeqLock>,
    child_start: Option<u64>,
}

/// The structural write section of a set: the root latch and, in ascending id order, the latch
/// of every child bin allocated when it was taken. Lock order: root, then children by id; the
/// in-place writer ([`LevelBins::write_in_child`]) holds one child latch and never waits for the
/// root, so no cycle exists.
#[derive(Debug)]
pub(crate) struct SetWrite<'a> {
    pub root: SeqWrite<'a>,
    _children: Vec<SeqWrite<'a>>,
}

/// What [`LevelBins::write_in_child`] did.
#[derive(Debug, PartialEq)]
pub(crate) enum ChildWrite {
    /// Done in place; the old value.
    Done(Option<u64>),
    /// The set was retrained into a small model: write there.
    Retired,
    /// Needs the structural write section (flat root, full child, or a child that would empty);
    /// `op` was not called.
    Structural,
}

/// One child bin as a writer sees it.
#[derive(Debug, Clone)]
pub(crate) struct Child {
    id: usize,
    items: Vec<(u64, u64)>,
    dirty: bool,
}

/// The whole set as a writer sees it (read under the write section, stored back after).
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    Flat(Vec<(u64, u64)>),
    Tree(Vec<Child>),
}

/// Reads `len` entries of parallel key/value atomics into `out`; `false` if `len` is torn.
fn read_entries(
    keys: &[AtomicU64],
    vals: &[AtomicU64],
    len: usize,
    out: &mut Vec<(u64, u64)>,
) -> bool {
    let (Some(ks), Some(vs)) = (keys.get(..len), vals.get(..len)) else {
        return false;
    };
    out.extend(
        ks.iter()
            .zip(vs)
            .map(|(k, v)| (k.load(Relaxed), v.load(Relaxed))),
    );
    true
}

impl LevelBins {
    /// An empty set of `root_slots` root slots whose child bins will have `child_slots` slots.
    pub fn new(root_slots: usize, child_slots: usize) -> LevelBins {
        LevelBins {
            latch: SeqLock::default(),
            tree: AtomicU64::new(0),
            root_len: AtomicU64::new(0),
            root_words: if root_slots <= INLINE_ROOT_SLOTS {
                RootWords::Inline(std::array::from_fn(|_| AtomicU64::new(0)))
            } else {
                RootWords::Boxed(atomics(2 * root_slots))
            },
            children: OnceLock::new(),
            root_slots,
            child_slots,
        }
    }

    /// The root bin's keys.
    fn root_keys(&self) -> &[AtomicU64] {
        self.root_halves().0
    }

    /// The root bin's values (entries, or child ids in the tree shape).
    fn root_vals(&self) -> &[AtomicU64] {
        self.root_halves().1
    }

    fn root_halves(&self) -> (&[AtomicU64], &[AtomicU64]) {
        match &self.root_words {
            RootWords::Inline(words) => halves(words.get(..2 * self.root_slots).unwrap_or(&[])),
            RootWords::Boxed(words) => halves(words),
        }
    }

    /// Lock-free point read: the root's version, then the child's (tree shape), the words, then
    /// both validations. In-place writers change only the child's version, structural writers
    /// both (they latch every child), so a read that passes both saw one consistent state.
    pub fn get(&self, q: u64) -> Read<Option<u64>> {
        let Some(v) = self.latch.optimistic() else {
            return Read::Retry;
        };
        if v & RETIRED != 0 {
            return Read::Retired;
        }
        // `None`: torn, or the child's latch was held; both mean retry.
        let found = self.find_optimistic(q);
        if !self.latch.validate(v) {
            return Read::Retry;
        }
        match found {
            Some((value, Some((latch, cv)))) if latch.validate(cv) => Read::Done(value),
            Some((value, None)) => Read::Done(value),
            _ => Read::Retry,
        }
    }

    /// The value of `q` as read now, and the child latch with the version it was read under;
    /// `None` if torn.
    #[expect(
        clippy::type_complexity,
        reason = "a private helper's one return value"
    )]
    fn find_optimistic(&self, q: u64) -> Option<(Option<u64>, Option<(&SeqLock, u64)>)> {
        let spot = self.spot(q, true)?;
        let child_version = match spot.child_latch {
            Some(latch) => Some((latch, spot.child_start?)),
            None => None,
        };
        #[cfg(test)]
        tests::interleave();
        let value = if spot.found {
            Some(spot.vals.get(spot.pos)?.load(Relaxed))
        } else {
            None
        };
        Some((value, child_version))
    }

    fn child(&self, id: usize) -> Option<&ChildBin> {
        self.children.get()?.get(id)?.get()
    }

    /// Where `q` is or would go: `None` if what was read is torn (never under the write section).
    pub fn spot(&self, q: u64, optimistic: bool) -> Option<Spot<'_>> {
        let root_len = self.root_len.load(Relaxed) as usize;
        let (keys, vals, len_word, child_latch): (&[AtomicU64], &[AtomicU64], &AtomicU64, _) =
            if self.tree.load(Relaxed) == 0 {
                (self.root_keys(), self.root_vals(), &self.root_len, None)
            } else {
                // The last child whose first key is <= q, or the first child.
                let child = self.route_child(q, root_len)?;
                (child.keys(), child.vals(), &child.len, Some(&child.latch))
            };
        // A reader starts the child's version here, before reading the child's words; a writer
        // holds the latch (it is odd) and reads exactly.
        let child_start = match child_latch {
            Some(latch) if optimistic => Some(latch.optimistic()?),
            _ => None,
        };
        let len = len_word.load(Relaxed) as usize;
        let mut pos = len;
        let mut found = false;
        for (i, k) in keys.get(..len)?.iter().enumerate() {
            let k = k.load(Relaxed);
            if k >= q {
                pos = i;
                found = k == q;
                break;
            }
        }
        Some(Spot {
            keys,
            vals,
            len_word,
            len,
            pos,
            found,
            child_latch,
            child_start,
        })
    }

    /// The value at a found spot.
    pub fn value_at(&self, _w: &SetWrite<'_>, spot: &Spot<'_>) -> Option<u64> {
        spot_value(spot)
    }

    /// Overwrites the value at a found spot.
    pub fn set_value(&self, _w: &SetWrite<'_>, spot: &Spot<'_>, v: u64) {
        spot_set(spot, v);
    }

    /// Inserts `(q, v)` at a spot where `q` was not found, in place, if its bin has a free slot
    /// (the common case: no move between bins); `false` (nothing changed) otherwise.
    pub fn insert_in_place(&self, _w: &SetWrite<'_>, spot: &Spot<'_>, q: u64, v: u64) -> bool {
        spot_insert(spot, q, v)
    }

    /// Takes the structural write section: the root latch, then every allocated child's.
    pub fn lock_all(&self) -> SetWrite<'_> {
        let root = self.latch.lock();
        // Children are allocated only under the root latch, so this list is stable now.
        let children = self
            .children
            .get()
            .map(|table| {
                table
                    .iter()
                    .filter_map(OnceLock::get)
                    .map(|c| c.latch.lock())
                    .collect()
            })
            .unwrap_or_default();
        SetWrite {
            root,
            _children: children,
        }
    }

    /// The in-place write of the paper (section 3.5.1): applies `op` to `q` holding only the
    /// latch of the child bin `q` routes to, when the set is a tree and the write cannot change
    /// its shape (an update, an insert into a child with a free slot, a removal that leaves the
    /// child non-empty). The root is read optimistically and validated after the child latch is
    /// taken; any change to `q`'s routing needs that child latch (structural writers take them
    /// all), so routing stays valid while it is held.
    pub fn write_in_child(
        &self,
        q: u64,
        op: &mut dyn FnMut(Option<u64>) -> Option<u64>,
    ) -> ChildWrite {
        let mut backoff = crate::seqlock::Backoff::default();
        loop {
            let Some(v) = self.latch.optimistic() else {
                backoff.snooze();
                continue;
            };
            if v & RETIRED != 0 {
                return ChildWrite::Retired;
            }
            if self.tree.load(Relaxed) == 0 {
                return ChildWrite::Structural;
            }
            let root_len = self.root_len.load(Relaxed) as usize;
            let Some(child) = self.route_child(q, root_len) else {
                // Torn root; validation would fail.
                backoff.snooze();
                continue;
            };
            #[cfg(test)]
            tests::interleave_writer();
            let _cw = child.latch.lock();
            if !self.latch.validate(v) {
                continue;
            }
            // The child is ours and q routes to it: what we read now is exact.
            let Some(spot) = self.spot(q, false) else {
                debug_assert!(false, "child bin torn under its latch");
                return ChildWrite::Structural;
            };
            let n = spot.keys.len();
            let in_place = if spot.found {
                spot.len > 1 || root_len == 1
            } else {
                spot.len < n
            };
            if !in_place {
                return ChildWrite::Structural;
            }
            let old = spot_value(&spot);
            match (old, op(old)) {
                (Some(_), Some(new)) => spot_set(&spot, new),
                (None, Some(new)) => {
                    let ok = spot_insert(&spot, q, new);
                    debug_assert!(ok, "no free slot after checking for one");
                }
                (Some(_), None) => spot_remove(&spot),
                (None, None) => {}
            }
            return ChildWrite::Done(old);
        }
    }

    /// The remote bin read (docs/format/fine-wire.md, READ_BIN): appends the words of the root
    /// bin (`child: None`) or of child bin `child`, loads of atomics only (no lock, no index
    /// logic): `head, aux, len, len x (key, value), tail`. Root: `aux` is the tree flag (1: the
    /// pairs are `(first key, child id)`). Child: `aux` is the root's version, read inside the
    /// child's seqlock window (a client checks it equals the version of the root it routed by).
    /// `head`/`tail` are the seqlock version before and after (`tail` after an Acquire fence);
    /// `mid` runs halfway (the test hook that tears a copy). A child id never allocated copies
    /// as an empty bin with version 0 (the root's version then tells the client it was stale).
    pub fn copy_words(
        &self,
        child: Option<usize>,
        out: &mut Vec<u64>,
        mid: Option<&mut dyn FnMut()>,
    ) {
        let empty = ChildBin::new(0);
        let (latch, len_word, keys, vals): (&SeqLock, &AtomicU64, &[AtomicU64], &[AtomicU64]) =
            match child {
                None => (
                    &self.latch,
                    &self.root_len,
                    self.root_keys(),
                    self.root_vals(),
                ),
                Some(id) => {
                    let c = self.child(id).unwrap_or(&empty);
                    (&c.latch, &c.len, c.keys(), c.vals())
                }
            };
        let head = latch.raw_version();
        let aux = match child {
            None => self.tree.load(Relaxed),
            Some(_) => self.latch.raw_version_relaxed(),
        };
        // A torn length is clamped to the slots; validation discards the copy.
        let len = (len_word.load(Relaxed) as usize).min(keys.len());
        out.reserve(4 + 2 * len);
        out.extend_from_slice(&[head, aux, len as u64]);
        let mut mid = mid;
        for (i, (k, v)) in keys.iter().zip(vals).take(len).enumerate() {
            if i == len / 2
                && let Some(f) = mid.take()
            {
                f();
            }
            out.extend_from_slice(&[k.load(Relaxed), v.load(Relaxed)]);
        }
        if let Some(f) = mid.take() {
            f();
        }
        out.push(latch.raw_version_after());
    }

    /// The child bin `q` routes to, read from the root's first `root_len` slots.
    fn route_child(&self, q: u64, root_len: usize) -> Option<&ChildBin> {
        let mut at = 0;
        for (i, k) in self.root_keys().get(..root_len)?.iter().enumerate().skip(1) {
            if k.load(Relaxed) <= q {
                at = i;
            } else {
                break;
            }
        }
        self.child(self.root_vals().get(at)?.load(Relaxed) as usize)
    }

    /// Lock-free read of every entry in key order into `out` (cleared first).
    pub fn snapshot(&self, out: &mut Vec<(u64, u64)>) -> Read<()> {
        out.clear();
        let Some(v) = self.latch.optimistic() else {
            return Read::Retry;
        };
        if v & RETIRED != 0 {
            return Read::Retired;
        }
        let ok = self.snapshot_optimistic(out);
        if ok && self.latch.validate(v) {
            Read::Done(())
        } else {
            Read::Retry
        }
    }

    /// Reads every entry into `out`; `false` if torn or a child latch was held or moved (the
    /// root's validation is the caller's).
    fn snapshot_optimistic(&self, out: &mut Vec<(u64, u64)>) -> bool {
        let len = self.root_len.load(Relaxed) as usize;
        if self.tree.load(Relaxed) == 0 {
            return read_entries(self.root_keys(), self.root_vals(), len, out);
        }
        let Some(ids) = self.root_vals().get(..len) else {
            return false;
        };
        for id in ids {
            let Some(child) = self.child(id.load(Relaxed) as usize) else {
                return false;
            };
            let Some(cv) = child.latch.optimistic() else {
                return false;
            };
            let clen = child.len.load(Relaxed) as usize;
            if !read_entries(child.keys(), child.vals(), clen, out) || !child.latch.validate(cv) {
                return false;
            }
        }
        true
    }

    /// The set as it is; the write section proves no other writer changes it meanwhile.
    pub fn load_shape(&self, _w: &SetWrite<'_>) -> Shape {
        let len = self.root_len.load(Relaxed) as usize;
        let mut items = Vec::new();
        if self.tree.load(Relaxed) == 0 {
            let ok = read_entries(self.root_keys(), self.root_vals(), len, &mut items);
            debug_assert!(ok, "root length {len} out of range under the write section");
            return Shape::Flat(items);
        }
        let mut children = Vec::with_capacity(len);
        for id in self.root_vals().iter().take(len) {
            let id = id.load(Relaxed) as usize;
            let mut items = Vec::new();
            if let Some(child) = self.child(id) {
                let clen = child.len.load(Relaxed) as usize;
                let ok = read_entries(child.keys(), child.vals(), clen, &mut items);
                debug_assert!(
                    ok,
                    "child length {clen} out of range under the write section"
                );
            } else {
                debug_assert!(false, "root names child bin {id}, which does not exist");
            }
            children.push(Child {
                id,
                items,
                dirty: false,
            });
        }
        Shape::Tree(children)
    }

    /// Stores `shape` (a changed [`LevelBins::load_shape`]) back, writing only changed child bins.
    pub fn store_shape(&self, _w: &SetWrite<'_>, shape: &Shape) {
        let store = |keys: &[AtomicU64], vals: &[AtomicU64], items: &[(u64, u64)]| {
            debug_assert!(items.len() <= keys.len());
            for ((k, v), &(key, value)) in keys.iter().zip(vals).zip(items) {
                k.store(key, Relaxed);
                v.store(value, Relaxed);
            }
        };
        match shape {
            Shape::Flat(items) => {
                self.tree.store(0, Relaxed);
                self.root_len.store(items.len() as u64, Relaxed);
                store(self.root_keys(), self.root_vals(), items);
            }
            Shape::Tree(children) => {
                self.tree.store(1, Relaxed);
                self.root_len.store(children.len() as u64, Relaxed);
                for ((k, v), c) in self.root_keys().iter().zip(self.root_vals()).zip(children) {
                    k.store(c.items.first().map_or(0, |e| e.0), Relaxed);
                    v.store(c.id as u64, Relaxed);
                }
                let slots = self
                    .children
                    .get_or_init(|| (0..self.root_slots).map(|_| OnceLock::new()).collect());
                for c in children.iter().filter(|c| c.dirty) {
                    let Some(slot) = slots.get(c.id) else {
                        debug_assert!(false, "child id {} out of range", c.id);
                        continue;
                    };
                    let child = slot.get_or_init(|| ChildBin::new(self.child_slots));
                    child.len.store(c.items.len() as u64, Relaxed);
                    store(child.keys(), child.vals(), &c.items);
                }
            }
        }
    }

    /// Heap bytes of this set: the boxed struct, the root bin, the child-bin table and every
    /// child bin ever allocated (a reused one counts once).
    pub fn heap_bytes(&self) -> u64 {
        let word = std::mem::size_of::<AtomicU64>() as u64;
        let mut bytes = std::mem::size_of::<LevelBins>() as u64;
        if let RootWords::Boxed(words) = &self.root_words {
            bytes += word * words.len() as u64;
        }
        if let Some(table) = self.children.get() {
            bytes += (table.len() * std::mem::size_of::<OnceLock<ChildBin>>()) as u64;
            let allocated = table.iter().filter(|c| c.get().is_some()).count() as u64;
            bytes += allocated * 2 * word * self.child_slots as u64;
        }
        bytes
    }

    /// Occupied and allocated data slots (root slots of a flat set, child slots of a tree) and
    /// the number of child bins in use.
    pub fn occupancy(&self) -> (u64, u64, u64) {
        let w = self.lock_all();
        if w.root.is_retired() {
            return (0, 0, 0);
        }
        match self.load_shape(&w) {
            Shape::Flat(items) => (items.len() as u64, self.root_keys().len() as u64, 0),
            Shape::Tree(children) => {
                let used: usize = children.iter().map(|c| c.items.len()).sum();
                let n = children.len() as u64;
                (used as u64, n * self.child_slots as u64, n)
            }
        }
    }
}

/// The value at a found spot.
fn spot_value(spot: &Spot<'_>) -> Option<u64> {
    if !spot.found {
        return None;
    }
    spot.vals.get(spot.pos).map(|v| v.load(Relaxed))
}

/// Overwrites the value at a found spot.
fn spot_set(spot: &Spot<'_>, v: u64) {
    debug_assert!(spot.found);
    if let Some(slot) = spot.vals.get(spot.pos) {
        slot.store(v, Relaxed);
    }
}

/// Inserts at a spot where the key was not found, shifting the larger entries up one slot;
/// `false` (nothing changed) if the bin is full.
fn spot_insert(spot: &Spot<'_>, q: u64, v: u64) -> bool {
    debug_assert!(!spot.found);
    if spot.len >= spot.keys.len() {
        return false;
    }
    for i in (spot.pos..spot.len).rev() {
        if let (Some(k0), Some(k1), Some(v0), Some(v1)) = (
            spot.keys.get(i),
            spot.keys.get(i + 1),
            spot.vals.get(i),
            spot.vals.get(i + 1),
        ) {
            k1.store(k0.load(Relaxed), Relaxed);
            v1.store(v0.load(Relaxed), Relaxed);
        }
    }
    if let (Some(k), Some(val)) = (spot.keys.get(spot.pos), spot.vals.get(spot.pos)) {
        k.store(q, Relaxed);
        val.store(v, Relaxed);
    }
    spot.len_word.store(spot.len as u64 + 1, Relaxed);
    true
}

/// Removes the entry at a found spot, shifting the larger entries down one slot. The first
/// key of a child may change; the root keeps the old one, which still separates this child from
/// the one before (every key between them routes here either way).
fn spot_remove(spot: &Spot<'_>) {
    debug_assert!(spot.found && spot.len > 0);
    for i in spot.pos + 1..spot.len {
        if let (Some(k0), Some(k1), Some(v0), Some(v1)) = (
            spot.keys.get(i - 1),
            spot.keys.get(i),
            spot.vals.get(i - 1),
            spot.vals.get(i),
        ) {
            k0.store(k1.load(Relaxed), Relaxed);
            v0.store(v1.load(Relaxed), Relaxed);
        }
    }
    spot.len_word
        .store(spot.len.saturating_sub(1) as u64, Relaxed);
}

impl Shape {
    /// Every entry in key order.
    pub fn into_items(self) -> Vec<(u64, u64)> {
        match self {
            Shape::Flat(items) => items,
            Shape::Tree(children) => children.into_iter().flat_map(|c| c.items).collect(),
        }
    }

    /// Inserts or overwrites `q` in a set of `m` root and `n` child slots; `false` when the set is
    /// full (the caller retrains it) and nothing changed.
    pub fn upsert(&mut self, q: u64, v: u64, m: usize, n: usize) -> bool {
        match self {
            Shape::Flat(items) => match items.binary_search_by_key(&q, |e| e.0) {
                Ok(i) => {
                    if let Some(e) = items.get_mut(i) {
                        e.1 = v;
                    }
                    true
                }
                Err(i) if items.len() < m => {
                    items.insert(i, (q, v));
                    true
                }
                Err(i) => {
                    // The root bin overflows: its entries go to two new child bins.
                    let mut all = std::mem::take(items);
                    all.insert(i, (q, v));
                    let right = all.split_off(all.len() / 2);
                    *self = Shape::Tree(vec![
                        Child {
                            id: 0,
                            items: all,
                            dirty: true,
                        },
                        Child {
                            id: 1,
                            items: right,
                            dirty: true,
                        },
                    ]);
                    true
                }
            },
            Shape::Tree(children) => tree_upsert(children, q, v, m, n),
        }
    }

    /// Removes `q`; the old value if it was present. An emptied child bin leaves the root unless
    /// it is the last one.
    pub fn remove(&mut self, q: u64) -> Option<u64> {
        match self {
            Shape::Flat(items) => {
                let i = items.binary_search_by_key(&q, |e| e.0).ok()?;
                Some(items.remove(i).1)
            }
            Shape::Tree(children) => {
                let at = route(children, q);
                let child = children.get_mut(at)?;
                let i = child.items.binary_search_by_key(&q, |e| e.0).ok()?;
                let old = child.items.remove(i).1;
                child.dirty = true;
                if child.items.is_empty() && children.len() > 1 {
                    children.remove(at);
                }
                Some(old)
            }
        }
    }
}

/// The child bin for `q`: the last whose first key is <= q, or the first.
fn route(children: &[Child], q: u64) -> usize {
    children
        .iter()
        .skip(1)
        .take_while(|c| c.items.first().is_some_and(|e| e.0 <= q))
        .count()
}

fn tree_upsert(children: &mut Vec<Child>, q: u64, v: u64, m: usize, n: usize) -> bool {
    let at = route(children, q);
    let prev_has_room = at
        .checked_sub(1)
        .and_then(|p| children.get(p))
        .is_some_and(|p| p.items.len() < n);
    let root_has_room = children.len() < m;
    let Some(child) = children.get_mut(at) else {
        debug_assert!(false, "a tree of level bins without children");
        return false;
    };
    let pos = match child.items.binary_search_by_key(&q, |e| e.0) {
        Ok(i) => {
            if let Some(e) = child.items.get_mut(i) {
                e.1 = v;
            }
            child.dirty = true;
            return true;
        }
        Err(i) => i,
    };
    if child.items.len() < n {
        child.items.insert(pos, (q, v));
        child.dirty = true;
        return true;
    }
    if prev_has_room {
        // Prefer the previous child bin: its last slot takes this bin's smallest entry (q itself
        // when q is the smallest), n + 1 moves at most.
        child.items.insert(pos, (q, v));
        let first = child.items.remove(0);
        child.dirty = true;
        if let Some(prev) = at.checked_sub(1).and_then(|p| children.get_mut(p)) {
            prev.items.push(first);
            prev.dirty = true;
        }
        return true;
    }
    if !root_has_room {
        return false;
    }
    // Split like a B-tree node: the upper half goes to a free child bin after this one.
    child.items.insert(pos, (q, v));
    let right = child.items.split_off(child.items.len() / 2);
    child.dirty = true;
    let Some(id) = (0..m).find(|id| children.iter().all(|c| c.id != *id)) else {
        debug_assert!(false, "fewer than m children but no free child id");
        return false;
    };
    children.insert(
        at + 1,
        Child {
            id,
            items: right,
            dirty: true,
        },
    );
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    type Interleaving = Box<dyn FnOnce()>;

    thread_local! {
        /// Runs once inside a reader, after it located a key in its child bin and before it
        /// loads the value: a deterministic stand-in for a writer that gets in between.
        static BETWEEN_KEY_AND_VALUE: RefCell<Option<Interleaving>> = const { RefCell::new(None) };
    }

    thread_local! {
        /// Runs once inside an in-place writer, after it routed to a child bin and before it
        /// latches it.
        static BETWEEN_ROUTE_AND_LATCH: RefCell<Option<Interleaving>> = const { RefCell::new(None) };
    }

    pub(super) fn interleave() {
        if let Some(f) = BETWEEN_KEY_AND_VALUE.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    pub(super) fn interleave_writer() {
        if let Some(f) = BETWEEN_ROUTE_AND_LATCH.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    /// Keys 10..=50 (step 10, value key * 10) in 4 x 4 bins: child bins [10, 20] and
    /// [30, 40, 50].
    fn five_keys_in_4x4_bins() -> Arc<LevelBins> {
        let (m, n) = (4, 4);
        let bins = Arc::new(LevelBins::new(m, n));
        for k in [10u64, 20, 30, 40, 50] {
            let w = bins.lock_all();
            let mut shape = bins.load_shape(&w);
            assert!(shape.upsert(k, k * 10, m, n));
            bins.store_shape(&w, &shape);
        }
        bins
    }

    #[test]
    fn an_in_place_writer_rechecks_the_root_after_latching_its_child() {
        // The writer routes 25 to a child bin; before it latches the child, the set is retrained
        // away (emptied and retired). Only the root's validation stops the write from landing in
        // a retired set, where nobody would ever read it.
        let bins = five_keys_in_4x4_bins();
        let retirer = Arc::clone(&bins);
        BETWEEN_ROUTE_AND_LATCH.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                let mut w = retirer.lock_all();
                retirer.store_shape(&w, &Shape::Flat(Vec::new()));
                w.root.retire();
            }));
        });
        let mut called = false;
        let done = bins.write_in_child(25, &mut |_| {
            called = true;
            Some(250)
        });
        assert_eq!(done, ChildWrite::Retired, "wrote into a retired set");
        assert!(!called);
    }

    #[test]
    fn a_reader_rejects_a_child_bin_changed_in_place_under_it() {
        // Five inserts into 4 x 4 bins give child bins [10, 20] and [30, 40, 50]. A reader of 20
        // finds it at slot 1; an in-place insert of 15 (the child has room, so only its latch is
        // taken and the root's version does not move) shifts 20 to slot 2 and puts 15's value in
        // slot 1. Only the child's validation tells the reader to start again.
        let bins = five_keys_in_4x4_bins();
        let before = bins.latch.optimistic();
        let writer = Arc::clone(&bins);
        BETWEEN_KEY_AND_VALUE.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                let done = writer.write_in_child(15, &mut |_| Some(150));
                assert_eq!(done, ChildWrite::Done(None));
            }));
        });
        assert_eq!(bins.get(20), Read::Retry, "a torn read passed validation");
        assert_eq!(
            bins.latch.optimistic(),
            before,
            "the in-place write moved the root"
        );
        assert_eq!(bins.get(20), Read::Done(Some(200)));
        assert_eq!(bins.get(15), Read::Done(Some(150)));
    }

    fn write_all(bins: &LevelBins, keys: &[u64], m: usize, n: usize) -> usize {
        let mut stored = 0;
        for &k in keys {
            let w = bins.lock_all();
            let mut shape = bins.load_shape(&w);
            if !shape.upsert(k, k * 10, m, n) {
                break;
            }
            bins.store_shape(&w, &shape);
            stored += 1;
        }
        stored
    }

    #[test]
    fn ascending_inserts_fill_through_the_previous_child_bin() {
        let (m, n) = (8, 16);
        let bins = LevelBins::new(m, n);
        let keys: Vec<u64> = (1..=200).collect();
        let stored = write_all(&bins, &keys, m, n);
        // Ascending keys split the last child each time (the previous one is full): the set
        // holds m bins half full plus the last one full.
        assert!(stored >= m * n / 2, "stored {stored}");
        assert!(stored <= m * n);
        let mut out = Vec::new();
        assert_eq!(bins.snapshot(&mut out), Read::Done(()));
        assert_eq!(out.len(), stored);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        for &k in &keys[..stored] {
            assert_eq!(bins.get(k), Read::Done(Some(k * 10)));
        }
        assert_eq!(bins.get(0), Read::Done(None));
    }

    #[test]
    fn random_inserts_and_removes_match_a_btreemap() {
        use rand::{Rng, SeedableRng};
        let (m, n) = (4, 4);
        for seed in 0..50u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let bins = LevelBins::new(m, n);
            let mut model = BTreeMap::new();
            for _ in 0..200 {
                let k = rng.gen_range(0..40u64);
                let w = bins.lock_all();
                let mut shape = bins.load_shape(&w);
                if rng.gen_bool(0.3) {
                    assert_eq!(shape.remove(k), model.remove(&k), "seed {seed}");
                } else if shape.upsert(k, k + 1000, m, n) {
                    model.insert(k, k + 1000);
                } else {
                    // Full: the target child bin, the one before it and the root are full
                    // (the paper's fill order may stop below m * n entries).
                    assert!(!model.contains_key(&k), "seed {seed}");
                    assert!(
                        model.len() > n,
                        "full with {} entries, seed {seed}",
                        model.len()
                    );
                }
                bins.store_shape(&w, &shape);
                drop(w);
                let mut out = Vec::new();
                assert_eq!(bins.snapshot(&mut out), Read::Done(()));
                let want: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
                assert_eq!(out, want, "seed {seed}");
                for q in 0..41 {
                    assert_eq!(
                        bins.get(q),
                        Read::Done(model.get(&q).copied()),
                        "seed {seed}"
                    );
                }
            }
        }
    }

    #[test]
    fn previous_child_bin_takes_the_smallest_entry() {
        let (m, n) = (4, 4);
        let mut shape = Shape::Tree(vec![
            Child {
                id: 0,
                items: vec![(1, 1), (2, 2)],
                dirty: false,
            },
            Child {
                id: 1,
                items: vec![(10, 10), (11, 11), (12, 12), (13, 13)],
                dirty: false,
            },
        ]);
        assert!(shape.upsert(14, 14, m, n));
        let Shape::Tree(children) = &shape else {
            panic!("not a tree")
        };
        assert_eq!(
            children.len(),
            2,
            "no split while the previous bin has room"
        );
        assert_eq!(children[0].items, vec![(1, 1), (2, 2), (10, 10)]);
        assert_eq!(children[1].items.first(), Some(&(11, 11)));
    }
}
