//! Scan-triggered GC: a GC started because scans keep paying for values scattered through the
//! value log, not because the logs outgrew the live data.
//!
//! A write's value goes to the end of the active value log, so the values of neighbouring keys
//! lie wherever their writes happened to fall: a scan over N keys the LSM holds costs up to N
//! random reads (`scan_batch` merges only records that lie near each other). GC writes every live
//! value in key order (the learned tier's svlog, lsm+tier's sorted log, lsm+'s rewritten log),
//! after which the same scan is one or two reads. The LearnedKV paper runs that GC by hand after
//! a load that scans follow ("after the GC process at the end of the loading phase, all valid
//! key-value pairs are re-grouped", section 5.1, Experiment 6); with the over-provisioning
//! trigger alone, a store that is loaded and then scanned never sorts its values.
//!
//! The rule is LevelDB's seek-triggered compaction (a file that costs reads it should not is
//! compacted) with a cost model for the price: scans count, in per-thread shards, the reads they
//! spend beyond what the same bytes would cost in key order ([`ScanScatter::add`]: a batch's
//! spans minus the reads of one contiguous run of its bytes). A GC is due once those wasted
//! reads since the last GC reach `ratio` times what a GC would cost ([`gc_cost_reads`]): one
//! random read per record of the active value log (a GC reads those values in key order, so one
//! by one in the worst case) plus every live byte read and written once at sequential speed.
//! With ratio 1 this is the ski-rental rule: the store never spends more than twice what the
//! better choice in hindsight would have spent on a run of scans, however long.
//!
//! Threads: scans on any thread add to the counter (a shard of their own); the background GC
//! thread reads it. The baseline is moved by a GC's switch (under the write mutex), so scans of
//! values written before the GC do not count toward the next.

use std::sync::atomic::{AtomicU64, Ordering};

use lidb_sync::Counter;

/// Bytes a device streams in the time of one random read: a random 4 KiB read costs about
/// 80-100 us on an NVMe SSD at queue depth 1, and 64 KiB is what such a device streams in it at
/// under 1 GB/s (conservative: most stream more, which makes GC's sequential part cheaper).
pub(crate) const SEQUENTIAL_BYTES_PER_READ: u64 = 64 * 1024;

/// Active value-log records below which scans never trigger a GC: a GC of a few thousand
/// records buys little and its fixed costs (new files, a model, a sync) dominate.
pub(crate) const MIN_ACTIVE_RECORDS: u64 = 4096;

/// Reads scans spent on scattered values since open, and the count at the last GC's switch.
#[derive(Debug, Default)]
pub(crate) struct ScanScatter {
    wasted: Counter,
    at_switch: AtomicU64,
}

impl ScanScatter {
    /// Counts one batch read as `spans` reads of `bytes` record bytes in all: the reads beyond
    /// the `ceil(bytes / max_span)` that the same bytes in key order would take.
    pub fn add(&self, spans: usize, bytes: u64, max_span: u64) {
        let contiguous = bytes.div_ceil(max_span.max(1)).max(1);
        let wasted = (spans as u64).saturating_sub(contiguous);
        if wasted > 0 {
            self.wasted.add(wasted);
        }
    }

    /// Wasted reads since the last switch.
    pub fn since_switch(&self) -> u64 {
        self.wasted
            .get()
            .saturating_sub(self.at_switch.load(Ordering::Relaxed))
    }

    /// A GC switched to a new value log: start counting again.
    pub fn reset(&self) {
        self.at_switch.store(self.wasted.get(), Ordering::Relaxed);
    }
}

/// What a GC costs, in random reads: one per record of the active value log plus every live
/// byte read and written once at sequential speed.
pub(crate) fn gc_cost_reads(active_records: u64, live_bytes: u64) -> u64 {
    active_records.saturating_add(live_bytes.saturating_mul(2) / SEQUENTIAL_BYTES_PER_READ)
}

/// Whether scans have wasted `ratio` times a GC's cost since the last one (`ratio` 0: never).
pub(crate) fn due(ratio: f64, wasted: u64, active_records: u64, live_bytes: u64) -> bool {
    ratio > 0.0
        && active_records >= MIN_ACTIVE_RECORDS
        && wasted as f64 >= ratio * gc_cost_reads(active_records, live_bytes) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_in_key_order_wastes_nothing_and_a_scattered_one_all_but_one_read() {
        let s = ScanScatter::default();
        // 50 records of 1 KiB in one span, then in 50 spans.
        s.add(1, 50 * 1024, 512 * 1024);
        assert_eq!(s.since_switch(), 0);
        s.add(50, 50 * 1024, 512 * 1024);
        assert_eq!(s.since_switch(), 49);
        // 2 MiB cannot be one read of at most 512 KiB: four spans are what key order costs.
        s.add(4, 2 << 20, 512 * 1024);
        assert_eq!(s.since_switch(), 49);
        s.reset();
        assert_eq!(s.since_switch(), 0);
        s.add(3, 3 * 1024, 512 * 1024);
        assert_eq!(s.since_switch(), 2);
    }

    #[test]
    fn gc_is_due_once_scans_wasted_its_cost() {
        let (records, live) = (200_000u64, 200_000 * 1_040u64);
        let cost = gc_cost_reads(records, live);
        assert_eq!(cost, 200_000 + 2 * live / SEQUENTIAL_BYTES_PER_READ);
        assert!(!due(1.0, cost - 1, records, live));
        assert!(due(1.0, cost, records, live));
        assert!(!due(2.0, cost, records, live));
        assert!(due(0.5, cost / 2 + 1, records, live));
        // Off, and never for a store too small to be worth a GC.
        assert!(!due(0.0, u64::MAX, records, live));
        assert!(!due(1.0, u64::MAX, MIN_ACTIVE_RECORDS - 1, live));
        // A large sorted tier makes the GC dear: a few scattered records do not pay for it.
        let tier = 100u64 << 30;
        assert!(!due(1.0, 10 * MIN_ACTIVE_RECORDS, MIN_ACTIVE_RECORDS, tier));
    }
}
