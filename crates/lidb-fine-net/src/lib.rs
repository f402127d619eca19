//! FineStore across machines (the FineStore paper, section 4): the fine-wire protocol
//! (docs/format/fine-wire.md), a FINEdex server whose trained data clients read without index
//! code on the server, and the client library that caches every server's models.
//!
//! - `codec/`: frames, requests, replies, the layout (pure, fuzzed);
//! - `server/`: [`Server`]: accept, connections (remote reads and pipeline ops), reclaimer;
//! - `client/`: [`Client`]: shard map, cached layouts, gets, writes, modes, counters;
//! - `resp_shard.rs`: [`resp_shard::ShardEngine`], a shard's RESP face (an engine over the
//!   server's index and log) for `lidb serve --engine finedex --fine-listen`;
//! - `twemproxy/`: the baseline deployment of the bench: the shards over RESP behind
//!   nutcracker (twemproxy), driven through a minimal RESP client;
//! - `relay.rs`: [`relay::Relay`], a delaying TCP relay (`--delay-us`, stand-in for netem);
//! - `bench.rs`: `lidb fine bench`, YCSB through clients per mode, every answer checked.
//!
//! Threads: a [`Server`] owns its threads (see `server/mod.rs`); a [`Client`] belongs to one
//! thread. Nothing here uses `unsafe`.

#![forbid(unsafe_code)]

pub mod bench;
pub mod client;
pub mod codec;
mod error;
pub mod relay;
pub mod resp_shard;
pub mod server;
mod target;
pub mod twemproxy;

pub use client::{Client, ClientStats, Mode};
pub use error::WireError;
pub use server::{Server, ServerConfig};
