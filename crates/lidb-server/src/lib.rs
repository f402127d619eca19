//! `lidb serve`: every lidb engine over the Redis protocol (RESP2, RESP3 after `HELLO 3`, and
//! inline commands), so redis-cli, redis-benchmark, redis-py, Jedis and YCSB talk to it unchanged.
//!
//! A thin shell over the engine, in the modules of mini-redis:
//! - `codec`, `inline`: bytes to requests; `reply`: replies to bytes, RESP2 or RESP3; pure and
//!   fuzzed.
//! - `session`: one connection's protocol, name and authentication, and the commands that set
//!   them (AUTH, HELLO, CLIENT); pure and fuzzed.
//! - `connection`: one task per client; decodes every complete request of its buffer, runs them
//!   as one batch on the engine pool, writes the replies together (pipelining).
//! - `commands`, `keyspace`, `info`: one table from command to engine call.
//! - `pool`: the threads that run batches against the engine.
//! - `on_worker`: the leading reads of a batch that the engine answers from memory and SETs it
//!   writes with no wait, answered on the async worker without the hand-off to the pool.
//! - `state`: what connections share (the engine, the key stripes, SCAN cursors, counters).
//! - `stripes`: the striped key locks that order commands on the same keys; reads take none.
//! - `server`: accept loop, connection cap, graceful stop (stop accepting, finish batches, flush).
//! - `metrics`: `--metrics-listen`, the counters in Prometheus's text format over a minimal HTTP
//!   responder on the server's runtime; per-command counts and latencies in per-thread shards.
//! - `tls`: `--tls-cert`/`--tls-key`/`--tls-ca-cert`, the listener's TLS (rustls): the PEM files
//!   loaded at start, the handshake on each connection's task before its first request.
//! - `workers`: `--thread-per-core`, one current-thread runtime per worker thread (an option; the
//!   default is one work-stealing runtime, see docs/ARCHITECTURE.md for the measurement).
//!
//! The engine is any [`lidb_engines::Engine`]; its calls may block, so they run on the
//! engine pool's threads (`pool.rs`), never on tokio's async workers; the exceptions are the
//! engine's memory-only read tier and its no-wait write (`on_worker.rs`), which by their
//! contracts never read storage and never wait.

pub mod codec;
mod commands;
mod connection;
pub mod glob;
mod info;
mod inline;
mod keyspace;
mod metrics;
mod on_worker;
mod pool;
pub mod reply;
mod server;
pub mod session;
mod state;
mod stripes;
mod tls;
mod workers;

pub use codec::{DecodeError, Limits, RequestCodec, decode_all};
pub use reply::{Protocol, Reply};
pub use server::{Server, ServerConfig, ServerError, ServerHandle, refuse_unprotected};
pub use session::Password;
pub use tls::{HANDSHAKE_TIMEOUT, Tls, TlsFiles};
