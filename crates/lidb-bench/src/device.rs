//! The device's own random-read latency, measured in the benchmark's directory in the same run
//! as the engines: the floor a point read that misses every cache cannot go below.
//! Engines' latencies are then printed as multiples of it.
//!
//! A [`ProbeFile`] is a file of pseudo-random bytes written (and synced) for the probe in the
//! benchmark's directory, so it sits on the device the engines use. [`ProbeFile::probe`] reads
//! it one read at a time (queue depth 1) with O_DIRECT at page-aligned offsets drawn uniformly by
//! a seeded generator, so neither the OS page cache nor any engine cache answers a read.
//!
//! Runs on the calling thread. Invariants:
//! 1. Every `pread` has a page-aligned offset, length and buffer (the buffer is a window of a
//!    heap allocation: lidb-storage's `direct::AlignedBuf`, as every direct reader uses).
//! 2. A file system that refuses O_DIRECT yields an error of kind `Unsupported`, never a silent
//!    buffered probe (which would measure the OS page cache).
//! 3. The file is removed when the `ProbeFile` is dropped.

use lidb_storage::direct;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::kv::hist::Histogram;

/// The alignment and granule of direct reads.
pub const PAGE_BYTES: u64 = 4096;
/// Size of the probe file: larger than any device-side read cache we expect to matter at QD1,
/// and small enough to write in about a second.
pub const PROBE_FILE_BYTES: u64 = 256 << 20;
/// Timed reads per probe (after [`WARMUP_READS`] untimed ones).
pub const PROBE_READS: usize = 2000;
const WARMUP_READS: usize = 100;

/// One probe's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Probe {
    /// Bytes per read (a multiple of [`PAGE_BYTES`]).
    pub read_bytes: u64,
    pub reads: u64,
    pub p50_us: f64,
    pub mean_us: f64,
}

impl Probe {
    /// "4KiB: p50 85.2 us, mean 90.1 us (2000 O_DIRECT reads, QD1)".
    pub fn describe(&self) -> String {
        format!(
            "{}: p50 {:.1} us, mean {:.1} us ({} O_DIRECT random reads, queue depth 1)",
            crate::lsm::load::format_size(self.read_bytes),
            self.p50_us,
            self.mean_us,
            self.reads
        )
    }
}

/// A file written for probing, removed on drop.
#[derive(Debug)]
pub struct ProbeFile {
    path: PathBuf,
    file: File,
    len: u64,
}

/// `bytes` rounded up to whole pages (at least one).
pub fn whole_pages(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(PAGE_BYTES) * PAGE_BYTES
}

fn unsupported(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!(
            "the file system holding {} refuses O_DIRECT: no device probe",
            path.display()
        ),
    )
}

impl ProbeFile {
    /// Writes `len` bytes (rounded up to pages) of seeded pseudo-random data to a new file in
    /// `dir`, syncs it and opens it for direct reads.
    pub fn create(dir: &Path, len: u64) -> std::io::Result<ProbeFile> {
        let path = dir.join("device-probe.bin");
        let len = whole_pages(len);
        {
            let mut out = File::create(&path)?;
            let mut rng = ChaCha8Rng::seed_from_u64(0x0050_524F_4245);
            let mut chunk = vec![0u8; 1 << 20];
            let mut left = len;
            while left > 0 {
                rng.fill(chunk.as_mut_slice());
                let n = left.min(chunk.len() as u64) as usize;
                out.write_all(chunk.get(..n).unwrap_or_default())?;
                left -= n as u64;
            }
            out.sync_all()?;
        }
        let file = match direct::open_direct(OpenOptions::new().read(true), &path) {
            Ok(Some(f)) => f,
            Ok(None) => {
                let _ = std::fs::remove_file(&path);
                return Err(unsupported(&path));
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        Ok(ProbeFile { path, file, len })
    }

    /// Times `reads` random reads of `read_bytes` (rounded up to pages), one at a time, after a
    /// short untimed warm-up.
    pub fn probe(&self, read_bytes: u64, reads: usize, seed: u64) -> std::io::Result<Probe> {
        let read_bytes = whole_pages(read_bytes).min(self.len);
        let mut buf = direct::AlignedBuf::zeroed(read_bytes as usize)?;
        let window = buf.as_mut_slice();
        let slots = (self.len - read_bytes) / PAGE_BYTES + 1;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut us = Vec::with_capacity(reads);
        for i in 0..WARMUP_READS + reads {
            let offset = rng.gen_range(0..slots) * PAGE_BYTES;
            let t = Instant::now();
            self.read_exact_at(window, offset)?;
            if i >= WARMUP_READS {
                us.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        let mean_us = us.iter().sum::<f64>() / us.len().max(1) as f64;
        Ok(Probe {
            read_bytes,
            reads: us.len() as u64,
            p50_us: Histogram::of_us(&us).percentile_us(50.0),
            mean_us,
        })
    }

    fn read_exact_at(&self, window: &mut [u8], offset: u64) -> std::io::Result<()> {
        match direct::read_aligned(&self.file, offset, window) {
            Ok(filled) if filled.bytes == window.len() => Ok(()),
            Ok(_) => Err(std::io::ErrorKind::UnexpectedEof.into()),
            Err(e) if direct::is_refusal(&e) => Err(unsupported(&self.path)),
            Err(e) => Err(e),
        }
    }
}

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A row's latency against the device limit. JSON names (flattened into rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DeviceMultiples {
    /// The device's p50 and mean of 4 KiB O_DIRECT random reads at queue depth 1 (same run).
    pub device_p50_us: Option<f64>,
    pub device_mean_us: Option<f64>,
    /// The row's p50 and mean over the device's 4 KiB ones.
    pub p50_x_device: Option<f64>,
    pub mean_x_device: Option<f64>,
    /// The engine's typical read (bytes per device read, rounded up to pages), the device's
    /// p50 at that size, and the row's p50 over it.
    pub typical_read_bytes: Option<u64>,
    pub device_typical_p50_us: Option<f64>,
    pub p50_x_device_typical: Option<f64>,
}

impl DeviceMultiples {
    /// Multiples of a row with `p50_us` and `mean_us` against the 4 KiB probe `page` and the
    /// probe `typical` at the engine's typical read size.
    pub fn of(p50_us: f64, mean_us: f64, page: &Probe, typical: Option<&Probe>) -> Self {
        DeviceMultiples {
            device_p50_us: Some(page.p50_us),
            device_mean_us: Some(page.mean_us),
            p50_x_device: multiple(p50_us, Some(page.p50_us)),
            mean_x_device: multiple(mean_us, Some(page.mean_us)),
            typical_read_bytes: typical.map(|t| t.read_bytes),
            device_typical_p50_us: typical.map(|t| t.p50_us),
            p50_x_device_typical: multiple(p50_us, typical.map(|t| t.p50_us)),
        }
    }
}

/// `engine_us / device_us`, None without a device figure.
pub fn multiple(engine_us: f64, device: Option<f64>) -> Option<f64> {
    device.filter(|d| *d > 0.0).map(|d| engine_us / d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_pages_round_up_and_never_to_zero() {
        assert_eq!(whole_pages(0), PAGE_BYTES);
        assert_eq!(whole_pages(1), PAGE_BYTES);
        assert_eq!(whole_pages(4096), 4096);
        assert_eq!(whole_pages(4097), 8192);
        assert_eq!(whole_pages(16 * 1024 + 300), 20 * 1024);
    }

    #[test]
    fn multiples_need_a_device_figure() {
        assert_eq!(multiple(150.0, Some(100.0)), Some(1.5));
        assert_eq!(multiple(150.0, None), None);
        assert_eq!(multiple(150.0, Some(0.0)), None);
        let page = Probe {
            read_bytes: 4096,
            reads: 10,
            p50_us: 100.0,
            mean_us: 120.0,
        };
        let wide = Probe {
            read_bytes: 20480,
            p50_us: 160.0,
            ..page
        };
        let m = DeviceMultiples::of(200.0, 300.0, &page, Some(&wide));
        assert_eq!(m.p50_x_device, Some(2.0));
        assert_eq!(m.mean_x_device, Some(2.5));
        assert_eq!(m.typical_read_bytes, Some(20480));
        assert_eq!(m.p50_x_device_typical, Some(1.25));
        assert_eq!(
            DeviceMultiples::of(1.0, 1.0, &page, None).p50_x_device_typical,
            None
        );
    }

    #[test]
    fn a_probe_times_the_reads_it_was_asked_for_and_removes_its_file()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("lidb-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("device-probe.bin");
        match ProbeFile::create(&dir, 1 << 20) {
            Ok(f) => {
                assert_eq!(std::fs::metadata(&path)?.len(), 1 << 20);
                let p = f.probe(4096, 50, 7)?;
                assert_eq!((p.read_bytes, p.reads), (4096, 50));
                assert!(p.p50_us > 0.0 && p.mean_us > 0.0);
                // A read size past the file is clipped to it; an odd one rounds up to pages.
                assert_eq!(f.probe(5000, 10, 7)?.read_bytes, 8192);
                assert_eq!(f.probe(4 << 20, 5, 7)?.read_bytes, 1 << 20);
                drop(f);
                assert!(!path.exists(), "the probe file is removed");
            }
            // tmpfs and some overlay file systems refuse O_DIRECT: that must be said, loudly.
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
                assert!(!path.exists());
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
