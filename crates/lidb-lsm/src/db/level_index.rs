//! Level models (`Granularity::Level`): one learned index over all tables of a level, which whole-
//! level merges keep sorted and disjoint. Positions are global to the level: table j holds
//! positions [starts[j], starts[j + 1]). A lookup's range may straddle two tables (two reads).
//!
//! File `{number:06}.lvl` (docs/format/level-index.md):
//! magic "LLVL" | version u16 = 1 | key map (keys.rs encoding, u32 length first) | table count u32 |
//! per table: number u64, entries u64 | index length u64 | index (lidb-index encoding) | crc32c u32
//! of everything before it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_index::{LearnedIndex, build, decode};

use crate::db::state::TableHandle;
use crate::keys::KeyMap;
use crate::options::IndexOptions;
use lidb_storage::Storage;
use lidb_storage::bytes::ByteReader;
use lidb_storage::error::{Result, corruption};

const MAGIC: [u8; 4] = *b"LLVL";
const VERSION: u16 = 1;

#[derive(Debug)]
pub(crate) struct LevelIndex {
    pub number: u64,
    pub keymap: KeyMap,
    pub index: Box<dyn LearnedIndex>,
    /// Table numbers in key order.
    pub tables: Vec<u64>,
    /// Cumulative entry counts: table j holds positions [starts[j], starts[j + 1]).
    pub starts: Vec<u64>,
}

impl LevelIndex {
    pub fn path(dir: &Path, number: u64) -> PathBuf {
        dir.join(format!("{number:06}.lvl"))
    }

    /// Trains a level model over `keys` (the whole level, sorted) stored in `tables` (key order).
    pub fn build(
        number: u64,
        keys: &[Vec<u8>],
        tables: &[Arc<TableHandle>],
        opts: &IndexOptions,
        level: usize,
    ) -> Result<LevelIndex> {
        let keymap = crate::db::compact::keymap_for(keys);
        let images: Vec<u64> = keys.iter().map(|k| keymap.image(k)).collect();
        let index = build(opts.family, &images, &opts.params_at(level))?;
        let mut starts = vec![0u64];
        for t in tables {
            starts.push(starts.last().copied().unwrap_or(0) + t.meta.entries);
        }
        Ok(LevelIndex {
            number,
            keymap,
            index,
            tables: tables.iter().map(|t| t.meta.number).collect(),
            starts,
        })
    }

    pub fn size_bytes(&self) -> u64 {
        self.index.size_bytes() + 16 * self.tables.len() as u64
    }

    /// The (table position in the level, local lo, local hi) pieces of the range for `key`.
    pub fn locate(&self, key: &[u8]) -> Vec<(usize, u64, u64)> {
        let b = self.index.search(self.keymap.image(key));
        let mut out = Vec::new();
        for (j, w) in self.starts.windows(2).enumerate() {
            if let [start, end] = *w {
                let lo = b.lo.max(start);
                let hi = b.hi.min(end);
                // An empty range (past the last key) reads nothing.
                if lo < hi {
                    out.push((j, lo - start, hi - start));
                }
            }
        }
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let km = self.keymap.encode();
        out.extend_from_slice(&(km.len() as u32).to_le_bytes());
        out.extend_from_slice(&km);
        out.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for (j, n) in self.tables.iter().enumerate() {
            let entries = self.starts.get(j + 1).copied().unwrap_or(0)
                - self.starts.get(j).copied().unwrap_or(0);
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&entries.to_le_bytes());
        }
        let idx = self.index.encode();
        out.extend_from_slice(&(idx.len() as u64).to_le_bytes());
        out.extend_from_slice(&idx);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn write(&self, storage: &dyn Storage, dir: &Path) -> Result<()> {
        let path = Self::path(dir, self.number);
        let mut f = storage.create(&path)?;
        f.append(&self.encode())?;
        f.sync()
    }

    pub fn load(storage: &dyn Storage, dir: &Path, number: u64) -> Result<LevelIndex> {
        let path = Self::path(dir, number);
        let bytes = storage.read_all(&path)?;
        Self::decode(&bytes, number).map_err(|d| corruption(&path, d))
    }

    pub(crate) fn decode(bytes: &[u8], number: u64) -> std::result::Result<LevelIndex, String> {
        let (body, crc) = bytes
            .len()
            .checked_sub(4)
            .map(|n| bytes.split_at(n))
            .ok_or("shorter than a checksum")?;
        let stored = u32::from_le_bytes(crc.try_into().map_err(|_| "bad checksum field")?);
        if crc32c::crc32c(body) != stored {
            return Err("checksum mismatch".into());
        }
        let mut r = ByteReader::new(body);
        if r.take(4)? != MAGIC {
            return Err("bad magic".into());
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(format!("unsupported level index version {version}"));
        }
        let km_len = r.u32()? as usize;
        let keymap = KeyMap::decode(r.take(km_len)?).map_err(|e| format!("key map: {e}"))?;
        let count = r.u32()? as usize;
        let mut tables = Vec::new();
        let mut starts = vec![0u64];
        for _ in 0..count {
            tables.push(r.u64()?);
            let entries = r.u64()?;
            let next = starts.last().copied().unwrap_or(0).checked_add(entries);
            starts.push(next.ok_or("entry counts overflow")?);
        }
        let idx_len = usize::try_from(r.u64()?).map_err(|e| e.to_string())?;
        let index = decode(r.take(idx_len)?).map_err(|e| e.to_string())?;
        if r.remaining() != 0 {
            return Err("trailing bytes".into());
        }
        if index.key_count() != starts.last().copied().unwrap_or(0) {
            return Err("index key count differs from the tables' entries".into());
        }
        Ok(LevelIndex {
            number,
            keymap,
            index,
            tables,
            starts,
        })
    }
}
