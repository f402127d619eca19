//! Writes through the learned path: a put or delete applied to a leaf reached by page id
//! (without its parent), when the leaf covers the key and the write needs no split. Anything
//! else (the page is not that leaf any more: `Miss`; the leaf is full: `Full`) changes
//! nothing, and the caller writes through the tree walk, which splits. A delete that leaves the leaf under a quarter
//! full merges it through the tree, as `Tree::delete` does.
//!
//! Callers: the learned path (`learned/lookup.rs`), any thread, under the checkpoint gate
//! (taken here, shared), like the walk's writes. The leaf's latch is upgraded from the version
//! at which its fences were checked, so a leaf that changed (split, merged, evicted, reused)
//! between the check and the write is a restart, never a write to the wrong leaf.

use super::{Fail, PROBE_ATTEMPTS, Step, Tree, probe_back_off, restart_unless};
use crate::buffer::FrameState;
use crate::error::Result;
use crate::node;

/// What a write to a leaf by page id did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafWrite {
    /// Applied in the leaf held by `frame`; `found`: the key was there before.
    Done { frame: u32, found: bool },
    /// Not applied: the page is not a leaf covering the key (any more). Walk the tree.
    Miss,
    /// Not applied: the leaf covers the key but has no room. Walk the tree (it splits).
    Full,
}

/// What a change did to the leaf's copy.
enum Change {
    Stored,
    Unchanged,
    NoRoom,
}

impl Tree {
    /// Sets `key` to `value` in leaf `pid` if it covers the key and has room.
    pub fn put_in_leaf(
        &self,
        pid: u64,
        frame_hint: Option<u32>,
        key: &[u8],
        value: &[u8],
    ) -> Result<LeafWrite> {
        self.check_sizes(key, value)?;
        let _gate = self
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.write_in_leaf(pid, frame_hint, key, |buf, pos, found| {
            let fits = if found {
                node::set_value(buf, pos, value)
            } else {
                node::insert(buf, pos, key, value)
            };
            if fits { Change::Stored } else { Change::NoRoom }
        })
    }

    /// Removes `key` from leaf `pid` if it covers the key; merges an underfull leaf after.
    pub fn delete_in_leaf(
        &self,
        pid: u64,
        frame_hint: Option<u32>,
        key: &[u8],
    ) -> Result<LeafWrite> {
        let _gate = self
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut underfull = false;
        let r = self.write_in_leaf(pid, frame_hint, key, |buf, pos, found| {
            if !found {
                return Change::Unchanged;
            }
            node::remove(buf, pos);
            underfull = node::used_space(buf) < buf.len() / 4;
            Change::Stored
        })?;
        if underfull && matches!(r, LeafWrite::Done { found: true, .. }) {
            self.merge(key)?;
        }
        Ok(r)
    }

    /// Finds leaf `pid` (hint, page table, or a load into an UNLINKED frame) and applies
    /// `change` to a copy of it under its exclusive latch; the copy is stored back only when
    /// `change` says it changed it.
    fn write_in_leaf(
        &self,
        pid: u64,
        frame_hint: Option<u32>,
        key: &[u8],
        mut change: impl FnMut(&mut Vec<u8>, usize, bool) -> Change,
    ) -> Result<LeafWrite> {
        let mut hint = frame_hint.filter(|f| (*f as usize) < self.pool.frame_count());
        let mut buf = Vec::new();
        for attempt in 0..PROBE_ATTEMPTS {
            probe_back_off(attempt);
            let f = match hint.take().or_else(|| self.pool.lookup(pid)) {
                Some(f) => f,
                None => match self.pool.load(pid, self)? {
                    Some(f) => f,
                    None => return Ok(LeafWrite::Miss),
                },
            };
            match self.write_frame(f, pid, key, &mut buf, &mut change) {
                Ok(r) => return Ok(r),
                Err(Fail::Err(e)) => return Err(e),
                Err(Fail::Restart) => continue,
            }
        }
        Ok(LeafWrite::Miss)
    }

    fn write_frame(
        &self,
        f: u32,
        pid: u64,
        key: &[u8],
        buf: &mut Vec<u8>,
        change: &mut impl FnMut(&mut Vec<u8>, usize, bool) -> Change,
    ) -> Step<LeafWrite> {
        let frame = self.pool.frame(f);
        let v = frame.latch.optimistic().ok_or(Fail::Restart)?;
        let live = matches!(
            frame.state(),
            FrameState::Hot | FrameState::Cooling | FrameState::Unlinked
        );
        if frame.pid() != pid || !live {
            restart_unless(frame.latch.validate(v))?;
            return Err(Fail::Restart); // a stale hint: look the page up
        }
        let words = &*frame.words;
        if !node::is_leaf(words) || !node::covers(words, key) {
            restart_unless(frame.latch.validate(v))?;
            return Ok(LeafWrite::Miss);
        }
        // The upgrade checks the version read above: the fences checked are the leaf's.
        let _g = frame.latch.upgrade(v).ok_or(Fail::Restart)?;
        frame.copy_out(buf);
        let (pos, found) = node::lower_bound(buf.as_slice(), key);
        match change(buf, pos, found) {
            Change::NoRoom => return Ok(LeafWrite::Full),
            Change::Unchanged => {}
            Change::Stored => {
                frame.store(buf);
                frame.set_dirty(true);
            }
        }
        Ok(LeafWrite::Done { frame: f, found })
    }
}
