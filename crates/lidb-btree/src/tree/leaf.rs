//! The learned path's entry points: the list of leaves read from their parents (never from the
//! leaves), and lookups in one leaf reached by page id without its parent (`probe_leaf`, or
//! `fix_leaf` and its [`LeafGuard`]).
//!
//! A leaf loaded by page id goes into an UNLINKED frame: resident, in the page table and the
//! cooling FIFO, swizzled nowhere; evicting it touches no parent. A tree walk that reaches it
//! through its parent links it (HOT), as for a cooling page (`Tree::link`).
//!
//! Callers: the learned path (mapping table build and lookups), any thread.

use std::sync::atomic::Ordering;

use super::{Fail, PROBE_ATTEMPTS, Step, Target, Tree, probe_back_off, restart_unless, retry};
use crate::buffer::{FrameState, Swip};
use crate::error::Result;
use crate::node;

/// One leaf as its parent describes it: its upper fence (inclusive; `None` for the last leaf,
/// plus infinity) and its page id. Leaves come in key order; leaf `i` covers
/// `(upper[i-1], upper[i]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRef {
    pub upper: Option<Vec<u8>>,
    pub pid: u64,
    /// The frame holding the leaf when it was listed (swizzled in its parent): a hint for
    /// [`Tree::probe_leaf`], checked before use.
    pub frame: Option<u32>,
}

/// The result of [`Tree::probe_leaf`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafProbe {
    /// The leaf covers the key and holds it; `frame` is the hint for the next probe.
    Found { value: Vec<u8>, frame: u32 },
    /// The leaf covers the key and does not hold it: the key is absent from the tree.
    Absent { frame: u32 },
    /// The page is not a leaf covering the key (it split, merged or is gone): walk the tree.
    Miss,
}

impl Tree {
    /// Every leaf's (upper fence, page id), in key order, read from the level-1 nodes only.
    pub fn leaf_parents(&self) -> Result<Vec<LeafRef>> {
        let mut out = Vec::new();
        let mut from: Option<Vec<u8>> = Some(Vec::new());
        while let Some(key) = from.take() {
            let (refs, upper) = retry(|| self.level1_refs(&key))?;
            out.extend(refs);
            from = upper.map(|mut u| {
                u.push(0);
                u
            });
        }
        Ok(out)
    }

    /// The leaves whose ranges meet `(lower, upper]` (`None`: infinite), in key order, read
    /// from their parents as [`Tree::leaf_parents`] does: the leaves one mapping-table slot
    /// covers now, after splits since the table was built. Reads no leaf.
    pub fn leaves_between(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<Vec<LeafRef>> {
        let mut out = Vec::new();
        let mut from = lower.map_or_else(Vec::new, |l| {
            let mut k = l.to_vec();
            k.push(0);
            k
        });
        loop {
            let (refs, node_upper) = retry(|| self.level1_refs(&from))?;
            for r in refs {
                let below = lower.is_some_and(|l| r.upper.as_deref().is_some_and(|u| u <= l));
                if below {
                    continue; // ends at or below the range
                }
                let last = match (r.upper.as_deref(), upper) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(u), Some(up)) => u >= up,
                };
                out.push(r);
                if last {
                    return Ok(out);
                }
            }
            match node_upper {
                // The node covering `from` ends at or above it, so `from` rises each round (a
                // damaged tree that says otherwise ends the list: it is only a hint).
                Some(mut u) if u >= from => {
                    u.push(0);
                    from = u;
                }
                _ => return Ok(out),
            }
        }
    }

    /// The children of the level-1 node covering `key` (or the root leaf), and that node's
    /// upper fence.
    fn level1_refs(&self, key: &[u8]) -> Step<(Vec<LeafRef>, Option<Vec<u8>>)> {
        let p = self.descend(Target::Key(key), 1, true)?;
        let frame = self.pool.frame(p.node);
        let words = &*frame.words;
        let mut refs = Vec::new();
        let upper = node::upper_fence(words);
        if node::is_leaf(words) {
            refs.push(LeafRef {
                upper: None,
                pid: frame.pid(),
                frame: Some(p.node),
            });
            restart_unless(frame.latch.validate(p.version))?;
            return Ok((refs, None));
        }
        let n = node::count(words);
        for i in 0..=n {
            let (pid, hint) = match Swip::decode(node::child(words, i)) {
                Swip::Frame(c) => (self.pool.frame(c).pid(), Some(c)),
                Swip::Page(pid) => (pid, None),
            };
            let upper = if i < n {
                Some(node::key(words, i))
            } else {
                upper.clone()
            };
            refs.push(LeafRef {
                upper,
                pid,
                frame: hint,
            });
        }
        restart_unless(frame.latch.validate(p.version))?;
        Ok((refs, upper))
    }

    /// Looks `key` up in leaf `pid` directly, loading it into an UNLINKED frame if it is not
    /// resident; `frame_hint` (from an earlier probe) skips the page table when it still holds
    /// the page. The fences are checked, so a stale mapping gives [`LeafProbe::Miss`], never a
    /// wrong answer.
    pub fn probe_leaf(&self, pid: u64, frame_hint: Option<u32>, key: &[u8]) -> Result<LeafProbe> {
        let mut hint = frame_hint;
        for attempt in 0..PROBE_ATTEMPTS {
            probe_back_off(attempt);
            let f = match hint
                .take()
                .filter(|f| (*f as usize) < self.pool.frame_count())
            {
                Some(f) => f,
                None => match self.pool.lookup(pid) {
                    Some(f) => f,
                    None => match self.pool.load(pid, self)? {
                        Some(f) => f,
                        None => return Ok(LeafProbe::Miss),
                    },
                },
            };
            match self.probe_frame(f, pid, key) {
                Ok(r) => return Ok(r),
                Err(Fail::Err(e)) => return Err(e),
                Err(Fail::Restart) => continue,
            }
        }
        Ok(LeafProbe::Miss)
    }

    /// Fixes leaf `pid` for lookups without its parent: the frame holding it (loaded into an
    /// UNLINKED frame if it was not resident), at the version read now. `Ok(None)`: no such
    /// page, or not a leaf. See [`LeafGuard`].
    pub fn fix_leaf(&self, pid: u64, frame_hint: Option<u32>) -> Result<Option<LeafGuard<'_>>> {
        let mut hint = frame_hint;
        for attempt in 0..PROBE_ATTEMPTS {
            probe_back_off(attempt);
            let f = match hint
                .take()
                .filter(|f| (*f as usize) < self.pool.frame_count())
            {
                Some(f) => f,
                None => match self.pool.lookup(pid) {
                    Some(f) => f,
                    None => match self.pool.load(pid, self)? {
                        Some(f) => f,
                        None => return Ok(None),
                    },
                },
            };
            let frame = self.pool.frame(f);
            let Some(version) = frame.latch.optimistic() else {
                continue;
            };
            let live = matches!(
                frame.state(),
                FrameState::Hot | FrameState::Cooling | FrameState::Unlinked
            );
            let ok = frame.pid() == pid && live;
            let leaf = node::is_leaf(&*frame.words);
            if !frame.latch.validate(version) || !ok {
                continue;
            }
            if !leaf {
                return Ok(None);
            }
            return Ok(Some(LeafGuard {
                tree: self,
                frame: f,
                pid,
                version,
            }));
        }
        Ok(None)
    }

    /// Refits the linear model of the leaf covering `key` (after many inserts made it stale);
    /// returns the new (slope, intercept).
    pub fn refit_leaf(&self, key: &[u8]) -> Result<(f64, f64)> {
        let mut buf = Vec::new();
        retry(|| {
            let p = self.descend(Target::Key(key), 0, true)?;
            let frame = self.pool.frame(p.node);
            let _g = frame.latch.upgrade(p.version).ok_or(Fail::Restart)?;
            frame.copy_out(&mut buf);
            node::fit_model(&mut buf);
            frame.store(&buf);
            frame.set_dirty(true);
            Ok(node::model(buf.as_slice()))
        })
    }

    pub(crate) fn probe_frame(&self, f: u32, pid: u64, key: &[u8]) -> Step<LeafProbe> {
        let frame = self.pool.frame(f);
        let v = frame.latch.optimistic().ok_or(Fail::Restart)?;
        let live = matches!(
            frame.state(),
            FrameState::Hot | FrameState::Cooling | FrameState::Unlinked
        );
        if frame.pid() != pid || !live {
            restart_unless(frame.latch.validate(v))?;
            return Err(Fail::Restart); // the hint is stale: look the page up
        }
        let words = &*frame.words;
        let skip_fences = self.sabotage.skip_fence_check.load(Ordering::Relaxed);
        if !node::is_leaf(words) || !(skip_fences || node::covers(words, key)) {
            restart_unless(frame.latch.validate(v))?;
            return Ok(LeafProbe::Miss);
        }
        let (pos, found) = node::lower_bound(words, key);
        let value = found.then(|| node::value(words, pos));
        restart_unless(frame.latch.validate(v))?;
        Ok(match value {
            Some(value) => LeafProbe::Found { value, frame: f },
            None => LeafProbe::Absent { frame: f },
        })
    }
}

/// An optimistic hold of one leaf reached by page id (LeanStore's optimistic guard): it takes
/// no latch; every read through it checks that the leaf is still the version fixed, and answers
/// [`LeafProbe::Miss`] (or `None`) once a writer changed or evicted it, so the caller fixes the
/// leaf again or walks the tree.
#[derive(Debug, Clone, Copy)]
pub struct LeafGuard<'a> {
    tree: &'a Tree,
    frame: u32,
    pid: u64,
    version: u64,
}

impl LeafGuard<'_> {
    /// The frame holding the leaf (a hint for the next `fix_leaf`).
    pub fn frame(&self) -> u32 {
        self.frame
    }

    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// Whether the leaf is still as fixed.
    pub fn is_current(&self) -> bool {
        self.tree
            .pool
            .frame(self.frame)
            .latch
            .validate(self.version)
    }

    /// The leaf's fences (lower exclusive, upper inclusive; `None` is infinite), if still
    /// current.
    #[expect(
        clippy::type_complexity,
        reason = "two optional fences, checked together"
    )]
    pub fn fences(&self) -> Option<(Option<Vec<u8>>, Option<Vec<u8>>)> {
        let words = &*self.tree.pool.frame(self.frame).words;
        let f = (node::lower_fence(words), node::upper_fence(words));
        self.is_current().then_some(f)
    }

    /// Looks `key` up after checking the fences cover it.
    pub fn lookup(&self, key: &[u8]) -> LeafProbe {
        let words = &*self.tree.pool.frame(self.frame).words;
        let covers = node::covers(words, key);
        let (pos, found) = node::lower_bound(words, key);
        let value = (covers && found).then(|| node::value(words, pos));
        if !self.is_current() || !covers {
            return LeafProbe::Miss;
        }
        match value {
            Some(value) => LeafProbe::Found {
                value,
                frame: self.frame,
            },
            None => LeafProbe::Absent { frame: self.frame },
        }
    }
}
