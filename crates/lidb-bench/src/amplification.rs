//! Write and space amplification, measured the same way for every engine (lidb's and RocksDB),
//! from outside the engine, as db_bench reports them:
//! - write amplification: bytes the process sent to the storage layer during a phase (the
//!   kernel's per-process `write_bytes` of `/proc/self/io`, counted when a page is dirtied or a
//!   direct write is issued, less `cancelled_write_bytes`, pages dirtied and then truncated or
//!   deleted before writeback) over the bytes of keys and values the phase's writes carried. Logs,
//!   flushes, compactions, GC, conversion and checkpoints are all in it, foreground or background,
//!   since they run in the same process. Work an engine leaves running past the end of a phase
//!   lands in the next phase's figure.
//! - space amplification: bytes of every file in the engine's directory over the bytes of the
//!   live records (records loaded plus inserted, key and value).
//!
//! Called by the YCSB runner between phases, on the thread that runs the phases. Where
//! `/proc/self/io` cannot be read (not Linux, or a restricted /proc) the write figure is `None`,
//! never a guess.

use std::path::Path;

/// What `/proc/self/io` says the process has sent to the storage layer, in bytes, so far.
pub fn process_device_writes() -> Option<u64> {
    parse_proc_io(&std::fs::read_to_string("/proc/self/io").ok()?)
}

/// `write_bytes - cancelled_write_bytes` from the text of a `/proc/PID/io` file.
pub fn parse_proc_io(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    let written = field("write_bytes:")?;
    let cancelled = field("cancelled_write_bytes:").unwrap_or(0);
    Some(written.saturating_sub(cancelled))
}

/// Bytes of every file under `dir`, recursively (0 for a directory that is gone).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// `bytes / of`, `None` when nothing was measured against (`of` is 0) or `bytes` is unknown.
pub fn ratio(bytes: Option<u64>, of: u64) -> Option<f64> {
    (of > 0).then_some(bytes? as f64 / of as f64)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn proc_io_parses_and_cancelled_pages_are_taken_off() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                    write_bytes: 81920\ncancelled_write_bytes: 4096\n";
        assert_eq!(parse_proc_io(text), Some(77824));
        assert_eq!(parse_proc_io("write_bytes: 5\n"), Some(5));
        assert_eq!(parse_proc_io("rchar: 1\n"), None);
        assert_eq!(parse_proc_io("write_bytes: lots\n"), None);
    }

    #[test]
    fn ratios_need_something_to_measure_against() {
        assert_eq!(ratio(Some(300), 100), Some(3.0));
        assert_eq!(ratio(Some(300), 0), None);
        assert_eq!(ratio(None, 100), None);
    }

    #[test]
    fn directory_bytes_count_every_file_below_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sub = dir.path().join("sub");
        std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
        for (path, n) in [(dir.path().join("a"), 100usize), (sub.join("b"), 23)] {
            std::fs::File::create(path)
                .and_then(|mut f| f.write_all(&vec![7u8; n]))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(dir_bytes(dir.path()), 123);
        assert_eq!(dir_bytes(&dir.path().join("gone")), 0);
    }

    #[test]
    fn a_synced_file_write_shows_in_the_process_counter_where_proc_io_exists() {
        let Some(before) = process_device_writes() else {
            eprintln!("/proc/self/io is not readable here: skipped");
            return;
        };
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut f = std::fs::File::create(dir.path().join("w")).unwrap_or_else(|e| panic!("{e}"));
        f.write_all(&vec![1u8; 1 << 20])
            .unwrap_or_else(|e| panic!("{e}"));
        f.sync_all().unwrap_or_else(|e| panic!("{e}"));
        let after = process_device_writes().unwrap_or(0);
        // tmpfs has no storage layer under it: nothing is counted there.
        if after == before {
            eprintln!(
                "{} is on a file system without a device: skipped",
                dir.path().display()
            );
            return;
        }
        assert!(after - before >= 1 << 20, "{before} -> {after}");
    }
}
