//! The fine-wire server: a FINEdex index behind TCP (the FineStore paper, section 4, over TCP instead of
//! RDMA; docs/format/fine-wire.md).
//!
//! Threads: one accept thread; one thread per connection, which answers that connection's
//! frames in order; one reclaimer thread that syncs the barrier with the index's layout and
//! reclaims old regions every `reclaim_every`. A READ is answered by the connection thread with
//! copies of region words only (`Barrier::lookup`, an `ArcSwap` load, and atomic loads): no
//! index code and no lock, so its reply may be torn and the client validates it. Pipeline ops
//! (SEARCH..RANGE) run the index's level-bin operations (`FineIndex::at_bin`) under the
//! index's own locks. Deviation from the paper: there is no separate NIC; "one-sided" means the
//! server thread that answers a READ runs no index logic.
//!
//! In-process callers (the RESP face of `lidb serve --fine-listen`) use [`Server::get`],
//! [`Server::insert`], [`Server::remove`] and [`Server::range`] (`local.rs`), which write
//! through the same path as fine-wire writes.
//!
//! Invariants: every reply carries `Shared::version`, the last layout version the barrier
//! synced; a write whose retraining published a newer layout syncs the barrier before it
//! replies, so the reply that follows a retraining already announces it.

mod connection;
mod durable;
mod lease;
mod local;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lidb_fine::{Barrier, BarrierStats, FineIndex};

use durable::Durable;
use lease::Lease;

use crate::error::WireError;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The shard's key range, both ends inclusive.
    pub shard_lo: u64,
    pub shard_hi: u64,
    /// Clients silent this long stop counting for reclamation.
    pub client_timeout: Duration,
    /// How often the reclaimer thread runs.
    pub reclaim_every: Duration,
    /// Run model retraining on a server thread this often (for an index built with
    /// `model_retrain_after_nested: 0`, whose writers never retrain); `None`: none.
    pub retrain_every: Option<Duration>,
    /// The locks mode: that thread retrains under the exclusive remote layout lock, which
    /// clients of `Mode::Locks` hold shared around each operation.
    pub layout_locks: bool,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            shard_lo: 0,
            shard_hi: u64::MAX,
            client_timeout: Duration::from_secs(10),
            reclaim_every: Duration::from_millis(50),
            retrain_every: None,
            layout_locks: false,
        }
    }
}

/// Counters of a server.
#[derive(Debug, Default)]
pub struct ServerCounters {
    pub reads: AtomicU64,
    pub read_items: AtomicU64,
    pub pipeline_ops: AtomicU64,
    pub at_address: AtomicU64,
    pub by_key: AtomicU64,
    pub malformed: AtomicU64,
}

/// What the connection threads share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub index: Arc<FineIndex>,
    pub barrier: Barrier,
    pub cfg: ServerConfig,
    pub version: AtomicU64,
    /// Test hook: this many upcoming region copies are torn by a write in their middle.
    pub tear_reads: AtomicU64,
    /// Test hook: bin copies (READ_BIN) left to tear.
    pub tear_bins: AtomicU64,
    pub counters: ServerCounters,
    pub stop: AtomicBool,
    pub sync_lock: Mutex<()>,
    /// The store writes are logged to first (a durable server), if any.
    pub durable: Option<Durable>,
    /// The remote layout lock (locks mode).
    pub lease: Lease,
}

impl Shared {
    /// Syncs the barrier when the index published a newer layout.
    pub fn sync_if_newer(&self) {
        if self.index.layout_version() > self.version.load(Ordering::Acquire) {
            let _g = self
                .sync_lock
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let v = self.barrier.sync(&self.index).version;
            self.version.fetch_max(v, Ordering::AcqRel);
        }
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Serves `index` on `listen` (for example `127.0.0.1:0`), in memory only.
    pub fn start(
        index: Arc<FineIndex>,
        listen: &str,
        cfg: ServerConfig,
    ) -> Result<Server, WireError> {
        Server::start_with(index, None, listen, cfg)
    }

    /// Serves the FineStore in `dir` (created if absent): the index is rebuilt from it, and
    /// every write is logged there before it is applied and acknowledged (with `store.sync`,
    /// synced); `store` also says the recovery mode and the automatic checkpoint threshold.
    pub fn start_durable(
        dir: &std::path::Path,
        store: lidb_fine::FineStoreOptions,
        listen: &str,
        cfg: ServerConfig,
    ) -> Result<Server, WireError> {
        let (durable, index) = Durable::open(dir, store)?;
        Server::start_with(index, Some(durable), listen, cfg)
    }

    fn start_with(
        index: Arc<FineIndex>,
        durable: Option<Durable>,
        listen: &str,
        cfg: ServerConfig,
    ) -> Result<Server, WireError> {
        if cfg.shard_lo > cfg.shard_hi {
            return Err(WireError::ShardMap {
                detail: format!("empty range {}-{}", cfg.shard_lo, cfg.shard_hi),
            });
        }
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let barrier = Barrier::new(&index, cfg.client_timeout);
        let version = barrier.version();
        let shared = Arc::new(Shared {
            index,
            barrier,
            cfg,
            version: AtomicU64::new(version),
            tear_reads: AtomicU64::new(0),
            tear_bins: AtomicU64::new(0),
            counters: ServerCounters::default(),
            stop: AtomicBool::new(false),
            sync_lock: Mutex::new(()),
            durable,
            lease: Lease::default(),
        });
        let conns = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (shared, conns) = (Arc::clone(&shared), Arc::clone(&conns));
            std::thread::Builder::new()
                .name("fine-accept".into())
                .spawn(move || accept_loop(&listener, &shared, &conns))?
        };
        let reclaimer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("fine-reclaim".into())
                .spawn(move || reclaim_loop(&shared))?
        };
        let mut threads = vec![accept, reclaimer];
        if let Some(every) = shared.cfg.retrain_every {
            let shared = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name("fine-retrain".into())
                    .spawn(move || retrain_loop(&shared, every))?,
            );
        }
        Ok(Server {
            addr,
            shared,
            conns,
            threads,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn index(&self) -> &Arc<FineIndex> {
        &self.shared.index
    }

    pub fn counters(&self) -> &ServerCounters {
        &self.shared.counters
    }

    pub fn barrier_stats(&self) -> BarrierStats {
        self.shared.barrier.stats()
    }

    /// Retrains every model now (in locks mode under the exclusive layout lock) and announces
    /// the new layout version.
    pub fn retrain_now(&self) {
        let shared = &self.shared;
        if shared.cfg.layout_locks {
            shared.lease.exclusive(|| shared.index.retrain_models());
        } else {
            shared.index.retrain_models();
        }
        shared.sync_if_newer();
    }

    /// Test hook: tear the next `n` region copies (a write to the region halfway through each).
    pub fn tear_next_reads(&self, n: u64) {
        self.shared.tear_reads.store(n, Ordering::Release);
    }

    /// Test hook: tear the next `n` bin copies (READ_BIN): each takes and releases the bins'
    /// write section halfway through, so its version words differ.
    pub fn tear_next_bin_reads(&self, n: u64) {
        self.shared.tear_bins.store(n, Ordering::Release);
    }

    /// Stops accepting, closes every connection and joins the server's threads.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the accept thread.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        for c in self
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop_now();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, conns: &Mutex<Vec<TcpStream>>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        if let Ok(c) = stream.try_clone() {
            let mut conns = conns.lock().unwrap_or_else(PoisonError::into_inner);
            conns.push(c);
        }
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("fine-conn".into())
            .spawn(move || connection::serve(stream, &shared));
    }
}

fn retrain_loop(shared: &Shared, every: Duration) {
    while !shared.stop.load(Ordering::Acquire) {
        std::thread::sleep(every);
        if shared.cfg.layout_locks {
            shared
                .lease
                .exclusive(|| shared.index.retrain_models_if_wanted());
        } else {
            shared.index.retrain_models_if_wanted();
        }
        shared.sync_if_newer();
    }
}

fn reclaim_loop(shared: &Shared) {
    while !shared.stop.load(Ordering::Acquire) {
        std::thread::sleep(shared.cfg.reclaim_every);
        shared.sync_if_newer();
        shared.barrier.reclaim(Instant::now());
    }
}
