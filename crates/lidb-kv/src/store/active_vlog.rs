//! The value log that takes writes, shared between the writers and the LSMs' flushes.
//!
//! Threads: writers append while holding the store's write mutex; a GC's switch replaces the log
//! under the same mutex. Syncs come from writers (`sync`), `Store::flush`, the switch, and the
//! LSMs' [`FlushHook`], which runs on whichever thread flushes a memtable: the LSM's background
//! thread, or a writer stalled inside `Db::put` while it holds the store's write mutex. So the
//! hook must not need the write mutex; it takes only this log's own mutex.
//!
//! Lock order: store write mutex -> this mutex; LSM flush lock -> this mutex. Nothing is locked,
//! and no LSM is called, while this mutex is held, so it is a leaf and the hook cannot deadlock.
//!
//! Invariants:
//! 1. Every record a memtable points to was appended before its pointer was put, so syncing at
//!    the hook makes every record a flushed table refers to durable.
//! 2. `replace` syncs the old log before the new one takes writes; a hook running after it finds
//!    the new log, and the old one's records are durable already.

use std::sync::{Arc, Mutex, MutexGuard};

use lidb_lsm::FlushHook;

use lidb_storage::Result;

use crate::Pointer;
use crate::vlog::VlogWriter;

#[derive(Debug, Clone)]
pub(crate) struct ActiveVlog(Arc<Mutex<VlogWriter>>);

impl ActiveVlog {
    pub fn new(writer: VlogWriter) -> ActiveVlog {
        ActiveVlog(Arc::new(Mutex::new(writer)))
    }

    fn lock(&self) -> MutexGuard<'_, VlogWriter> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn append(&self, key: &[u8], value: &[u8]) -> Result<Pointer> {
        self.lock().append(key, value)
    }

    /// `Closed` naming the cause once an append or sync of the current log failed (see
    /// `VlogWriter::check_usable`). Checked under this log's mutex, which a failing sync holds
    /// until the log is poisoned, so a write that starts after the failure always sees it.
    pub fn check_usable(&self) -> Result<()> {
        self.lock().check_usable()
    }

    /// Makes every appended record durable (nothing to do if nothing was appended since).
    pub fn sync(&self) -> Result<()> {
        self.lock().sync()
    }

    /// Syncs the current log and makes `next` take writes.
    pub fn replace(&self, next: VlogWriter) -> Result<()> {
        let mut w = self.lock();
        w.sync()?;
        *w = next;
        Ok(())
    }

    /// Bytes in the current log, header included.
    pub fn len(&self) -> u64 {
        self.lock().len()
    }

    /// The LSMs' hook: syncs whichever log is current when a memtable is flushed.
    pub fn flush_hook(&self) -> FlushHook {
        let me = self.clone();
        FlushHook::new(move || me.sync())
    }
}
