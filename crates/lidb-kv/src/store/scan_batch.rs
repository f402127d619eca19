//! The values of a scan's LSM-resident keys, fetched in batches: a scan's LSM entries
//! are pointers into the value logs, and reading each on its own costs one random read per key.
//! A batch of pointers is sorted by (file, offset) and cut into spans ([`plan`]): a record joins
//! the span before it when it lies in the same file and starts at most `COALESCE_GAP_BYTES` after
//! that span's end, while the span stays within `MAX_SPAN_BYTES`. Each span is ONE read
//! (`VlogReader::read_span`); its records are decoded from their slices and checked like a point
//! read's ([`fetch`]). Keys written together sit together in the log, so a scan over them costs
//! a read per span instead of a read per key; spans that stay apart (keys written at different
//! times) are read several at once.
//!
//! Threads: callers from any thread. A batch of at least `PARALLEL_MIN_SPANS` spans is read from
//! up to `PARALLEL_READS` scoped threads, all joined before [`fetch`] returns; they share only
//! `&VlogReader` (its handle map is behind a mutex) and an atomic index of the next span.
//! Invariants: every pointer of a batch is in exactly one span; a span holds pointers of one file
//! only and covers each of its records entirely; each span is read once; the results come back
//! in the batch's order.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use lidb_storage::PAGE_SIZE;
use lidb_storage::error::corruption;

use crate::Result;
use crate::pointer::Pointer;
use crate::store::scan_gc::ScanScatter;
use crate::vlog::{VlogReader, decode_pointed};

/// Records at most this far apart (end of one span to start of the next record) share a read:
/// a 4 KiB page or three of dead bytes cost less than a second random read.
pub(crate) const COALESCE_GAP_BYTES: u64 = 16 * 1024;
/// The longest span one read covers.
pub(crate) const MAX_SPAN_BYTES: u64 = 512 * 1024;
/// Reads of one batch issued at once (scoped threads), at most.
const PARALLEL_READS: usize = 8;
/// Spans below which a batch is read on the caller's thread.
const PARALLEL_MIN_SPANS: usize = 4;

/// Value-log reads since open (point reads and scans), machine-independent benchmark counters.
/// Per-thread shards (`lidb_sync::Counter`): every point read that resolves a pointer counts.
#[derive(Debug, Default)]
pub(crate) struct VlogReadCounters {
    pub reads: lidb_sync::Counter,
    /// Bytes read (rounded out to pages with direct I/O, as the device reads them).
    pub bytes: lidb_sync::Counter,
}

impl VlogReadCounters {
    /// Counts one read of `[start, end)`.
    pub fn count(&self, start: u64, end: u64, direct: bool) {
        let bytes = if direct {
            end.next_multiple_of(PAGE_SIZE) - start / PAGE_SIZE * PAGE_SIZE
        } else {
            end - start
        };
        self.reads.incr();
        self.bytes.add(bytes);
    }
}

/// One read: `[start, end)` of log `file`, serving the batch's pointers at `members`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Span {
    pub file: u64,
    pub start: u64,
    pub end: u64,
    pub members: Vec<usize>,
}

/// The reads that fetch `pointers` (see the module documentation).
pub(crate) fn plan(pointers: &[Pointer], gap: u64, max_span: u64) -> Vec<Span> {
    let mut order: Vec<usize> = (0..pointers.len()).collect();
    order.sort_by_key(|&i| pointers.get(i).map(|p| (p.file, p.offset)));
    let mut spans: Vec<Span> = Vec::new();
    for i in order {
        let Some(p) = pointers.get(i) else { continue };
        let end = p.offset.saturating_add(u64::from(p.len));
        if let Some(last) = spans.last_mut()
            && last.file == p.file
            && p.offset <= last.end.saturating_add(gap)
            && end.max(last.end) - last.start <= max_span
        {
            last.end = last.end.max(end);
            last.members.push(i);
            continue;
        }
        spans.push(Span {
            file: p.file,
            start: p.offset,
            end,
            members: vec![i],
        });
    }
    spans
}

/// The values of `batch` (each a key and the pointer its LSM holds), in the batch's order: one
/// read per span of [`plan`]; a user's scan passes `scatter`, which counts the spans beyond
/// what the same bytes in key order would take (`scan_gc`). A record holding another key than its LSM entry is corruption
/// (named by `dir`, the LSM's directory, as a point read names it).
pub(crate) fn fetch(
    reader: &VlogReader,
    counters: &VlogReadCounters,
    scatter: Option<&ScanScatter>,
    direct: bool,
    dir: &Path,
    batch: &[(&[u8], Pointer)],
) -> Result<Vec<Vec<u8>>> {
    let pointers: Vec<Pointer> = batch.iter().map(|(_, p)| *p).collect();
    let mut values: Vec<Option<Vec<u8>>> = vec![None; batch.len()];
    let spans = plan(&pointers, COALESCE_GAP_BYTES, MAX_SPAN_BYTES);
    if let Some(scatter) = scatter {
        let bytes = pointers.iter().map(|p| u64::from(p.len)).sum();
        scatter.add(spans.len(), bytes, MAX_SPAN_BYTES);
    }
    let bufs = read_spans(reader, &spans)?;
    for (span, buf) in spans.into_iter().zip(bufs) {
        counters.count(span.start, span.end, direct);
        for i in span.members {
            let (Some((key, p)), Some(slot)) = (batch.get(i), values.get_mut(i)) else {
                continue;
            };
            let from = (p.offset - span.start) as usize;
            let record = buf
                .get(from..from + p.len as usize)
                .ok_or_else(|| corruption(dir, "a record reaches past its span"))?;
            let (k, v) = decode_pointed(record, *p).map_err(|d| {
                corruption(
                    dir,
                    format!("value log {} offset {}: {d}", p.file, p.offset),
                )
            })?;
            if k != *key {
                return Err(corruption(
                    dir,
                    format!(
                        "value log {} offset {} holds another key than the LSM says",
                        p.file, p.offset
                    ),
                ));
            }
            *slot = Some(v.to_vec());
        }
    }
    values
        .into_iter()
        .map(|v| v.ok_or_else(|| corruption(dir, "a scan's pointer was in no span")))
        .collect()
}

/// The bytes of every span, in order: one read each, issued from up to `PARALLEL_READS` scoped
/// threads when there are at least `PARALLEL_MIN_SPANS` (a device serves several random reads at
/// once about as fast as one), on the caller's thread otherwise.
fn read_spans(reader: &VlogReader, spans: &[Span]) -> Result<Vec<Vec<u8>>> {
    let read = |s: &Span| reader.read_span(s.file, s.start, s.end - s.start);
    if spans.len() < PARALLEL_MIN_SPANS {
        return spans.iter().map(read).collect();
    }
    let threads = spans.len().min(PARALLEL_READS);
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, Result<Vec<u8>>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(span) = spans.get(i) else { break };
                        mine.push((i, read(span)));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                // A reader thread does not panic (reads return errors); if one did, the panic
                // goes on here, as it would have on the caller's thread.
                w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
            })
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    debug_assert_eq!(results.len(), spans.len(), "every span read once");
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
#[expect(
    clippy::indexing_slicing,
    reason = "a test: an index out of range is a failure"
)]
mod tests {
    use super::*;

    fn p(file: u64, offset: u64, len: u32) -> Pointer {
        Pointer { file, offset, len }
    }

    #[test]
    fn near_records_of_one_file_share_a_read_and_far_ones_do_not() {
        let ps = [
            p(3, 10_000, 1000),
            p(2, 100, 1000),
            p(3, 5_000, 1000),
            p(2, 1_100, 1000),
            p(3, 60_000, 1000),
        ];
        let spans = plan(&ps, 16 * 1024, 512 * 1024);
        assert_eq!(
            spans,
            vec![
                Span {
                    file: 2,
                    start: 100,
                    end: 2_100,
                    members: vec![1, 3]
                },
                Span {
                    file: 3,
                    start: 5_000,
                    end: 11_000,
                    members: vec![2, 0]
                },
                Span {
                    file: 3,
                    start: 60_000,
                    end: 61_000,
                    members: vec![4]
                },
            ]
        );
    }

    #[test]
    fn every_pointer_is_in_exactly_one_span_within_the_limits() {
        // A deterministic spread: offsets from a multiplicative hash over three files.
        let ps: Vec<Pointer> = (0..500u64)
            .map(|i| {
                p(
                    i % 3,
                    32 + (i * 2_654_435_761) % 3_000_000,
                    100 + (i % 900) as u32,
                )
            })
            .collect();
        for (gap, max) in [(0, 4096), (4096, 64 * 1024), (16 * 1024, 512 * 1024)] {
            let spans = plan(&ps, gap, max);
            let mut seen = vec![0u32; ps.len()];
            for s in &spans {
                for &m in &s.members {
                    seen[m] += 1;
                    let q = ps[m];
                    assert_eq!(q.file, s.file);
                    assert!(s.start <= q.offset && q.offset + u64::from(q.len) <= s.end);
                }
                // A span over max holds exactly one record (longer than max itself).
                assert!(s.end - s.start <= max || s.members.len() == 1, "{s:?}");
            }
            assert!(seen.iter().all(|&n| n == 1), "gap {gap} max {max}");
        }
        // Adjacent records coalesce into one read.
        let run: Vec<Pointer> = (0..50).map(|i| p(1, 32 + i * 1040, 1040)).collect();
        assert_eq!(plan(&run, 0, 512 * 1024).len(), 1);
        assert_eq!(plan(&run, 0, 10 * 1040).len(), 5);
    }
}
