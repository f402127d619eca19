//! Structure changes: leaf and inner splits (a new root when the root splits), merges of leaves
//! and then of their parents while underfull, and root collapse when the root is an inner node
//! left with one child.
//!
//! Each change takes, after an optimistic walk, exclusive latches top-down: the parent (or the
//! root slot), then the node, then (merge) the right sibling; new frames are reserved before
//! any latch is taken. A full parent is split first, in its own step, and the change restarts.
//!
//! Callers: `Tree::put` (split) and `Tree::delete` (merge), under the shared checkpoint gate.

use super::{Fail, Parent, Step, Target, Tree, restart_unless, retry};
use crate::buffer::{FrameState, Swip};
use crate::error::Result;
use crate::node;
use crate::page::{self, PageKind};

/// What a merge step left behind.
enum Merged {
    /// Nothing more to do (no merge, or the parent is full enough).
    No,
    /// The parent is under a quarter full: try it one level up.
    ParentUnderfull,
    /// The parent has no separator left: collapse it if it is the root, else merge it.
    ParentEmpty,
}

impl Tree {
    /// Splits the node at `level` that covers `key`.
    pub(crate) fn split(&self, key: &[u8], level: u8) -> Result<()> {
        let mut reserved: Vec<u32> = Vec::new();
        let result = retry(|| self.split_step(key, level, &mut reserved));
        if result.is_ok() {
            self.count_smo();
        }
        for f in reserved {
            self.pool.release_reserved(f);
        }
        result
    }

    fn split_step(&self, key: &[u8], level: u8, reserved: &mut Vec<u32>) -> Step<()> {
        let p = self.descend(Target::Key(key), level, true)?;
        let frame = self.pool.frame(p.node);
        let lvl = node::level(&*frame.words);
        restart_unless(frame.latch.validate(p.version))?;
        if lvl != level {
            return Ok(()); // the tree is lower than `level` now: nothing to split
        }
        let need = if matches!(p.parent, Parent::Root { .. }) {
            2
        } else {
            1
        };
        while reserved.len() < need {
            reserved.push(self.pool.alloc(self)?);
        }
        let page_size = self.pool.page_size();
        let mut buf = Vec::with_capacity(page_size);
        let mut right = vec![0u8; page_size];
        let right_frame = reserved.first().copied().ok_or(Fail::Restart)?;
        let pg = self.upgrade_parent(p.parent)?;
        let _ng = frame.latch.upgrade(p.version).ok_or(Fail::Restart)?;
        frame.copy_out(&mut buf);
        let right_pid = self.new_pid();
        page::set_id(&mut right, right_pid);
        let Some(sep) = node::split(&mut buf, &mut right) else {
            return Ok(()); // a single entry: nothing to split (the caller's insert will fit)
        };
        match p.parent {
            Parent::Root { .. } => {
                let root_frame = reserved.get(1).copied().ok_or(Fail::Restart)?;
                let root_pid = self.new_pid();
                let mut root = vec![0u8; page_size];
                page::set_id(&mut root, root_pid);
                let entries = [(sep, Swip::Frame(p.node).encode().to_le_bytes().to_vec())];
                let built = node::build(
                    &mut root,
                    PageKind::Inner,
                    lvl + 1,
                    None,
                    None,
                    &entries,
                    Swip::Frame(right_frame).encode(),
                    false,
                );
                debug_assert!(built, "a root with one separator fits");
                frame.store(&buf);
                frame.set_dirty(true);
                self.publish(right_frame, right_pid, &right);
                self.publish(root_frame, root_pid, &root);
                self.set_parent_word(p.parent, Swip::Frame(root_frame).encode());
                reserved.drain(..2);
            }
            Parent::Node { frame: pf, pos, .. } => {
                let parent = self.pool.frame(pf);
                let mut pbuf = Vec::with_capacity(page_size);
                parent.copy_out(&mut pbuf);
                let me = Swip::Frame(p.node).encode().to_le_bytes();
                if !node::insert(&mut pbuf, pos, &sep, &me) {
                    // The parent is full: split it first, then start again.
                    drop(_ng);
                    drop(pg);
                    self.split(key, level + 1)?;
                    return Err(Fail::Restart);
                }
                node::set_child(&mut pbuf, pos + 1, Swip::Frame(right_frame).encode());
                frame.store(&buf);
                frame.set_dirty(true);
                self.publish(right_frame, right_pid, &right);
                parent.store(&pbuf);
                parent.set_dirty(true);
                reserved.remove(0);
            }
        }
        Ok(())
    }

    /// Merges the leaf covering `key` with a sibling under the same parent, if both fit in one
    /// page and the leaf is still under a quarter full; then the same one level up while the
    /// parent is left under a quarter full. Best effort: a sibling that is not resident is left
    /// alone.
    pub(crate) fn merge(&self, key: &[u8]) -> Result<()> {
        for level in 0..32u8 {
            match retry(|| self.merge_step(key, level))? {
                Merged::No => break,
                Merged::ParentUnderfull => continue,
                Merged::ParentEmpty => {
                    retry(|| self.collapse_root())?;
                    continue;
                }
            }
        }
        Ok(())
    }

    /// Merges the node at `level` covering `key` with a sibling, if it is under a quarter full
    /// and both fit in one page.
    fn merge_step(&self, key: &[u8], level: u8) -> Step<Merged> {
        let p = self.descend(Target::Key(key), level, true)?;
        let Parent::Node { frame: pf, pos, .. } = p.parent else {
            return Ok(Merged::No);
        };
        let parent = self.pool.frame(pf);
        let pg = self.upgrade_parent(p.parent)?;
        let n = node::count(&*parent.words);
        let lpos = if pos < n { pos } else { pos.saturating_sub(1) };
        for i in [lpos, lpos + 1] {
            if let Swip::Page(pid) = Swip::decode(node::child(&*parent.words, i))
                && i <= n
            {
                // The sibling is not swizzled: link it under the parent's latch if it is
                // resident, else read it with no latch held and start again.
                let Some(f) = self.pool.lookup(pid) else {
                    drop(pg);
                    self.pool.load(pid, self)?;
                    return Err(Fail::Restart);
                };
                let frame = self.pool.frame(f);
                // Only tried, as in `Tree::link`: the frame may have been reused since the
                // lookup, for a page whose holder waits for this parent.
                let _g = frame.latch.try_lock().ok_or(Fail::Restart)?;
                let linkable = matches!(frame.state(), FrameState::Cooling | FrameState::Unlinked);
                if frame.pid() != pid || !linkable {
                    return Err(Fail::Restart);
                }
                frame.set_state(FrameState::Hot);
                let off = node::child_offset(&*parent.words, i);
                parent.store_u64_at(off, Swip::Frame(f).encode());
                self.pool.count_rehit();
            }
        }
        let page_size = self.pool.page_size();
        let mut pbuf = Vec::with_capacity(page_size);
        parent.copy_out(&mut pbuf);
        let lpos = if pos < n {
            pos
        } else if pos > 0 {
            pos - 1
        } else {
            return Ok(Merged::No);
        };
        let (Swip::Frame(lf), Swip::Frame(rf)) = (
            Swip::decode(node::child(pbuf.as_slice(), lpos)),
            Swip::decode(node::child(pbuf.as_slice(), lpos + 1)),
        ) else {
            return Ok(Merged::No);
        };
        let (left, right) = (self.pool.frame(lf), self.pool.frame(rf));
        let _lg = if lf == p.node {
            left.latch.upgrade(p.version).ok_or(Fail::Restart)?
        } else {
            left.latch.lock()
        };
        let _rg = if rf == p.node {
            right.latch.upgrade(p.version).ok_or(Fail::Restart)?
        } else {
            right.latch.lock()
        };
        let (mut lbuf, mut rbuf) = (Vec::new(), Vec::new());
        left.copy_out(&mut lbuf);
        right.copy_out(&mut rbuf);
        let me = if lf == p.node { &lbuf } else { &rbuf };
        let sep = node::key(pbuf.as_slice(), lpos);
        let same_level = node::level(lbuf.as_slice()) == level
            && node::level(rbuf.as_slice()) == level
            && node::is_leaf(lbuf.as_slice()) == node::is_leaf(rbuf.as_slice());
        if !same_level
            || node::used_space(me) >= page_size / 4
            || !node::can_merge(&lbuf, &rbuf, sep.len())
        {
            return Ok(Merged::No);
        }
        let merged = node::merge(&mut lbuf, &rbuf, &sep);
        debug_assert!(merged, "can_merge said it fits");
        node::remove(&mut pbuf, lpos);
        node::set_child(&mut pbuf, lpos, Swip::Frame(lf).encode());
        left.store(&lbuf);
        left.set_dirty(true);
        parent.store(&pbuf);
        parent.set_dirty(true);
        let right_pid = right.pid();
        // The page leaves the file before the frame leaves the page table, both under the
        // right leaf's latch: a lookup by page id (the learned path) meanwhile finds the frame
        // latched and retries, then finds no page. The other order let it load the page's old
        // copy from the file into a frame of its own and write to that orphan (a lost delete).
        self.pool.file().free_page(right_pid);
        self.pool.discard(rf);
        self.count_smo();
        Ok(if node::count(pbuf.as_slice()) == 0 {
            Merged::ParentEmpty
        } else if node::used_space(&pbuf) < page_size / 4 {
            Merged::ParentUnderfull
        } else {
            Merged::No
        })
    }

    /// Replaces a root that is an inner node without separators by its only child.
    fn collapse_root(&self) -> Step<()> {
        let rv = self.root_latch.optimistic().ok_or(Fail::Restart)?;
        let word = self.root.load(std::sync::atomic::Ordering::Relaxed);
        let Swip::Frame(r) = Swip::decode(word) else {
            return Ok(());
        };
        let _rg = self.root_latch.upgrade(rv).ok_or(Fail::Restart)?;
        let root = self.pool.frame(r);
        let _g = root.latch.lock();
        let words = &*root.words;
        if node::is_leaf(words) || node::count(words) != 0 {
            return Ok(());
        }
        let child = node::rightmost(words);
        let pid = root.pid();
        self.root.store(child, std::sync::atomic::Ordering::Relaxed);
        // Page first, frame second, under the latch (see `merge_step`).
        self.pool.file().free_page(pid);
        self.pool.discard(r);
        Ok(())
    }
}
