//! The static tier (lidb-kv static_tier/, docs/format/static-tier.md): a real generation is built
//! once; each input replaces its key list (`.keys`, with its file table) or its model (`.model`),
//! chosen by bit 1 of the first byte. Opening never panics; an opened tier iterates and answers
//! gets without panicking.
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use lidb_kv::static_tier::{
    StaticTier, StaticTierBuilder, TierOptions, keys_path, model_path, svlog_path,
};
use lidb_storage::mem::MemStorage;
use lidb_storage::{ReadMode, Storage};

const DIR: &str = "/db";

/// (svlog, keys, model) of a real generation 1.
fn template() -> &'static (Vec<u8>, Vec<u8>, Vec<u8>) {
    static T: OnceLock<(Vec<u8>, Vec<u8>, Vec<u8>)> = OnceLock::new();
    T.get_or_init(|| {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let dir = Path::new(DIR);
        storage.create_dir_all(dir).expect("dir");
        let mut b = StaticTierBuilder::new(storage.clone(), dir, 1, TierOptions::default())
            .expect("builder");
        for i in 0..600u32 {
            b.add(format!("key{i:06}").as_bytes(), &i.to_le_bytes())
                .expect("add");
        }
        b.finish().expect("finish");
        let read = |p: &Path| storage.read_all(p).expect("read");
        (
            read(&svlog_path(dir, 1)),
            read(&keys_path(dir, 1)),
            read(&model_path(dir, 1)),
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let (svlog, keys, model) = template();
    let fuzz_keys = data.first().is_some_and(|b| b & 2 == 0);
    let (keys, model) = if fuzz_keys {
        (
            lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_keys(b)),
            model.clone(),
        )
    } else {
        (
            keys.clone(),
            lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_trailer(b)),
        )
    };
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let dir = Path::new(DIR);
    storage.create_dir_all(dir).expect("dir");
    for (path, bytes) in [
        (svlog_path(dir, 1), svlog),
        (keys_path(dir, 1), &keys),
        (model_path(dir, 1), &model),
    ] {
        let mut f = storage.create(&path).expect("create");
        f.append(bytes).expect("append");
        f.sync().expect("sync");
    }
    let Ok(tier) = StaticTier::open(storage, dir, 1, ReadMode::Buffered) else {
        return;
    };
    let tier = Arc::new(tier);
    let mut seen = Vec::new();
    if let Ok(mut it) = tier.keys() {
        while let Ok(Some(e)) = it.next_entry() {
            seen.push(e.key);
            if seen.len() > 5000 {
                break;
            }
        }
    }
    for key in seen.iter().take(32) {
        let _ = tier.get(key);
        let _ = tier.get_pointer(key);
    }
    for key in [&b""[..], b"key000300", b"zzz"] {
        let _ = tier.get(key);
        let _ = tier.iter(key);
    }
});
