//! A buffer frame and the swip encoding.
//!
//! A frame holds one page as `Box<[AtomicU64]>` words (so optimistic readers racing a writer
//! stay safe Rust), its hybrid latch, the page id, its state and a dirty flag.
//!
//! A swip is the u64 a parent (or the root slot) holds for a child: with [`SWIZZLED`] set, the
//! low bits are the index of the frame holding the child (the hot path follows it without a
//! lookup); without it, the word is the child's page id.
//!
//! Invariants (who may write what):
//! 1. `words`, `pid`, `state` and `dirty` are written only by the holder of `latch`, except a
//!    frame in state `Reserved`, which is reachable by nobody and owned by the thread that took
//!    it from the free list.
//! 2. A `Hot` frame is referenced by exactly one swizzled swip (its parent's, or the root
//!    slot); `Cooling` and `Unlinked` frames by none; every resident page is in the pool's page
//!    table, so no page is resident twice.
//! 3. A frame with a swizzled child is `Hot` (its children are unswizzled before it cools).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crate::latch::HybridLatch;

/// The tag bit of a swizzled swip.
pub const SWIZZLED: u64 = 1 << 63;

/// A decoded swip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swip {
    /// The child is resident in this frame.
    Frame(u32),
    /// The child is on disk (or resident but not swizzled) under this page id.
    Page(u64),
}

impl Swip {
    pub fn decode(word: u64) -> Swip {
        if word & SWIZZLED != 0 {
            Swip::Frame((word & !SWIZZLED) as u32)
        } else {
            Swip::Page(word)
        }
    }

    pub fn encode(self) -> u64 {
        match self {
            Swip::Frame(f) => SWIZZLED | u64::from(f),
            Swip::Page(p) => p,
        }
    }
}

/// The life states of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameState {
    /// On the free list.
    Free = 0,
    /// Resident and swizzled in its parent (or the root slot).
    Hot = 1,
    /// Resident, unswizzled, in the cooling FIFO: evicted at the FIFO's tail unless touched.
    Cooling = 2,
    /// Resident, loaded by page id without its parent (a miss, or the learned path); in the
    /// FIFO like a cooling page; linked (made `Hot`) when a tree walk reaches it.
    Unlinked = 3,
    /// Taken from the free list by one thread, not yet published.
    Reserved = 4,
}

impl FrameState {
    fn from_u8(b: u8) -> FrameState {
        match b {
            1 => FrameState::Hot,
            2 => FrameState::Cooling,
            3 => FrameState::Unlinked,
            4 => FrameState::Reserved,
            _ => FrameState::Free,
        }
    }
}

/// One frame of the pool.
#[derive(Debug)]
pub struct Frame {
    pub latch: HybridLatch,
    pub words: Box<[AtomicU64]>,
    pid: AtomicU64,
    state: AtomicU8,
    dirty: AtomicBool,
}

impl Frame {
    pub fn new(page_size: usize) -> Frame {
        Frame {
            latch: HybridLatch::default(),
            words: (0..page_size / 8).map(|_| AtomicU64::new(0)).collect(),
            pid: AtomicU64::new(u64::MAX),
            state: AtomicU8::new(FrameState::Free as u8),
            dirty: AtomicBool::new(false),
        }
    }

    pub fn pid(&self) -> u64 {
        self.pid.load(Ordering::Relaxed)
    }
    pub fn state(&self) -> FrameState {
        FrameState::from_u8(self.state.load(Ordering::Relaxed))
    }
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Relaxed)
    }

    /// Sets pid, state and dirty (the latch holder or the reserving thread, invariant 1).
    pub fn set_meta(&self, pid: u64, state: FrameState, dirty: bool) {
        self.pid.store(pid, Ordering::Relaxed);
        self.state.store(state as u8, Ordering::Relaxed);
        self.dirty.store(dirty, Ordering::Relaxed);
    }
    pub fn set_state(&self, state: FrameState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }
    pub fn set_dirty(&self, dirty: bool) {
        self.dirty.store(dirty, Ordering::Relaxed);
    }

    /// Copies the page out (for a writer under the latch, or a write-back).
    pub fn copy_out(&self, buf: &mut Vec<u8>) {
        buf.clear();
        buf.resize(self.words.len() * 8, 0);
        for (c, w) in buf.chunks_exact_mut(8).zip(self.words.iter()) {
            c.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
    }

    /// Stores a page image into the words (the latch holder).
    pub fn store(&self, buf: &[u8]) {
        for (w, c) in self.words.iter().zip(buf.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            let v = u64::from_le_bytes(b);
            if w.load(Ordering::Relaxed) != v {
                w.store(v, Ordering::Relaxed);
            }
        }
    }

    /// Writes 8 bytes at byte offset `off` (a child word: the latch holder swizzling).
    pub fn store_u64_at(&self, off: usize, v: u64) {
        for (i, b) in v.to_le_bytes().iter().enumerate() {
            let at = off + i;
            if let Some(w) = self.words.get(at / 8) {
                let shift = 8 * (at % 8);
                let old = w.load(Ordering::Relaxed);
                w.store(
                    (old & !(0xffu64 << shift)) | (u64::from(*b) << shift),
                    Ordering::Relaxed,
                );
            }
        }
    }
}
