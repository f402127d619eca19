//! `KVSTATE`: which files form the tiered store (docs/format/kv-manifest.md, the only
//! specification; the constants below are on disk, DO NOT CHANGE).
//!
//! Callers: the store, from the one thread that changes its file set (writes are not
//! synchronised here). The file is replaced atomically (write `KVSTATE.tmp`, sync, rename, sync
//! the directory), so a crash at any instant leaves the old or the new state. `read_state` never
//! panics on any bytes.

use std::path::{Path, PathBuf};

use lidb_storage::Storage;
use lidb_storage::bytes::ByteReader;
use lidb_storage::error::corruption;

use crate::Result;

/// "LIDBKVST" read big-endian, stored little-endian.
pub const STATE_MAGIC: u64 = 0x4c49_4442_4b56_5354;
/// The format version this build writes (2: the list of retained svlogs). It also reads 1.
pub const STATE_FORMAT_VERSION: u32 = 2;
/// Name of the state file in the store's directory.
pub const STATE_FILE: &str = "KVSTATE";
/// Name of the next state while it is written.
pub const STATE_TMP_FILE: &str = "KVSTATE.tmp";
/// The largest count of LSM directories or value logs a reader believes.
pub const MAX_LIST_LEN: u32 = 1 << 20;

/// The store's file set and counters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KvState {
    /// LSM directories `lsm-{n:06}`, newest first.
    pub lsm_dirs: Vec<u64>,
    /// Live value logs `{n:06}.vlog`.
    pub vlogs: Vec<u64>,
    /// The static tier generation, if there is one.
    pub tier: Option<u64>,
    /// Static value logs `{n:06}.svlog` the tier reads: its own (GC-built) and, for a converted
    /// tier, older generations' whose key lists and models are gone.
    pub svlogs: Vec<u64>,
    /// The next file number to hand out.
    pub next_number: u64,
    /// Bytes of live data (input of the GC policy).
    pub live_bytes: u64,
    /// The engine that wrote the store (`ENGINE_*`); `None` in a version-1 file, which predates
    /// the field. A store is opened only by the engine that wrote it: their files differ in
    /// meaning (lsm+'s GC output log, lsm+tier's tier LSM).
    pub engine: Option<u8>,
}

/// `KvState::engine` of learnedkv.
pub const ENGINE_LEARNED: u8 = 0;
/// `KvState::engine` of lsm+tier (the tier is an LSM).
pub const ENGINE_LSM_TIER: u8 = 1;
/// `KvState::engine` of lsm+ (write-back GC, no tier).
pub const ENGINE_WRITE_BACK: u8 = 2;

/// `dir/KVSTATE`.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// The bytes of `s` (docs/format/kv-manifest.md).
pub fn encode_state(s: &KvState) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 8 * (s.lsm_dirs.len() + s.vlogs.len() + s.svlogs.len()));
    out.extend_from_slice(&STATE_MAGIC.to_le_bytes());
    out.extend_from_slice(&STATE_FORMAT_VERSION.to_le_bytes());
    for list in [&s.lsm_dirs, &s.vlogs] {
        out.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for n in list {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    match s.tier {
        Some(g) => {
            out.push(1);
            out.extend_from_slice(&g.to_le_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(s.svlogs.len() as u32).to_le_bytes());
    for n in &s.svlogs {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(&s.next_number.to_le_bytes());
    out.extend_from_slice(&s.live_bytes.to_le_bytes());
    out.push(s.engine.unwrap_or(ENGINE_LEARNED));
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a state file; the error says what is wrong.
pub fn decode_state(bytes: &[u8]) -> std::result::Result<KvState, String> {
    let split = bytes
        .len()
        .checked_sub(4)
        .ok_or_else(|| format!("{} bytes is too short for a state file", bytes.len()))?;
    let (body, crc) = bytes.split_at(split);
    let mut r = ByteReader::new(body);
    let magic = r.u64()?;
    if magic != STATE_MAGIC {
        return Err(format!("bad magic {magic:#018x}: not a KVSTATE file"));
    }
    let version = r.u32()?;
    if version != STATE_FORMAT_VERSION && version != 1 {
        return Err(format!(
            "format version {version} is not supported (this build reads {STATE_FORMAT_VERSION})"
        ));
    }
    let mut c = [0u8; 4];
    c.copy_from_slice(crc);
    if crc32c::crc32c(body) != u32::from_le_bytes(c) {
        return Err("checksum mismatch".into());
    }
    let lsm_dirs = read_list(&mut r, "LSM directory")?;
    let vlogs = read_list(&mut r, "value log")?;
    let tier = match r.u8()? {
        0 => None,
        1 => Some(r.u64()?),
        t => return Err(format!("tier flag {t} is neither 0 nor 1")),
    };
    // Version 1 tiers were all GC-built: the tier's own svlog is the only one.
    let svlogs = if version == 1 {
        tier.into_iter().collect()
    } else {
        read_list(&mut r, "svlog")?
    };
    let next_number = r.u64()?;
    let live_bytes = r.u64()?;
    let engine = if version == 1 {
        None
    } else {
        match r.u8()? {
            e @ (ENGINE_LEARNED | ENGINE_LSM_TIER | ENGINE_WRITE_BACK) => Some(e),
            e => return Err(format!("engine {e} is not 0, 1 or 2")),
        }
    };
    r.finish("state")?;
    Ok(KvState {
        lsm_dirs,
        vlogs,
        tier,
        svlogs,
        next_number,
        live_bytes,
        engine,
    })
}

/// A count (at most `MAX_LIST_LEN`, checked before allocating) then that many u64 numbers.
fn read_list(r: &mut ByteReader<'_>, name: &str) -> std::result::Result<Vec<u64>, String> {
    let n = r.u32()?;
    if n > MAX_LIST_LEN {
        return Err(format!(
            "{n} {name} numbers is above the limit {MAX_LIST_LEN}"
        ));
    }
    (0..n).map(|_| r.u64().map_err(String::from)).collect()
}

/// Replaces `dir/KVSTATE` with `s` atomically and durably.
pub fn write_state(storage: &dyn Storage, dir: &Path, s: &KvState) -> Result<()> {
    let tmp = dir.join(STATE_TMP_FILE);
    let mut f = storage.create(&tmp)?;
    f.append(&encode_state(s))?;
    f.sync()?;
    drop(f);
    storage.rename(&tmp, &state_path(dir))?;
    storage.sync_dir(dir)
}

/// The state in `dir/KVSTATE`, or `None` when there is none (a new store).
pub fn read_state(storage: &dyn Storage, dir: &Path) -> Result<Option<KvState>> {
    let path = state_path(dir);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let bytes = storage.read_all(&path)?;
    decode_state(&bytes)
        .map(Some)
        .map_err(|d| corruption(&path, d))
}
