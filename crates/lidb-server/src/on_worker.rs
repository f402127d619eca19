//! Requests answered on the connection's async worker, without the hand-off to the engine pool:
//! the leading run of a batch made of GET, MGET, EXISTS, PING and ECHO whose keys the engine
//! answers from memory ([`Engine::get_if_in_memory`](lidb_engines::Engine::get_if_in_memory):
//! memtables, filters, indexes, cached pages; RocksDB calls it the block-cache tier), and of
//! plain SETs the engine writes with no wait
//! ([`Engine::try_put_many`](lidb_engines::Engine::try_put_many): without `--sync`, lsm when no
//! other write runs and its memtable has room, its WAL append one write to the operating
//! system's page cache, as Redis's event loop appends to its AOF; finedex always, its log
//! record buffered for its logger thread).
//!
//! Handing a batch to the engine pool costs two thread wake-ups (the pool thread, then the
//! connection's task); for a pipeline of GETs of hot keys, or of SETs, that hand-off is most of
//! the server's CPU time. Requests that may wait (a storage read, a memtable switch, a stall, a
//! sync, another writer) still go to the pool, and nothing here waits on a lock a pool thread may
//! hold across I/O: reads are optimistic over their key stripes (`stripes.rs`), and one that must
//! restart ends the prefix; SETs take their stripes shared only if no command holds one
//! exclusively, else they end the prefix.
//!
//! Called from a connection's task, on a tokio worker. Invariants:
//! 1. It answers a prefix of the batch, in order, and returns its length; the caller runs the
//!    rest on the pool. A command some of whose keys are not in memory is not answered here at
//!    all (no half-answered MGET), and the prefix ends before it; a run of SETs is answered whole
//!    or not at all (an engine error ends the prefix, and the pool writes the run again with
//!    `put_many`, which reports it: plain SETs written twice leave the same values).
//! 2. Answers are what [`crate::commands::execute_batch`] would give: the same replies, under the
//!    same key-stripe rules (`stripes.rs`: a read validated against multi-key writes, a plain SET
//!    holding its stripe shared), counted the same in INFO and in `--metrics-listen`
//!    (`metrics.rs`).
//! 3. Anything else (other commands, SET with options, wrong arities, an engine error) ends the
//!    prefix, so errors are always produced by `execute`.
//! 4. The caller asks only for a session that has authenticated (`session.rs`): this module
//!    does not see the session, so it cannot answer NOAUTH.

use bytes::{Bytes, BytesMut};

use crate::commands::{Reply, answer_sets, bulk, set_run};
use crate::reply::Protocol;
use crate::state::Shared;
use crate::stripes::{self, order};

/// What this module may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    /// Reads the engine answers from memory (`--no-memory-reads` turns them off).
    pub reads: bool,
    /// Plain SETs the engine writes with no wait (`--no-worker-writes` turns them off).
    pub writes: bool,
}

/// Answers the leading run of `requests` that needs no wait, appending its replies to `out` in
/// `protocol`; returns how many requests it answered.
pub fn answer_prefix(
    shared: &Shared,
    requests: &[Vec<Bytes>],
    allowed: Allowed,
    protocol: Protocol,
    out: &mut BytesMut,
) -> usize {
    let mut answered = 0;
    while let Some(rest) = requests.get(answered..).filter(|r| !r.is_empty()) {
        let started = shared.settings.metrics.then(std::time::Instant::now);
        let sets = if allowed.writes {
            set_run(rest)
        } else {
            Vec::new()
        };
        if !sets.is_empty() {
            if !write(shared, &sets) {
                break;
            }
            answer_sets(shared, sets.len(), &Ok(()), started, protocol, out);
            shared.counters.worker_writes.add(sets.len() as u64);
            answered += sets.len();
            continue;
        }
        let Some(reply) = rest
            .first()
            .filter(|_| allowed.reads)
            .and_then(|request| answer(shared, request))
        else {
            break;
        };
        if let (Some(started), Some(request)) = (started, rest.first()) {
            let name = request.first().map_or(&b""[..], AsRef::as_ref);
            shared
                .counters
                .metrics
                .record(name, started.elapsed(), false);
        }
        reply.encode(protocol, out);
        shared.counters.commands_processed.incr();
        shared.counters.memory_reads.incr();
        answered += 1;
    }
    answered
}

/// Writes a run of plain SETs if neither the stripes nor the engine would make it wait; `false`
/// when it wrote nothing (a stripe held exclusively, the engine declining, or an engine error,
/// which the pool's `put_many` then reports).
fn write(shared: &Shared, sets: &[(&[u8], &[u8])]) -> bool {
    let Some(_held) = shared
        .stripes
        .try_lock_shared(&order(sets.iter().map(|(k, _)| *k)))
    else {
        return false;
    };
    matches!(shared.engine.try_put_many(sets), Ok(true))
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
