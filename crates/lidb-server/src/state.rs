//! What every connection of one server shares: the engine, the write order lock, SCAN's cursor
//! map and the counters INFO shows.
//!
//! Threads: any; commands run on the engine pool's threads, several at once.
//!
//! Lock order: `write_order` before `cursors`; the engine's own locks are below both. Nothing
//! holds `cursors` across an engine call.
//!
//! Invariants:
//! 1. A command that reads and then writes (SETNX, GETSET, SET NX|XX|GET, DEL with its count) or
//!    writes several keys (MSET, FLUSHDB) holds `write_order` exclusively; GET, MGET, EXISTS and a
//!    plain SET hold it shared. So MSET is atomic to readers and SETNX's check and write are not
//!    split by another client's SET, as in Redis. Scans (SCAN, LIDB.RANGE, DBSIZE) take no lock:
//!    they see each key as some instant of the scan saw it.
//! 2. Cursor ids are never 0 (0 starts and ends a SCAN) and never reused; at most
//!    [`MAX_CURSORS`] are remembered, the oldest forgotten first; an unknown id restarts the scan.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use lidb_engines::Engine;

/// How many SCAN cursors the server remembers (Kvrocks keeps a similar bounded map).
pub const MAX_CURSORS: usize = 1 << 16;

/// Server-wide settings the commands need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Whether every write is synced before its reply (`--sync`); INFO and CONFIG GET say so.
    pub sync: bool,
    /// The most items one SCAN COUNT or LIDB.RANGE returns.
    pub max_range_items: u64,
    /// The address the server listens on, for INFO.
    pub listen: String,
}

/// Counters since start.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections_received: AtomicU64,
    pub connections_open: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub commands_processed: AtomicU64,
    /// Commands answered from memory on an async worker (`memory_reads.rs`).
    pub memory_reads: AtomicU64,
}

/// Resume keys of open SCAN cursors.
#[derive(Debug, Default)]
struct Cursors {
    last_id: u64,
    resume: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

pub struct Shared {
    pub engine: Box<dyn Engine>,
    pub settings: Settings,
    pub counters: Counters,
    pub started: Instant,
    write_order: RwLock<()>,
    cursors: Mutex<Cursors>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("engine", &self.engine.name())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub fn new(engine: Box<dyn Engine>, settings: Settings) -> Shared {
        Shared {
            engine,
            settings,
            counters: Counters::default(),
            started: Instant::now(),
            write_order: RwLock::new(()),
            cursors: Mutex::new(Cursors::default()),
        }
    }

    /// For single-key commands (invariant 1). A panic in another command poisons nothing we
    /// rely on: the lock guards no data.
    pub fn shared_order(&self) -> RwLockReadGuard<'_, ()> {
        self.write_order
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Shared::shared_order`] if it is free now; `None` while a command holds it exclusively
    /// (an async worker must not wait for it: the holder may be waiting on I/O).
    pub fn try_shared_order(&self) -> Option<RwLockReadGuard<'_, ()>> {
        match self.write_order.try_read() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// For read-then-write and multi-key writes (invariant 1).
    pub fn exclusive_order(&self) -> RwLockWriteGuard<'_, ()> {
        self.write_order
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The resume key of cursor `id`; `None` for 0 or an unknown id (the scan restarts).
    pub fn cursor_resume(&self, id: u64) -> Option<Vec<u8>> {
        let cursors = self.cursors.lock().unwrap_or_else(PoisonError::into_inner);
        cursors.resume.get(&id).cloned()
    }

    /// A new cursor id that resumes at `key`.
    pub fn new_cursor(&self, key: Vec<u8>) -> u64 {
        let mut c = self.cursors.lock().unwrap_or_else(PoisonError::into_inner);
        c.last_id += 1;
        let id = c.last_id;
        c.resume.insert(id, key);
        c.order.push_back(id);
        while c.order.len() > MAX_CURSORS {
            if let Some(old) = c.order.pop_front() {
                c.resume.remove(&old);
            }
        }
        id
    }

    pub fn count(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
