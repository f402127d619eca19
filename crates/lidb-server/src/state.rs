//! What every connection of one server shares: the engine, the key stripes that order commands
//! on the same keys (`stripes.rs`), SCAN's cursor map and the counters INFO shows.
//!
//! Threads: any; commands run on the engine pool's threads, several at once, and in-memory reads
//! on the async workers.
//!
//! Lock order: key stripes (ascending, see `stripes.rs`) before `cursors`; the engine's own locks
//! are below both. Nothing holds `cursors` across an engine call.
//!
//! Invariants:
//! 1. No lock is common to all commands. A command that reads and then writes one key holds
//!    that key's stripe exclusively, a plain SET holds it shared; a write of several keys (MSET, DEL, FLUSHDB) holds its
//!    keys' stripes as a publishing write; reads take no lock (see `stripes.rs`). So MSET is atomic
//!    to readers and SETNX's check and write are not split by another client's SET, as in
//!    Redis. Scans (SCAN, LIDB.RANGE, DBSIZE) take no lock: they see each key as some instant of
//!    the scan saw it.
//! 2. Cursor ids are never 0 (0 starts and ends a SCAN) and never reused; at most
//!    [`MAX_CURSORS`] are remembered, the oldest forgotten first; an unknown id restarts the scan.
//! 3. Counters bumped per command are [`Counter`]s: a command writes its own thread's shard only.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use lidb_engines::Engine;
use lidb_sync::Counter;

use crate::session::Password;
use crate::stripes::Stripes;

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
    /// `--requirepass`: connections must AUTH before any other command (`session.rs`).
    pub password: Option<Password>,
    /// Whether `--metrics-listen` serves metrics: only then are commands timed and counted
    /// per name (two clock reads a command that nobody would read otherwise).
    pub metrics: bool,
}

/// Counters since start.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections_received: AtomicU64,
    pub connections_open: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub commands_processed: Counter,
    /// Commands answered from memory on an async worker (`on_worker.rs`).
    pub memory_reads: Counter,
    /// SETs written on an async worker, with no wait (`on_worker.rs`).
    pub worker_writes: Counter,
    /// Wrong passwords given to AUTH or HELLO (Redis's `acl_access_denied_auth`).
    pub auth_failures: AtomicU64,
    /// Per-command counts, errors and latencies for `--metrics-listen` (`metrics.rs`).
    pub metrics: crate::metrics::CommandMetrics,
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
    pub stripes: Stripes,
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
            stripes: Stripes::default(),
            cursors: Mutex::new(Cursors::default()),
        }
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
