//! Requests and replies of fine-wire (docs/format/fine-wire.md, "Requests", "Read result",
//! "The layout") and their encoding to and decoding from frame bodies.
//!
//! Pure; any thread. Invariants: `decode_*` never panic and accept exactly what `encode_*`
//! produce (round trip), and reject trailing bytes; counts are checked against the bytes left
//! before anything is allocated for them.

use lidb_index::segment::Segments;

use super::consts::*;
use super::frame::{Cursor, put_u16, put_u32, put_u64};
use crate::error::WireError;

/// A level bin address: the gap below record `position` of region `region` (0: none, route by
/// key on the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BinAddr {
    pub region: u64,
    pub position: u32,
}

/// One item of a READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadItem {
    pub region: u64,
    pub offset: u32,
    pub records: u32,
}

/// A request (without its id).
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Hello {
        client_id: u64,
    },
    Layout {
        client_id: u64,
    },
    Ack {
        client_id: u64,
        version: u64,
    },
    Retrain,
    Lock,
    Unlock,
    Read {
        items: Vec<ReadItem>,
    },
    /// On-client mode: copy the model region (the layout as words, with version words).
    ReadModel,
    /// On-client mode: copy the level bin below record `position` of `region` (`child`:
    /// [`BIN_ROOT`] for the root bin, else that child bin).
    ReadBin {
        region: u64,
        position: u32,
        child: u32,
    },
    Search {
        addr: BinAddr,
        key: u64,
    },
    Insert {
        addr: BinAddr,
        key: u64,
        value: u64,
    },
    Update {
        addr: BinAddr,
        key: u64,
        value: u64,
    },
    Remove {
        addr: BinAddr,
        key: u64,
    },
    Range {
        addr: BinAddr,
        lo: u64,
        hi: u64,
        limit: u32,
    },
}

/// One region of a layout as a client caches it.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRegion {
    pub id: u64,
    pub first_key: u64,
    pub records: u32,
    pub segments: Segments,
}

/// A server's model layout.
#[derive(Debug, Clone, PartialEq)]
pub struct WireLayout {
    pub version: u64,
    pub eps: u64,
    pub shard_lo: u64,
    pub shard_hi: u64,
    pub regions: Vec<WireRegion>,
}

/// The answer to one READ item.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadResult {
    /// The region is reclaimed or unknown.
    Stale,
    /// `words`: head version, 3 words per record, tail version.
    Words(Vec<u64>),
}

/// A copy of one level bin (READ_BIN), validated by the client
/// ([`lidb_fine::bin_copy_is_valid`] on `head`, `tail`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinCopy {
    pub head: u64,
    /// Root bin: 1 when `entries` are `(first key, child id)` of child bins, else 0. Child bin:
    /// the root bin's version read inside the child's copy.
    pub aux: u64,
    pub entries: Vec<(u64, u64)>,
    pub tail: u64,
}

/// The answer to a READ_BIN.
#[derive(Debug, Clone, PartialEq)]
pub enum BinResult {
    /// The region is reclaimed or unknown, or the position is past it.
    Stale,
    Copy(BinCopy),
}

/// A reply's payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Empty,
    Hello {
        client_id: u64,
        shard_lo: u64,
        shard_hi: u64,
    },
    Layout(WireLayout),
    Read(Vec<ReadResult>),
    /// READ_MODEL: the layout between its head and tail version words.
    Model {
        head: u64,
        layout: WireLayout,
        tail: u64,
    },
    Bin(BinResult),
    Value(Option<u64>),
    Range(Vec<(u64, u64)>),
    Message(String),
}

/// A reply (the request's id and op, a status, the server's layout version, a payload).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub id: u64,
    pub op: u8,
    pub status: u8,
    pub version: u64,
    pub payload: Payload,
}

impl Request {
    pub fn op(&self) -> u8 {
        match self {
            Request::Hello { .. } => OP_HELLO,
            Request::Layout { .. } => OP_LAYOUT,
            Request::Ack { .. } => OP_ACK,
            Request::Retrain => OP_RETRAIN,
            Request::Lock => OP_LOCK,
            Request::Unlock => OP_UNLOCK,
            Request::Read { .. } => OP_READ,
            Request::ReadModel => OP_READ_MODEL,
            Request::ReadBin { .. } => OP_READ_BIN,
            Request::Search { .. } => OP_SEARCH,
            Request::Insert { .. } => OP_INSERT,
            Request::Update { .. } => OP_UPDATE,
            Request::Remove { .. } => OP_REMOVE,
            Request::Range { .. } => OP_RANGE,
        }
    }
}

fn put_addr(out: &mut Vec<u8>, a: BinAddr) {
    put_u64(out, a.region);
    put_u32(out, a.position);
}

fn get_addr(c: &mut Cursor<'_>) -> Result<BinAddr, WireError> {
    Ok(BinAddr {
        region: c.u64("region")?,
        position: c.u32("position")?,
    })
}

/// Appends the body of request `id` to `out`.
pub fn encode_request(id: u64, req: &Request, out: &mut Vec<u8>) {
    put_u64(out, id);
    out.push(req.op());
    match *req {
        Request::Hello { client_id } | Request::Layout { client_id } => put_u64(out, client_id),
        Request::Ack { client_id, version } => {
            put_u64(out, client_id);
            put_u64(out, version);
        }
        Request::Retrain | Request::Lock | Request::Unlock | Request::ReadModel => {}
        Request::ReadBin {
            region,
            position,
            child,
        } => {
            put_u64(out, region);
            put_u32(out, position);
            put_u32(out, child);
        }
        Request::Read { ref items } => {
            put_u16(out, items.len() as u16);
            for it in items {
                put_u64(out, it.region);
                put_u32(out, it.offset);
                put_u32(out, it.records);
            }
        }
        Request::Search { addr, key } | Request::Remove { addr, key } => {
            put_addr(out, addr);
            put_u64(out, key);
        }
        Request::Insert { addr, key, value } | Request::Update { addr, key, value } => {
            put_addr(out, addr);
            put_u64(out, key);
            put_u64(out, value);
        }
        Request::Range {
            addr,
            lo,
            hi,
            limit,
        } => {
            put_addr(out, addr);
            put_u64(out, lo);
            put_u64(out, hi);
            put_u32(out, limit);
        }
    }
}

/// Decodes a request body: its id and the request. When the id could be read but the rest is
/// bad, the error comes with it (`Err((Some(id), e))`) so a server can answer BAD_REQUEST.
pub fn decode_request(body: &[u8]) -> Result<(u64, Request), (Option<u64>, WireError)> {
    let mut c = Cursor::new(body);
    let id = c.u64("request id").map_err(|e| (None, e))?;
    decode_request_rest(&mut c)
        .map(|r| (id, r))
        .map_err(|e| (Some(id), e))
}

fn decode_request_rest(c: &mut Cursor<'_>) -> Result<Request, WireError> {
    let op = c.u8("op")?;
    let req = match op {
        OP_HELLO => Request::Hello {
            client_id: c.u64("client id")?,
        },
        OP_LAYOUT => Request::Layout {
            client_id: c.u64("client id")?,
        },
        OP_ACK => Request::Ack {
            client_id: c.u64("client id")?,
            version: c.u64("version")?,
        },
        OP_RETRAIN => Request::Retrain,
        OP_LOCK => Request::Lock,
        OP_UNLOCK => Request::Unlock,
        OP_READ => {
            let n = c.u16("read count")?;
            if n > MAX_READ_ITEMS {
                return Err(WireError::malformed(format!(
                    "READ of {n} items (at most {MAX_READ_ITEMS})"
                )));
            }
            let mut items = Vec::with_capacity(usize::from(n));
            for _ in 0..n {
                let it = ReadItem {
                    region: c.u64("region")?,
                    offset: c.u32("offset")?,
                    records: c.u32("records")?,
                };
                if it.records > MAX_READ_RECORDS {
                    return Err(WireError::malformed(format!(
                        "READ of {} records (at most {MAX_READ_RECORDS})",
                        it.records
                    )));
                }
                items.push(it);
            }
            Request::Read { items }
        }
        OP_READ_MODEL => Request::ReadModel,
        OP_READ_BIN => Request::ReadBin {
            region: c.u64("region")?,
            position: c.u32("position")?,
            child: c.u32("child")?,
        },
        OP_SEARCH => Request::Search {
            addr: get_addr(c)?,
            key: c.u64("key")?,
        },
        OP_INSERT => Request::Insert {
            addr: get_addr(c)?,
            key: c.u64("key")?,
            value: c.u64("value")?,
        },
        OP_UPDATE => Request::Update {
            addr: get_addr(c)?,
            key: c.u64("key")?,
            value: c.u64("value")?,
        },
        OP_REMOVE => Request::Remove {
            addr: get_addr(c)?,
            key: c.u64("key")?,
        },
        OP_RANGE => {
            let r = Request::Range {
                addr: get_addr(c)?,
                lo: c.u64("lo")?,
                hi: c.u64("hi")?,
                limit: c.u32("limit")?,
            };
            if let Request::Range { limit, .. } = r
                && limit > MAX_RANGE_LIMIT
            {
                return Err(WireError::malformed(format!(
                    "RANGE limit {limit} (at most {MAX_RANGE_LIMIT})"
                )));
            }
            r
        }
        other => return Err(WireError::malformed(format!("unknown op {other:#04x}"))),
    };
    c.finish()?;
    Ok(req)
}

/// Appends the body of `reply` to `out`.
pub fn encode_reply(reply: &Reply, out: &mut Vec<u8>) {
    put_u64(out, reply.id);
    out.push(reply.op);
    out.push(reply.status);
    put_u64(out, reply.version);
    match &reply.payload {
        Payload::Empty => {}
        Payload::Hello {
            client_id,
            shard_lo,
            shard_hi,
        } => {
            put_u64(out, *client_id);
            put_u64(out, *shard_lo);
            put_u64(out, *shard_hi);
        }
        Payload::Layout(l) => encode_layout(l, out),
        Payload::Read(results) => {
            for r in results {
                match r {
                    ReadResult::Stale => out.push(STATUS_STALE),
                    ReadResult::Words(w) => {
                        out.push(STATUS_OK);
                        put_u32(out, (w.len().saturating_sub(2) / 3) as u32);
                        for &x in w {
                            put_u64(out, x);
                        }
                    }
                }
            }
        }
        Payload::Model { head, layout, tail } => {
            put_u64(out, *head);
            encode_layout(layout, out);
            put_u64(out, *tail);
        }
        Payload::Bin(BinResult::Stale) => out.push(STATUS_STALE),
        Payload::Bin(BinResult::Copy(b)) => {
            out.push(STATUS_OK);
            put_u64(out, b.head);
            put_u64(out, b.aux);
            put_u32(out, b.entries.len() as u32);
            for &(k, v) in &b.entries {
                put_u64(out, k);
                put_u64(out, v);
            }
            put_u64(out, b.tail);
        }
        Payload::Value(v) => {
            out.push(u8::from(v.is_some()));
            put_u64(out, v.unwrap_or(0));
        }
        Payload::Range(entries) => {
            put_u32(out, entries.len() as u32);
            for &(k, v) in entries {
                put_u64(out, k);
                put_u64(out, v);
            }
        }
        Payload::Message(m) => {
            let bytes = m.as_bytes();
            let n = bytes.len().min(MAX_MESSAGE_BYTES);
            // Cut on a char boundary so the message stays UTF-8.
            let n = (0..=n).rev().find(|&i| m.is_char_boundary(i)).unwrap_or(0);
            put_u16(out, n as u16);
            out.extend(bytes.iter().take(n));
        }
    }
}

fn encode_layout(l: &WireLayout, out: &mut Vec<u8>) {
    put_u64(out, l.version);
    put_u64(out, l.eps);
    put_u64(out, l.shard_lo);
    put_u64(out, l.shard_hi);
    put_u32(out, l.regions.len() as u32);
    for r in &l.regions {
        put_u64(out, r.id);
        put_u64(out, r.first_key);
        put_u32(out, r.records);
        let s = &r.segments;
        put_u32(out, s.len() as u32);
        for ((&k, &slope), &c) in s.keys.iter().zip(&s.slopes).zip(&s.intercepts) {
            put_u64(out, k);
            put_u32(out, slope.to_bits());
            put_u32(out, c);
        }
    }
}

/// Checks that `n` items of `each` bytes can still be in the body.
fn check_count(c: &Cursor<'_>, n: u64, each: u64, what: &str) -> Result<usize, WireError> {
    if n.saturating_mul(each) > c.remaining() as u64 {
        return Err(WireError::malformed(format!(
            "{n} {what} cannot fit in the {} bytes left",
            c.remaining()
        )));
    }
    usize::try_from(n).map_err(|_| WireError::malformed(format!("{n} {what}")))
}

fn decode_layout(c: &mut Cursor<'_>) -> Result<WireLayout, WireError> {
    let version = c.u64("version")?;
    let eps = c.u64("eps")?;
    let shard_lo = c.u64("shard lo")?;
    let shard_hi = c.u64("shard hi")?;
    let n = c.u32("region count")?;
    let n = check_count(c, u64::from(n), 24, "regions")?;
    let mut regions = Vec::with_capacity(n);
    for _ in 0..n {
        let id = c.u64("region id")?;
        let first_key = c.u64("first key")?;
        let records = c.u32("records")?;
        let m = c.u32("segment count")?;
        let m = check_count(c, u64::from(m), 16, "segments")?;
        let mut segments = Segments::default();
        for _ in 0..m {
            let key = c.u64("segment key")?;
            let slope = f32::from_bits(c.u32("slope")?);
            let intercept = c.u32("intercept")?;
            if segments.keys.last().is_some_and(|&k| k >= key) {
                return Err(WireError::malformed("segment keys not increasing"));
            }
            segments.keys.push(key);
            segments.slopes.push(slope);
            segments.intercepts.push(intercept);
        }
        if regions
            .last()
            .is_some_and(|r: &WireRegion| r.first_key >= first_key)
        {
            return Err(WireError::malformed("region first keys not increasing"));
        }
        regions.push(WireRegion {
            id,
            first_key,
            records,
            segments,
        });
    }
    Ok(WireLayout {
        version,
        eps,
        shard_lo,
        shard_hi,
        regions,
    })
}

/// Decodes a reply body.
pub fn decode_reply(body: &[u8]) -> Result<Reply, WireError> {
    let mut c = Cursor::new(body);
    let id = c.u64("request id")?;
    let op = c.u8("op")?;
    let status = c.u8("status")?;
    let version = c.u64("layout version")?;
    let payload = match status {
        STATUS_OK | STATUS_RETIRED => decode_payload(op, &mut c)?,
        STATUS_BAD_REQUEST => {
            let n = c.u16("message length")?;
            let bytes = c.bytes(usize::from(n), "message")?;
            Payload::Message(String::from_utf8_lossy(bytes).into_owned())
        }
        STATUS_STALE | STATUS_WRONG_SHARD => Payload::Empty,
        other => return Err(WireError::malformed(format!("unknown status {other}"))),
    };
    c.finish()?;
    Ok(Reply {
        id,
        op,
        status,
        version,
        payload,
    })
}

fn decode_payload(op: u8, c: &mut Cursor<'_>) -> Result<Payload, WireError> {
    Ok(match op {
        OP_HELLO => Payload::Hello {
            client_id: c.u64("client id")?,
            shard_lo: c.u64("shard lo")?,
            shard_hi: c.u64("shard hi")?,
        },
        OP_LAYOUT => Payload::Layout(decode_layout(c)?),
        OP_ACK | OP_RETRAIN | OP_LOCK | OP_UNLOCK => Payload::Empty,
        OP_READ => {
            let mut results = Vec::new();
            while c.remaining() > 0 {
                if results.len() >= usize::from(MAX_READ_ITEMS) {
                    return Err(WireError::malformed("READ reply with too many items"));
                }
                match c.u8("read status")? {
                    STATUS_STALE => results.push(ReadResult::Stale),
                    STATUS_OK => {
                        let n = c.u32("records")?;
                        if n > MAX_READ_RECORDS {
                            return Err(WireError::malformed(format!("READ reply of {n} records")));
                        }
                        let words = check_count(c, u64::from(n) * 3 + 2, 8, "words")?;
                        let mut w = Vec::with_capacity(words);
                        for _ in 0..words {
                            w.push(c.u64("word")?);
                        }
                        results.push(ReadResult::Words(w));
                    }
                    other => {
                        return Err(WireError::malformed(format!("unknown read status {other}")));
                    }
                }
            }
            Payload::Read(results)
        }
        OP_READ_MODEL => Payload::Model {
            head: c.u64("head version")?,
            layout: decode_layout(c)?,
            tail: c.u64("tail version")?,
        },
        OP_READ_BIN => match c.u8("bin status")? {
            STATUS_STALE => Payload::Bin(BinResult::Stale),
            STATUS_OK => {
                let head = c.u64("head version")?;
                let aux = c.u64("aux")?;
                let n = c.u32("bin entries")?;
                if n > MAX_BIN_ENTRIES {
                    return Err(WireError::malformed(format!("bin copy of {n} entries")));
                }
                let n = check_count(c, u64::from(n), 16, "bin entries")?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    entries.push((c.u64("key")?, c.u64("value")?));
                }
                let tail = c.u64("tail version")?;
                Payload::Bin(BinResult::Copy(BinCopy {
                    head,
                    aux,
                    entries,
                    tail,
                }))
            }
            other => return Err(WireError::malformed(format!("unknown bin status {other}"))),
        },
        OP_SEARCH | OP_INSERT | OP_UPDATE | OP_REMOVE => {
            let found = c.u8("found")?;
            let value = c.u64("value")?;
            match found {
                0 => Payload::Value(None),
                1 => Payload::Value(Some(value)),
                other => return Err(WireError::malformed(format!("found flag {other}"))),
            }
        }
        OP_RANGE => {
            let n = c.u32("range count")?;
            let n = check_count(c, u64::from(n), 16, "range entries")?;
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                entries.push((c.u64("key")?, c.u64("value")?));
            }
            Payload::Range(entries)
        }
        other => return Err(WireError::malformed(format!("unknown op {other:#04x}"))),
    })
}
