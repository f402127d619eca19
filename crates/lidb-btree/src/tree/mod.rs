//! The B+-tree over the buffer pool, with optimistic lock coupling.
//!
//! A walk reads the root slot's version and swip, then at each node: read the node's version,
//! validate the parent's (so the swip it followed was current), read the child swip, go on; a
//! failed validation is [`Fail::Restart`], which the caller's loop ([`retry`]) turns into a new
//! walk. Readers never write shared memory. A writer walks the same way, then upgrades the
//! leaf's latch (which checks the version it read) and changes a private copy of the page that
//! it stores back. A full leaf is split under exclusive latches of its parent and itself (the
//! parent split first if it is full too, a new root when the root splits: `smo.rs`). An
//! unswizzled child swip met on the walk is linked (`link`): swizzled in place if the page is
//! resident (cooling or unlinked), else read with no latch held, and the walk restarts.
//!
//! Callers: the `BTree` handle, any number of threads; the provider thread (`cooling.rs`).
//!
//! Lock order (deadlock freedom): the checkpoint gate (writers shared, checkpoint exclusive),
//! then the root latch, then node latches top-down and, among siblings, left to right; the
//! pool's and page file's mutexes last (they are leaves). Cooling and eviction only `try_lock`,
//! and so does linking: a frame found through the page table (not through a swizzled swip of a
//! latched parent) may have been reused since for a page whose holder waits for our parent, so
//! blocking on it could close a cycle (a stress run deadlocked that way). No latch is held
//! across a page read.
//!
//! Invariants: those of `node.rs` (fences, separators) and `buffer/frame.rs` (swips, states).
//! The root's swip lives in `root` and is guarded by `root_latch` like a parent's child word.

mod bulk;
pub(crate) mod cooling;
mod leaf;
mod leaf_write;
mod resident;
mod simulate;
mod smo;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use crate::buffer::{FrameState, Pool, Swip};
use crate::error::{Error, Result};
use crate::latch::{ExclusiveGuard, HybridLatch};
use crate::node;
use crate::page::PageKind;
use crate::pagefile::{CheckpointInfo, PageFile};

pub use leaf::{LeafGuard, LeafProbe, LeafRef};
pub use leaf_write::LeafWrite;

/// Why a step of a tree operation did not finish.
#[derive(Debug)]
pub(crate) enum Fail {
    /// A validation failed or a latch could not be taken: start the walk again.
    Restart,
    Err(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Err(e)
    }
}

pub(crate) type Step<T> = std::result::Result<T, Fail>;

/// Runs `step` until it finishes, backing off a little after each restart.
pub(crate) fn retry<T>(mut step: impl FnMut() -> Step<T>) -> Result<T> {
    let mut spins = 0u32;
    loop {
        match step() {
            Ok(v) => return Ok(v),
            Err(Fail::Err(e)) => return Err(e),
            Err(Fail::Restart) => {
                back_off(spins);
                spins = spins.saturating_add(1);
            }
        }
    }
}

/// The wait before restart number `restarts` (from 0): a spin doubling from 1 to 128 rounds,
/// then a yield, so a latch holder that lost its core gets it back.
pub(crate) fn back_off(restarts: u32) {
    if restarts < 8 {
        for _ in 0..(1u32 << restarts) {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

/// Attempts of a probe or write of one leaf by page id before it gives up (a miss, then the
/// tree walk); between attempts [`probe_back_off`] waits.
pub(crate) const PROBE_ATTEMPTS: u32 = 8;

/// The wait before attempt `attempt` of a leaf probe: none before the first, then spins of
/// 1, 4, 16 and 64 rounds, then yields. Without it a probe gave up after eight quick tries while
/// a preempted writer (the in-leaf refit) held the leaf, and counted a misprediction.
pub(crate) fn probe_back_off(attempt: u32) {
    if attempt > 0 {
        back_off(2 * (attempt - 1));
    }
}

/// The most levels a walk descends through (a tree of 4 KiB pages holds far fewer).
const MAX_LEVELS: usize = 64;

fn restart_unless(ok: bool) -> Step<()> {
    if ok { Ok(()) } else { Err(Fail::Restart) }
}

/// Where a node hangs, as read by a walk.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parent {
    Root {
        version: u64,
    },
    Node {
        frame: u32,
        version: u64,
        pos: usize,
    },
}

/// A node reached by a walk, with the versions to validate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path {
    pub parent: Parent,
    pub node: u32,
    pub version: u64,
}

/// What a walk looks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// The node covering this key.
    Key(&'a [u8]),
    /// The rightmost node.
    Last,
}

/// Test-only switches that break the protocol on purpose, to show the checks matter.
#[derive(Debug, Default)]
pub(crate) struct Sabotage {
    pub skip_leaf_validation: AtomicBool,
    /// The learned path's probes skip the leaf's fence check (`leaf.rs`).
    pub skip_fence_check: AtomicBool,
}

/// The tree: the pool, the root slot, the page id counter, the checkpoint gate.
#[derive(Debug)]
pub struct Tree {
    pub(crate) pool: Pool,
    root_latch: HybridLatch,
    root: AtomicU64,
    next_pid: AtomicU64,
    gate: RwLock<()>,
    checkpointing: Mutex<()>,
    max_key: usize,
    max_value: usize,
    rng: AtomicU64,
    pub(crate) sabotage: Sabotage,
    /// Splits and merges done (the learned path's retraining trigger reads it).
    smo_count: AtomicU64,
    /// The inner-miss simulation's probability, as f64 bits (0: off); see `simulate.rs`.
    pub(crate) inner_miss_bits: AtomicU64,
}

impl Tree {
    /// A tree over `file` with `frames` frames. With `checkpoint` the tree is the one it
    /// records; without, a new tree with one empty root leaf (not yet durable).
    pub(crate) fn new(
        file: std::sync::Arc<PageFile>,
        frames: usize,
        cooling_share: f64,
        checkpoint: Option<&CheckpointInfo>,
    ) -> Result<Tree> {
        let page_size = file.page_size();
        let tree = Tree {
            pool: Pool::new(file, frames, cooling_share),
            root_latch: HybridLatch::default(),
            root: AtomicU64::new(0),
            next_pid: AtomicU64::new(0),
            gate: RwLock::new(()),
            checkpointing: Mutex::new(()),
            max_key: (page_size / 16).min(1024),
            max_value: page_size / 4,
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
            sabotage: Sabotage::default(),
            smo_count: AtomicU64::new(0),
            inner_miss_bits: AtomicU64::new(0),
        };
        match checkpoint {
            Some(info) => {
                tree.root.store(info.root_pid, Ordering::Relaxed);
                tree.next_pid.store(info.next_pid, Ordering::Relaxed);
            }
            None => {
                let f = tree.pool.alloc(&tree)?;
                let pid = tree.new_pid();
                let mut buf = vec![0u8; page_size];
                crate::page::set_id(&mut buf, pid);
                node::init(&mut buf, PageKind::Leaf, 0, None, None);
                tree.publish(f, pid, &buf);
                tree.root.store(Swip::Frame(f).encode(), Ordering::Relaxed);
            }
        }
        Ok(tree)
    }

    pub(crate) fn new_pid(&self) -> u64 {
        self.next_pid.fetch_add(1, Ordering::Relaxed)
    }

    /// Fills reserved frame `f` with a new page and makes it HOT (the caller swizzles it in).
    pub(crate) fn publish(&self, f: u32, pid: u64, buf: &[u8]) {
        let frame = self.pool.frame(f);
        let _g = frame.latch.lock();
        frame.store(buf);
        frame.set_meta(pid, FrameState::Hot, true);
        self.pool.publish_new(pid, f);
    }

    /// Rejects keys and values the pages cannot hold (`Error::TooLarge`, naming both sizes).
    pub fn check_sizes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > self.max_key {
            return Err(Error::TooLarge(format!(
                "key of {} bytes; the limit is {} (page size / 16, at most 1024)",
                key.len(),
                self.max_key
            )));
        }
        if value.len() > self.max_value {
            return Err(Error::TooLarge(format!(
                "value of {} bytes; the limit is {} (a quarter page)",
                value.len(),
                self.max_value
            )));
        }
        Ok(())
    }

    /// The largest key and value the tree takes.
    pub fn limits(&self) -> (usize, usize) {
        (self.max_key, self.max_value)
    }

    fn validate_parent(&self, parent: Parent) -> Step<()> {
        let ok = match parent {
            Parent::Root { version } => self.root_latch.validate(version),
            Parent::Node { frame, version, .. } => self.pool.frame(frame).latch.validate(version),
        };
        restart_unless(ok)
    }

    fn upgrade_parent(&self, parent: Parent) -> Step<ExclusiveGuard<'_>> {
        let g = match parent {
            Parent::Root { version } => self.root_latch.upgrade(version),
            Parent::Node { frame, version, .. } => self.pool.frame(frame).latch.upgrade(version),
        };
        g.ok_or(Fail::Restart)
    }

    /// Stores `word` as the parent's child swip (the caller holds the parent's latch).
    fn set_parent_word(&self, parent: Parent, word: u64) {
        match parent {
            Parent::Root { .. } => self.root.store(word, Ordering::Relaxed),
            Parent::Node { frame, pos, .. } => {
                let f = self.pool.frame(frame);
                let off = node::child_offset(&*f.words, pos);
                f.store_u64_at(off, word);
            }
        }
    }

    /// Walks to the node at `level` covering `target` (or the leaf, if the tree is lower).
    /// With `may_load`, an unswizzled swip is linked or read and the walk restarts; without,
    /// it is a restart (the provider walks only resident paths).
    pub(crate) fn descend(&self, target: Target<'_>, level: u8, may_load: bool) -> Step<Path> {
        let rv = self.root_latch.optimistic().ok_or(Fail::Restart)?;
        let mut word = self.root.load(Ordering::Relaxed);
        let mut parent = Parent::Root { version: rv };
        // The level of the node the walk came from: each step must go down, so a broken file
        // whose child pointers loop (or a level that does not fall) is corruption, not a walk
        // that restarts forever.
        let mut parent_level: Option<u8> = None;
        for _ in 0..=MAX_LEVELS {
            let f = match Swip::decode(word) {
                Swip::Frame(f) => f,
                Swip::Page(pid) => {
                    self.validate_parent(parent)?;
                    if may_load {
                        self.link(parent, pid)?;
                    }
                    return Err(Fail::Restart);
                }
            };
            let frame = self.pool.frame(f);
            let v = frame.latch.optimistic().ok_or(Fail::Restart)?;
            self.validate_parent(parent)?;
            self.pool.count_hit();
            let words = &*frame.words;
            let lvl = node::level(words);
            if let Some(above) = parent_level.filter(|&above| lvl >= above && !node::is_leaf(words))
            {
                restart_unless(frame.latch.validate(v))?;
                self.validate_parent(parent)?;
                return Err(Fail::Err(self.corruption(format!(
                    "page {} of level {lvl} hangs under a node of level {above}",
                    frame.pid()
                ))));
            }
            if lvl <= level || node::is_leaf(words) {
                restart_unless(frame.latch.validate(v))?;
                return Ok(Path {
                    parent,
                    node: f,
                    version: v,
                });
            }
            let pos = match target {
                Target::Key(k) => node::child_index(words, k),
                Target::Last => node::count(words),
            };
            word = node::child(words, pos);
            restart_unless(frame.latch.validate(v))?;
            self.simulate_inner_miss(frame.pid())?;
            parent = Parent::Node {
                frame: f,
                version: v,
                pos,
            };
            parent_level = Some(lvl);
        }
        // Levels fell at every step, so only a root above `MAX_LEVELS` gets here.
        self.validate_parent(parent)?;
        Err(Fail::Err(self.corruption(format!(
            "the tree is deeper than {MAX_LEVELS} levels"
        ))))
    }

    fn corruption(&self, detail: String) -> Error {
        Error::Corruption {
            file: self.pool.file().device().name().to_path_buf(),
            detail,
        }
    }

    /// Resolves the unswizzled child `pid` of `parent`: swizzles it if resident, else reads it
    /// (no latch held) into an unlinked frame. The caller restarts either way.
    fn link(&self, parent: Parent, pid: u64) -> Step<()> {
        let Some(f) = self.pool.lookup(pid) else {
            if self.pool.load(pid, self)?.is_some() {
                return Ok(());
            }
            // No such page: merged away since the walk read the swip (the parent changed:
            // restart), or referenced by an unchanged parent (a broken file).
            self.validate_parent(parent)?;
            return Err(Fail::Err(Error::Corruption {
                file: self.pool.file().device().name().to_path_buf(),
                detail: format!("page {pid} is referenced by the tree but has no slot"),
            }));
        };
        if matches!(parent, Parent::Node { frame, .. } if frame == f) {
            // The parent names its own page (a broken file): its latch is the one wanted.
            self.validate_parent(parent)?;
            return Err(Fail::Err(
                self.corruption(format!("page {pid} is its own child")),
            ));
        }
        let _pg = self.upgrade_parent(parent)?;
        let frame = self.pool.frame(f);
        // Only tried: between the lookup and now the frame may have been evicted and reused
        // for a page whose latch holder waits for this parent (a lock order the walk cannot
        // see). A cooling or unlinked frame is latched only briefly by an evictor.
        let _g = frame.latch.try_lock().ok_or(Fail::Restart)?;
        if frame.pid() != pid {
            return Err(Fail::Restart);
        }
        if frame.state() == FrameState::Hot {
            // A hot frame is swizzled into its one parent, and this parent (latched, unchanged
            // since the walk read the page id) is not it: a broken file names the page twice.
            return Err(Fail::Err(
                self.corruption(format!("page {pid} is referenced by two parents")),
            ));
        }
        if !matches!(frame.state(), FrameState::Cooling | FrameState::Unlinked) {
            return Err(Fail::Restart);
        }
        frame.set_state(FrameState::Hot);
        self.set_parent_word(parent, Swip::Frame(f).encode());
        self.pool.count_rehit();
        Ok(())
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        retry(|| {
            let p = self.descend(Target::Key(key), 0, true)?;
            let frame = self.pool.frame(p.node);
            let words = &*frame.words;
            let (pos, found) = node::lower_bound(words, key);
            let value = found.then(|| node::value(words, pos));
            if !self.sabotage.skip_leaf_validation.load(Ordering::Relaxed) {
                restart_unless(frame.latch.validate(p.version))?;
            }
            Ok(value)
        })
    }

    /// Inserts or updates `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(key, value)?;
        let _gate = self
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut buf = Vec::new();
        loop {
            let done = retry(|| {
                let p = self.descend(Target::Key(key), 0, true)?;
                let frame = self.pool.frame(p.node);
                let _g = frame.latch.upgrade(p.version).ok_or(Fail::Restart)?;
                frame.copy_out(&mut buf);
                debug_assert!(node::covers(buf.as_slice(), key));
                let (pos, found) = node::lower_bound(buf.as_slice(), key);
                let ok = if found {
                    node::set_value(&mut buf, pos, value)
                } else {
                    node::insert(&mut buf, pos, key, value)
                };
                if ok {
                    frame.store(&buf);
                    frame.set_dirty(true);
                }
                Ok(ok)
            })?;
            if done {
                return Ok(());
            }
            self.split(key, 0)?;
        }
    }

    /// Removes `key`; returns whether it was there. A leaf left under a quarter full merges
    /// with a sibling under the same parent when both fit in one page.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let _gate = self
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut buf = Vec::new();
        let (found, underfull) = retry(|| {
            let p = self.descend(Target::Key(key), 0, true)?;
            let frame = self.pool.frame(p.node);
            let _g = frame.latch.upgrade(p.version).ok_or(Fail::Restart)?;
            frame.copy_out(&mut buf);
            let (pos, found) = node::lower_bound(buf.as_slice(), key);
            if !found {
                return Ok((false, false));
            }
            node::remove(&mut buf, pos);
            frame.store(&buf);
            frame.set_dirty(true);
            Ok((true, node::used_space(&buf) < buf.len() / 4))
        })?;
        if underfull {
            self.merge(key)?;
        }
        Ok(found)
    }

    /// Up to `limit` pairs with `start <= key < end` (no end: to the last key), in order. Each
    /// leaf is read consistently; a leaf that changes under the read is read again, and the
    /// walk goes on from the leaf's upper fence, so the result is sorted without duplicates.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut from = start.to_vec();
        while out.len() < limit {
            let (batch, upper) = retry(|| {
                let p = self.descend(Target::Key(&from), 0, true)?;
                let frame = self.pool.frame(p.node);
                let words = &*frame.words;
                let (mut pos, _) = node::lower_bound(words, &from);
                let n = node::count(words);
                let mut batch = Vec::new();
                while pos < n && out.len() + batch.len() < limit {
                    let k = node::key(words, pos);
                    if end.is_some_and(|e| k.as_slice() >= e) {
                        break;
                    }
                    batch.push((k, node::value(words, pos)));
                    pos += 1;
                }
                let upper = node::upper_fence(words);
                restart_unless(frame.latch.validate(p.version))?;
                Ok((batch, upper))
            })?;
            out.extend(batch);
            let Some(next) = upper else { break };
            let next = self.next_scan_key(&from, next)?;
            if end.is_some_and(|e| next.as_slice() >= e) {
                break;
            }
            from = next;
        }
        Ok(out)
    }

    /// The number of pairs: walks every leaf (reading the non-resident ones), so O(leaves).
    pub fn count_entries(&self) -> Result<u64> {
        let mut total = 0u64;
        let mut from = Vec::new();
        loop {
            let (n, upper) = retry(|| {
                let p = self.descend(Target::Key(&from), 0, true)?;
                let frame = self.pool.frame(p.node);
                let n = node::count(&*frame.words) as u64;
                let upper = node::upper_fence(&*frame.words);
                restart_unless(frame.latch.validate(p.version))?;
                Ok((n, upper))
            })?;
            total += n;
            let Some(next) = upper else {
                return Ok(total);
            };
            from = self.next_scan_key(&from, next)?;
        }
    }

    /// The key a leaf-by-leaf walk goes on from after the leaf it reached for `from`: the
    /// smallest key above the leaf's upper fence. The leaf, read consistently, covers `from`,
    /// so that key is above `from`; one that is not (a broken file whose fences disagree with
    /// its parents) is corruption, not a walk that goes round forever.
    fn next_scan_key(&self, from: &[u8], mut upper: Vec<u8>) -> Result<Vec<u8>> {
        upper.push(0);
        if upper.as_slice() <= from {
            upper.pop(); // the message names the fence itself
            return Err(self.corruption(format!(
                "a leaf reached for key {from:02x?} ends at {upper:02x?}, not above it"
            )));
        }
        Ok(upper)
    }

    /// Height of the tree (1: the root is a leaf).
    pub fn height(&self) -> Result<u8> {
        retry(|| {
            let p = self.descend(Target::Last, u8::MAX, true)?;
            let lvl = node::level(&*self.pool.frame(p.node).words);
            restart_unless(self.pool.frame(p.node).latch.validate(p.version))?;
            Ok(lvl + 1)
        })
    }

    /// Writes every dirty page back and commits a checkpoint with `lsn` and `extra`; returns
    /// when it is durable. A first pass writes the dirty pages while writers go on (like
    /// evictions); then writers wait while the pages dirtied since, the table, the blob and the
    /// header are written and synced. Readers never wait.
    pub fn checkpoint(&self, lsn: u64, extra: &[u8]) -> Result<CheckpointInfo> {
        let _one = self
            .checkpointing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.write_back_dirty()?;
        let _gate = self
            .gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.write_back_dirty()?;
        let root_pid = {
            let _r = self.root_latch.lock();
            match Swip::decode(self.root.load(Ordering::Relaxed)) {
                Swip::Frame(f) => self.pool.frame(f).pid(),
                Swip::Page(p) => p,
            }
        };
        self.pool.file().commit_checkpoint(
            root_pid,
            self.next_pid.load(Ordering::Relaxed),
            lsn,
            extra,
        )
    }

    /// Writes back every frame dirty now, one latch at a time.
    fn write_back_dirty(&self) -> Result<()> {
        for f in self.pool.dirty_frames() {
            let frame = self.pool.frame(f);
            let _g = frame.latch.lock();
            let live = matches!(
                frame.state(),
                FrameState::Hot | FrameState::Cooling | FrameState::Unlinked
            );
            if frame.is_dirty() && live {
                self.pool.write_back(f)?;
            }
        }
        Ok(())
    }

    /// A pseudo-random number (the provider's picks; racy updates only repeat a pick).
    pub(crate) fn random(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        x
    }

    /// Splits and merges done since the tree was opened.
    pub fn smo_count(&self) -> u64 {
        self.smo_count.load(Ordering::Relaxed)
    }

    pub(crate) fn count_smo(&self) {
        self.smo_count.fetch_add(1, Ordering::Relaxed);
    }

    /// Pages the tree has handed out ids for (live or merged away).
    pub fn pids_issued(&self) -> u64 {
        self.next_pid.load(Ordering::Relaxed)
    }
}
