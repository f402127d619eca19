//! The command table: one request (a list of arguments) to one reply, against the engine. Each
//! command maps to the engine in one place, as Kvrocks' table does; scans and ranges are in
//! `keyspace.rs`, INFO in `info.rs`.
//!
//! Connection commands (AUTH, HELLO, CLIENT, QUIT) and the NOAUTH gate of a server with a
//! password come first, from `session.rs`: a session that has not authenticated runs nothing
//! of this table.
//!
//! Called on the engine pool's threads (engine calls may wait on I/O), never as async code. A reply
//! to a write is built only after the engine has taken the write (synced with `--sync`), so what
//! a client sees acknowledged is durable as the engine promises.
//!
//! Errors keep Redis's shapes: `ERR unknown command 'x', with args beginning with: ...`,
//! `ERR wrong number of arguments for 'get' command`, `ERR syntax error`.

use bytes::{Bytes, BytesMut};

use crate::keyspace;
pub use crate::reply::Reply;
use crate::session::{Outcome, Session, connection_command};
use crate::state::Shared;
use crate::stripes::{self, order};

pub fn ok() -> Reply {
    Reply::Status(Bytes::from_static(b"OK"))
}

/// An error reply; `msg` starts with its code (`ERR ...`); see [`Reply::error`].
pub fn error(msg: impl AsRef<str>) -> Reply {
    Reply::error(msg)
}

pub fn syntax_error() -> Reply {
    error("ERR syntax error")
}

pub fn not_integer() -> Reply {
    error("ERR value is not an integer or out of range")
}

/// An engine's error, its kind as the error code a client reads (`-CORRUPTION`, `-IOERR`,
/// `-CLOSED`, `-TOOLARGE`, `-UNSUPPORTED`, or `-ERR` for a bad option and anything else).
pub fn engine_error(e: &lidb_engines::EngineError) -> Reply {
    error(format!("{} engine: {e}", e.code()))
}

pub fn bulk(b: impl Into<Bytes>) -> Reply {
    Reply::Bulk(b.into())
}

fn int(n: u64) -> Reply {
    Reply::Integer(n.min(i64::MAX as u64) as i64)
}

/// An argument as text for an error message: lossy, at most 128 bytes, as Redis cuts them.
fn shown(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg.get(..128).unwrap_or(arg)).into_owned()
}

pub fn parse_u64(arg: &[u8]) -> Option<u64> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse().ok())
}

/// The table: name, arity as Redis writes it (n: exactly n arguments with the name; -n: at least
/// n). COMMAND COUNT reports its length. AUTH, HELLO, CLIENT and QUIT are listed for that count;
/// `session.rs` answers them before the table is looked at.
const TABLE: &[(&str, i64)] = &[
    ("ping", -1),
    ("echo", 2),
    ("get", 2),
    ("set", -3),
    ("setnx", 3),
    ("getset", 3),
    ("del", -2),
    ("exists", -2),
    ("mget", -2),
    ("mset", -3),
    ("dbsize", 1),
    ("flushdb", -1),
    ("info", -1),
    ("scan", -2),
    ("lidb.range", -3),
    ("config", -2),
    ("client", -2),
    ("command", -1),
    ("select", 2),
    ("quit", -1),
    ("hello", -1),
    ("auth", -2),
];

/// The most bytes of keys and values one group of pipelined SETs writes at once.
const GROUP_BYTES: usize = 4 << 20;

/// `SET key value` with no options: what a pipeline's runs of writes are made of.
fn plain_set(request: &[Bytes]) -> Option<(&[u8], &[u8])> {
    match request {
        [name, key, value] if name.eq_ignore_ascii_case(b"set") => Some((key, value)),
        _ => None,
    }
}

/// The leading run of plain SETs of `requests` that is written as one
/// [`Engine::put_many`](lidb_engines::Engine::put_many): as many as follow each other, up to
/// [`GROUP_BYTES`] of keys and values (at least one). Empty when the first request is not one.
pub fn set_run(requests: &[Vec<Bytes>]) -> Vec<(&[u8], &[u8])> {
    let mut group = Vec::new();
    let mut bytes = 0;
    for request in requests {
        match plain_set(request) {
            Some((k, v)) if group.is_empty() || bytes + k.len() + v.len() <= GROUP_BYTES => {
                bytes += k.len() + v.len();
                group.push((k, v));
            }
            _ => break,
        }
    }
    group
}

/// Counts a written run of `n` SETs (and times it for `--metrics-listen`) and appends its `n`
/// replies: OK each, or the engine's error each.
pub fn answer_sets(
    shared: &Shared,
    n: usize,
    written: &lidb_engines::EngineResult<()>,
    started: Option<std::time::Instant>,
    protocol: crate::reply::Protocol,
    out: &mut BytesMut,
) {
    shared.counters.commands_processed.add(n as u64);
    if let Some(started) = started {
        shared
            .counters
            .metrics
            .record_sets(n as u64, started.elapsed(), written.is_err());
    }
    let reply = written.as_ref().map_or_else(engine_error, |()| ok());
    for _ in 0..n {
        reply.encode(protocol, out);
    }
}

/// Runs a pipelined batch in order, appending one reply per request until QUIT to `out`, each
/// in the session's protocol when it was answered (a HELLO changes the form of the replies
/// after it). A run of plain SETs of an authenticated session is written as one
/// [`Engine::put_many`](lidb_engines::Engine::put_many) (one WAL record and one sync for lsm)
/// and each gets its OK after it; other requests run one by one.
pub fn execute_batch(
    shared: &Shared,
    session: &mut Session,
    requests: &[Vec<Bytes>],
    out: &mut BytesMut,
) {
    let mut rest = requests;
    while let Some((first, _)) = rest.split_first() {
        let group = set_run(rest);
        if group.len() < 2 || !session.authenticated {
            execute(shared, session, first).encode(session.protocol, out);
            rest = rest.get(1..).unwrap_or_default();
            if session.quit {
                return;
            }
            continue;
        }
        let started = shared.settings.metrics.then(std::time::Instant::now);
        let written = {
            // Plain SETs (`stripes.rs`): the run holds its keys' stripes shared.
            let _held = shared
                .stripes
                .lock_shared(&order(group.iter().map(|(k, _)| *k)));
            shared.engine.put_many(&group)
        };
        answer_sets(
            shared,
            group.len(),
            &written,
            started,
            session.protocol,
            out,
        );
        rest = rest.get(group.len()..).unwrap_or_default();
    }
}

/// Runs one request, counted and timed for `--metrics-listen` (`metrics.rs`) when it is on.
pub fn execute(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    if !shared.settings.metrics {
        return run(shared, session, args);
    }
    let started = std::time::Instant::now();
    let reply = run(shared, session, args);
    let name = args.first().map_or(&b""[..], AsRef::as_ref);
    let failed = matches!(reply, Reply::Error(_));
    shared
        .counters
        .metrics
        .record(name, started.elapsed(), failed);
    reply
}

/// Runs one request.
fn run(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    let Some((name, rest)) = args.split_first() else {
        return error("ERR empty command");
    };
    match connection_command(session, shared.settings.password.as_ref(), args) {
        Outcome::Pass => {}
        Outcome::Refused(reply) => return reply,
        Outcome::Answered(reply) => {
            shared.counters.commands_processed.incr();
            return reply;
        }
    }
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let Some(&(cmd, arity)) = TABLE.iter().find(|(n, _)| *n == lower) else {
        let mut msg = format!(
            "ERR unknown command '{}', with args beginning with: ",
            shown(name)
        );
        for a in rest {
            msg.push_str(&format!("'{}' ", shown(a)));
        }
        return error(msg);
    };
    let n = args.len() as i64;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return error(format!("ERR wrong number of arguments for '{cmd}' command"));
    }
    shared.counters.commands_processed.incr();
    let engine = &shared.engine;
    match (cmd, rest) {
        ("ping", []) => Reply::Status(Bytes::from_static(b"PONG")),
        ("ping", [msg]) | ("echo", [msg]) => bulk(msg.clone()),
        ("ping", _) => error("ERR wrong number of arguments for 'ping' command"),
        ("get", [key]) => {
            let stripe = [stripes::stripe_of(key)];
            match shared.stripes.read_or_lock(&stripe, || engine.get(key)) {
                Ok(Some(v)) => bulk(v),
                Ok(None) => Reply::Null,
                Err(e) => engine_error(&e),
            }
        }
        ("set", [key, value, options @ ..]) => set(shared, key, value, options),
        ("setnx", [key, value]) => {
            let _held = shared.stripes.lock(&[stripes::stripe_of(key)]);
            match engine.get(key) {
                Ok(Some(_)) => int(0),
                Ok(None) => engine
                    .put(key, value)
                    .map_or_else(|e| engine_error(&e), |()| int(1)),
                Err(e) => engine_error(&e),
            }
        }
        ("getset", [key, value]) => {
            let _held = shared.stripes.lock(&[stripes::stripe_of(key)]);
            let old = match engine.get(key) {
                Ok(old) => old,
                Err(e) => return engine_error(&e),
            };
            match engine.put(key, value) {
                Ok(()) => old.map_or(Reply::Null, bulk),
                Err(e) => engine_error(&e),
            }
        }
        ("del", keys) => {
            let _held = shared
                .stripes
                .lock_publishing(&order(keys.iter().map(AsRef::as_ref)));
            let mut deleted = 0;
            for key in keys {
                match engine.get(key) {
                    Ok(Some(_)) => {}
                    Ok(None) => continue,
                    Err(e) => return engine_error(&e),
                }
                if let Err(e) = engine.delete(key) {
                    return engine_error(&e);
                }
                deleted += 1;
            }
            int(deleted)
        }
        ("exists", keys) => {
            let ordered = order(keys.iter().map(AsRef::as_ref));
            let found = shared.stripes.read_or_lock(&ordered, || {
                let mut found = 0;
                for key in keys {
                    found += u64::from(engine.get(key)?.is_some());
                }
                Ok(found)
            });
            found.map_or_else(|e| engine_error(&e), int)
        }
        ("mget", keys) => {
            let ordered = order(keys.iter().map(AsRef::as_ref));
            let values = shared.stripes.read_or_lock(&ordered, || {
                let mut values = Vec::with_capacity(keys.len());
                for key in keys {
                    values.push(engine.get(key)?.map_or(Reply::Null, bulk));
                }
                Ok(values)
            });
            values.map_or_else(|e| engine_error(&e), Reply::Array)
        }
        ("mset", pairs) => {
            if pairs.len() % 2 != 0 {
                return error("ERR wrong number of arguments for 'mset' command");
            }
            let entries: Vec<(&[u8], &[u8])> = pairs
                .chunks_exact(2)
                .filter_map(|pair| match pair {
                    [key, value] => Some((key.as_ref(), value.as_ref())),
                    _ => None,
                })
                .collect();
            let _held = shared
                .stripes
                .lock_publishing(&order(entries.iter().map(|(k, _)| *k)));
            engine
                .put_many(&entries)
                .map_or_else(|e| engine_error(&e), |()| ok())
        }
        ("dbsize", []) => keyspace::dbsize(shared).map_or_else(|e| engine_error(&e), int),
        ("flushdb", options) => {
            if options.len() > 1
                || options.first().is_some_and(|o| {
                    !o.eq_ignore_ascii_case(b"sync") && !o.eq_ignore_ascii_case(b"async")
                })
            {
                return syntax_error();
            }
            let _held = shared.stripes.lock_publishing(&stripes::all());
            keyspace::flush_all(shared).map_or_else(|e| engine_error(&e), |()| ok())
        }
        ("info", sections) => crate::info::info(shared, sections),
        ("scan", [cursor, options @ ..]) => keyspace::scan(shared, cursor, options),
        ("lidb.range", [start, end, options @ ..]) => keyspace::range(shared, start, end, options),
        ("config", [sub, params @ ..]) => config(shared, sub, params),
        ("command", sub) => command(sub),
        ("select", [db]) => match parse_u64(db) {
            Some(0) => ok(),
            Some(_) => error("ERR DB index is out of range"),
            None => not_integer(),
        },
        _ => error(format!("ERR wrong number of arguments for '{cmd}' command")),
    }
}

/// SET key value [NX|XX] [GET] [KEEPTTL]; EX, PX, EXAT, PXAT are refused: lidb keeps no TTLs.
fn set(shared: &Shared, key: &Bytes, value: &Bytes, options: &[Bytes]) -> Reply {
    let (mut nx, mut xx, mut get) = (false, false, false);
    for o in options {
        let o = o.to_ascii_lowercase();
        match o.as_slice() {
            b"nx" if !xx => nx = true,
            b"xx" if !nx => xx = true,
            b"get" => get = true,
            b"keepttl" => {}
            b"ex" | b"px" | b"exat" | b"pxat" => {
                return error(
                    "ERR lidb keeps no expiry times: SET EX/PX/EXAT/PXAT are not supported",
                );
            }
            _ => return syntax_error(),
        }
    }
    let engine = &shared.engine;
    let stripe = [stripes::stripe_of(key)];
    if !(nx || xx || get) {
        let _held = shared.stripes.lock_shared(&stripe);
        return engine
            .put(key, value)
            .map_or_else(|e| engine_error(&e), |()| ok());
    }
    let _held = shared.stripes.lock(&stripe);
    let old = match engine.get(key) {
        Ok(old) => old,
        Err(e) => return engine_error(&e),
    };
    let write = !(nx && old.is_some() || xx && old.is_none());
    if write && let Err(e) = engine.put(key, value) {
        return engine_error(&e);
    }
    match (get, write) {
        (true, _) => old.map_or(Reply::Null, bulk),
        (false, true) => ok(),
        (false, false) => Reply::Null,
    }
}

/// CONFIG GET of what clients ask on connect (save, appendonly), a map (a flat array of names
/// and values in RESP2); CONFIG SET is refused.
fn config(shared: &Shared, sub: &[u8], params: &[Bytes]) -> Reply {
    if sub.eq_ignore_ascii_case(b"get") {
        let appendonly = if shared.settings.sync { "yes" } else { "no" };
        let known = [("save", ""), ("appendonly", appendonly), ("databases", "1")];
        let mut out = Vec::new();
        for (name, value) in known {
            if params
                .iter()
                .any(|p| crate::glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
            {
                out.push((bulk(name), bulk(value)));
            }
        }
        return Reply::Map(out);
    }
    if sub.eq_ignore_ascii_case(b"resetstat") {
        return ok();
    }
    if sub.eq_ignore_ascii_case(b"set") {
        return error("ERR CONFIG SET is not supported by lidb: restart with other options");
    }
    error(format!(
        "ERR unknown subcommand '{}'. Try CONFIG HELP.",
        shown(sub)
    ))
}

/// COMMAND, COMMAND COUNT, COMMAND DOCS: what redis-cli and client libraries ask on connect. No
/// docs are served (an empty answer), which clients take as "no hints".
fn command(sub: &[Bytes]) -> Reply {
    match sub.first().map(|s| s.to_ascii_lowercase()) {
        None => Reply::Array(Vec::new()),
        Some(s) if s == b"count" => int(TABLE.len() as u64),
        // DOCS is a map of name to docs (a flat array in RESP2), INFO an array.
        Some(s) if s == b"docs" => Reply::Map(Vec::new()),
        Some(s) if s == b"info" => Reply::Array(Vec::new()),
        Some(s) => error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            shown(&s)
        )),
    }
}
