//! What the damage and repair tests share: every engine `lidb kv` serves behind one small enum
//! (`Engine`, and `Open` for an opened one), and a seeded workload with the model after each
//! write. The snapshots and the kinds of damage are lidb-testkit's (`lidb_testkit::mem`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use lidb_fine::{FineStore, FineStoreOptions};
use lidb_kv::{Error, Store, TierKind};
use lidb_lsm::Db;
use lidb_storage::RecoveryMode;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{learned, small};

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Lsm,
    LearnedKv,
    LsmPlus,
    LsmTier,
    /// FineStore (lidb-fine): a log and checkpoints, no tables.
    Fine,
}

pub const ENGINES: [Engine; 4] = [
    Engine::Lsm,
    Engine::LearnedKv,
    Engine::LsmPlus,
    Engine::LsmTier,
];
/// The engines of the corruption campaign: every engine `lidb kv` serves.
pub const CAMPAIGN_ENGINES: [Engine; 5] = [
    Engine::Lsm,
    Engine::LearnedKv,
    Engine::LsmPlus,
    Engine::LsmTier,
    Engine::Fine,
];

pub fn root() -> PathBuf {
    PathBuf::from("/store")
}

pub enum Open {
    Lsm(Db),
    Kv(Store),
    Fine(Box<FineStore>),
}

impl Engine {
    fn tier(self) -> Option<TierKind> {
        match self {
            Engine::Lsm | Engine::Fine => None,
            Engine::LearnedKv => Some(learned()),
            Engine::LsmPlus => Some(TierKind::WriteBack),
            Engine::LsmTier => Some(TierKind::Lsm),
        }
    }

    pub fn open(self, storage: &MemStorage, mode: RecoveryMode) -> Result<Open, Error> {
        let s: Arc<dyn Storage> = Arc::new(storage.clone());
        if self == Engine::Fine {
            let opts = FineStoreOptions {
                recovery_mode: mode,
                ..FineStoreOptions::default()
            };
            return FineStore::open_with_storage(s, &root(), opts).map(|f| Open::Fine(Box::new(f)));
        }
        match self.tier() {
            None => {
                let mut opts = small(TierKind::WriteBack).lsm;
                opts.recovery_mode = mode;
                Db::open_with_storage(s, &root(), opts).map(Open::Lsm)
            }
            Some(tier) => {
                let mut opts = small(tier);
                opts.lsm.recovery_mode = mode;
                Store::open_with_storage(s, &root(), opts).map(Open::Kv)
            }
        }
    }
}

impl Engine {
    /// Runs `lidb repair`'s library call for this engine; the report's text.
    pub fn repair(self, storage: &MemStorage) -> Result<String, Error> {
        let s: Arc<dyn Storage> = Arc::new(storage.clone());
        if self == Engine::Fine {
            return FineStore::repair_with_storage(storage, &root()).map(|r| r.to_string());
        }
        match self.tier() {
            None => {
                let opts = small(TierKind::WriteBack).lsm;
                lidb_lsm::repair::repair_db(&s, &root(), &opts).map(|r| r.to_string())
            }
            Some(tier) => {
                lidb_kv::repair::repair_store(&s, &root(), &small(tier)).map(|r| r.to_string())
            }
        }
    }
}

/// Every value each key had in any of `models`.
pub fn values_ever(models: &[Model]) -> BTreeMap<Vec<u8>, Vec<Vec<u8>>> {
    let mut out: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    for m in models {
        for (k, v) in m {
            let vs = out.entry(k.clone()).or_default();
            if vs.last() != Some(v) && !vs.contains(v) {
                vs.push(v.clone());
            }
        }
    }
    out
}

impl Open {
    pub fn put(&self, k: &[u8], v: &[u8]) -> Result<(), Error> {
        match self {
            Open::Lsm(d) => d.put(k, v),
            Open::Kv(s) => s.put(k, v),
            Open::Fine(s) => s.put(k, v),
        }
    }

    pub fn delete(&self, k: &[u8]) -> Result<(), Error> {
        match self {
            Open::Lsm(d) => d.delete(k),
            Open::Kv(s) => s.delete(k),
            Open::Fine(s) => s.delete(k).map(|_| ()),
        }
    }

    pub fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        match self {
            Open::Lsm(d) => d.get(k),
            Open::Kv(s) => s.get(k),
            Open::Fine(s) => Ok(s.get(k)),
        }
    }

    pub fn flush(&self) -> Result<(), Error> {
        match self {
            Open::Lsm(d) => d.flush(),
            Open::Kv(s) => s.flush(),
            Open::Fine(s) => s.flush(),
        }
    }

    /// A compaction for lsm, a GC for the tiered engines, a checkpoint for FineStore.
    pub fn settle(&self) -> Result<(), Error> {
        match self {
            Open::Lsm(d) => d.compact(),
            Open::Kv(s) => s.gc(),
            Open::Fine(s) => s.checkpoint(),
        }
    }

    /// Every pair in key order, or the first error.
    pub fn scan_all(&self) -> Result<Pairs, Error> {
        let mut out = Vec::new();
        match self {
            Open::Lsm(d) => {
                let mut it = d.scan(b"", None)?;
                while it.valid() {
                    out.push((it.key().to_vec(), it.value().to_vec()));
                    it.next()?;
                }
            }
            Open::Kv(s) => {
                let mut it = s.scan(b"", None)?;
                while it.valid() {
                    out.push((it.key().to_vec(), it.value().to_vec()));
                    it.next()?;
                }
            }
            Open::Fine(s) => out = s.scan(b"", None, usize::MAX),
        }
        Ok(out)
    }

    /// The cuts of the open's recovery report, one line each.
    pub fn cuts(&self) -> Vec<lidb_lsm::LogCut> {
        match self {
            Open::Lsm(d) => d.recovery_report().cuts().cloned().collect(),
            Open::Kv(s) => s.recovery_report().cuts().cloned().collect(),
            Open::Fine(s) => {
                let r = s.recovery_report();
                r.cut
                    .iter()
                    .map(|t| lidb_lsm::LogCut::of_tail(r.log.clone(), t))
                    .collect()
            }
        }
    }

    pub fn close(self) -> Result<(), Error> {
        match self {
            Open::Lsm(d) => d.close(),
            Open::Kv(s) => s.close(),
            Open::Fine(s) => (*s).close(),
        }
    }
}

pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Applies `ops` seeded writes (puts of 0..300-byte values, a fifth deletes) over 300 keys,
/// flushing every 120 and settling (compaction or GC) at the middle; returns the model after each
/// write (`models[i]` is the state after `i` writes) and the write count at the last flush.
pub fn workload(db: &Open, seed: u64, ops: usize) -> (Vec<Model>, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut models = vec![model.clone()];
    let mut flushed = 0;
    for i in 0..ops {
        let k = key(rng.gen_range(0..300));
        if rng.gen_bool(0.2) {
            db.delete(&k)
                .unwrap_or_else(|e| panic!("seed {seed}: delete: {e}"));
            model.remove(&k);
        } else {
            let len = rng.gen_range(0..300);
            let v: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
            db.put(&k, &v)
                .unwrap_or_else(|e| panic!("seed {seed}: put: {e}"));
            model.insert(k, v);
        }
        models.push(model.clone());
        if (i + 1) % 120 == 0 {
            db.flush()
                .unwrap_or_else(|e| panic!("seed {seed}: flush: {e}"));
            flushed = i + 1;
        }
        if i + 1 == ops / 2 {
            db.settle()
                .unwrap_or_else(|e| panic!("seed {seed}: settle: {e}"));
            flushed = i + 1;
        }
    }
    (models, flushed)
}

/// `n` more seeded writes with no flush, appending to `models`.
pub fn tail_writes(db: &Open, models: &mut Vec<Model>, seed: u64, n: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut model = models.last().cloned().unwrap_or_default();
    for _ in 0..n {
        let k = key(rng.gen_range(0..300));
        let v: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.r#gen()).collect();
        db.put(&k, &v)
            .unwrap_or_else(|e| panic!("seed {seed}: put: {e}"));
        model.insert(k, v);
        models.push(model.clone());
    }
}

/// Whether `e` is a Corruption error naming a file of the store.
pub fn is_corruption_in_store(e: &Error) -> bool {
    matches!(e, Error::Corruption { file, .. } if file.starts_with(root()))
}
