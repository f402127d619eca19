//! The store's state: which LSMs, value logs and tier serve it now. Readers clone the current
//! [`Tiers`] (an `Arc`) and work on it; GC installs a new one. Every file a retired `Tiers` still
//! names is deleted only when the last reader of that `Tiers` lets go (the handles' `Drop`), so a
//! read that started before an install never finds its files gone.
//!
//! A learned tier's static value logs have handles of their own ([`SvlogFile`]), apart from its
//! key list and model: a converted tier reads older generations' svlogs, so retiring a tier
//! deletes its key list and model, and each svlog goes only when no tier of the next view reads it
//! (the same handle is shared by every view that reads the file).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lidb_lsm::Db;
use lidb_storage::Storage;

use crate::membloom::MemBloom;
use crate::static_tier::StaticTier;
use crate::vlog::VlogReader;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Name of LSM directory `n` inside the store directory.
pub(crate) fn lsm_dir(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("lsm-{n:06}"))
}

/// An LSM mapping keys to value pointers (or to the empty tombstone), with the Bloom filter of
/// the keys written to it.
#[derive(Debug)]
pub(crate) struct LsmPart {
    pub number: u64,
    pub db: Option<Db>,
    pub bloom: Option<MemBloom>,
    pub dir: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub retired: AtomicBool,
}

impl LsmPart {
    pub fn db(&self) -> &Db {
        // `db` is taken only in `drop`.
        self.db
            .as_ref()
            .unwrap_or_else(|| unreachable!("LsmPart used after drop"))
    }
}

impl Drop for LsmPart {
    fn drop(&mut self) {
        let db = self.db.take();
        if self.retired.load(Ordering::SeqCst) {
            // Its files go next: syncing its WAL could only fail about a file no acknowledged
            // write depends on (the view that replaced it holds every write it held).
            if let Some(db) = db {
                db.discard();
            }
            remove_tree(&*self.storage, &self.dir);
        } else {
            drop(db);
        }
    }
}

/// Removes a directory's files and the directory's LOCK (the storage has no rmdir; an empty
/// directory left behind is harmless and ignored at open).
pub(crate) fn remove_tree(storage: &dyn Storage, dir: &Path) {
    if let Ok(names) = storage.list(dir) {
        for n in names {
            let _ = storage.remove(&dir.join(n));
        }
    }
}

/// A value log file that readers may still reach.
#[derive(Debug)]
pub(crate) struct VlogFile {
    pub number: u64,
    pub path: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub reader: Arc<VlogReader>,
    pub retired: AtomicBool,
}

impl Drop for VlogFile {
    fn drop(&mut self) {
        if self.retired.load(Ordering::SeqCst) {
            self.reader.forget(self.number);
            let _ = self.storage.remove(&self.path);
        }
    }
}

/// A static value log `{n:06}.svlog` that the tier of some view reads.
#[derive(Debug)]
pub(crate) struct SvlogFile {
    pub number: u64,
    pub path: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub retired: AtomicBool,
}

impl Drop for SvlogFile {
    fn drop(&mut self) {
        if self.retired.load(Ordering::SeqCst) {
            let _ = self.storage.remove(&self.path);
        }
    }
}

/// What serves settled data.
#[derive(Debug)]
pub(crate) enum Tier {
    Learned(Arc<StaticTier>),
    /// lsm+: an LSM over a key-sorted value log.
    Lsm(Arc<LsmPart>),
}

#[derive(Debug)]
pub(crate) struct TierHandle {
    pub tier: Tier,
    pub generation: u64,
    pub storage: Arc<dyn Storage>,
    pub retired: AtomicBool,
    /// The svlogs a learned tier reads (its file table's), empty for lsm+.
    pub svlogs: Vec<Arc<SvlogFile>>,
}

impl TierHandle {
    /// The handle of learned tier `tier` of directory `dir`. Its svlogs reuse the handles in
    /// `known` with the same number (so one file has one handle across views), new ones otherwise.
    pub fn learned(
        tier: Arc<StaticTier>,
        dir: &Path,
        storage: &Arc<dyn Storage>,
        known: &[Arc<SvlogFile>],
    ) -> Arc<TierHandle> {
        let svlogs = tier
            .svlog_numbers()
            .into_iter()
            .map(|n| match known.iter().find(|k| k.number == n) {
                Some(k) => Arc::clone(k),
                None => Arc::new(SvlogFile {
                    number: n,
                    path: crate::static_tier::svlog_path(dir, n),
                    storage: Arc::clone(storage),
                    retired: AtomicBool::new(false),
                }),
            })
            .collect();
        Arc::new(TierHandle {
            generation: tier.generation(),
            tier: Tier::Learned(tier),
            storage: Arc::clone(storage),
            retired: AtomicBool::new(false),
            svlogs,
        })
    }
}

impl Drop for TierHandle {
    fn drop(&mut self) {
        if self.retired.load(Ordering::SeqCst) {
            match &self.tier {
                // Its svlogs go through their own handles.
                Tier::Learned(t) => {
                    for f in t.index_files() {
                        let _ = self.storage.remove(&f);
                    }
                }
                Tier::Lsm(part) => part.retired.store(true, Ordering::SeqCst),
            }
        }
    }
}

/// One consistent view of the store. Lookups go: `active`, then `frozen` (during GC), then
/// `tier`; the first that knows the key decides.
#[derive(Debug, Clone)]
pub(crate) struct Tiers {
    pub active: Arc<LsmPart>,
    pub frozen: Option<Arc<LsmPart>>,
    pub tier: Option<Arc<TierHandle>>,
    /// Every value log a pointer of this view may name (including the tier's sorted log).
    pub vlogs: Vec<Arc<VlogFile>>,
}

impl Tiers {
    /// Marks everything of `self` that `next` no longer uses as retired: it is deleted when the
    /// last reader of `self` is done.
    pub fn retire_unused(&self, next: &Tiers) {
        let same = |a: &Arc<LsmPart>, b: &Arc<LsmPart>| Arc::ptr_eq(a, b);
        for part in [Some(&self.active), self.frozen.as_ref()]
            .into_iter()
            .flatten()
        {
            let kept =
                same(part, &next.active) || next.frozen.as_ref().is_some_and(|f| same(part, f));
            if !kept {
                part.retired.store(true, Ordering::SeqCst);
            }
        }
        if let Some(t) = &self.tier
            && !next.tier.as_ref().is_some_and(|n| Arc::ptr_eq(n, t))
        {
            t.retired.store(true, Ordering::SeqCst);
            for sv in &t.svlogs {
                let read_next = next
                    .tier
                    .as_ref()
                    .is_some_and(|n| n.svlogs.iter().any(|k| k.number == sv.number));
                if !read_next {
                    sv.retired.store(true, Ordering::SeqCst);
                }
            }
        }
        for v in &self.vlogs {
            if !next.vlogs.iter().any(|n| Arc::ptr_eq(n, v)) {
                v.retired.store(true, Ordering::SeqCst);
            }
        }
    }
}
