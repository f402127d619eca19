//! Commands over the key order: SCAN, LIDB.RANGE, DBSIZE and FLUSHDB, all built on the engine's
//! forward `scan(start, end, limit)`. Called on the engine pool (see
//! `connection.rs`).
//!
//! Costs (the engine trait has no key count, no reverse iterator and no range delete):
//! - DBSIZE counts every key: O(n) time, in chunks of [`CHUNK`] so memory stays O(chunk).
//! - FLUSHDB deletes every key it scans: O(n) writes.
//! - LIDB.RANGE ... REV reads the whole range forward and keeps the last LIMIT+1 keys: O(range)
//!   time, O(LIMIT) memory.
//!
//! SCAN's cursor is a decimal id mapped server-side to the key to resume at (see `state.rs`), as
//! Kvrocks does. A key present for the whole scan is returned at least once: each call resumes at
//! the first key not yet returned, whatever was written meanwhile.

use bytes::Bytes;
use lidb_engines::{Engine, EngineResult};

use crate::commands::{Reply, bulk, engine_error, error, not_integer, parse_u64, syntax_error};
use crate::glob;
use crate::state::Shared;

/// Keys per engine call of the whole-keyspace walks.
const CHUNK: usize = 1024;

/// The smallest key after `key` in byte order.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// Calls `each` for every entry of [start, end), reading CHUNK entries per engine call.
fn walk(
    engine: &dyn Engine,
    start: &[u8],
    end: Option<&[u8]>,
    each: &mut dyn FnMut(&[u8], &[u8]),
) -> EngineResult<()> {
    let mut from = start.to_vec();
    loop {
        let mut last: Option<Vec<u8>> = None;
        let n = engine.scan(&from, end, CHUNK, &mut |k, v| {
            each(k, v);
            last = Some(k.to_vec());
        })?;
        match last {
            Some(k) if n == CHUNK => from = successor(&k),
            _ => return Ok(()),
        }
    }
}

pub fn dbsize(shared: &Shared) -> EngineResult<u64> {
    let mut n = 0;
    walk(shared.engine.as_ref(), b"", None, &mut |_, _| n += 1)?;
    Ok(n)
}

/// Deletes every key. The caller holds the write order exclusively.
pub fn flush_all(shared: &Shared) -> EngineResult<()> {
    let engine = shared.engine.as_ref();
    loop {
        let mut keys = Vec::new();
        engine.scan(b"", None, CHUNK, &mut |k, _| keys.push(k.to_vec()))?;
        if keys.is_empty() {
            return Ok(());
        }
        for k in &keys {
            engine.delete(k)?;
        }
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]
pub fn scan(shared: &Shared, cursor: &[u8], options: &[Bytes]) -> Reply {
    let Some(cursor) = parse_u64(cursor) else {
        return error("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut type_ok) = (None, 10u64, true);
    let mut rest = options.iter();
    while let Some(o) = rest.next() {
        let Some(arg) = rest.next() else {
            return syntax_error();
        };
        match o.to_ascii_lowercase().as_slice() {
            b"match" => pattern = Some(arg.clone()),
            b"count" => match parse_u64(arg) {
                Some(0) => return syntax_error(),
                Some(n) => count = n,
                None => return not_integer(),
            },
            b"type" => type_ok = arg.eq_ignore_ascii_case(b"string"),
            _ => return syntax_error(),
        }
    }
    let count = count.min(shared.settings.max_range_items) as usize;
    let start = shared.cursor_resume(cursor).unwrap_or_default();
    let mut keys: Vec<Bytes> = Vec::new();
    let got = shared.engine.scan(&start, None, count + 1, &mut |k, _| {
        keys.push(Bytes::copy_from_slice(k));
    });
    if let Err(e) = got {
        return engine_error(&e);
    }
    let next = if keys.len() > count {
        keys.pop()
            .map_or(0, |resume| shared.new_cursor(resume.to_vec()))
    } else {
        0
    };
    let items = keys
        .into_iter()
        .filter(|k| type_ok && pattern.as_ref().is_none_or(|p| glob::matches(p, k)))
        .map(bulk)
        .collect();
    Reply::Array(vec![bulk(next.to_string()), Reply::Array(items)])
}

/// One end of a range in ZRANGEBYLEX notation.
enum Bound {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

fn bound(arg: &Bytes) -> Option<Bound> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(Bound::Min),
        b'+' if arg.len() == 1 => Some(Bound::Max),
        b'[' => Some(Bound::Inclusive(arg.slice(1..))),
        b'(' => Some(Bound::Exclusive(arg.slice(1..))),
        _ => None,
    }
}

/// LIDB.RANGE start end [LIMIT n] [WITHVALUES] [REV]: the keys in [start, end] (bounds as
/// ZRANGEBYLEX: `-`, `+`, `[key`, `(key`), ascending, or descending from the end with REV, at
/// most n (and at most the server's cap). Replies `[next_key, items]`: items are keys, or key,
/// value, key, value... with WITHVALUES; next_key is the first key not returned (pass `[next_key`
/// as the start, or as the end with REV, to continue), nil when the range is exhausted.
pub fn range(shared: &Shared, start: &Bytes, end: &Bytes, options: &[Bytes]) -> Reply {
    let (Some(lo), Some(hi)) = (bound(start), bound(end)) else {
        return error("ERR min or max not valid string range item");
    };
    let (mut limit, mut values, mut rev) = (shared.settings.max_range_items, false, false);
    let mut rest = options.iter();
    while let Some(o) = rest.next() {
        match o.to_ascii_lowercase().as_slice() {
            b"limit" => match rest.next().map(|n| parse_u64(n)) {
                Some(Some(n)) if n > 0 => limit = n.min(shared.settings.max_range_items),
                Some(Some(_)) => return syntax_error(),
                Some(None) => return not_integer(),
                None => return syntax_error(),
            },
            b"withvalues" => values = true,
            b"rev" => rev = true,
            _ => return syntax_error(),
        }
    }
    let from = match lo {
        Bound::Min => Vec::new(),
        Bound::Inclusive(k) => k.to_vec(),
        Bound::Exclusive(k) => successor(&k),
        Bound::Max => return empty_range(),
    };
    let to = match hi {
        Bound::Max => None,
        Bound::Exclusive(k) => Some(k.to_vec()),
        Bound::Inclusive(k) => Some(successor(&k)),
        Bound::Min => return empty_range(),
    };
    if to.as_ref().is_some_and(|t| *t <= from) {
        return empty_range();
    }
    let limit = limit as usize;
    let mut found: std::collections::VecDeque<(Bytes, Bytes)> = Default::default();
    let mut keep = |k: &[u8], v: &[u8]| {
        if rev && found.len() > limit {
            found.pop_front();
        }
        let v = if values {
            Bytes::copy_from_slice(v)
        } else {
            Bytes::new()
        };
        found.push_back((Bytes::copy_from_slice(k), v));
    };
    let read = if rev {
        walk(shared.engine.as_ref(), &from, to.as_deref(), &mut keep)
    } else {
        shared
            .engine
            .scan(&from, to.as_deref(), limit + 1, &mut keep)
            .map(|_| ())
    };
    if let Err(e) = read {
        return engine_error(&e);
    }
    let mut found: Vec<(Bytes, Bytes)> = found.into();
    if rev {
        found.reverse();
    }
    let next = if found.len() > limit {
        found.pop().map_or(Reply::Null, |(k, _)| bulk(k))
    } else {
        Reply::Null
    };
    let mut items = Vec::with_capacity(found.len() * if values { 2 } else { 1 });
    for (k, v) in found {
        items.push(bulk(k));
        if values {
            items.push(bulk(v));
        }
    }
    Reply::Array(vec![next, Reply::Array(items)])
}

fn empty_range() -> Reply {
    Reply::Array(vec![Reply::Null, Reply::Array(Vec::new())])
}
