//! The paper's "inner nodes out of memory with probability p" simulation (section III): once
//! set, each inner node a tree walk passes costs, with probability p, a real read of that page
//! from the device (counted in the device's reads, its bytes thrown away), as if the node had
//! been evicted and read back. It changes no state: the walk goes on with the resident node.
//! A page created since the last write-back has no copy on the device yet and costs nothing.
//! A simulation for the tail-latency experiments only; 0 turns it off.
//!
//! Callers: any walk (`Tree::descend`), any thread. The read holds no latch (the walk holds
//! only optimistic versions).

use std::sync::atomic::Ordering;

use super::{Step, Tree};

impl Tree {
    /// Sets the simulation's probability (clamped to 0..=1; 0 or NaN: off).
    pub fn set_inner_miss_probability(&self, probability: f64) {
        let p = if probability.is_nan() {
            0.0
        } else {
            probability.clamp(0.0, 1.0)
        };
        self.inner_miss_bits.store(p.to_bits(), Ordering::Relaxed);
    }

    /// With the simulation on, reads inner page `pid` from the device with its probability.
    pub(crate) fn simulate_inner_miss(&self, pid: u64) -> Step<()> {
        let bits = self.inner_miss_bits.load(Ordering::Relaxed);
        if bits == 0 {
            return Ok(());
        }
        let p = f64::from_bits(bits);
        let draw = (self.random() >> 11) as f64 / (1u64 << 53) as f64;
        if draw < p {
            let mut buf = vec![0u8; self.pool.page_size()];
            // A page freed since (a merge) or never written has no slot: nothing read.
            self.pool.file().read_page(pid, &mut buf)?;
        }
        Ok(())
    }
}
