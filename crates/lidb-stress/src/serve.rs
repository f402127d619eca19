//! `lidb stress --serve`: the stress workload through `lidb serve` over the Redis protocol
//! (RESP2), the server SIGKILLed at random moments and restarted on the same directory, every
//! key read back through the protocol after each restart.
//!
//! Parts: a small blocking RESP2 client (`resp.rs`: [`Conn`], [`resp::read_reply`]);
//! [`ServeTarget`], the [`Target`] over a pool of connections; [`ServeHarness`], which starts,
//! kills and stops the server process; [`stress_serve`], one run.
//!
//! Threads: one [`ServeTarget`] is shared by every worker. A call takes a connection from the
//! pool (or opens one), so each worker has its own while it calls; the pool's mutex is held only
//! to take or give back. The harness belongs to the supervisor (the thread of `run::run`).
//!
//! Invariants:
//! - A connection goes back to the pool only after a whole reply was read: one whose call failed
//!   in transport (or timed out) is dropped, as its stream may hold part of a reply.
//! - Every socket has read and write timeouts (`resp::IO_TIMEOUT`): a dead or hung server fails
//!   a call within seconds, never hangs a worker.
//! - A call that fails after the harness began a kill is the kill's doing, not an error of the
//!   run: it is counted apart (`KillMarks`) and taken off the error counts at the end. The
//!   workload already treats such a write as maybe applied. A call that fails while no kill is
//!   under way (the server died or refused on its own) stays an error and fails the run.
//! - The harness never leaves a server running: `open` stops the previous one (SIGTERM, exit 0
//!   expected), `kill` SIGKILLs it, Drop kills whatever still runs.

pub mod resp;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::expected::Expected;
use crate::target::{Rows, Target};
use crate::{Config, Report, kill, run};

use resp::{Conn, Reply};

/// How long a starting server may take to print its address (it recovers the engine first).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a SIGTERMed server may take to finish its requests, flush and exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Calls that failed while the harness was killing the server.
#[derive(Debug, Default)]
struct KillMarks {
    /// Set just before a SIGKILL, cleared once the next server is up.
    killing: AtomicBool,
    reads: AtomicU64,
    writes: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
enum Side {
    Read,
    Write,
}

/// `lidb serve` as a [`Target`]: one connection per worker, taken from a pool.
#[derive(Debug)]
pub struct ServeTarget {
    addr: SocketAddr,
    pool: Mutex<Vec<Conn>>,
    marks: Arc<KillMarks>,
}

impl ServeTarget {
    /// One request on a pooled connection: the reply, or why there is none (an error reply
    /// included).
    fn call(&self, side: Side, args: &[&[u8]]) -> Result<Reply, String> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let result = pooled
            .map_or_else(|| Conn::connect(self.addr), Ok)
            .and_then(|mut conn| {
                let reply = conn.call(args)?;
                // A whole reply was read: the stream is in step, the connection reusable.
                self.pool
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(conn);
                Ok(reply)
            });
        let name = String::from_utf8_lossy(args.first().copied().unwrap_or_default());
        let failed = match result {
            Ok(Reply::Error(e)) => format!("{name}: server error: {e}"),
            Ok(reply) => return Ok(reply),
            Err(e) => format!("{name}: {e}"),
        };
        if self.marks.killing.load(Ordering::SeqCst) {
            let counter = match side {
                Side::Read => &self.marks.reads,
                Side::Write => &self.marks.writes,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        Err(failed)
    }
}

fn unexpected(what: &str, reply: &Reply) -> String {
    format!("{what}: unexpected reply {reply:?}")
}

impl Target for ServeTarget {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        match self.call(Side::Write, &[b"SET", key, value])? {
            Reply::Simple(ok) if ok == "OK" => Ok(()),
            other => Err(unexpected("SET", &other)),
        }
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self.call(Side::Read, &[b"GET", key])? {
            Reply::Bulk(v) => Ok(Some(v)),
            Reply::Nil => Ok(None),
            other => Err(unexpected("GET", &other)),
        }
    }
    fn delete(&self, key: &[u8]) -> Result<(), String> {
        match self.call(Side::Write, &[b"DEL", key])? {
            Reply::Integer(0 | 1) => Ok(()),
            other => Err(unexpected("DEL", &other)),
        }
    }
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<(), String> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(1 + 2 * entries.len());
        args.push(b"MSET");
        for (k, v) in entries {
            args.push(k);
            args.push(v);
        }
        match self.call(Side::Write, &args)? {
            Reply::Simple(ok) if ok == "OK" => Ok(()),
            other => Err(unexpected("MSET", &other)),
        }
    }
    /// `LIDB.RANGE [start (end LIMIT n WITHVALUES`: the bounds are a byte of kind then the key's
    /// bytes as they are, so binary keys pass. A reply cut at the server's cap
    /// (`--max-range-items`) is continued from its next key.
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Rows, String> {
        let mut rows: Rows = Vec::new();
        let mut from = [b"[", start].concat();
        let to = [b"(", end].concat();
        while rows.len() < limit {
            let want = (limit - rows.len()).to_string();
            let args: [&[u8]; 6] = [
                b"LIDB.RANGE",
                &from,
                &to,
                b"LIMIT",
                want.as_bytes(),
                b"WITHVALUES",
            ];
            let reply = self.call(Side::Read, &args)?;
            let Reply::Array(parts) = reply else {
                return Err(unexpected("LIDB.RANGE", &reply));
            };
            let [next, Reply::Array(items)] = <[Reply; 2]>::try_from(parts)
                .map_err(|parts| unexpected("LIDB.RANGE", &Reply::Array(parts)))?
            else {
                return Err("LIDB.RANGE: the second part of the reply is no array".into());
            };
            let before = rows.len();
            let mut items = items.into_iter();
            while let Some(k) = items.next() {
                match (k, items.next()) {
                    (Reply::Bulk(k), Some(Reply::Bulk(v))) => rows.push((k, v)),
                    (k, v) => return Err(format!("LIDB.RANGE: bad item {k:?} {v:?}")),
                }
            }
            match next {
                Reply::Nil => break,
                Reply::Bulk(_) if rows.len() == before => {
                    return Err("LIDB.RANGE: a next key but no items".into());
                }
                Reply::Bulk(k) => from = [b"[", k.as_slice()].concat(),
                other => return Err(unexpected("LIDB.RANGE next key", &other)),
            }
        }
        rows.truncate(limit);
        Ok(rows)
    }
    /// `lidb serve` has no command that forces a flush, compaction or checkpoint (its table:
    /// `lidb-server/src/commands.rs`; INFO only reports them), so this does nothing: the
    /// engine's own background work, under the small write buffer, is what runs.
    fn background(&self, _pick: u64) -> Result<&'static str, String> {
        Ok("none")
    }
}

/// A running server: the process and its stdout (kept open so a later line never meets a closed
/// pipe).
#[derive(Debug)]
struct Server {
    child: Child,
    _stdout: BufReader<ChildStdout>,
}

/// Starts, kills and stops `lidb serve` for [`run::run`].
#[derive(Debug)]
pub struct ServeHarness {
    lidb: PathBuf,
    engine: String,
    dir: PathBuf,
    /// Serve with `--sync` (`Config::sync`).
    sync: bool,
    server: Option<Server>,
    marks: Arc<KillMarks>,
}

impl ServeHarness {
    /// The engine in `cfg.db/engine`, served by the binary `lidb`.
    pub fn new(cfg: &Config, lidb: &Path) -> ServeHarness {
        ServeHarness {
            lidb: lidb.to_path_buf(),
            engine: cfg.engine.clone(),
            dir: cfg.db.join("engine"),
            sync: cfg.sync,
            server: None,
            marks: Arc::default(),
        }
    }

    /// `lidb serve` with [`Config::engine_config`]'s settings, as far as serve takes them.
    fn command(&self) -> Command {
        let mut c = Command::new(&self.lidb);
        c.args(["serve", "--engine", &self.engine, "--db"])
            .arg(&self.dir)
            .args(["--listen", "127.0.0.1:0"]);
        if self.sync {
            c.arg("--sync");
        }
        // serve refuses an option the engine would ignore: give each kind its own.
        match lidb_engines::EngineKind::parse(&self.engine).map(|k| k.shape()) {
            Ok(lidb_engines::Shape::Lsm) => {
                c.args(["--write-buffer", "256KiB", "--block-cache", "1MiB"]);
            }
            Ok(lidb_engines::Shape::Tree) => {
                c.args(["--pool", "1MiB", "--checkpoint-log-bytes", "512KiB"]);
            }
            Ok(lidb_engines::Shape::InMemory) => {
                c.args(["--checkpoint-log-bytes", "512KiB"]);
            }
            // rocksdb is not a stress engine; an unknown name is serve's to refuse.
            Ok(lidb_engines::Shape::Foreign) | Err(_) => {}
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        c
    }

    /// Starts a server and reads the address from its first line.
    fn start(&mut self) -> Result<SocketAddr, String> {
        let mut child = self
            .command()
            .spawn()
            .map_err(|e| format!("starting {} serve: {e}", self.lidb.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("lidb serve: no stdout".into());
        };
        // The first line is read on a thread so a server stuck in recovery cannot hang the run.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            let got = r.read_line(&mut line).map(|_| line);
            let _ = tx.send((got, r));
        });
        let first = rx.recv_timeout(START_TIMEOUT);
        let addr = match &first {
            Ok((Ok(line), _)) => line
                .trim()
                .strip_prefix("listening on ")
                .and_then(|a| a.parse::<SocketAddr>().ok())
                .ok_or_else(|| format!("lidb serve's first line is {line:?}, not its address")),
            Ok((Err(e), _)) => Err(format!("reading lidb serve's stdout: {e}")),
            Err(_) => Err(format!(
                "lidb serve printed no address within {} s",
                START_TIMEOUT.as_secs()
            )),
        };
        match (addr, first) {
            (Ok(addr), Ok((_, stdout))) => {
                self.server = Some(Server {
                    child,
                    _stdout: stdout,
                });
                Ok(addr)
            }
            (Err(e), _) => {
                let _ = child.kill();
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                Err(format!("{e} (the server ended: {status})"))
            }
            (Ok(_), Err(_)) => Err("unreachable: an address without a line".into()),
        }
    }

    /// Stops the running server cleanly (SIGTERM: it finishes its requests, flushes and exits
    /// 0), if there is one. Any other end is an error.
    pub fn stop(&mut self) -> Result<(), String> {
        let Some(mut s) = self.server.take() else {
            return Ok(());
        };
        let pid = s.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|e| format!("running kill -TERM {pid}: {e}"));
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            if let Err(e) = &sent {
                break Err(e.clone());
            }
            match s.child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    break Err(format!(
                        "lidb serve did not exit within {} s of SIGTERM",
                        STOP_TIMEOUT.as_secs()
                    ));
                }
                Err(e) => break Err(format!("waiting for lidb serve: {e}")),
            }
        };
        let _ = s.child.kill();
        let _ = s.child.wait();
        match status? {
            st if st.success() => Ok(()),
            st => Err(format!("lidb serve ended with {st} after SIGTERM, not 0")),
        }
    }
}

impl run::Harness for ServeHarness {
    fn open(&mut self) -> Result<(Arc<dyn Target>, String), String> {
        // A reopen with no kill (after write errors, or the run's last): a clean stop first.
        self.stop()?;
        let addr = self.start()?;
        self.marks.killing.store(false, Ordering::SeqCst);
        let target = ServeTarget {
            addr,
            pool: Mutex::new(Vec::new()),
            marks: Arc::clone(&self.marks),
        };
        match target.call(Side::Read, &[b"PING"])? {
            Reply::Simple(pong) if pong == "PONG" => {}
            other => return Err(unexpected("PING", &other)),
        }
        Ok((Arc::new(target), String::new()))
    }
    fn can_kill(&self) -> bool {
        true
    }
    fn kill(&mut self) {
        self.marks.killing.store(true, Ordering::SeqCst);
        if let Some(mut s) = self.server.take() {
            // SIGKILL: no drain, no flush.
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

impl Drop for ServeHarness {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

/// Runs `cfg` against `lidb serve` (the binary `lidb`), one worker per connection
/// (`connections`), the server SIGKILLed at a random moment of each `kill_every`. The directory
/// `cfg.db` must be empty or absent. Calls that failed because a kill cut them are not errors of
/// the run (they are reported on stderr); the server is stopped cleanly at the end, and a stop
/// that does not exit 0 fails the run.
pub fn stress_serve(
    cfg: &Config,
    lidb: &Path,
    kill_every: Option<Duration>,
    connections: usize,
) -> Result<Report, String> {
    kill::prepare_dir(&cfg.db)?;
    let cfg = Config {
        threads: connections,
        ..cfg.clone()
    };
    let expected = Arc::new(Expected::new(cfg.keys));
    let mut harness = ServeHarness::new(&cfg, lidb);
    let mut report = run::run(&cfg, &mut harness, expected, Vec::new(), kill_every, None)?;
    if let Err(e) = harness.stop() {
        report.failures.push(e);
    }
    let reads = harness.marks.reads.load(Ordering::Relaxed);
    let writes = harness.marks.writes.load(Ordering::Relaxed);
    report.read_errors = report.read_errors.saturating_sub(reads);
    report.write_errors = report.write_errors.saturating_sub(writes);
    if reads + writes > 0 {
        eprintln!(
            "stress: {reads} reads and {writes} writes failed because a kill cut them (not \
             errors: such a write may or may not have been applied)"
        );
    }
    report.engine = format!("serve:{}", cfg.engine);
    Ok(report)
}
