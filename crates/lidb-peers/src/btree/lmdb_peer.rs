//! `lmdb`: LMDB (through heed) as a [`PagedStore`] peer and the OS-page-cache reference: LMDB
//! has no pool of its own, it maps its file and lets the kernel cache pages.
//!
//! Memory cap: the issue asks for a memory cgroup of the pool's size around the run. From the
//! end of the bulk load to drop the process runs inside a [`MemoryCap`] of the pool plus
//! [`CAP_SLACK`] (the harness's own allocations while LMDB runs, such as the latencies of the
//! timed operations, are charged there too), so the kernel keeps LMDB's page cache within the
//! pool the other engines get. The bulk load runs uncapped because LMDB holds a write
//! transaction's dirty pages in heap memory until it commits (one transaction of all records
//! would exceed any pool smaller than the data); after it commits and syncs, the file is dropped
//! from the page cache (pages cached during the load would otherwise stay charged outside the
//! cap) and the cap is applied. Where no writable memory cgroup exists, LMDB runs uncapped and
//! the notes say why.
//!
//! Device reads: LMDB does not count them, so they are estimated from the process's
//! `/proc/self/io` `read_bytes` (bytes this process caused to be read from storage, page faults
//! of the map included) divided by [`PAGE_BYTES`], labelled as such. The harness is
//! single-threaded, so other engines' reads do not mix in while LMDB runs.
//!
//! Environment: `NO_SYNC` (writes are not synced per commit, as the paper's engines and the redb
//! peer) and `NO_READ_AHEAD` (random lookups: read-ahead would read pages nobody asked for).
//! Keys are stored big-endian so LMDB's byte order is the u64 order.
//!
//! `reopen_cold` closes the environment, drops `data.mdb` from the OS page cache with
//! `posix_fadvise(DONTNEED)` and opens it again.

use std::path::{Path, PathBuf};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, PutFlags};

use lidb_bench::btree::memcap::MemoryCap;
use lidb_bench::btree::oscache::drop_os_cache;
use lidb_bench::btree::{PagedStore, StoreError, StoreSetup};

/// The peer's name in rows.
pub const NAME: &str = "lmdb";

/// A fresh LMDB environment in `setup.dir` (lidb-bench's registration signature): its map has
/// room for the records three times over (B-tree pages half full after splits, and the inserts
/// of `writes`), at least 64 MiB.
pub fn open(setup: &StoreSetup) -> Result<Box<dyn PagedStore>, StoreError> {
    let map = (setup.data_bytes.saturating_mul(3)).max(64 << 20);
    Ok(Box::new(LmdbStore::create(
        &setup.dir,
        setup.pool_bytes,
        map,
    )?))
}

/// Any heed/LMDB error as a [`StoreError::Engine`].
fn err<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Engine {
        engine: NAME.to_string(),
        detail: e.to_string(),
    }
}

/// The page size `read_bytes` is divided by.
pub const PAGE_BYTES: u64 = 4096;

type Table = Database<'static, Bytes, Bytes>;

/// LMDB in `DIR/lmdb/` with a map of `map_bytes`.
#[derive(Debug)]
pub struct LmdbStore {
    dir: PathBuf,
    pool_bytes: u64,
    map_bytes: u64,
    env: Option<(Env, Table)>,
    reads_at_open: u64,
    /// The cap the process runs under from the end of the bulk load, or why there is none;
    /// `None` before the bulk load.
    cap: Option<Result<MemoryCap, String>>,
}

/// Bytes of the cap above the pool: the harness's own allocations while LMDB runs.
pub const CAP_SLACK: u64 = 32 << 20;

/// Bytes this process has read from storage so far (`read_bytes` of `/proc/self/io`); 0 where
/// the file is missing.
pub fn proc_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("read_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

impl LmdbStore {
    /// A new, empty environment in `DIR/lmdb/` (an old one there is removed).
    pub fn create(dir: &Path, pool_bytes: u64, map_bytes: u64) -> Result<LmdbStore, StoreError> {
        let dir = dir.join("lmdb");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let mut store = LmdbStore {
            dir,
            pool_bytes,
            map_bytes: map_bytes.next_multiple_of(PAGE_BYTES),
            env: None,
            reads_at_open: proc_read_bytes(),
            cap: None,
        };
        store.open()?;
        Ok(store)
    }

    #[expect(
        unsafe_code,
        reason = "heed's open and flags are unsafe because LMDB maps the file: the harness opens \
                  each environment once, from one process, and never truncates the file"
    )]
    fn open(&mut self) -> Result<(), StoreError> {
        let map = usize::try_from(self.map_bytes).unwrap_or(usize::MAX);
        let mut options = EnvOpenOptions::new();
        options.map_size(map).max_dbs(1);
        // SAFETY: see the reason above; NO_SYNC and NO_READ_AHEAD only change durability and
        // read-ahead.
        let env = unsafe {
            options.flags(EnvFlags::NO_SYNC | EnvFlags::NO_READ_AHEAD);
            options.open(&self.dir)
        }
        .map_err(err)?;
        let wtxn = env.write_txn().map_err(err)?;
        let table: Table = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener
                    .create_database::<Bytes, Bytes>(wtxn, None)
                    .map(CommitOrAbort::<_, ()>::Commit)
            })
            .map_err(err)?
            .unwrap_commit();
        self.env = Some((env, table));
        Ok(())
    }

    fn env(&self) -> Result<&(Env, Table), StoreError> {
        self.env.as_ref().ok_or_else(|| StoreError::Engine {
            engine: NAME.to_string(),
            detail: "environment is closed (a reopen failed)".to_string(),
        })
    }

    fn drop_page_cache(&self) -> Result<(), StoreError> {
        drop_os_cache(&self.dir.join("data.mdb"))
    }
}

impl PagedStore for LmdbStore {
    fn name(&self) -> &str {
        NAME
    }

    fn bulk_load(
        &mut self,
        records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        let (env, table) = self.env()?;
        let mut wtxn = env.write_txn().map_err(err)?;
        for (key, value) in records {
            table
                .put_with_flags(&mut wtxn, PutFlags::APPEND, &key.to_be_bytes(), &value)
                .map_err(err)?;
        }
        wtxn.commit().map_err(err)?;
        env.force_sync().map_err(err)?;
        self.drop_page_cache()?;
        if self.cap.is_none() {
            self.cap = Some(MemoryCap::apply(
                self.pool_bytes.saturating_add(CAP_SLACK),
                NAME,
            ));
        }
        Ok(())
    }

    fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError> {
        out.clear();
        let (env, table) = self.env()?;
        let rtxn = env.read_txn().map_err(err)?;
        match table.get(&rtxn, &key.to_be_bytes()).map_err(err)? {
            Some(value) => {
                out.extend_from_slice(value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError> {
        let (env, table) = self.env()?;
        let mut wtxn = env.write_txn().map_err(err)?;
        table
            .put(&mut wtxn, &key.to_be_bytes(), value)
            .map_err(err)?;
        wtxn.commit().map_err(err)
    }

    fn delete(&mut self, key: u64) -> Result<bool, StoreError> {
        let (env, table) = self.env()?;
        let mut wtxn = env.write_txn().map_err(err)?;
        let was = table.delete(&mut wtxn, &key.to_be_bytes()).map_err(err)?;
        wtxn.commit().map_err(err)?;
        Ok(was)
    }

    fn device_reads(&self) -> u64 {
        proc_read_bytes().saturating_sub(self.reads_at_open) / PAGE_BYTES
    }

    fn device_reads_source(&self) -> &'static str {
        "estimated: /proc/self/io read_bytes / 4096"
    }

    fn pool_bytes(&self) -> u64 {
        self.pool_bytes
    }

    fn reopen_cold(&mut self) -> Result<(), StoreError> {
        if let Some((env, _)) = self.env.take() {
            env.prepare_for_closing().wait();
        }
        self.drop_page_cache()?;
        self.open()
    }

    fn notes(&self) -> Vec<String> {
        let cap = match &self.cap {
            None => "lmdb: no memory cap yet (it is applied at the end of the bulk load)".into(),
            Some(Ok(cap)) => format!(
                "lmdb: memory-capped from the end of the bulk load: the process ran in {} (the \
                 pool + {} MiB for the harness's own allocations)",
                cap.describe(),
                CAP_SLACK >> 20,
            ),
            Some(Err(why)) => format!(
                "lmdb: NOT memory-capped: {why}; it may use all free memory as OS page cache"
            ),
        };
        vec![
            cap,
            format!(
                "lmdb: map {} bytes, NO_SYNC, NO_READ_AHEAD; device reads estimated from \
                 /proc/self/io read_bytes / {PAGE_BYTES}",
                self.map_bytes
            ),
        ]
    }
}
