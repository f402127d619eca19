//! The store's file set for a repair: `KVSTATE` when it reads, else one rebuilt from the
//! directory listing (the old bytes copied to `lost/KVSTATE@0` first).
//!
//! Rebuilding (numbers only grow, so newer files have higher numbers):
//! - LSMs: the highest `lsm-NNNNNN` is the active one. For lsm+tier the tier is an LSM too; a
//!   GC creates its tier after its new active LSM, so with two or more directories the highest is
//!   taken as the tier and the next as the active LSM. Older directories are left in place, not
//!   named (a clean open sweeps them).
//! - Value logs: every `.vlog`, the highest first (the active one).
//! - Learned tier: the newest generation whose `.keys` and `.model` exist and whose svlog does.
//! - `next_number` past every numbered file; `live_bytes` 0 (open then takes the logs' sizes).

use std::path::Path;

use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::report::save_lost;

use crate::Result;
use crate::manifest::{KvState, read_state, state_path};
use crate::static_tier::{model_path, svlog_path};
use crate::store::TierKind;
use crate::store::gc::{engine_code, engine_name};

/// The number of `name` if it is `{prefix}{digits}{suffix}`.
pub(crate) fn numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The state to repair against, and why it was rebuilt (if it was).
pub(crate) fn load_or_rebuild(
    storage: &dyn Storage,
    dir: &Path,
    tier: &TierKind,
) -> Result<(KvState, Option<String>)> {
    let engine = engine_code(tier);
    let why = match read_state(storage, dir) {
        Ok(Some(s)) => {
            if let Some(found) = s.engine
                && found != engine
            {
                return Err(Error::InvalidOption(format!(
                    "{}: this store was written by {}; repair it as {}, not {}",
                    dir.display(),
                    engine_name(found),
                    engine_name(found),
                    engine_name(engine)
                )));
            }
            return Ok((s, None));
        }
        Ok(None) => "KVSTATE is missing".to_string(),
        Err(e) => {
            save_lost(storage, dir, &state_path(dir), 0)?;
            e.to_string()
        }
    };
    Ok((rebuild(storage, dir, tier)?, Some(why)))
}

fn rebuild(storage: &dyn Storage, dir: &Path, tier: &TierKind) -> Result<KvState> {
    let names = storage.list(dir)?;
    let all = |prefix: &str, suffix: &str| -> Vec<u64> {
        let mut v: Vec<u64> = names
            .iter()
            .filter_map(|n| numbered(n, prefix, suffix))
            .collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    };
    let mut lsms = all("lsm-", "");
    let vlogs = all("", ".vlog");
    let max_number = names
        .iter()
        .filter_map(|n| {
            let stem = n.split('.').next().unwrap_or(n);
            numbered(stem, "lsm-", "").or_else(|| numbered(stem, "", ""))
        })
        .max()
        .unwrap_or(0);
    let tier_gen = match tier {
        TierKind::Lsm if lsms.len() >= 2 => Some(lsms.remove(0)),
        TierKind::Learned { .. } => all("", ".keys")
            .into_iter()
            .find(|&g| storage.exists(&model_path(dir, g)) && storage.exists(&svlog_path(dir, g))),
        _ => None,
    };
    let svlogs = match tier {
        TierKind::Learned { .. } => tier_gen.into_iter().collect(),
        _ => Vec::new(),
    };
    Ok(KvState {
        lsm_dirs: lsms.into_iter().take(1).collect(),
        vlogs,
        tier: tier_gen,
        svlogs,
        next_number: max_number + 1,
        live_bytes: 0,
        engine: Some(engine_code(tier)),
    })
}
