//! Lookups that read nothing from the device: a leaf by page id only if it is resident, and a
//! walk that follows only resident nodes (swizzled swips, or pages found in the page table).
//! `None` means a read would have been needed; nothing was read then, nothing was linked.
//!
//! Callers: the learned path's `get_if_in_memory`, any thread. Optimistic reads only: no latch
//! is taken, no shared word written.

use super::{Fail, PROBE_ATTEMPTS, Step, Tree, probe_back_off, restart_unless, retry};
use crate::buffer::{FrameState, Swip};
use crate::error::Result;
use crate::node;
use crate::tree::LeafProbe;

impl Tree {
    /// [`Tree::probe_leaf`] without a load: `None` when leaf `pid` is not resident.
    pub fn probe_resident(
        &self,
        pid: u64,
        frame_hint: Option<u32>,
        key: &[u8],
    ) -> Result<Option<LeafProbe>> {
        let mut hint = frame_hint.filter(|f| (*f as usize) < self.pool.frame_count());
        for attempt in 0..PROBE_ATTEMPTS {
            probe_back_off(attempt);
            let Some(f) = hint.take().or_else(|| self.pool.lookup(pid)) else {
                return Ok(None);
            };
            match self.probe_frame(f, pid, key) {
                Ok(r) => return Ok(Some(r)),
                Err(Fail::Err(e)) => return Err(e),
                Err(Fail::Restart) => continue,
            }
        }
        Ok(Some(LeafProbe::Miss))
    }

    /// The value of `key` if the walk to its leaf finds every node resident; `None` if a node
    /// on the way is on the device only.
    pub fn get_resident(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        retry(|| self.walk_resident(key))
    }

    fn walk_resident(&self, key: &[u8]) -> Step<Option<Option<Vec<u8>>>> {
        let rv = self.root_latch.optimistic().ok_or(Fail::Restart)?;
        let mut word = self.root.load(std::sync::atomic::Ordering::Relaxed);
        restart_unless(self.root_latch.validate(rv))?;
        for _ in 0..64 {
            let f = match Swip::decode(word) {
                Swip::Frame(f) => f,
                // A cooling or unlinked page is still resident: read it where it is (its pid
                // is checked below, as a frame found in the page table may be reused).
                Swip::Page(pid) => match self.pool.lookup(pid) {
                    Some(f) => f,
                    None => return Ok(None),
                },
            };
            let frame = self.pool.frame(f);
            let v = frame.latch.optimistic().ok_or(Fail::Restart)?;
            let live = matches!(
                frame.state(),
                FrameState::Hot | FrameState::Cooling | FrameState::Unlinked
            );
            let words = &*frame.words;
            if node::is_leaf(words) {
                let covers = node::covers(words, key);
                let (pos, found) = node::lower_bound(words, key);
                let value = found.then(|| node::value(words, pos));
                restart_unless(frame.latch.validate(v) && live && covers)?;
                return Ok(Some(value));
            }
            word = node::child(words, node::child_index(words, key));
            // A node changed, evicted or reused under the read: start again from the root
            // (children are validated against their own version only, so the parent's is
            // checked before its child word is used).
            restart_unless(frame.latch.validate(v) && live)?;
        }
        Err(Fail::Restart)
    }
}

impl Tree {
    /// Whether page `pid` is in a frame now (a hint: it may be evicted right after).
    pub fn is_resident(&self, pid: u64) -> bool {
        self.pool.lookup(pid).is_some()
    }
}
