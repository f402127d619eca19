//! Structure changes: leaf and inner splits (a new root when the root splits), leaf merges, and
//! root collapse when the root is an inner node left with one child.
//!
//! Each change takes, after an optimistic walk, exclusive latches top-down: the parent (or the
//! root slot), then the node, then (merge) the right sibling; new frames are reserved before
//! any latch is taken. A full parent is split first, in its own step, and the change restarts.
//!
//! Callers: `Tree::put` (split) and `Tree::delete` (merge), under the shared checkpoint gate.

use super::{Fail, Parent, Step, Target, Tree, restart_unless, retry};
use crate::buffer::Swip;
use crate::error::Result;
use crate::node;
use crate::page::{self, PageKind};

impl Tree {
    /// Splits the node at `level` that covers `key`.
    pub(crate) fn split(&self, key: &[u8], level: u8) -> Result<()> {
        let mut reserved: Vec<u32> = Vec::new();
        let result = retry(|| self.split_step(key, level, &mut reserved));
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
        let right_frame = reserved.last().copied().ok_or(Fail::Restart)?;
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
                let root_frame = reserved.first().copied().ok_or(Fail::Restart)?;
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
                reserved.clear();
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
                reserved.clear();
            }
        }
        Ok(())
    }

    /// Merges the leaf covering `key` with a sibling under the same parent, if both fit in one
    /// page and the leaf is still under a quarter full; best effort (a sibling that is not
    /// resident is left alone).
    pub(crate) fn merge(&self, key: &[u8]) -> Result<()> {
        let collapse = retry(|| self.merge_step(key))?;
        if collapse {
            retry(|| self.collapse_root())?;
        }
        Ok(())
    }

    /// Returns whether the parent is left without separators (if it is the root, it goes).
    fn merge_step(&self, key: &[u8]) -> Step<bool> {
        let p = self.descend(Target::Key(key), 0, true)?;
        let Parent::Node { frame: pf, pos, .. } = p.parent else {
            return Ok(false);
        };
        let parent = self.pool.frame(pf);
        let _pg = self.upgrade_parent(p.parent)?;
        let page_size = self.pool.page_size();
        let mut pbuf = Vec::with_capacity(page_size);
        parent.copy_out(&mut pbuf);
        let n = node::count(pbuf.as_slice());
        let lpos = if pos < n {
            pos
        } else if pos > 0 {
            pos - 1
        } else {
            return Ok(false);
        };
        let (Swip::Frame(lf), Swip::Frame(rf)) = (
            Swip::decode(node::child(pbuf.as_slice(), lpos)),
            Swip::decode(node::child(pbuf.as_slice(), lpos + 1)),
        ) else {
            return Ok(false);
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
        let both_leaves = node::is_leaf(lbuf.as_slice()) && node::is_leaf(rbuf.as_slice());
        if !both_leaves
            || node::used_space(me) >= page_size / 4
            || !node::can_merge(&lbuf, &rbuf, sep.len())
        {
            return Ok(false);
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
        self.pool.discard(rf);
        self.pool.file().free_page(right_pid);
        Ok(node::count(pbuf.as_slice()) == 0)
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
        self.pool.discard(r);
        self.pool.file().free_page(pid);
        Ok(())
    }
}
