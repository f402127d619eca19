//! What a FINEdex server exposes to remote clients (the FineStore paper, section 4; the bytes are in
//! docs/format/fine-wire.md): trained-data regions a network thread copies without locks or
//! index code, the model layout clients predict positions with, pipeline operations that start
//! at a level bin address, and the extended RCU barrier (`barrier.rs`).
//!
//! - `words.rs`: a region's version words (writes started, finished; RETIRED) and the lock-free
//!   copy of its record words;
//! - `barrier.rs`: per-version client acks with timeouts, retained old regions, reclamation;
//! - this file: [`TrainedRegion`], [`RemoteLayout`], and [`FineIndex::at_bin`].
//!
//! Threads: everything here may be called from any thread. A [`TrainedRegion`] keeps its node
//! alive (an `Arc`), so a copy of a retired region is memory-safe; its RETIRED bit tells the
//! client the data is old.
//!
//! Invariants: a region of the current layout is not retired (retraining retires a node only
//! when it replaces it, right before publishing); a region's key range never changes while it
//! is not retired (a retraining replaces a node by nodes covering exactly its keys).

pub(crate) mod barrier;
pub(crate) mod words;

use std::sync::Arc;

use lidb_index::segment::Segments;

use crate::index::FineIndex;
use crate::node::{Home, Node};

pub use barrier::{Barrier, BarrierStats};
pub use words::{
    BIN_REGION_RETIRED, RETIRED, WORDS_PER_RECORD, WRITING, bin_copy_is_valid, copy_is_valid,
};

/// The trained data array of one top-level model node, as a region of words.
#[derive(Debug, Clone)]
pub struct TrainedRegion {
    node: Arc<Node>,
}

impl TrainedRegion {
    /// The region id (unique in this process, never 0).
    pub fn id(&self) -> u64 {
        self.node.region.id
    }

    /// The key of the first record (the region covers keys from here to the next region's).
    pub fn first_key(&self) -> u64 {
        self.node.keys().first().copied().unwrap_or(0)
    }

    /// Records in the region.
    pub fn records(&self) -> u64 {
        self.node.len() as u64
    }

    /// The node's LPA models (positions are record indexes of this region).
    pub fn segments(&self) -> &Segments {
        self.node.router().segments()
    }

    /// Whether a model retraining replaced this region.
    pub fn is_retired(&self) -> bool {
        self.node.region.is_retired()
    }

    /// Appends head version, `count` records' words from `offset` (clamped), tail version.
    /// Loads of atomics only: no lock, no index code.
    pub fn copy_words(&self, offset: u64, count: u64, out: &mut Vec<u64>) {
        self.node.region.copy(
            self.node.keys(),
            self.node.slots(),
            usize::try_from(offset).unwrap_or(usize::MAX),
            usize::try_from(count).unwrap_or(usize::MAX),
            out,
            None,
        );
    }

    /// [`TrainedRegion::copy_words`] that runs `mid` halfway through the copy: the test hook
    /// that tears a copy (a write to this region from `mid` must make the copy invalid).
    pub fn copy_words_torn_by(
        &self,
        offset: u64,
        count: u64,
        out: &mut Vec<u64>,
        mid: &mut dyn FnMut(),
    ) {
        self.node.region.copy(
            self.node.keys(),
            self.node.slots(),
            usize::try_from(offset).unwrap_or(usize::MAX),
            usize::try_from(count).unwrap_or(usize::MAX),
            out,
            Some(mid),
        );
    }

    /// The remote bin read (docs/format/fine-wire.md, READ_BIN): appends the words of the
    /// level bin below record `position` (root bin, or child bin `child`) as
    /// `head, aux, len, len x (key, value), tail`; `false` (nothing appended) when `position`
    /// is past the region. Loads of atomics only: no lock, no index code. The head and tail
    /// words are the bin's seqlock versions, with [`BIN_REGION_RETIRED`] when the region was
    /// retired before the copy began or before it ended. A gap without bins copies as an empty
    /// root (`0, 0, 0, 0`). `tear`: take and release the bins' write section halfway through
    /// (the test hook; the copy must then fail validation).
    pub fn copy_bin(
        &self,
        position: u64,
        child: Option<u32>,
        out: &mut Vec<u64>,
        tear: bool,
    ) -> bool {
        let Some(rec) = usize::try_from(position)
            .ok()
            .and_then(|p| self.node.record(p))
        else {
            return false;
        };
        let retired = |r: bool| if r { BIN_REGION_RETIRED } else { 0 };
        let before = retired(self.is_retired());
        let start = out.len();
        match rec.gap().map(|g| g.bins()) {
            Some(bins) => {
                let mut hook = || drop(bins.lock_all());
                let mid: Option<&mut dyn FnMut()> = if tear { Some(&mut hook) } else { None };
                bins.copy_words(child.map(|c| c as usize), out, mid);
            }
            None => out.extend_from_slice(&[0, 0, 0, 0]),
        }
        let after = retired(self.is_retired());
        if let Some(h) = out.get_mut(start) {
            *h |= before;
        }
        if let Some(t) = out.last_mut() {
            *t |= after;
        }
        true
    }

    fn same_node(&self, other: &Node) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.node), other)
    }
}

/// What a client caches of a server's index: the version and each region's models.
#[derive(Debug, Clone)]
pub struct RemoteLayout {
    /// 1 after the bulk load, one more per model retraining.
    pub version: u64,
    /// The models' error bound in positions.
    pub eps: u64,
    /// The top-level trained arrays, in key order.
    pub regions: Vec<TrainedRegion>,
}

/// A pipeline operation on one key (docs/format/fine-wire.md, ops 0x20-0x23).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BinOp {
    Search,
    Insert(u64),
    Update(u64),
    Remove,
}

/// What [`FineIndex::at_bin`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinAnswer {
    /// The value (Search) or the old value (writes).
    pub value: Option<u64>,
    /// Whether the op started at the given address; `false`: the region was retired or the key
    /// is not in that record or gap, so it ran by key from the current layout.
    pub at_address: bool,
}

impl FineIndex {
    /// The current layout version.
    pub fn layout_version(&self) -> u64 {
        self.layout.load().version
    }

    /// The current layout as regions (what a client fetches).
    pub fn remote_layout(&self) -> RemoteLayout {
        let layout = self.layout.load_full();
        RemoteLayout {
            version: layout.version,
            eps: self.cfg.threshold,
            regions: layout
                .nodes()
                .iter()
                .map(|n| TrainedRegion {
                    node: Arc::clone(n),
                })
                .collect(),
        }
    }

    /// Runs `op` on `key` starting at the level bin address `(region, position)`: the record
    /// at `position` if it holds `key`, else its gap, with no model search. Falls back to the
    /// ordinary path by key (`at_address: false`) when the region is retired or the key does not
    /// belong there, so a wrong or stale address never loses or misplaces a write.
    pub fn at_bin(&self, region: &TrainedRegion, position: u64, key: u64, op: BinOp) -> BinAnswer {
        let start = if region.is_retired() {
            None
        } else {
            self.check_address(region, position, key)
        };
        let at_address = start.is_some();
        let value = match op {
            BinOp::Search => match start {
                Some(pos) => read_from(&region.node, pos, key),
                None => self.get(key),
            },
            BinOp::Insert(v) => {
                let start = start.map(|pos| (&*region.node, pos));
                self.write_from(key, true, &mut |_| Some(v), start)
            }
            BinOp::Update(v) => {
                let start = start.map(|pos| (&*region.node, pos));
                self.write_from(key, false, &mut |old| old.map(|_| v), start)
            }
            BinOp::Remove => {
                let start = start.map(|pos| (&*region.node, pos));
                self.write_from(key, false, &mut |_| None, start)
            }
        };
        BinAnswer { value, at_address }
    }

    /// `Some(position)` when `key` is the record at `position` of `region` or lies in its gap
    /// (for the last record: when the current layout routes `key` to this region).
    fn check_address(&self, region: &TrainedRegion, position: u64, key: u64) -> Option<usize> {
        let pos = usize::try_from(position).ok()?;
        let keys = region.node.keys();
        if *keys.get(pos)? > key {
            return None;
        }
        match keys.get(pos + 1) {
            Some(&next) if next <= key => None,
            Some(_) => Some(pos),
            None => {
                let layout = self.layout.load();
                let (_, n) = layout.node_for(key)?;
                region.same_node(n).then_some(pos)
            }
        }
    }
}

/// The window `[lo, hi)` of a region's records (`records` of them, models `segs` of error
/// `eps`) that holds the first position whose key is `>= key` (it may equal `hi`): what a client
/// reads to find `key` in trained data. No models: the whole region.
pub fn predict_window(segs: &Segments, eps: u64, records: u64, key: u64) -> (u64, u64) {
    if segs.is_empty() {
        return (0, records);
    }
    let j = segs.route(key);
    let b = lidb_index::bound::window(segs.predict(j, key, records), eps, records);
    (b.lo, b.hi)
}

/// The value of `key`, which is the record at `pos` of `node` or lies in its gap.
fn read_from(node: &Node, pos: usize, key: u64) -> Option<u64> {
    let mut home = node.home_at(pos, key)?;
    loop {
        match home {
            Home::Record(r) => return r.read(),
            Home::Gap(r) => match r.gap()?.get(key) {
                crate::gap::Step::Done(v) => return v,
                crate::gap::Step::Descend(sub) => home = sub.home(key)?,
            },
        }
    }
}
