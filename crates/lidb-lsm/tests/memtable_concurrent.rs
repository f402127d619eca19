//! The memtable under concurrent inserts, gets and iterators: nothing is lost, the
//! counters add up exactly, iterators stay sorted, and a get never returns an older version than
//! one it saw before.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lidb_lsm::memtable::{ENTRY_OVERHEAD_BYTES, MemTable};
use lidb_lsm::{EntryKind, SortedIter};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 3_000;
const KEYS: u64 = 500;

fn key(i: u64) -> Vec<u8> {
    format!("k{}", i % KEYS).into_bytes()
}

/// Thread `t` inserts seqs t+1, t+1+THREADS, ...: every seq once, keys shared between threads.
fn insert_all(table: &MemTable, t: u64) {
    for n in 0..PER_THREAD {
        let seq = n * THREADS + t + 1;
        table.insert(seq, EntryKind::Put, &key(seq), &seq.to_le_bytes());
    }
}

#[test]
fn concurrent_inserts_gets_and_iterators_lose_nothing() {
    let table = Arc::new(MemTable::new());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let (table, done) = (Arc::clone(&table), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut newest_seen = vec![0u64; KEYS as usize];
                let mut rounds = 0u32;
                while !done.load(Ordering::SeqCst) && rounds < 10_000 {
                    for i in (r..KEYS).step_by(7) {
                        if let Some((kind, seq, value)) = table.get(&key(i)) {
                            assert_eq!(kind, EntryKind::Put);
                            assert_eq!(value, seq.to_le_bytes());
                            assert!(seq >= newest_seen[i as usize], "a get went back in time");
                            newest_seen[i as usize] = seq;
                        }
                    }
                    let mut it = table.iter(u64::MAX);
                    it.seek_to_first().unwrap();
                    let mut last: Option<Vec<u8>> = None;
                    while it.valid() {
                        assert!(last.as_deref() < Some(it.key()), "iterator out of order");
                        last = Some(it.key().to_vec());
                        it.next().unwrap();
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let table = Arc::clone(&table);
            std::thread::spawn(move || insert_all(&table, t))
        })
        .collect();
    for h in writers {
        h.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for h in readers {
        assert!(h.join().unwrap() > 0);
    }
    let total = THREADS * PER_THREAD;
    assert_eq!(table.len() as u64, total);
    let key_bytes: u64 = (1..=total).map(|s| key(s).len() as u64).sum();
    assert_eq!(
        table.approximate_bytes(),
        key_bytes + total * (8 + ENTRY_OVERHEAD_BYTES)
    );
    assert_eq!(table.max_value_len(), 8);
    // Every key's newest version is its largest seq, and every older one is still there.
    for i in 0..KEYS {
        let newest = (1..=total).filter(|s| s % KEYS == i).max().unwrap();
        assert_eq!(table.get(&key(i)).unwrap().1, newest);
        for s in (1..=total).filter(|s| s % KEYS == i) {
            assert_eq!(table.get_at(&key(i), s).unwrap().1, s);
        }
    }
}

#[test]
fn a_repeated_key_and_seq_replaces_and_counts_once() {
    let table = MemTable::new();
    table.insert(5, EntryKind::Put, b"k", b"first");
    table.insert(5, EntryKind::Put, b"k", b"second");
    assert_eq!(table.len(), 1);
    assert_eq!(table.get(b"k").unwrap().2, b"second");
}

#[test]
fn keys_differing_after_eight_bytes_or_in_zero_padding_keep_byte_order() {
    // The memtable compares an 8-byte prefix before the bytes: zero bytes, short keys and keys
    // equal in their first 8 bytes are where that could go wrong.
    let mut keys: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0, 0],
        vec![1],
        vec![1, 0],
        vec![1, 0, 0, 0, 0, 0, 0, 0],
        vec![1, 0, 0, 0, 0, 0, 0, 0, 0],
        vec![1, 0, 0, 0, 0, 0, 0, 0, 1],
        vec![1, 0, 0, 0, 0, 0, 0, 1],
        b"abcdefgh".to_vec(),
        b"abcdefghA".to_vec(),
        b"abcdefghB".to_vec(),
        b"abcdefg".to_vec(),
        vec![255; 8],
        vec![255; 9],
        vec![255, 255, 255, 255, 255, 255, 255, 254, 255],
    ];
    let table = Arc::new(MemTable::new());
    // Insert in an order unrelated to the byte order.
    for (seq, k) in keys.iter().rev().enumerate() {
        table.insert(seq as u64 + 1, EntryKind::Put, k, k);
    }
    keys.sort();
    let mut it = table.iter(u64::MAX);
    it.seek_to_first().unwrap();
    let mut seen = Vec::new();
    while it.valid() {
        assert_eq!(it.key(), it.value());
        seen.push(it.key().to_vec());
        it.next().unwrap();
    }
    assert_eq!(seen, keys);
    for k in &keys {
        assert_eq!(table.get(k).unwrap().2, *k, "get {k:?}");
        let mut it = table.iter(u64::MAX);
        it.seek(k).unwrap();
        assert_eq!(it.key(), k.as_slice(), "seek {k:?}");
    }
    assert!(table.get(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_none());
}
