//! LeanStore's replacement, the tree's half: moving HOT frames to COOLING.
//!
//! A random HOT frame is picked; an inner node with a swizzled child is not cooled, one of its
//! swizzled children is tried instead (so leaves go first, and invariant 3 of `frame.rs`
//! holds: a node with swizzled children stays HOT). The node's parent is found by a walk with
//! the node's upper fence (which routes to it at every level); under `try_lock`ed latches of
//! parent and node, the parent's swip becomes the page id again, and the frame joins the
//! cooling FIFO, from whose tail the pool evicts (`buffer/mod.rs`). The root is never cooled.
//!
//! Callers: the provider thread (keeps `cooling_share` of the frames cooling), and any thread
//! whose frame allocation found no free frame (inline, through `Cooler`). Walks here never
//! read pages (`may_load = false`), and latches are only tried, so cooling never waits.

use super::{Fail, Parent, Step, Target, Tree};
use crate::buffer::{Cooler, FrameState, Swip};
use crate::node;

impl Cooler for Tree {
    fn cool(&self, n: usize) -> usize {
        let mut cooled = 0;
        for _ in 0..n.saturating_mul(8).max(8) {
            if cooled >= n {
                break;
            }
            if self.cool_one() {
                cooled += 1;
            }
        }
        cooled
    }
}

impl Tree {
    /// Tries to cool one frame; returns whether it did.
    fn cool_one(&self) -> bool {
        let frames = self.pool.frame_count() as u64;
        let mut f = (self.random() % frames) as u32;
        for _ in 0..16 {
            let frame = self.pool.frame(f);
            if frame.state() != FrameState::Hot {
                return false;
            }
            let Some(v) = frame.latch.optimistic() else {
                return false;
            };
            let words = &*frame.words;
            if !node::is_leaf(words) {
                let n = node::count(words);
                let start = (self.random() % (n as u64 + 1)) as usize;
                let child = (0..=n)
                    .map(|i| node::child(words, (start + i) % (n + 1)))
                    .find_map(|w| match Swip::decode(w) {
                        Swip::Frame(c) => Some(c),
                        Swip::Page(_) => None,
                    });
                if let Some(c) = child {
                    if !frame.latch.validate(v) {
                        return false;
                    }
                    f = c;
                    continue;
                }
            }
            let level = node::level(words);
            let upper = node::upper_fence(words);
            if !frame.latch.validate(v) || frame.state() != FrameState::Hot {
                return false;
            }
            return self
                .unswizzle(f, v, level, upper.as_deref())
                .unwrap_or(false);
        }
        false
    }

    /// Unswizzles frame `f` (read at version `v`) from its parent and queues it as COOLING.
    fn unswizzle(&self, f: u32, v: u64, level: u8, upper: Option<&[u8]>) -> Step<bool> {
        let target = upper.map_or(Target::Last, Target::Key);
        let p = self.descend(target, level, false)?;
        if p.node != f || p.version != v {
            return Ok(false);
        }
        let Parent::Node {
            frame: pf,
            version: pv,
            ..
        } = p.parent
        else {
            return Ok(false); // the root stays hot
        };
        let parent = self.pool.frame(pf);
        let _pg = parent.latch.try_upgrade(pv).ok_or(Fail::Restart)?;
        let frame = self.pool.frame(f);
        let _g = frame.latch.try_upgrade(v).ok_or(Fail::Restart)?;
        let pid = frame.pid();
        self.set_parent_word(p.parent, Swip::Page(pid).encode());
        frame.set_state(FrameState::Cooling);
        self.pool.push_cooling(f, pid);
        self.pool.count_cooled();
        Ok(true)
    }
}
