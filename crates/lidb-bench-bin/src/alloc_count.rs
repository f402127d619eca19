//! A counting global allocator: forwards every call to `System` unchanged and, only while
//! counting is on, adds the bytes allocated and subtracts the bytes freed. `lidb-bench bench
//! concurrent` turns it on around an index's bulk load to measure the peers that cannot report
//! their own memory. When off it costs one relaxed load of a flag per call.
//!
//! Threads: any (the allocator is global). The figure is exact only when no other thread
//! allocates or frees while counting is on (the bench builds with its workers not started).

#![expect(
    unsafe_code,
    reason = "GlobalAlloc is an unsafe trait; each method forwards to System with the caller's arguments"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

/// The allocator; installed in main.rs of the `lidb-bench` binary.
#[derive(Debug)]
pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static NET: AtomicI64 = AtomicI64::new(0);

fn add(bytes: usize) {
    if ON.load(Relaxed) {
        NET.fetch_add(bytes as i64, Relaxed);
    }
}

fn sub(bytes: usize) {
    if ON.load(Relaxed) {
        NET.fetch_sub(bytes as i64, Relaxed);
    }
}

// SAFETY: every method calls System's with the same arguments, under the same contract the
// caller of this method promised; the counters touch no memory of the allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size);
            sub(layout.size());
        }
        p
    }
}

/// Zeroes the count and turns counting on.
pub fn start() {
    NET.store(0, Relaxed);
    ON.store(true, Relaxed);
}

/// Turns counting off; the bytes allocated and not freed since [`start`] (0 if fewer).
pub fn stop() -> u64 {
    ON.store(false, Relaxed);
    NET.load(Relaxed).max(0) as u64
}
