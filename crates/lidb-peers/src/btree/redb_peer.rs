//! `redb`: redb's B-tree as a [`PagedStore`] peer, capped to the pool size with
//! `Builder::set_cache_size` and reading through [`DirectBackend`] (`O_DIRECT`), so the OS page
//! cache holds no second copy and every cache miss is a device read the backend counts.
//!
//! One table `kv` of `u64 -> bytes` (redb orders u64 keys numerically). Each `get` is a read
//! transaction; each `put`/`delete` a write transaction committed with `Durability::None`, and
//! every [`DURABLE_EVERY`]th with `Durability::Immediate` (redb frees the pages of non-durable
//! commits only at a durable one; the paper's engines do not sync each write either). The bulk
//! load is one transaction, committed durably.
//!
//! `reopen_cold` drops the database (its cache) and opens the file again; with `O_DIRECT` no
//! page of it is then in memory. Used from one thread at a time (`&mut self` for writes).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use redb::{Builder, Database, Durability, ReadableDatabase, TableDefinition};

use lidb_bench::btree::{PagedStore, StoreError, StoreSetup};

use super::direct::{DirectBackend, IoCounters};

/// The peer's name in rows.
pub const NAME: &str = "redb";

/// Any redb error as a [`StoreError::Engine`].
fn err<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Engine {
        engine: NAME.to_string(),
        detail: e.to_string(),
    }
}

/// A fresh redb in `setup.dir` with a cache of the pool (lidb-bench's registration signature).
pub fn open(setup: &StoreSetup) -> Result<Box<dyn PagedStore>, StoreError> {
    Ok(Box::new(RedbStore::create(&setup.dir, setup.pool_bytes)?))
}

/// Every this many writes, one commits durably.
pub const DURABLE_EVERY: u64 = 1024;

const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("kv");

/// redb over an `O_DIRECT` file with a cache of `pool_bytes`.
#[derive(Debug)]
pub struct RedbStore {
    path: PathBuf,
    pool_bytes: u64,
    db: Option<Database>,
    counters: Arc<IoCounters>,
    direct: bool,
    writes: u64,
}

impl RedbStore {
    /// A new, empty database `DIR/redb.db` (an old file there is removed).
    pub fn create(dir: &Path, pool_bytes: u64) -> Result<RedbStore, StoreError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("redb.db");
        if path.exists() {
            std::fs::remove_file(&path)?;
        }
        let mut store = RedbStore {
            path,
            pool_bytes,
            db: None,
            counters: Arc::new(IoCounters::default()),
            direct: false,
            writes: 0,
        };
        store.open()?;
        Ok(store)
    }

    fn open(&mut self) -> Result<(), StoreError> {
        self.db = None;
        let backend = DirectBackend::open(&self.path, Arc::clone(&self.counters))?;
        self.direct = backend.is_direct();
        let cache = usize::try_from(self.pool_bytes).unwrap_or(usize::MAX);
        let db = Builder::new()
            .set_cache_size(cache)
            .create_with_backend(backend)
            .map_err(err)?;
        self.db = Some(db);
        Ok(())
    }

    fn db(&self) -> Result<&Database, StoreError> {
        self.db.as_ref().ok_or_else(|| StoreError::Engine {
            engine: NAME.to_string(),
            detail: "database is closed (a reopen failed)".to_string(),
        })
    }

    /// Runs `f` on the table in one write transaction and commits it.
    fn write<T>(
        &mut self,
        f: impl FnOnce(&mut redb::Table<'_, u64, &'static [u8]>) -> Result<T, redb::StorageError>,
    ) -> Result<T, StoreError> {
        self.writes += 1;
        let durability = if self.writes.is_multiple_of(DURABLE_EVERY) {
            Durability::Immediate
        } else {
            Durability::None
        };
        let mut txn = self.db()?.begin_write().map_err(err)?;
        txn.set_durability(durability).map_err(err)?;
        let out = {
            let mut table = txn.open_table(TABLE).map_err(err)?;
            f(&mut table).map_err(err)?
        };
        txn.commit().map_err(err)?;
        Ok(out)
    }
}

impl PagedStore for RedbStore {
    fn name(&self) -> &str {
        NAME
    }

    fn bulk_load(
        &mut self,
        records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        let txn = self.db()?.begin_write().map_err(err)?;
        {
            let mut table = txn.open_table(TABLE).map_err(err)?;
            for (key, value) in records {
                table.insert(key, value.as_slice()).map_err(err)?;
            }
        }
        txn.commit().map_err(err)?;
        Ok(())
    }

    fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError> {
        out.clear();
        let txn = self.db()?.begin_read().map_err(err)?;
        let table = txn.open_table(TABLE).map_err(err)?;
        match table.get(key).map_err(err)? {
            Some(value) => {
                out.extend_from_slice(value.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError> {
        self.write(|table| table.insert(key, value).map(|_| ()))
    }

    fn delete(&mut self, key: u64) -> Result<bool, StoreError> {
        self.write(|table| table.remove(key).map(|old| old.is_some()))
    }

    fn device_reads(&self) -> u64 {
        self.counters.reads.load(Ordering::Relaxed)
    }

    fn device_reads_source(&self) -> &'static str {
        if self.direct {
            "O_DIRECT preads counted by the storage backend"
        } else {
            "preads counted by the storage backend (buffered: may hit the OS page cache)"
        }
    }

    fn pool_bytes(&self) -> u64 {
        self.pool_bytes
    }

    fn reopen_cold(&mut self) -> Result<(), StoreError> {
        self.open()
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "redb 4.1: cache set_cache_size({} bytes); writes commit with Durability::None, \
             every {DURABLE_EVERY}th durably; a commit still writes its dirty pages through \
             O_DIRECT, so each write waits for the device",
            self.pool_bytes
        )];
        if !self.direct {
            notes.push(format!(
                "redb: O_DIRECT refused by the file system (EINVAL) for {}: reads are \
                 buffered, the OS page cache may hold a second copy and serve misses",
                self.path.display()
            ));
        }
        notes
    }
}
