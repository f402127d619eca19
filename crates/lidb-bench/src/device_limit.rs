//! The device limit in a benchmark's report: the device's own 4 KiB random-read
//! latency (O_DIRECT, queue depth 1; `crate::device`) probed in the run's directory before the
//! engines run, again after them, and at each configuration's typical read size (its bytes per
//! device read, rounded up to pages). Every row then carries its p50 and mean as multiples of the
//! 4 KiB figures, and its p50 over the probe at its typical size. A shared device drifts between
//! the two 4 KiB probes; the multiples use the faster of the two for each figure (the lower p50,
//! the lower mean), so a multiple is never flattered by a slow moment of the probe.
//!
//! Used by `lidb bench ycsb` (a configuration is an engine) and `lidb bench lsm` (a
//! configuration is an index and boundary). Runs on the calling thread, before and after the
//! engines, never while one is timed.

use std::path::Path;

use crate::device::{self, DeviceMultiples, PAGE_BYTES, Probe, ProbeFile, whole_pages};

/// A row the device columns are filled into.
pub trait DeviceRow {
    /// Rows of one configuration share its typical read size.
    fn config(&self) -> String;
    /// Bytes per device read the configuration issued, where known.
    fn typical_read_bytes(&self) -> Option<f64>;
    /// (p50, mean) in microseconds.
    fn latency_us(&self) -> (f64, f64);
    fn set_device(&mut self, device: DeviceMultiples);
}

/// The probe file and what it measured before the engines ran.
#[derive(Debug)]
pub struct DeviceLimit {
    file: Option<ProbeFile>,
    /// 4 KiB reads before the engines ran.
    page: Option<Probe>,
    reads: usize,
    seed: u64,
}

impl DeviceLimit {
    /// Writes the probe file in `dir` and times `reads` 4 KiB reads (0: no probe). A file
    /// system without O_DIRECT, or a failed probe, is said in `notes`.
    pub fn start(dir: &Path, reads: usize, seed: u64, notes: &mut Vec<String>) -> DeviceLimit {
        let mut limit = DeviceLimit {
            file: None,
            page: None,
            reads,
            seed,
        };
        if reads == 0 {
            notes.push("device probe off (--device-probe-reads 0): no device multiples".into());
            return limit;
        }
        let probed = ProbeFile::create(dir, device::PROBE_FILE_BYTES)
            .and_then(|f| Ok((f.probe(PAGE_BYTES, reads, seed)?, f)));
        match probed {
            Ok((page, file)) => {
                notes.push(format!(
                    "device limit before the engines ({} file in {}): {}",
                    crate::lsm::load::format_size(device::PROBE_FILE_BYTES),
                    dir.display(),
                    page.describe()
                ));
                limit.page = Some(page);
                limit.file = Some(file);
            }
            Err(e) => notes.push(format!("device probe failed, no device multiples: {e}")),
        }
        limit
    }

    /// Probes 4 KiB again and each configuration's typical read size (taken from the rows
    /// `summary` picks), then fills the device columns of every row.
    pub fn annotate<R: DeviceRow>(
        &mut self,
        rows: &mut [R],
        summary: impl Fn(&R) -> bool,
        notes: &mut Vec<String>,
    ) {
        let (Some(file), Some(page)) = (self.file.as_ref(), self.page) else {
            return;
        };
        let page = match file.probe(PAGE_BYTES, self.reads, self.seed ^ 1) {
            Ok(after) => {
                let best = faster(page, after);
                notes.push(format!(
                    "device limit after the engines: {}; multiples use the faster figures of \
                     the two probes: p50 {:.1} us, mean {:.1} us",
                    after.describe(),
                    best.p50_us,
                    best.mean_us
                ));
                best
            }
            Err(e) => {
                notes.push(format!("device probe after the engines failed: {e}"));
                page
            }
        };
        let typical: Vec<(String, u64)> = rows
            .iter()
            .filter(|r| summary(r))
            .filter_map(|r| {
                Some((
                    r.config(),
                    whole_pages(r.typical_read_bytes()?.ceil() as u64),
                ))
            })
            .collect();
        let mut probes: Vec<Probe> = vec![page];
        for (config, bytes) in &typical {
            if probes.iter().any(|p| p.read_bytes == *bytes) {
                continue;
            }
            match file.probe(*bytes, self.reads, self.seed ^ bytes) {
                Ok(p) => {
                    notes.push(format!(
                        "device limit at {config}'s typical read: {}",
                        p.describe()
                    ));
                    probes.push(p);
                }
                Err(e) => notes.push(format!("device probe at {bytes} bytes failed: {e}")),
            }
        }
        for r in rows.iter_mut() {
            let config = r.config();
            let bytes = typical.iter().find(|(c, _)| *c == config).map(|t| t.1);
            let probe = bytes.and_then(|b| probes.iter().find(|p| p.read_bytes == b));
            let (p50, mean) = r.latency_us();
            r.set_device(DeviceMultiples::of(p50, mean, &page, probe));
        }
    }
}

/// The lower p50 and the lower mean of two probes of the same read size.
fn faster(a: Probe, b: Probe) -> Probe {
    Probe {
        p50_us: a.p50_us.min(b.p50_us),
        mean_us: a.mean_us.min(b.mean_us),
        reads: a.reads + b.reads,
        ..a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_the_faster_figure_of_each_probe() {
        let a = Probe {
            read_bytes: 4096,
            reads: 100,
            p50_us: 60.0,
            mean_us: 95.0,
        };
        let b = Probe {
            p50_us: 70.0,
            mean_us: 80.0,
            ..a
        };
        let f = faster(a, b);
        assert_eq!(
            (f.p50_us, f.mean_us, f.reads, f.read_bytes),
            (60.0, 80.0, 200, 4096)
        );
    }
}
