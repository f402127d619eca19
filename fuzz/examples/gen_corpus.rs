//! Writes the seed corpus `fuzz/corpus/<target>/` from files the engines really make, all in
//! memory (MemStorage). Run from the repository root:
//! `cargo run --manifest-path fuzz/Cargo.toml --example gen_corpus [target...]` (targets named:
//! only their directories are written).
//! Each seed is one selector byte then the file: bit 0 asks the target to reseal checksums
//! (`lidb_fuzz::prepare`), bit 1 picks the static tier's model over its key list; for
//! `finestore`, bits 1-2 pick the file (0 log, 1 checkpoint, 2 FINESTATE) and bits 3-4 the
//! recovery mode; for `btree_wal`, bits 1-2 pick the bytes (0 a record payload, 1 `WALSTATE`,
//! 2 a log file); for `btree_page`, bit 1 picks a whole page file over one page.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_btree::{
    BTree, LearnedStore, LearnedStoreOptions, Options as TreeOptions, PAGE_FILE_NAME,
};
use lidb_fine::{FineStore, FineStoreOptions};
use lidb_index::{Family, Params};
use lidb_kv::static_tier::{StaticTierBuilder, TierOptions, keys_path, model_path};
use lidb_kv::{Store, StoreOptions};
use lidb_lsm::table::{TableBuilder, TableOptions};
use lidb_lsm::{Db, EntryKind, Granularity, IndexKind, Options, Unclustered};
use lidb_storage::Storage;
use lidb_storage::log::parse_log;
use lidb_storage::mem::MemStorage;

/// The corpus root, and the targets to write (empty: all).
struct Corpus(PathBuf, Vec<String>);

impl Corpus {
    fn put(&self, target: &str, name: &str, selector: Option<u8>, bytes: &[u8]) {
        if !self.1.is_empty() && !self.1.iter().any(|t| t == target) {
            return;
        }
        let dir = self.0.join(target);
        fs::create_dir_all(&dir).expect("corpus dir");
        let mut out = Vec::with_capacity(bytes.len() + 1);
        out.extend(selector);
        out.extend_from_slice(bytes);
        fs::write(dir.join(name), out).expect("write seed");
    }
}

fn files_ending(storage: &MemStorage, suffix: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = storage
        .files()
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .map(|p| {
            let name = p
                .to_string_lossy()
                .trim_start_matches('/')
                .replace('/', "_");
            (name, storage.read_all(&p).expect("read"))
        })
        .collect();
    out.sort();
    out
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", i * 7).into_bytes()
}

/// WAL, manifest, tables and level indexes of an LSM with level models.
fn lsm(c: &Corpus) {
    let storage = Arc::new(MemStorage::new());
    let dir = Path::new("/lsm");
    let opts = Options {
        granularity: Granularity::Level,
        background_compaction: false,
        ..Options::default()
    };
    let db = Db::open_with_storage(storage.clone(), dir, opts.clone()).expect("open");
    for round in 0..2u32 {
        for i in 0..300 {
            db.put(&key(i), format!("value-{round}-{i}").as_bytes())
                .expect("put");
        }
        db.delete(&key(round)).expect("delete");
        db.flush().expect("flush");
    }
    db.compact().expect("compact");
    for i in 0..20 {
        db.put(&key(i), b"in the wal").expect("put");
    }
    db.delete(&key(3)).expect("delete");
    db.sync_wal().expect("sync");
    for (name, bytes) in files_ending(&storage, ".lvl") {
        c.put("level_index", &name, Some(1), &bytes);
    }
    for (name, bytes) in files_ending(&storage, ".log") {
        c.put("log_framing", &name, Some(1), &bytes);
        c.put(
            "log_framing",
            &format!("{name}.torn"),
            Some(0),
            &bytes[..bytes.len() - 5],
        );
        for (i, record) in parse_log(&bytes)
            .expect("wal")
            .records
            .iter()
            .enumerate()
            .take(4)
        {
            c.put("wal_batch", &format!("{name}.{i}"), None, record);
        }
    }
    let manifests: Vec<_> = storage
        .files()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("MANIFEST-"))
        .collect();
    for p in manifests {
        let bytes = storage.read_all(&p).expect("read");
        let name = p.file_name().expect("name").to_string_lossy().into_owned();
        c.put("manifest_edit", &name, Some(1), &bytes);
        for (i, record) in parse_log(&bytes)
            .expect("manifest")
            .records
            .iter()
            .enumerate()
        {
            c.put("manifest_edit", &format!("{name}.edit{i}"), None, record);
        }
    }
    db.close().expect("close");
}

/// One small table per index family, and one without index or filter.
fn tables(c: &Corpus) {
    let storage = MemStorage::new();
    storage.create_dir_all(Path::new("/t")).expect("dir");
    let mut variants: Vec<(String, TableOptions)> = Family::ALL
        .iter()
        .map(|&f| {
            let opts = TableOptions {
                index: Some((f, Params::new(8))),
                bloom_bits_per_key: 10,
                kind: IndexKind::Clustered,
            };
            (format!("{f:?}").to_lowercase(), opts)
        })
        .collect();
    // The kinds with a mapped-keys block (format version 2).
    let mut kinds = vec![IndexKind::MappedKeys];
    kinds.extend(Unclustered::ALL.map(IndexKind::Unclustered));
    for kind in kinds {
        let name = match kind {
            IndexKind::Unclustered(u) => u.name().to_string(),
            _ => "pgm-mapped-keys".to_string(),
        };
        let opts = TableOptions {
            index: Some((Family::Pgm, Params::new(8))),
            bloom_bits_per_key: 10,
            kind,
        };
        variants.push((name, opts));
    }
    variants.push((
        "plain".into(),
        TableOptions {
            index: None,
            bloom_bits_per_key: 0,
            kind: IndexKind::Clustered,
        },
    ));
    for (name, opts) in variants {
        let path = PathBuf::from(format!("/t/{name}.sst"));
        let mut b = TableBuilder::new(&storage, &path, 1, 10, 8, opts).expect("builder");
        for i in 0..40u32 {
            let kind = if i % 9 == 4 {
                EntryKind::Delete
            } else {
                EntryKind::Put
            };
            let value = if kind == EntryKind::Put {
                format!("v{i}")
            } else {
                String::new()
            };
            b.add(&key(i), u64::from(i) + 1, kind, value.as_bytes())
                .expect("add");
        }
        b.finish().expect("finish");
        c.put(
            "sstable",
            &name,
            Some(1),
            &storage.read_all(&path).expect("read"),
        );
    }
}

/// Every index family over a few key distributions.
fn indexes(c: &Corpus) {
    let dense: Vec<u64> = (0..200).collect();
    let sparse: Vec<u64> = (0..200u64).map(|i| i * i * 1_000_003).collect();
    let dups: Vec<u64> = (0..200u64).map(|i| i / 7).collect();
    for f in Family::ALL {
        for (dist, keys) in [("dense", &dense), ("sparse", &sparse), ("dups", &dups)] {
            let Ok(index) = lidb_index::build(f, keys, &Params::new(16)) else {
                continue;
            };
            let name = format!("{}-{dist}", format!("{f:?}").to_lowercase());
            c.put("index", &name, Some(1), &index.encode());
        }
    }
    // PLEX tunes these small sets to a radix table; its hist-tree layout needs its own seed.
    let clustered: Vec<u64> = (0..300u64)
        .map(|i| if i < 150 { i } else { (1 << 40) + i * i * i })
        .collect();
    let tree = lidb_index::plex::tune::Layout::Tree {
        bin_bits: 3,
        max_error: 3,
    };
    let plex = lidb_index::plex::Plex::build_with(&clustered, 4, tree).expect("plex tree");
    c.put(
        "index",
        "plex-tree",
        Some(1),
        &lidb_index::LearnedIndex::encode(&plex),
    );
}

/// KVSTATE and value logs of a LearnedKV store, and a static tier generation.
fn kv(c: &Corpus) {
    let storage = Arc::new(MemStorage::new());
    let dir = Path::new("/kv");
    let store = Store::open_with_storage(storage.clone(), dir, StoreOptions::default())
        .expect("open store");
    for i in 0..200u32 {
        store
            .put(&key(i), format!("value {i}").as_bytes())
            .expect("put");
    }
    store.flush().expect("flush");
    store.gc().expect("gc");
    for i in 0..30u32 {
        store.put(&key(i), b"newer").expect("put");
    }
    store.flush().expect("flush");
    for (name, bytes) in files_ending(&storage, "KVSTATE") {
        c.put("kvstate", &name, Some(1), &bytes);
    }
    for (name, bytes) in files_ending(&storage, ".vlog").into_iter().take(2) {
        c.put("vlog", &name, Some(1), &bytes);
        c.put(
            "vlog",
            &format!("{name}.torn"),
            Some(0),
            &bytes[..bytes.len() - 3],
        );
    }
    store.close().expect("close");

    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let dir = Path::new("/db");
    storage.create_dir_all(dir).expect("dir");
    let mut b =
        StaticTierBuilder::new(storage.clone(), dir, 1, TierOptions::default()).expect("builder");
    for i in 0..600u32 {
        b.add(format!("key{i:06}").as_bytes(), &i.to_le_bytes())
            .expect("add");
    }
    b.finish().expect("finish");
    let keys = storage.read_all(&keys_path(dir, 1)).expect("keys");
    let model = storage.read_all(&model_path(dir, 1)).expect("model");
    c.put("static_tier", "keys", Some(1), &keys);
    c.put("static_tier", "model", Some(3), &model);
}

/// A FineStore's FINESTATE, checkpoint and log (records after the checkpoint, a deletion among
/// them); the log also torn, and damaged under point-in-time recovery.
fn finestore(c: &Corpus) {
    let storage = Arc::new(MemStorage::new());
    let dir = Path::new("/fine");
    let store = FineStore::open_with_storage(storage.clone(), dir, FineStoreOptions::default())
        .expect("open finestore");
    for i in 0..30u32 {
        store
            .put(&key(i), format!("value {i}").as_bytes())
            .expect("put");
    }
    store.delete(&key(5)).expect("delete");
    store.checkpoint().expect("checkpoint");
    for i in 20..35u32 {
        store.put(&key(i), b"newer").expect("put");
    }
    store.delete(&key(2)).expect("delete");
    store.close().expect("close");
    let read = |name: &str| storage.read_all(&dir.join(name)).expect("read");
    let log = read("log-000002");
    c.put("finestore", "log", Some(1), &log);
    c.put("finestore", "log.torn", Some(0), &log[..log.len() - 5]);
    let mut damaged = log.clone();
    damaged[30] ^= 0x10;
    c.put("finestore", "log.damaged.point-in-time", Some(8), &damaged);
    c.put(
        "finestore",
        "checkpoint",
        Some(3),
        &read("checkpoint-000001"),
    );
    c.put("finestore", "FINESTATE", Some(5), &read("FINESTATE"));
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let c = Corpus(root, std::env::args().skip(1).collect());
    lsm(&c);
    tables(&c);
    indexes(&c);
    kv(&c);
    finestore(&c);
    btree(&c);
}

/// A small LearnedStore (the page file must be a real file: a temporary directory): a checkpoint
/// of 300 keys over a few leaves and an inner node, with the learned path's blob, then writes
/// left in the log, closed cleanly (`WALSTATE`).
fn btree(c: &Corpus) {
    let dir = std::env::temp_dir().join(format!("lidb-gen-corpus-btree-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let opts = LearnedStoreOptions {
        tree: TreeOptions {
            pool_bytes: 1 << 20,
            direct_io: false,
            provider_thread: false,
            ..TreeOptions::default()
        },
        ..LearnedStoreOptions::default()
    };
    let store = LearnedStore::open(&dir, &opts).expect("open");
    for i in 0..300 {
        store
            .put(
                &key(i),
                format!("value-{i:04}-{}", "x".repeat(40)).as_bytes(),
            )
            .expect("put");
    }
    store.delete(&key(5)).expect("delete");
    store.checkpoint().expect("checkpoint");
    for i in 290..310 {
        store.put(&key(i), b"in the log").expect("put");
    }
    store.delete(&key(7)).expect("delete");
    store.flush().expect("flush");
    // The log as it stands before the close (a clean close checkpoints and starts an empty one).
    for name in dir_names(&dir) {
        if !name.ends_with(".log") {
            continue;
        }
        let bytes = fs::read(dir.join(&name)).expect("read");
        c.put("btree_wal", &name, Some(4), &bytes);
        c.put(
            "btree_wal",
            &format!("{name}.torn"),
            Some(4),
            &bytes[..bytes.len() - 5],
        );
        for (i, record) in parse_log(&bytes)
            .expect("log")
            .records
            .iter()
            .enumerate()
            .take(4)
        {
            c.put("btree_wal", &format!("{name}.{i}"), Some(0), record);
        }
    }
    store.close().expect("close");
    let state = fs::read(dir.join("WALSTATE")).expect("read WALSTATE");
    c.put("btree_wal", "WALSTATE", Some(2), &state);
    let pages = fs::read(dir.join(PAGE_FILE_NAME)).expect("read pages");
    eprintln!("btree: page file of {} bytes", pages.len());
    c.put("btree_page", "file", Some(2), &pages);
    let mut kinds_seen = Vec::new();
    for (slot, page) in pages.chunks_exact(4096).enumerate() {
        let kind = page.get(6).copied().unwrap_or(0);
        if kind != 0 && !kinds_seen.contains(&kind) {
            kinds_seen.push(kind);
            c.put(
                "btree_page",
                &format!("slot{slot}.kind{kind}"),
                Some(0),
                page,
            );
        }
    }
    let tree = BTree::open(&dir.join(PAGE_FILE_NAME), &opts.tree).expect("reopen the tree");
    let blob = tree.checkpoint_info().extra;
    assert!(!blob.is_empty(), "the checkpoint holds the learned blob");
    c.put("btree_learned", "blob", Some(0), &blob);
    tree.close().expect("close");
    fs::remove_dir_all(&dir).expect("remove the temporary directory");
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
