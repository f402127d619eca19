//! SSTables indexed by the kinds of the LSM study's Figure 5 and Figure 7 (C), (F), (I): mapped
//! keys retained beside a clustered model, and the unclustered ALEX, LIPP, DILI and LITS. One
//! data read per lookup on distinct images, the right answers with image ties and variable-length
//! keys, seeks, reopen, memory accounting, a version-1 table, and a damaged mapped-keys block.
//!
//! Every random test prints its seed; rerun one with `LIDB_SEED=<seed>`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_lsm::table::format::{FOOTER_LEN, FORMAT_VERSION_V1, Footer, MetaBlock, frame_block};
use lidb_lsm::table::{Table, TableBuilder, TableOptions};
use lidb_lsm::{EntryKind, IndexKind, ReadStats, SortedIter, Unclustered};
use lidb_storage::Error;
use lidb_storage::ReadMode;
use lidb_storage::fs::FsStorage;
use lidb_testkit::{Cases, Scratch};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Runs `test` once with this file's seed; `LIDB_SEED=<n>` replaces it, and a failure prints
/// the command that replays it (lidb-testkit's seeded cases).
fn with_seed(test: impl FnMut(&mut ChaCha8Rng, u64)) {
    Cases::new("table kinds", 1).base_seed(0x6b1d5).run(test);
}

fn kinds() -> Vec<IndexKind> {
    let mut k = vec![IndexKind::MappedKeys];
    k.extend(Unclustered::ALL.map(IndexKind::Unclustered));
    k
}

fn options(kind: IndexKind) -> TableOptions {
    TableOptions {
        max_window_bytes: 0,
        index: Some((Family::Pgm, Params::new(16))),
        bloom_bits_per_key: 0,
        kind,
    }
}

/// Keys with distinct 8-byte images: 8 random bytes, then 0 to 16 more (8 to 24 bytes).
fn distinct_image_model(rng: &mut ChaCha8Rng, n: usize) -> Model {
    let mut m = Model::new();
    let mut heads = std::collections::HashSet::new();
    while m.len() < n {
        let head: [u8; 8] = rng.r#gen();
        if !heads.insert(head) {
            continue;
        }
        let mut k = head.to_vec();
        k.extend((0..rng.gen_range(0..=16)).map(|_| rng.r#gen::<u8>()));
        m.insert(k, rng.gen_range(0u64..1 << 40).to_le_bytes().to_vec());
    }
    m
}

/// Keys of 8 to 24 bytes, most of them sharing their image with others: a 2-byte head of 16
/// values, then `x`/`y` bytes.
fn tied_image_model(rng: &mut ChaCha8Rng, n: usize) -> Model {
    let mut m = Model::new();
    while m.len() < n {
        let mut k = vec![b'h', b'a' + rng.gen_range(0..16)];
        let len = rng.gen_range(6..=22);
        k.extend((0..len).map(|_| if rng.gen_bool(0.5) { b'x' } else { b'y' }));
        m.insert(k, vec![rng.r#gen(); rng.gen_range(0..40)]);
    }
    m
}

fn build(path: &Path, model: &Model, opts: TableOptions) {
    let max_key = model.keys().map(Vec::len).max().unwrap_or(0) as u32;
    let max_value = model.values().map(Vec::len).max().unwrap_or(0) as u32;
    let mut b = TableBuilder::new(&FsStorage, path, 1, max_key, max_value, opts).expect("builder");
    for (i, (k, v)) in model.iter().enumerate() {
        b.add(k, i as u64, EntryKind::Put, v).expect("add");
    }
    b.finish().expect("finish");
}

fn open(path: &Path) -> Arc<Table> {
    Arc::new(Table::open(&FsStorage, path, 1, ReadMode::Buffered, None).expect("open"))
}

/// Every key, some absent keys, and seeks, against the model; returns the data reads of the
/// lookups of present keys.
fn check(table: &Arc<Table>, model: &Model, rng: &mut ChaCha8Rng, ctx: &str) -> u64 {
    let mut reads = 0;
    for (k, v) in model {
        let mut st = ReadStats::default();
        let got = table.get(k, &mut st).expect("get");
        assert_eq!(got.map(|f| f.value), Some(v.clone()), "{ctx}: get {k:?}");
        reads += st.data_reads;
    }
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for i in 0..300 {
        let mut target = keys[rng.gen_range(0..keys.len())].clone();
        match i % 3 {
            0 => target.push(0),
            1 => {
                target.pop();
            }
            _ => {}
        }
        let got = table.get(&target, &mut ReadStats::default()).expect("get");
        assert_eq!(
            got.map(|f| f.value),
            model.get(&target).cloned(),
            "{ctx}: get {target:?}"
        );
        let mut it = table.iter();
        it.seek(&target).expect("seek");
        for (k, v) in model.range(target.clone()..).take(3) {
            assert!(it.valid(), "{ctx}: seek {target:?}");
            assert_eq!(
                (it.key(), it.value()),
                (&k[..], &v[..]),
                "{ctx}: seek {target:?}"
            );
            it.next().expect("next");
        }
    }
    reads
}

#[test]
fn one_data_read_per_lookup_on_distinct_images_and_reopen_keeps_answers() {
    with_seed(|rng, seed| {
        let dir = Scratch::new("kinds-one-read");
        let model = distinct_image_model(rng, 3_000);
        let path = dir.join("plain.sst");
        build(&path, &model, options(IndexKind::Clustered));
        let plain_bytes = open(&path).index_bytes();
        for kind in kinds() {
            let path = dir.join(format!("{kind:?}.sst"));
            build(&path, &model, options(kind));
            let table = open(&path);
            assert_eq!(table.index_kind(), kind);
            let ctx = format!("seed {seed} {kind:?}");
            let reads = check(&table, &model, rng, &ctx);
            assert_eq!(reads, model.len() as u64, "{ctx}: one read per lookup");
            // The in-memory structure is counted: at least the 8-byte image (or key) per entry.
            assert!(
                table.index_bytes() >= 8 * model.len() as u64,
                "{ctx}: index bytes {} for {} entries",
                table.index_bytes(),
                model.len()
            );
            if kind == IndexKind::MappedKeys {
                assert!(
                    table.index_bytes() > plain_bytes,
                    "{ctx}: images beside the model"
                );
            }
            // Opening trains an unclustered index (compaction charges it to learning time); the
            // other kinds decode theirs.
            assert_eq!(
                table.unclustered_build_time() > std::time::Duration::ZERO,
                matches!(kind, IndexKind::Unclustered(_)),
                "{ctx}: build time {:?}",
                table.unclustered_build_time()
            );
            drop(table);
            let again = open(&path);
            let reads = check(&again, &model, rng, &format!("{ctx} reopened"));
            assert_eq!(
                reads,
                model.len() as u64,
                "{ctx}: one read per lookup after reopen"
            );
        }
    });
}

#[test]
fn tied_images_and_variable_length_keys_answer_right() {
    with_seed(|rng, seed| {
        let dir = Scratch::new("kinds-ties");
        let model = tied_image_model(rng, 2_000);
        for kind in kinds() {
            let path = dir.join(format!("{kind:?}.sst"));
            build(&path, &model, options(kind));
            let table = open(&path);
            assert!(table.max_image_run() > 1, "the model has image ties");
            check(&table, &model, rng, &format!("seed {seed} {kind:?} ties"));
        }
    });
}

fn is_corruption_of(err: &Error, path: &Path) -> bool {
    matches!(err, Error::Corruption { file, .. } if file == path)
}

#[test]
fn a_damaged_mapped_keys_block_is_corruption_naming_the_file() {
    let dir = Scratch::new("kinds-damage");
    with_seed(|rng, _| {
        let model = distinct_image_model(rng, 300);
        for kind in kinds() {
            let path = dir.join(format!("{kind:?}.sst"));
            build(&path, &model, options(kind));
            let bytes = std::fs::read(&path).unwrap();
            let size = bytes.len() as u64;
            let footer = Footer::decode(&bytes[(size - FOOTER_LEN) as usize..], size).unwrap();
            let meta_raw = &bytes
                [footer.meta_offset as usize..(footer.meta_offset + footer.meta_len) as usize];
            let meta = MetaBlock::decode(&meta_raw[..meta_raw.len() - 4]).unwrap();
            let keys_start = footer.meta_offset - meta.keys_len;
            // Flip a bit in several places of the mapped-keys block, its CRC included.
            for off in [keys_start, keys_start + 9, footer.meta_offset - 1] {
                let mut b = bytes.clone();
                b[off as usize] ^= 0x10;
                std::fs::write(&path, &b).unwrap();
                let err = Table::open(&FsStorage, &path, 1, ReadMode::Buffered, None)
                    .expect_err("a damaged mapped-keys block must not open");
                assert!(is_corruption_of(&err, &path), "{kind:?} at {off}: {err}");
            }
        }
    });
}

/// A version-1 table (no index kind, no mapped-keys block) still opens and answers: the tail of
/// a version-2 clustered table rewritten the way version 1 wrote it.
#[test]
fn a_version_1_table_still_opens() {
    let dir = Scratch::new("kinds-v1");
    with_seed(|rng, _| {
        let model = distinct_image_model(rng, 500);
        let path = dir.join("v1.sst");
        build(&path, &model, options(IndexKind::Clustered));
        let bytes = std::fs::read(&path).unwrap();
        let size = bytes.len() as u64;
        let footer = Footer::decode(&bytes[(size - FOOTER_LEN) as usize..], size).unwrap();
        let meta_raw =
            &bytes[footer.meta_offset as usize..(footer.meta_offset + footer.meta_len) as usize];
        let meta = MetaBlock::decode(&meta_raw[..meta_raw.len() - 4]).unwrap();
        let v1_meta = frame_block(&meta.encode_for(FORMAT_VERSION_V1));
        let mut v1 = bytes[..footer.meta_offset as usize].to_vec();
        v1.extend_from_slice(&v1_meta);
        let v1_footer = Footer {
            version: FORMAT_VERSION_V1,
            meta_len: v1_meta.len() as u64,
            ..footer
        };
        v1.extend_from_slice(&v1_footer.encode());
        std::fs::write(&path, &v1).unwrap();
        let table = open(&path);
        assert_eq!(table.index_kind(), IndexKind::Clustered);
        check(&table, &model, rng, "version 1");
    });
}
