//! Referencing static tiers (format version 2, range-query-assisted conversion): entries that
//! point into `.vlog` files and older `.svlog` files through the key list's file table. Lookups
//! and scans against a `BTreeMap`; the file table's decoder on corrupt and crafted headers (a
//! `Corruption`, never a panic); a referenced file that changed size is refused at open.
#![expect(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation is a failed test; crafted pages are 4096 bytes"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_kv::Error;
use lidb_kv::static_tier::format::{
    EntryRef, KeyListHeader, Layout, MAX_TIER_FILES, PAGE_BYTES, TierFile, TierFileKind,
    decode_entry, encode_entry,
};
use lidb_kv::static_tier::{StaticTier, StaticTierBuilder, TierOptions, keys_path, svlog_path};
use lidb_kv::vlog::{VlogWriter, vlog_path};
use lidb_storage::mem::MemStorage;
use lidb_storage::{ReadMode, Storage};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn dir() -> PathBuf {
    PathBuf::from("/tier")
}

fn open(s: &MemStorage, g: u64) -> lidb_kv::Result<StaticTier> {
    StaticTier::open(Arc::new(s.clone()), &dir(), g, ReadMode::Buffered)
}

/// Generation 1 (a GC-built tier of the even keys), value log 2 (the odd keys, and newer values
/// of every 4th even key), and generation 3 referencing both: the newest value of each key.
fn build_pair(s: &MemStorage) -> Map {
    s.create_dir_all(&dir()).ok();
    let st: Arc<dyn Storage> = Arc::new(s.clone());
    let key = |i: u32| format!("key{i:05}").into_bytes();
    let mut b = StaticTierBuilder::new(Arc::clone(&st), &dir(), 1, TierOptions::default())
        .expect("builder");
    let mut model = Map::new();
    for i in (0..2000u32).step_by(2) {
        let v = vec![b'a'; (i % 90) as usize];
        b.add(&key(i), &v).expect("add");
        model.insert(key(i), v);
    }
    b.finish().expect("finish");
    let mut vlog = VlogWriter::create(st.as_ref(), &dir(), 2).expect("vlog");
    let mut newer = BTreeMap::new();
    for i in (0..2000u32).filter(|i| i % 2 == 1 || i % 8 == 0) {
        let v = vec![b'z'; (i % 70) as usize + 1];
        let p = vlog.append(&key(i), &v).expect("append");
        newer.insert(key(i), p);
        model.insert(key(i), v);
    }
    vlog.sync().expect("sync");
    let old = Arc::new(open(s, 1).expect("open 1"));
    let mut old_entries = old.iter(b"").expect("iter");
    let mut refs = BTreeMap::new();
    while let Some(e) = old_entries.next_entry().expect("entry") {
        refs.insert(e.key, (e.file.kind, e.file.number, e.offset, e.len));
    }
    for (k, p) in &newer {
        refs.insert(k.clone(), (TierFileKind::Vlog, 2, p.offset, p.len));
    }
    let mut b = StaticTierBuilder::referencing(st, &dir(), 3, TierOptions::default())
        .expect("referencing builder");
    assert!(matches!(b.add(b"a", b"v"), Err(Error::InvalidOption(_))));
    for (k, (kind, n, off, len)) in &refs {
        b.add_ref(k, *kind, *n, *off, *len).expect("add_ref");
    }
    let meta = b.finish().expect("finish");
    assert_eq!(meta.entries, model.len() as u64);
    model
}

#[test]
fn a_referencing_tier_serves_lookups_and_scans_from_other_files() {
    let s = MemStorage::new();
    let model = build_pair(&s);
    assert!(!s.exists(&svlog_path(&dir(), 3)), "no own svlog is written");
    let t = Arc::new(open(&s, 3).expect("open 3"));
    assert!(!t.packed());
    let table: Vec<(TierFileKind, u64)> =
        t.file_table().iter().map(|f| (f.kind, f.number)).collect();
    assert_eq!(table.len(), 2, "{table:?}");
    assert!(table.contains(&(TierFileKind::Svlog, 1)) && table.contains(&(TierFileKind::Vlog, 2)));
    assert_eq!(t.svlog_numbers(), vec![1]);
    assert_eq!(t.files().len(), 2, "key list and model only");
    for (k, v) in &model {
        assert_eq!(t.get(k).expect("get").as_ref(), Some(v), "{k:?}");
    }
    assert_eq!(t.get(b"key99999").expect("get"), None);
    assert_eq!(t.get(b"key00000x").expect("get"), None);
    let got: Vec<(Vec<u8>, Vec<u8>)> = t
        .iter(b"key01000")
        .expect("iter")
        .collect::<Result<_, _>>()
        .expect("scan");
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range(b"key01000".to_vec()..)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(got == want, "scan differs");
    // Pointers name the file they are in; read_value follows them.
    let p = t.get_pointer(b"key00001").expect("ptr").expect("present");
    assert_eq!(p.file, 2);
    assert_eq!(t.read_value(p).expect("read"), vec![b'z'; 2]);
}

#[test]
fn a_referenced_file_that_changed_or_vanished_is_refused_at_open() {
    let s = MemStorage::new();
    build_pair(&s);
    let v = vlog_path(&dir(), 2);
    let len = s.file_size(&v).expect("size");
    s.truncate(&v, len - 1).expect("cut");
    match open(&s, 3) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, v),
        other => panic!("expected Corruption naming the vlog, got {other:?}"),
    }
    let s = MemStorage::new();
    build_pair(&s);
    s.remove(&svlog_path(&dir(), 1)).expect("rm");
    assert!(open(&s, 3).is_err());
}

fn corruption_names(r: Result<StaticTier, Error>, path: &Path, what: &str) {
    match r {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "{what}"),
        other => panic!("{what}: expected Corruption, got {other:?}"),
    }
}

#[test]
fn every_bit_of_the_file_table_is_checked() {
    let s = MemStorage::new();
    build_pair(&s);
    let k = keys_path(&dir(), 3);
    // Fixed header 56 bytes, two rows of 17, the CRC, then zeros.
    for i in 48..(56 + 2 * 17 + 4 + 8) {
        for bit in [0x01u8, 0x80] {
            s.corrupt(&k, i, bit).expect("flip");
            corruption_names(open(&s, 3), &k, &format!("byte {i} bit {bit:#x}"));
            s.corrupt(&k, i, bit).expect("unflip");
        }
    }
    open(&s, 3).expect("intact again");
}

fn header(files: Vec<TierFile>) -> KeyListHeader {
    KeyListHeader {
        generation: 9,
        entries: 0,
        pages: 0,
        layout: Layout::new(8).expect("layout"),
        files,
    }
}

fn row(kind: TierFileKind, number: u64) -> TierFile {
    TierFile {
        kind,
        number,
        bytes: 100,
    }
}

#[test]
fn crafted_file_tables_with_a_valid_crc_are_refused_not_believed() {
    let full: Vec<TierFile> = (0..u64::from(MAX_TIER_FILES))
        .map(|n| row(TierFileKind::Vlog, n))
        .collect();
    let page = header(full.clone()).encode();
    assert_eq!(
        page.len() as u64,
        PAGE_BYTES,
        "the largest table fits the page"
    );
    assert_eq!(KeyListHeader::decode(&page).expect("max").files, full);
    let dup = header(vec![
        row(TierFileKind::Vlog, 4),
        row(TierFileKind::Svlog, 4),
    ]);
    assert!(
        KeyListHeader::decode(&dup.encode()).is_err(),
        "repeated number"
    );
    let short = header(vec![TierFile {
        bytes: 3,
        ..row(TierFileKind::Vlog, 4)
    }]);
    assert!(
        KeyListHeader::decode(&short.encode()).is_err(),
        "too short a file"
    );
    // Kind 3 and a count past the limit, with the CRC recomputed.
    let mut page = header(vec![row(TierFileKind::Vlog, 4)]).encode();
    page[56] = 3;
    let crc = crc32c::crc32c(&page[..73]);
    page[73..77].copy_from_slice(&crc.to_le_bytes());
    assert!(
        KeyListHeader::decode(&page)
            .expect_err("kind 3")
            .contains("kind")
    );
    let mut page = header(vec![]).encode();
    page[52..56].copy_from_slice(&(MAX_TIER_FILES + 1).to_le_bytes());
    assert!(
        KeyListHeader::decode(&page)
            .expect_err("count")
            .contains("limit")
    );
    let mut page = header(vec![]).encode();
    page[8..12].copy_from_slice(&1u32.to_le_bytes());
    let e = KeyListHeader::decode(&page).expect_err("version 1");
    assert!(e.contains("version 1"), "{e}");
}

#[test]
fn entries_naming_a_row_past_the_table_or_past_their_file_are_refused() {
    let layout = Layout::new(4).expect("layout");
    let files = [row(TierFileKind::Svlog, 1)];
    let mut buf = vec![0u8; layout.entry_width as usize];
    let e = |file_idx, offset, len| EntryRef {
        file_idx,
        offset,
        len,
    };
    encode_entry(&mut buf, &layout, b"ab", e(0, 32, 20));
    let (k, got) = decode_entry(&buf, &layout, &files).expect("valid");
    assert_eq!((k, got), (&b"ab"[..], e(0, 32, 20)));
    for bad in [e(1, 32, 20), e(0, 32, 69), e(0, 8, 20), e(u16::MAX, 32, 20)] {
        buf.fill(0);
        encode_entry(&mut buf, &layout, b"ab", bad);
        assert!(decode_entry(&buf, &layout, &files).is_err(), "{bad:?}");
    }
}

/// An entry cut anywhere, or whose key length exceeds its key field, is refused: never a key cut
/// to the bytes that happen to be there (nor an empty one).
#[test]
fn cut_entries_and_keys_longer_than_their_field_are_refused() {
    let layout = Layout::new(4).expect("layout");
    let files = [row(TierFileKind::Svlog, 1)];
    let mut buf = vec![0u8; layout.entry_width as usize];
    let entry = EntryRef {
        file_idx: 0,
        offset: 32,
        len: 20,
    };
    encode_entry(&mut buf, &layout, b"abcd", entry);
    assert_eq!(
        decode_entry(&buf, &layout, &files),
        Ok((&b"abcd"[..], entry))
    );
    for cut in 0..buf.len() {
        assert!(decode_entry(&buf[..cut], &layout, &files).is_err(), "{cut}");
    }
    // The stored key length one above the 4-byte field.
    buf[..2].copy_from_slice(&5u16.to_le_bytes());
    let e = decode_entry(&buf, &layout, &files).expect_err("key longer than its field");
    assert!(e.contains("key length 5 exceeds the key width 4"), "{e}");
}
