//! A test stand-in for the B+-tree under a [`crate::store::BTreeStore`]: an in-memory `BTreeMap`
//! whose checkpoint is a serialized snapshot written through the same `Storage` as the log, so
//! power cuts (`lidb_storage::powercut`) reach it too. It is not the engine: it exists to
//! test the durability layer before the tree implements [`CheckpointTarget`].
//!
//! Threads: any. The map is behind one `RwLock`; a checkpoint serializes it under the read lock,
//! so its snapshot is the map at one moment (contract 2 of [`CheckpointTarget`]).
//!
//! Snapshot file (test-only, not a stored format of the engine):
//! `[magic "BTMEMCK" 7][version u8 = 1][lsn u64][extra_len u32][extra][entries u64]
//! ([key_len u32][value_len u32][key][value])* [crc32c u32 of all before]`, written as
//! `{name}.tmp`, synced, renamed over `{name}`, directory synced.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use lidb_storage::Storage;

use crate::error::{Error, Result};
use crate::store::{CheckpointInfo, CheckpointTarget};
use crate::wal::lock;
use lidb_storage::bytes::ByteReader;

const MAGIC: &[u8; 7] = b"BTMEMCK";
const VERSION: u8 = 1;

/// The in-memory target: see the module documentation.
#[derive(Debug)]
pub struct MemTarget {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    info: Mutex<CheckpointInfo>,
    /// Checkpoints written by this handle (for tests of the checkpointer).
    checkpoints: Mutex<u64>,
}

impl MemTarget {
    /// Loads the snapshot at `path` (an empty map with LSN 0 when there is none).
    pub fn open(storage: Arc<dyn Storage>, path: &Path) -> Result<MemTarget> {
        let (map, info) = if storage.exists(path) {
            decode(&storage.read_all(path)?).map_err(|detail| Error::Corruption {
                file: path.to_path_buf(),
                detail,
            })?
        } else {
            (BTreeMap::new(), CheckpointInfo::default())
        };
        Ok(MemTarget {
            storage,
            path: path.to_path_buf(),
            map: RwLock::new(map),
            info: Mutex::new(info),
            checkpoints: Mutex::new(0),
        })
    }

    /// Checkpoints written through this handle.
    pub fn checkpoints_written(&self) -> u64 {
        *lock(&self.checkpoints)
    }

    /// A copy of the whole map.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl CheckpointTarget for MemTarget {
    fn apply_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn apply_delete(&self, key: &[u8]) -> Result<bool> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        Ok(map.remove(key).is_some())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        Ok(map.get(key).cloned())
    }

    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(map
            .range::<[u8], _>((Bound::Included(start), upper))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn checkpoint(&self, lsn: u64, extra: &[u8]) -> Result<()> {
        let bytes = {
            let map = self.map.read().unwrap_or_else(|e| e.into_inner());
            encode(&map, lsn, extra)
        };
        let tmp = self.path.with_extension("tmp");
        let mut f = self.storage.create(&tmp)?;
        f.append(&bytes)?;
        f.sync()?;
        drop(f);
        self.storage.rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            self.storage.sync_dir(dir)?;
        }
        *lock(&self.info) = CheckpointInfo {
            lsn,
            extra: extra.to_vec(),
        };
        *lock(&self.checkpoints) += 1;
        Ok(())
    }

    fn checkpoint_info(&self) -> CheckpointInfo {
        lock(&self.info).clone()
    }
}

fn encode(map: &BTreeMap<Vec<u8>, Vec<u8>>, lsn: u64, extra: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&(extra.len() as u32).to_le_bytes());
    out.extend_from_slice(extra);
    out.extend_from_slice(&(map.len() as u64).to_le_bytes());
    for (k, v) in map {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out.extend_from_slice(&crc32c::crc32c(&out).to_le_bytes());
    out
}

type Decoded = (BTreeMap<Vec<u8>, Vec<u8>>, CheckpointInfo);

fn decode(bytes: &[u8]) -> std::result::Result<Decoded, String> {
    let bad = || "the snapshot is truncated or malformed".to_string();
    let (body, crc) = bytes
        .split_at_checked(bytes.len().checked_sub(4).ok_or_else(bad)?)
        .ok_or_else(bad)?;
    let crc = u32::from_le_bytes(crc.try_into().map_err(|_| bad())?);
    if crc32c::crc32c(body) != crc {
        return Err("the snapshot fails its checksum".into());
    }
    let mut r = ByteReader::new(body);
    if r.take(7)? != MAGIC.as_slice() || r.take(1)? != [VERSION] {
        return Err("not a MemTarget snapshot of version 1".into());
    }
    let lsn = r.u64()?;
    let extra_len = r.u32()? as usize;
    let extra = r.take(extra_len)?.to_vec();
    let entries = r.u64()?;
    let mut map = BTreeMap::new();
    for _ in 0..entries {
        let (kl, vl) = (r.u32()? as usize, r.u32()? as usize);
        let k = r.take(kl)?.to_vec();
        map.insert(k, r.take(vl)?.to_vec());
    }
    if r.remaining() != 0 {
        return Err(bad());
    }
    Ok((map, CheckpointInfo { lsn, extra }))
}
