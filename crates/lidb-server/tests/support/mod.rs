//! What the server tests share: a server on 127.0.0.1 over a fresh engine in a temporary
//! directory, a `redis` client to it, and raw socket exchanges for bytes no client would send.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lidb_engines::{self as engines, EngineConfig};
use lidb_server::{Server, ServerConfig, ServerHandle};
use lidb_testkit::Scratch;

/// A running server and its directory (removed on drop, after the server stops: `drop` stops
/// the server, then the fields drop).
pub struct TestServer {
    pub handle: Option<ServerHandle>,
    pub dir: Scratch,
}

impl TestServer {
    pub fn addr(&self) -> SocketAddr {
        self.handle.as_ref().unwrap().addr()
    }

    pub fn client(&self) -> redis::Connection {
        let url = format!("redis://{}/", self.addr());
        let client = redis::Client::open(url).unwrap();
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        con
    }

    pub fn stop(mut self) {
        self.handle.take().unwrap().stop().unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        drop(self.handle.take());
    }
}

/// A server over engine `engine` with `config` (its listen address replaced by 127.0.0.1:0).
pub fn start_with(engine: &str, config: ServerConfig) -> TestServer {
    start_prepared(engine, config, |_| {})
}

/// `start_with`, after `prepare` has run on the engine before the server takes it.
pub fn start_prepared(
    engine: &str,
    mut config: ServerConfig,
    prepare: impl FnOnce(&dyn engines::Engine),
) -> TestServer {
    let dir = Scratch::new(&format!("server-{engine}"));
    let mut cfg = EngineConfig::new(dir.to_path_buf());
    // Small memtables: the tests' writes go through flushes and compactions too.
    cfg.lsm.memtable_bytes = 256 << 10;
    let engine = engines::open(engine, &cfg).unwrap();
    prepare(engine.as_ref());
    config.listen = "127.0.0.1:0".into();
    let server = Server::bind(config, engine).unwrap();
    TestServer {
        handle: Some(server.spawn()),
        dir,
    }
}

pub fn start(engine: &str) -> TestServer {
    start_with(engine, ServerConfig::default())
}

/// Sends `bytes` on a new connection, then reads until the server closes it or `wait` passes
/// with nothing new; returns what came back and whether the server closed the connection.
pub fn exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> (Vec<u8>, bool) {
    exchange_upto(addr, bytes, wait, usize::MAX)
}

/// `exchange` that also stops once `enough` bytes came back.
pub fn exchange_upto(
    addr: SocketAddr,
    bytes: &[u8],
    wait: Duration,
    enough: usize,
) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && got.len() < enough {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(buf.get(..n).unwrap()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(_) => return (got, false),
        }
    }
    (got, false)
}

/// `exchange` with a short wait, as text.
pub fn exchange_text(addr: SocketAddr, bytes: &[u8]) -> (String, bool) {
    let (got, closed) = exchange(addr, bytes, Duration::from_millis(300));
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

/// A request in RESP2 multibulk form.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Sends `bytes` and reads back exactly as many bytes as `want` has (or less if the server
/// closes or stays silent for a second), as text.
pub fn reply_text(addr: SocketAddr, bytes: &[u8], want: &str) -> String {
    let (got, _) = exchange_upto(addr, bytes, Duration::from_secs(1), want.len());
    String::from_utf8_lossy(&got).into_owned()
}
