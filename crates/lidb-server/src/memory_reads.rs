//! Reads answered on the async worker: the leading run of a batch made of GET, MGET, EXISTS,
//! PING and ECHO whose keys the engine answers from memory
//! ([`Engine::get_if_in_memory`](lidb_engines::Engine::get_if_in_memory): memtables,
//! filters, indexes, cached pages; RocksDB calls it the block-cache tier).
//!
//! Handing a batch to the engine pool costs two thread wake-ups (the pool thread, then the
//! connection's task); for a pipeline of GETs of hot keys that hand-off is most of the server's
//! CPU time. Reads that would touch the storage still go to the pool, so nothing here can wait on
//! I/O, and nothing here waits on a lock a pool thread may hold across I/O: reads are optimistic
//! over their key stripes (`stripes.rs`), and one that must restart ends the prefix instead.
//!
//! Called from a connection's task, on a tokio worker. Invariants:
//! 1. It answers a prefix of the batch, in order, and returns its length; the caller runs the
//!    rest on the pool. A command some of whose keys are not in memory is not answered here at
//!    all (no half-answered MGET), and the prefix ends before it.
//! 2. Answers are what [`crate::commands::execute`] would give: the same replies, under the same
//!    key-stripe rules (`stripes.rs`: a read validated against multi-key writes), counted the
//!    same in INFO and in `--metrics-listen` (`metrics.rs`).
//! 3. Anything else (other commands, wrong arities, an engine error) ends the prefix, so errors
//!    are always produced by `execute`.
//! 4. The caller asks only for a session that has authenticated (`session.rs`): this module
//!    does not see the session, so it cannot answer NOAUTH.

use bytes::Bytes;

use crate::commands::{Reply, bulk};
use crate::state::Shared;
use crate::stripes::{self, order};

/// Answers the leading run of `requests` that needs no storage read; returns its length.
pub fn answer_prefix(shared: &Shared, requests: &[Vec<Bytes>], replies: &mut Vec<Reply>) -> usize {
    let mut answered = 0;
    for request in requests {
        let started = shared.settings.metrics.then(std::time::Instant::now);
        let Some(reply) = answer(shared, request) else {
            break;
        };
        if let Some(started) = started {
            let name = request.first().map_or(&b""[..], AsRef::as_ref);
            shared
                .counters
                .metrics
                .record(name, started.elapsed(), false);
        }
        replies.push(reply);
        answered += 1;
    }
    let c = &shared.counters;
    c.commands_processed.add(answered as u64);
    c.memory_reads.add(answered as u64);
    answered
}

/// The reply to one request if it can be given from memory.
fn answer(shared: &Shared, request: &[Bytes]) -> Option<Reply> {
    let (name, args) = request.split_first()?;
    let is = |cmd: &[u8]| name.eq_ignore_ascii_case(cmd);
    match args {
        [key] if is(b"get") => {
            let value = shared
                .stripes
                .read(&[stripes::stripe_of(key)], || lookup(shared, key))
                .ok()??;
            Some(value.map_or(Reply::Null, bulk))
        }
        [] if is(b"ping") => Some(Reply::Status(Bytes::from_static(b"PONG"))),
        [msg] if is(b"ping") || is(b"echo") => Some(bulk(msg.clone())),
        [_, ..] if is(b"mget") => {
            let ordered = order(args.iter().map(AsRef::as_ref));
            let read = shared.stripes.read(&ordered, || {
                let mut values = Vec::with_capacity(args.len());
                for key in args {
                    values.push(lookup(shared, key)?.map_or(Reply::Null, bulk));
                }
                Some(Reply::Array(values))
            });
            read.ok()?
        }
        [_, ..] if is(b"exists") => {
            let ordered = order(args.iter().map(AsRef::as_ref));
            let read = shared.stripes.read(&ordered, || {
                let mut found = 0i64;
                for key in args {
                    found += i64::from(lookup(shared, key)?.is_some());
                }
                Some(Reply::Integer(found))
            });
            read.ok()?
        }
        _ => None,
    }
}

/// `Some(value)` when memory answers `key`; `None` when a storage read is needed or the engine
/// failed (the pool then runs the command and reports the error).
fn lookup(shared: &Shared, key: &[u8]) -> Option<Option<Vec<u8>>> {
    shared.engine.get_if_in_memory(key).ok().flatten()
}
