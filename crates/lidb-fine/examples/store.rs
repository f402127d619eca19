//! A first, small measurement of `FineStore` on the real file system: puts from each thread
//! (with and without `sync`), gets, a full scan, a checkpoint, and the reopen (recovery) time
//! with the whole history in the log against after a checkpoint. Not a benchmark suite: one key
//! shape (16-byte keys, the first 8 bytes shared by 16 keys each so images collide), 100-byte
//! values.
//!
//! `cargo run --release -p lidb-fine --example store -- DIR [puts_per_thread] [threads]
//! [sync_puts_per_thread]`
//!
//! Prints one JSON object per line: phase, ops, seconds, kops_per_s.
//!
//! Automatic checkpoints are off (`checkpoint_log_bytes: 0`), so the puts are timed alone and
//! the first reopen replays the whole history, whatever the arguments.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use lidb_fine::{FineStore, FineStoreOptions};

fn key(t: u64, i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&((t << 40) | (i / 16)).to_be_bytes());
    k[8..].copy_from_slice(&(i % 16).to_be_bytes());
    k
}

fn row(phase: &str, ops: u64, started: Instant) {
    let s = started.elapsed().as_secs_f64();
    let kops = ops as f64 / s / 1e3;
    println!("{{\"phase\":\"{phase}\",\"ops\":{ops},\"seconds\":{s:.3},\"kops_per_s\":{kops:.1}}}");
}

/// The store's options: no automatic checkpoint (see the module documentation).
fn options(sync: bool) -> FineStoreOptions {
    FineStoreOptions {
        sync,
        checkpoint_log_bytes: 0,
        ..FineStoreOptions::default()
    }
}

fn puts(dir: &Path, sync: bool, threads: u64, per_thread: u64, offset: u64) {
    let opts = options(sync);
    let store = FineStore::open(dir, opts).unwrap();
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = &store;
            s.spawn(move || {
                for i in 0..per_thread {
                    store.put(&key(t + offset, i), &[t as u8; 100]).unwrap();
                }
            });
        }
    });
    store.flush().unwrap();
    let phase = if sync { "put_sync" } else { "put" };
    row(phase, threads * per_thread, started);
    store.close().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .expect("usage: store DIR [puts] [threads] [sync_puts]"),
    );
    let per_thread: u64 = args.get(1).map_or(200_000, |a| a.parse().unwrap());
    let threads: u64 = args.get(2).map_or(2, |a| a.parse().unwrap());
    let sync_per_thread: u64 = args.get(3).map_or(500, |a| a.parse().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    puts(&dir, false, threads, per_thread, 0);
    puts(&dir, true, threads, sync_per_thread, 1000);

    let started = Instant::now();
    let store = FineStore::open(&dir, options(false)).unwrap();
    let records = store.recovery_report().log_records;
    row("reopen_from_log", records, started);

    let started = Instant::now();
    for t in 0..threads {
        for i in 0..per_thread {
            assert!(store.get(&key(t, i)).is_some());
        }
    }
    row("get", threads * per_thread, started);

    let started = Instant::now();
    let n = store.scan(&[], None, usize::MAX).len() as u64;
    row("scan_all", n, started);

    let started = Instant::now();
    store.checkpoint().unwrap();
    row("checkpoint", n, started);
    store.close().unwrap();

    let started = Instant::now();
    let store = FineStore::open(&dir, options(false)).unwrap();
    row(
        "reopen_from_checkpoint",
        store.recovery_report().checkpoint_entries,
        started,
    );
    assert_eq!(store.scan(&[], None, usize::MAX).len() as u64, n);
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
