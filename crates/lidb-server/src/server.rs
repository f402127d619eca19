//! The accept loop, the connection cap and the graceful stop.
//!
//! [`Server::bind`] binds the socket on the caller's thread (so the address, port 0 resolved, is
//! known before serving); [`Server::run`] then builds a tokio runtime and serves until the stop
//! future resolves: SIGINT or SIGTERM for `lidb serve` ([`Server::run_until_signal`]), a call for
//! tests ([`Server::spawn`]).
//!
//! Stop sequence: stop accepting, tell every connection (each finishes its running batch and
//! writes its replies), wait for them up to `drain_timeout`, then flush the engine (memtable to
//! tables, logs synced) on the calling thread, and return. A connection over `max_connections`
//! gets `-ERR max number of clients reached` and is closed, as Redis does.
//!
//! Protected mode (on by default, as in Redis): [`Server::bind`] refuses an address that is not
//! loopback unless a password is set, so a server is never open to the network by accident; the
//! metrics address (`metrics.rs`) is held to the same rule. TLS (`tls.rs`) does not change it: a
//! TLS listener, with client certificates or without, still needs the password off loopback.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lidb_engines::{Engine, EngineError};
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;

use crate::codec::Limits;
use crate::connection::{self, ConnectionContext};
use crate::pool::EnginePool;
use crate::session::Password;
use crate::state::{Settings, Shared};
use crate::tls::Tls;
use crate::workers::Workers;

/// How a server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: String,
    pub max_connections: usize,
    /// Close a connection that sends nothing for this long; `None`: never.
    pub idle_timeout: Option<Duration>,
    pub limits: Limits,
    /// The engine syncs every write (reported by INFO and CONFIG GET appendonly).
    pub sync: bool,
    /// The most items one SCAN or LIDB.RANGE reply holds.
    pub max_range_items: u64,
    /// How long a stop waits for connections to finish their running batches.
    pub drain_timeout: Duration,
    /// Tokio worker threads; 0: one per core.
    pub threads: usize,
    /// Answer the reads the engine can answer from memory on the async workers instead of the
    /// engine threads (`on_worker.rs`); off sends every read to the engine threads.
    pub memory_reads: bool,
    /// Write the pipelined SETs the engine takes with no wait on the async workers instead of
    /// the engine threads (`on_worker.rs`); off sends every write to the engine threads.
    pub worker_writes: bool,
    /// One single-threaded runtime per worker thread, each serving the connections dealt to it,
    /// instead of one work-stealing runtime (`workers.rs`).
    pub thread_per_core: bool,
    /// Clients must AUTH (or HELLO ... AUTH) with this password before any other command.
    pub requirepass: Option<Password>,
    /// Refuse to start on an address other than loopback without a password (Redis's protected
    /// mode, checked at start since the address is fixed).
    pub protected_mode: bool,
    /// Serve Prometheus metrics over HTTP on this address (`metrics.rs`); port 0 picks a free
    /// one. Protected mode applies to it as to `listen`.
    pub metrics_listen: Option<String>,
    /// Speak only TLS on `listen` (`tls.rs`); the metrics address stays plain HTTP.
    pub tls: Option<Tls>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: "127.0.0.1:6379".into(),
            max_connections: 1024,
            idle_timeout: None,
            limits: Limits::default(),
            sync: false,
            max_range_items: 10_000,
            drain_timeout: Duration::from_secs(10),
            threads: 0,
            memory_reads: true,
            worker_writes: true,
            thread_per_core: false,
            requirepass: None,
            protected_mode: true,
            metrics_listen: None,
            tls: None,
        }
    }
}

/// Why a server could not start or stop cleanly.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    Io {
        what: String,
        source: std::io::Error,
    },
    /// The final flush of the engine failed.
    Engine(EngineError),
    /// Protected mode: an address other than loopback and no password.
    Unprotected { listen: String },
    /// A TLS file (`tls.rs`) that was read but is not what it should be.
    TlsFile { file: PathBuf, detail: String },
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerError::Io { what, source } => write!(f, "{what}: {source}"),
            ServerError::Engine(e) => write!(f, "engine: {e}"),
            ServerError::Unprotected { listen } => write!(
                f,
                "refusing to serve {listen} without a password (protected mode): anyone who can \
                 reach it could read and change every key; give a password \
                 (--requirepass-file), listen on 127.0.0.1, or turn protected mode off \
                 (--protected-mode no)"
            ),
            ServerError::TlsFile { file, detail } => write!(f, "{}: {detail}", file.display()),
        }
    }
}

impl std::error::Error for ServerError {}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

/// A bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    metrics: Option<(std::net::TcpListener, SocketAddr)>,
    shared: Arc<Shared>,
    config: ServerConfig,
}

impl Server {
    pub fn bind(config: ServerConfig, engine: Box<dyn Engine>) -> Result<Server, ServerError> {
        refuse_unprotected(
            &config.listen,
            config.requirepass.is_some(),
            config.protected_mode,
        )?;
        if let Some(metrics) = &config.metrics_listen {
            refuse_unprotected(metrics, config.requirepass.is_some(), config.protected_mode)?;
        }
        let listener = std::net::TcpListener::bind(&config.listen)
            .map_err(io_error(format!("cannot listen on {}", config.listen)))?;
        let addr = listener.local_addr().map_err(io_error("local address"))?;
        listener
            .set_nonblocking(true)
            .map_err(io_error("non-blocking socket"))?;
        let metrics = match &config.metrics_listen {
            Some(at) => Some(bind_metrics(at)?),
            None => None,
        };
        let settings = Settings {
            sync: config.sync,
            max_range_items: config.max_range_items.max(1),
            listen: addr.to_string(),
            password: config.requirepass.clone(),
            metrics: metrics.is_some(),
        };
        Ok(Server {
            listener,
            addr,
            metrics,
            shared: Arc::new(Shared::new(engine, settings)),
            config,
        })
    }

    /// The bound address (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound metrics address, if `metrics_listen` was given.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(_, addr)| *addr)
    }

    /// The runtime of the accept loop: with `thread_per_core` it only accepts (the connections
    /// run on the workers' runtimes), so one thread does.
    fn runtime(&self) -> Result<tokio::runtime::Runtime, ServerError> {
        if self.config.thread_per_core {
            return tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(io_error("tokio runtime"));
        }
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if self.config.threads > 0 {
            b.worker_threads(self.config.threads);
        }
        b.enable_all().build().map_err(io_error("tokio runtime"))
    }

    /// Serves until SIGINT or SIGTERM; `ready` is called once the signal handlers are in place
    /// (`lidb serve` prints its address there, so a signal sent after that line is handled).
    pub fn run_until_signal(self, ready: impl FnOnce(SocketAddr)) -> Result<(), ServerError> {
        use tokio::signal::unix::{SignalKind, signal};
        let runtime = self.runtime()?;
        let (mut term, mut int) = runtime.block_on(async {
            Ok::<_, ServerError>((
                signal(SignalKind::terminate()).map_err(io_error("SIGTERM handler"))?,
                signal(SignalKind::interrupt()).map_err(io_error("SIGINT handler"))?,
            ))
        })?;
        ready(self.addr);
        self.serve_on(runtime, async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }

    /// Serves until `stop` resolves, then stops as the module says.
    pub fn run(self, stop: impl Future<Output = ()>) -> Result<(), ServerError> {
        let runtime = self.runtime()?;
        self.serve_on(runtime, stop)
    }

    /// Serves on a thread of its own; the handle stops it.
    pub fn spawn(self) -> ServerHandle {
        let addr = self.addr;
        let metrics_addr = self.metrics_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            self.run(async {
                let _ = rx.await;
            })
        });
        ServerHandle {
            addr,
            metrics_addr,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    fn serve_on(
        self,
        runtime: tokio::runtime::Runtime,
        stop: impl Future<Output = ()>,
    ) -> Result<(), ServerError> {
        let Server {
            listener,
            metrics,
            shared,
            config,
            ..
        } = self;
        let threads = match config.threads {
            0 => std::thread::available_parallelism().map_or(2, usize::from),
            n => n,
        };
        let pool = Arc::new(EnginePool::new(threads).map_err(io_error("engine threads"))?);
        let workers = if config.thread_per_core {
            Some(Workers::start(threads).map_err(io_error("worker threads"))?)
        } else {
            None
        };
        let handles = workers.as_ref().map(Workers::handles).unwrap_or_default();
        let scrapes = match metrics {
            Some((listener, _)) => {
                let _entered = runtime.enter();
                let listener =
                    TcpListener::from_std(listener).map_err(io_error("metrics listener"))?;
                Some(runtime.spawn(crate::metrics::serve(listener, Arc::clone(&shared))))
            }
            None => None,
        };
        runtime.block_on(accept_loop(
            listener,
            Arc::clone(&shared),
            Arc::clone(&pool),
            &handles,
            &config,
            stop,
        ))?;
        if let Some(scrapes) = scrapes {
            scrapes.abort();
        }
        drop(workers);
        runtime.shutdown_timeout(Duration::from_secs(1));
        shared.engine.flush().map_err(ServerError::Engine)
    }
}

fn bind_metrics(at: &str) -> Result<(std::net::TcpListener, SocketAddr), ServerError> {
    let listener = std::net::TcpListener::bind(at)
        .map_err(io_error(format!("cannot serve metrics on {at}")))?;
    let addr = listener.local_addr().map_err(io_error("metrics address"))?;
    listener
        .set_nonblocking(true)
        .map_err(io_error("non-blocking socket"))?;
    Ok((listener, addr))
}

/// Protected mode's rule, which [`Server::bind`] applies: an address other than loopback needs a
/// password unless protected mode is off. For a caller that would refuse before it opens an
/// engine.
pub fn refuse_unprotected(
    listen: &str,
    password: bool,
    protected_mode: bool,
) -> Result<(), ServerError> {
    if protected_mode && !password && !loopback_only(listen) {
        return Err(ServerError::Unprotected {
            listen: listen.to_string(),
        });
    }
    Ok(())
}

/// Whether every address `listen` names is a loopback one (`localhost` may name several).
fn loopback_only(listen: &str) -> bool {
    use std::net::ToSocketAddrs;
    match listen.to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        // Not an address: binding fails with its own message.
        Err(_) => true,
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    pool: Arc<EnginePool>,
    workers: &[Handle],
    config: &ServerConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let listener = TcpListener::from_std(listener).map_err(io_error("listener"))?;
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let (stopping, shutdown) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut next_id = 0u64;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors and the like: let connections close, then retry.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                shared.counters.connections_received.fetch_add(1, Ordering::Relaxed);
                let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                    shared.counters.connections_rejected.fetch_add(1, Ordering::Relaxed);
                    let tls = config.tls.clone();
                    let shutdown = shutdown.clone();
                    tasks.spawn(async move {
                        connection::refuse(stream, tls, shutdown).await;
                    });
                    continue;
                };
                next_id += 1;
                let ctx = ConnectionContext {
                    shared: Arc::clone(&shared),
                    pool: Arc::clone(&pool),
                    limits: config.limits,
                    idle_timeout: config.idle_timeout,
                    on_worker: crate::on_worker::Allowed {
                        reads: config.memory_reads,
                        writes: config.worker_writes,
                    },
                    shutdown: shutdown.clone(),
                    tls: config.tls.clone(),
                };
                let id = next_id;
                let Some(worker) = workers.get(id as usize % workers.len().max(1)) else {
                    tasks.spawn(async move {
                        // Dropped when the task ends, also by a panic: the count and the permit
                        // come back either way.
                        let _open = OpenConnection::new(Arc::clone(&ctx.shared), permit);
                        connection::serve_tcp(stream, id, ctx).await;
                    });
                    continue;
                };
                // The socket moves to the worker's reactor: leave this one's first.
                let Ok(stream) = stream.into_std() else { continue };
                tasks.spawn_on(async move {
                    let _open = OpenConnection::new(Arc::clone(&ctx.shared), permit);
                    if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                        connection::serve_tcp(stream, id, ctx).await;
                    }
                }, worker);
            }
        }
    }
    drop(listener);
    let _ = stopping.send(true);
    let drained = tokio::time::timeout(config.drain_timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
    }
    Ok(())
}

/// One open connection: counted in INFO and holding a permit of the connection cap while alive.
struct OpenConnection {
    shared: Arc<Shared>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl OpenConnection {
    fn new(shared: Arc<Shared>, permit: tokio::sync::OwnedSemaphorePermit) -> OpenConnection {
        shared
            .counters
            .connections_open
            .fetch_add(1, Ordering::Relaxed);
        OpenConnection {
            shared,
            _permit: permit,
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.shared
            .counters
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A server running on its own thread ([`Server::spawn`]).
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServerError>>>,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The metrics address, if the server serves metrics.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Stops the server as a signal would and waits for it.
    pub fn stop(mut self) -> Result<(), ServerError> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<(), ServerError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ServerError::Io {
                what: "server thread".into(),
                source: std::io::Error::other("panicked"),
            }),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop_now();
    }
}
