//! `lidb serve`: one engine over the Redis protocol (RESP2, RESP3 and inline commands) on a TCP socket,
//! for redis-cli, redis-benchmark, redis-py, Jedis and YCSB. The server itself is lidb-server;
//! this file turns options into its configuration, prints the bound address as the first line of
//! stdout, and serves until SIGINT or SIGTERM (then flushes the engine and exits 0).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lidb_engines::EngineKind;
use lidb_server::{Limits, Server, ServerConfig};

use crate::engine_args::{CommandUse, EngineArgs, open_error};
use crate::error::{CliError, io};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Database directory (created if missing).
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
    /// Address to listen on. Port 0 binds a free port; the first line of stdout is always
    /// `listening on ADDRESS` with the port bound. An address other than loopback needs a
    /// password (--requirepass-file) unless --protected-mode is no.
    #[arg(long, default_value = "127.0.0.1:6379")]
    listen: String,
    /// The most clients connected at once; one more gets "-ERR max number of clients reached"
    /// and is closed.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Close a connection that sends nothing for this many seconds; 0 = never.
    #[arg(long, default_value_t = 0)]
    idle_timeout: u64,
    /// The largest bulk string (key, value or argument) a request may carry (e.g. 16MiB); a
    /// request with a larger one gets "-ERR Protocol error: invalid bulk length" and the
    /// connection is closed.
    #[arg(long, default_value = "16MiB", value_parser = lidb_storage::size::parse_size)]
    max_bulk: u64,
    /// The most arguments in one request (MSET, MGET, DEL with many keys).
    #[arg(long, default_value_t = 1 << 20)]
    max_args: u64,
    /// The most bytes of bulk strings one request may carry in all.
    #[arg(long, default_value = "64MiB", value_parser = lidb_storage::size::parse_size)]
    max_request: u64,
    /// The longest inline command line (what nc and telnet send).
    #[arg(long, default_value = "64KiB", value_parser = lidb_storage::size::parse_size)]
    max_inline: u64,
    /// The most items one SCAN (COUNT) or LIDB.RANGE reply holds; a larger LIMIT is cut to it
    /// and the reply's cursor or next key says where to continue.
    #[arg(long, default_value_t = 10_000)]
    max_range_items: u64,
    /// Seconds a stop waits for connections to finish the requests they are running.
    #[arg(long, default_value_t = 10)]
    drain_timeout: u64,
    /// Async worker threads, and as many engine threads (which run the batches of engine calls off the async workers); 0 = one per core.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Send every request to the engine threads, also the GET, MGET and EXISTS the engine could
    /// answer from memory (by default those are answered on the async workers, without the
    /// hand-off; engines with no memory-only read tier send them to the engine threads anyway).
    #[arg(long)]
    no_memory_reads: bool,
    /// Send every write to the engine threads, also the pipelined SETs the engine could take
    /// without waiting (by default lsm, with no --sync, writes those on the async workers when no
    /// other write runs and its memtable has room; other engines send them to the engine threads
    /// anyway).
    #[arg(long)]
    no_worker_writes: bool,
    /// Serve with one single-threaded async runtime per worker thread (--threads of them), each
    /// owning the connections dealt to it, instead of one work-stealing runtime.
    #[arg(long)]
    thread_per_core: bool,
    /// finedex only: serve one shard over RESP and fine-wire at once, fine-wire on this address
    /// (port 0: a free one; stdout's second line is `fine-wire listening on ADDRESS`). One index
    /// and one log serve both; keys and values are then u64 in decimal text (`SET 42 7`), and
    /// anything else is an error. The store in --db is fine-wire's (8-byte keys): not one
    /// written by `--engine finedex` without this option.
    #[arg(long)]
    fine_listen: Option<String>,
    /// With --fine-listen: the shard's key range LO-HI (u64, both inclusive); keys outside it
    /// are refused over both protocols. Default: every u64.
    #[arg(long)]
    shard: Option<String>,
    /// Clients must authenticate with this password (`AUTH password`, `AUTH default password`
    /// or `HELLO 3 AUTH default password`) before any other command; until then they get
    /// "-NOAUTH Authentication required.", and a wrong password "-WRONGPASS ..." after a short
    /// delay. The password shows in `ps`: prefer --requirepass-file.
    #[arg(long, conflicts_with = "requirepass_file")]
    requirepass: Option<String>,
    /// --requirepass, read from this file (its one trailing newline dropped).
    #[arg(long)]
    requirepass_file: Option<PathBuf>,
    /// Protected mode (yes or no): with yes, the default, a --listen address other than
    /// loopback (127.0.0.1, ::1) without a password is refused at start, as Redis refuses
    /// clients from the network in that case. No serves the network without a password.
    #[arg(long, default_value = "yes", value_parser = ["yes", "no"])]
    protected_mode: String,
    /// Serve Prometheus metrics (text format) at `GET /metrics` over HTTP on this address:
    /// commands and errors, connections, command latency as a histogram, the engine's memory by
    /// part and its background work. Port 0: a free one; stdout's line after `listening on`
    /// (and fine-wire's) is then `metrics listening on ADDRESS`. Protected mode applies to it.
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Speak TLS on --listen with this certificate chain (PEM: the server's certificate first,
    /// then any intermediates); needs --tls-key. The listener then speaks only TLS, and plain
    /// clients are refused at the handshake (Redis opens a separate tls-port beside the plain
    /// one; lidb serve has one listener, TLS or plain). Clients: `redis-cli --tls --cacert
    /// CA.pem`, redis-py `ssl=True, ssl_ca_certs="CA.pem"`. TLS does not change protected mode
    /// (an address other than loopback still needs a password) and --metrics-listen stays plain
    /// HTTP.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert's first certificate (PEM, unencrypted: `BEGIN PRIVATE
    /// KEY`, `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY`); needs --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Require a client certificate signed by one of the CA certificates in this PEM file, as
    /// Redis's `tls-auth-clients yes`: a client without one fails the handshake (redis-cli:
    /// `--cert FILE --key FILE`). Needs --tls-cert and --tls-key. A verified certificate is not
    /// a password: --requirepass and protected mode apply as without it.
    #[arg(long, value_name = "FILE")]
    tls_ca_cert: Option<PathBuf>,
}

/// The TLS files of --tls-cert, --tls-key and --tls-ca-cert: both of the first two or neither,
/// and the third only with them.
fn tls_files(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
) -> Result<Option<lidb_server::TlsFiles>, CliError> {
    match (cert, key, client_ca) {
        (Some(cert_chain), Some(private_key), client_ca) => Ok(Some(lidb_server::TlsFiles {
            cert_chain,
            private_key,
            client_ca,
        })),
        (None, None, None) => Ok(None),
        (None, None, Some(_)) => Err(CliError::Usage(
            "--tls-ca-cert needs --tls-cert and --tls-key (it verifies clients of a TLS listener)"
                .into(),
        )),
        (Some(_), None, _) => Err(CliError::Usage(
            "--tls-cert needs --tls-key (the private key of the certificate)".into(),
        )),
        (None, Some(_), _) => Err(CliError::Usage(
            "--tls-key needs --tls-cert (the certificate chain of the key)".into(),
        )),
    }
}

/// The password of --requirepass or --requirepass-file, if one was given.
fn password(args: &ServeArgs) -> Result<Option<lidb_server::Password>, CliError> {
    let bytes = match (&args.requirepass, &args.requirepass_file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => {
            let mut bytes = std::fs::read(path).map_err(io(path.display().to_string()))?;
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
                if bytes.last() == Some(&b'\r') {
                    bytes.pop();
                }
            }
            bytes
        }
        (None, None) => return Ok(None),
    };
    lidb_server::Password::new(bytes)
        .map(Some)
        .ok_or_else(|| CliError::Usage("--requirepass: the password is empty".into()))
}

pub fn run(args: ServeArgs, given: &[String]) -> Result<(), CliError> {
    args.engine.refuse_ignored(CommandUse::Serve, given)?;
    let kind = args.engine.engine;
    let cfg = args.engine.config(args.db.clone())?;
    let requirepass = password(&args)?;
    // Protected mode refuses before anything is created or opened.
    lidb_server::refuse_unprotected(
        &args.listen,
        requirepass.is_some(),
        args.protected_mode == "yes",
    )
    .map_err(|e| CliError::Serve(e.to_string()))?;
    if let Some(metrics) = &args.metrics_listen {
        lidb_server::refuse_unprotected(
            metrics,
            requirepass.is_some(),
            args.protected_mode == "yes",
        )
        .map_err(|e| CliError::Serve(e.to_string()))?;
    }
    // Bad TLS files are refused before anything is created or opened, too.
    let tls = match tls_files(
        args.tls_cert.clone(),
        args.tls_key.clone(),
        args.tls_ca_cert.clone(),
    )? {
        Some(files) => {
            Some(lidb_server::Tls::load(&files).map_err(|e| CliError::Serve(e.to_string()))?)
        }
        None => None,
    };
    if args.shard.is_some() && args.fine_listen.is_none() {
        return Err(CliError::Usage(
            "--shard needs --fine-listen (a shard map is fine-wire's)".into(),
        ));
    }
    if args.fine_listen.is_some() && kind != EngineKind::Finedex {
        return Err(CliError::Usage(format!(
            "--fine-listen serves a FINEdex shard: it needs --engine finedex, not {kind}"
        )));
    }
    std::fs::create_dir_all(&args.db).map_err(io(args.db.display().to_string()))?;
    let (engine, fine_addr) = match &args.fine_listen {
        Some(fine_listen) => {
            let (engine, addr) = open_shard(&args, fine_listen)?;
            (engine, Some(addr))
        }
        None => {
            let engine =
                lidb_engines::open_kind(kind, &cfg).map_err(|e| open_error(kind, &args.db, e))?;
            (engine, None)
        }
    };
    let config = ServerConfig {
        listen: args.listen,
        max_connections: args.max_connections,
        idle_timeout: (args.idle_timeout > 0).then(|| Duration::from_secs(args.idle_timeout)),
        limits: Limits {
            max_bulk_bytes: args.max_bulk,
            max_args: args.max_args,
            max_request_bytes: args.max_request,
            max_inline_bytes: args.max_inline,
        },
        sync: args.engine.sync,
        max_range_items: args.max_range_items,
        drain_timeout: Duration::from_secs(args.drain_timeout),
        threads: args.threads,
        memory_reads: !args.no_memory_reads,
        worker_writes: !args.no_worker_writes,
        thread_per_core: args.thread_per_core,
        requirepass,
        protected_mode: args.protected_mode == "yes",
        metrics_listen: args.metrics_listen,
        tls,
    };
    let server = Server::bind(config, engine).map_err(|e| CliError::Serve(e.to_string()))?;
    let metrics_addr = server.metrics_addr();
    let mut printed = Ok(());
    let served = server.run_until_signal(|addr| {
        let mut out = std::io::stdout().lock();
        printed = writeln!(out, "listening on {addr}")
            .and_then(|()| match fine_addr {
                Some(fine) => writeln!(out, "fine-wire listening on {fine}"),
                None => Ok(()),
            })
            .and_then(|()| match metrics_addr {
                Some(metrics) => writeln!(out, "metrics listening on {metrics}"),
                None => Ok(()),
            })
            .and_then(|()| out.flush());
    });
    printed.map_err(io("stdout"))?;
    served.map_err(|e| CliError::Serve(e.to_string()))
}

/// The fine-wire server of `--fine-listen` over the store in --db, and its RESP face (one
/// index, one log: `lidb_fine_net::resp_shard`).
fn open_shard(
    args: &ServeArgs,
    fine_listen: &str,
) -> Result<(Box<dyn lidb_engines::Engine>, std::net::SocketAddr), CliError> {
    let (lo, hi) = match &args.shard {
        Some(text) => crate::fine_cmd::parse_range("--shard", text)?,
        None => (0, u64::MAX),
    };
    let cfg = lidb_fine_net::ServerConfig {
        shard_lo: lo,
        shard_hi: hi,
        ..lidb_fine_net::ServerConfig::default()
    };
    let server = lidb_fine_net::Server::start_durable(
        &args.db,
        crate::fine_cmd::store_options(&args.engine),
        fine_listen,
        cfg,
    )
    .map_err(|e| {
        CliError::Serve(format!(
            "cannot serve the fine-wire shard of {} on {fine_listen}: {e}",
            args.db.display()
        ))
    })?;
    let addr = server.addr();
    let engine = lidb_fine_net::resp_shard::ShardEngine::new(server, Some(args.db.clone()));
    Ok((Box::new(engine), addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: &str) -> Option<PathBuf> {
        Some(PathBuf::from(name))
    }

    #[test]
    fn tls_cert_and_key_come_together() {
        let usage = |r: Result<Option<lidb_server::TlsFiles>, CliError>| match r {
            Err(CliError::Usage(msg)) => msg,
            other => panic!("want a usage error, got {other:?}"),
        };
        assert!(
            usage(tls_files(path("c.pem"), None, None)).starts_with("--tls-cert needs --tls-key")
        );
        assert!(
            usage(tls_files(None, path("k.pem"), None)).starts_with("--tls-key needs --tls-cert")
        );
        assert!(usage(tls_files(None, None, path("ca.pem"))).starts_with("--tls-ca-cert needs"));
        assert!(usage(tls_files(None, path("k.pem"), path("ca.pem"))).starts_with("--tls-key"));
        assert!(matches!(tls_files(None, None, None), Ok(None)));
        let Ok(Some(files)) = tls_files(path("c.pem"), path("k.pem"), path("ca.pem")) else {
            panic!("cert, key and CA are a TLS setup");
        };
        assert_eq!(files.cert_chain, PathBuf::from("c.pem"));
        assert_eq!(files.private_key, PathBuf::from("k.pem"));
        assert_eq!(files.client_ca, path("ca.pem"));
    }
}
