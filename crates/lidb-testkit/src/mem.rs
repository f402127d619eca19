//! Helpers over lidb-storage's in-memory storage for crash and damage tests: file snapshots and
//! restores ([`snapshot`], [`restore`]), the three kinds of media damage ([`damage`]), and
//! [`each_power_cut`], which runs a workload with the power cut at operation N for N spread over
//! the whole workload and hands each rebooted storage to a check.
//!
//! Called by the crash, repair and damage tests of lidb-kv (and any engine test over
//! `MemStorage`), from the test's thread. Nothing here knows an engine: the caller passes how to
//! open one on a storage. Invariants: a snapshot holds every file but `LOCK` files; a restored
//! storage has every file and its directory synced, so a crash right after `restore` loses
//! nothing.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::powercut::PowerCut;

/// Every file of a storage with its bytes.
pub type Files = BTreeMap<PathBuf, Vec<u8>>;

/// Every file of `s` with its bytes (`LOCK` files left out: a restored store takes its own).
pub fn snapshot(s: &MemStorage) -> Files {
    s.files()
        .into_iter()
        .filter(|p| !p.ends_with("LOCK"))
        .map(|p| {
            let b = s
                .read_all(&p)
                .unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            (p, b)
        })
        .collect()
}

/// A fresh storage holding `files`, all of them durable.
pub fn restore(files: &Files) -> MemStorage {
    let s = MemStorage::new();
    for (p, b) in files {
        if let Some(dir) = p.parent() {
            s.create_dir_all(dir)
                .unwrap_or_else(|e| panic!("mkdir: {e}"));
        }
        let mut f = s.create(p).unwrap_or_else(|e| panic!("create: {e}"));
        f.append(b).unwrap_or_else(|e| panic!("append: {e}"));
        f.sync().unwrap_or_else(|e| panic!("sync: {e}"));
    }
    for p in files.keys() {
        if let Some(dir) = p.parent() {
            s.sync_dir(dir).unwrap_or_else(|e| panic!("sync dir: {e}"));
        }
    }
    s
}

/// A kind of media damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// One bit flipped.
    Flip,
    /// 512 bytes zeroed (fewer where the file ends first).
    Zeros,
    /// The file cut at the offset.
    Truncate,
}

/// Damages `path` of `s` at `offset` (`bit` picks the bit a `Flip` flips). Panics when `path`
/// is missing or, for a flip, `offset` is past its end.
pub fn damage(s: &MemStorage, path: &Path, offset: u64, kind: Damage, bit: u8) {
    let bytes = s.read_all(path).unwrap_or_else(|e| panic!("read: {e}"));
    match kind {
        Damage::Flip => s
            .corrupt(path, offset, 1 << (bit % 8))
            .unwrap_or_else(|e| panic!("{e}")),
        Damage::Zeros => {
            for (i, &b) in bytes.iter().enumerate().skip(offset as usize).take(512) {
                if b != 0 {
                    s.corrupt(path, i as u64, b)
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
        Damage::Truncate => s.truncate(path, offset).unwrap_or_else(|e| panic!("{e}")),
    }
}

/// Runs `workload` once without a cut to count its storage operations, then about `cuts` times
/// with the power cut at operations spread over that count (and a crash at the end if the cut
/// never came). After each, opens the engine again on the rebooted storage and hands it, with
/// what the interrupted workload recorded in `R`, to `check` (whose last argument names the run:
/// the cut's operation and the seed that tore unsynced data).
///
/// `open` opens the engine on a storage (`PowerCut` for the workload, the rebooted `MemStorage`
/// for the check); a failed open during the cut run counts as the workload failing at once.
pub fn each_power_cut<T, R: Default, E: Display>(
    open: impl Fn(Arc<dyn Storage>) -> Result<T, E>,
    cuts: usize,
    workload: impl Fn(&T, &mut R) -> Result<(), E>,
    check: impl Fn(&T, &R, &str),
) {
    let total = {
        let p = PowerCut::new(MemStorage::new(), u64::MAX, 0);
        let engine = open(Arc::new(p.clone())).unwrap_or_else(|e| panic!("open: {e}"));
        workload(&engine, &mut R::default())
            .unwrap_or_else(|e| panic!("the workload without a cut: {e}"));
        drop(engine);
        p.ops()
    };
    let step = (total as usize / cuts.max(1)).max(1);
    for (i, cut_at) in (1..=total).step_by(step).enumerate() {
        let seed = i as u64;
        let mem = MemStorage::new();
        let p = PowerCut::new(mem.clone(), cut_at, seed);
        let mut recorded = R::default();
        if let Ok(engine) = open(Arc::new(p.clone())) {
            let _ = workload(&engine, &mut recorded);
            drop(engine);
        }
        if !p.is_cut() {
            mem.crash(seed);
        }
        let ctx = format!("power cut at operation {cut_at} of {total} (tear seed {seed})");
        let engine = open(Arc::new(mem)).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        check(&engine, &recorded, &ctx);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn file(s: &MemStorage, path: &str, bytes: &[u8]) {
        let path = Path::new(path);
        if let Some(dir) = path.parent() {
            s.create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut f = s.create(path).unwrap_or_else(|e| panic!("{e}"));
        f.append(bytes).unwrap_or_else(|e| panic!("{e}"));
        f.sync().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_restored_snapshot_survives_a_crash_and_leaves_out_locks() {
        let s = MemStorage::new();
        file(&s, "/db/a", b"alpha");
        file(&s, "/db/sub/b", b"beta");
        file(&s, "/db/LOCK", b"");
        let files = snapshot(&s);
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            [Path::new("/db/a"), Path::new("/db/sub/b")]
        );
        let restored = restore(&files);
        restored.crash(7);
        assert_eq!(snapshot(&restored), files);
    }

    #[test]
    fn each_damage_changes_the_file_as_named() {
        let s = MemStorage::new();
        let path = Path::new("/f");
        let read = |s: &MemStorage| s.read_all(path).unwrap_or_else(|e| panic!("{e}"));
        file(&s, "/f", &[0xff; 1000]);
        damage(&s, path, 3, Damage::Flip, 9);
        let flipped = read(&s);
        assert_eq!(flipped.get(3), Some(&(0xff ^ 0b10)));
        assert_eq!(flipped.iter().filter(|&&b| b != 0xff).count(), 1);
        damage(&s, path, 900, Damage::Zeros, 0);
        let zeroed = read(&s);
        assert!(zeroed.get(900..).is_some_and(|t| t.iter().all(|&b| b == 0)));
        assert_eq!(zeroed.get(899), Some(&0xff));
        damage(&s, path, 10, Damage::Truncate, 0);
        assert_eq!(read(&s).len(), 10);
    }

    /// A toy engine: appends numbered 8-byte records to `/d/log`, syncing each; what it
    /// acknowledged must survive every cut.
    #[test]
    fn every_cut_reopens_and_keeps_what_was_synced() {
        let checks = Cell::new(0);
        let log = Path::new("/d/log");
        each_power_cut(
            |s: Arc<dyn Storage>| -> Result<Arc<dyn Storage>, lidb_storage::Error> { Ok(s) },
            10,
            |s, acked: &mut u64| {
                s.create_dir_all(Path::new("/d"))?;
                let mut f = s.create(log)?;
                s.sync_dir(Path::new("/d"))?;
                for n in 0..20u64 {
                    f.append(&n.to_le_bytes())?;
                    f.sync()?;
                    *acked = n + 1;
                }
                Ok(())
            },
            |s, acked, ctx| {
                checks.set(checks.get() + 1);
                let bytes = if *acked == 0 {
                    Vec::new()
                } else {
                    s.read_all(log).unwrap_or_else(|e| panic!("{ctx}: {e}"))
                };
                assert!(
                    bytes.len() as u64 >= 8 * acked,
                    "{ctx}: {} bytes",
                    bytes.len()
                );
            },
        );
        assert!(checks.get() >= 10, "{} checks", checks.get());
    }
}
