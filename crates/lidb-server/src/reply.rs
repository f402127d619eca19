//! Replies and their two wire forms: RESP2 for every client, RESP3 for a connection that asked
//! for it with `HELLO 3` (`session.rs`).
//!
//! Pure: no I/O; called on the engine pool's threads (a batch encodes its replies as it runs, so
//! a HELLO in the middle of a pipeline changes the form of the replies after it only) and on a
//! connection's task (in-memory reads, error replies).
//!
//! Invariants:
//! 1. A reply is encoded whole into the caller's buffer and never fails.
//! 2. RESP2 bytes are what the `redis-protocol` crate's RESP2 encoder writes for the same reply
//!    (lidb sent those before it spoke RESP3; a client that never sends HELLO sees no change):
//!    a map is a flat array of its keys and values, a null `$-1`, a verbatim string a bulk one.
//! 3. RESP3 adds only the types Redis uses for lidb's commands: a map (`%`) for HELLO, CONFIG
//!    GET and COMMAND DOCS, a null (`_`) for every missing value, a verbatim string (`=`) for
//!    INFO. Every other reply has the same bytes in both protocols.

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol of a connection; RESP2 until a `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    /// The number `HELLO` takes and reports.
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply, in the terms of RESP3 (RESP2 is written from it).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`: a line without CR or LF.
    Status(Bytes),
    /// `-ERR ...`: a line that starts with its code and holds no CR or LF (build it with
    /// [`Reply::error`]).
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Null,
    Array(Vec<Reply>),
    /// Pairs in the order given: `%` in RESP3, a flat array of 2n items in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Text to show as it is (INFO): `=` with format `txt` in RESP3, a bulk string in RESP2.
    Verbatim(Bytes),
}

impl Reply {
    /// An error reply; `msg` starts with its code (`ERR ...`). CR and LF become spaces, as an
    /// error line cannot hold them (a client's argument quoted in it may).
    pub fn error(msg: impl AsRef<str>) -> Reply {
        let line: String = msg
            .as_ref()
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        Reply::Error(line.into())
    }

    /// Appends the reply to `out` in `protocol`.
    pub fn encode(&self, protocol: Protocol, out: &mut BytesMut) {
        let resp3 = protocol == Protocol::Resp3;
        match self {
            Reply::Status(line) => line_of(b'+', line, out),
            Reply::Error(line) => line_of(b'-', line, out),
            Reply::Integer(n) => {
                out.put_u8(b':');
                decimal(*n, out);
                out.put_slice(b"\r\n");
            }
            Reply::Bulk(data) => blob(b'$', &[data], out),
            Reply::Null if resp3 => out.put_slice(b"_\r\n"),
            Reply::Null => out.put_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                header(b'*', items.len(), out);
                for item in items {
                    item.encode(protocol, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    header(b'%', pairs.len(), out);
                } else {
                    header(b'*', pairs.len() * 2, out);
                }
                for (key, value) in pairs {
                    key.encode(protocol, out);
                    value.encode(protocol, out);
                }
            }
            Reply::Verbatim(text) if resp3 => blob(b'=', &[b"txt:", text], out),
            Reply::Verbatim(text) => blob(b'$', &[text], out),
        }
    }
}

fn line_of(kind: u8, line: &[u8], out: &mut BytesMut) {
    out.reserve(line.len() + 3);
    out.put_u8(kind);
    out.put_slice(line);
    out.put_slice(b"\r\n");
}

fn header(kind: u8, len: usize, out: &mut BytesMut) {
    out.put_u8(kind);
    decimal(len as i64, out);
    out.put_slice(b"\r\n");
}

/// A length-prefixed string made of `parts`.
fn blob(kind: u8, parts: &[&[u8]], out: &mut BytesMut) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(len + 24);
    header(kind, len, out);
    for part in parts {
        out.put_slice(part);
    }
    out.put_slice(b"\r\n");
}

/// `n` in decimal, without an allocation.
fn decimal(n: i64, out: &mut BytesMut) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        if let Some(d) = digits.get_mut(at) {
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.put_u8(b'-');
    }
    out.put_slice(digits.get(at..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use redis_protocol::resp2::encode::extend_encode;
    use redis_protocol::resp2::types::BytesFrame;

    /// The RESP2 frame lidb sent for `reply` before RESP3 (invariant 2).
    fn resp2_frame(reply: &Reply) -> BytesFrame {
        match reply {
            Reply::Status(s) => BytesFrame::SimpleString(s.clone()),
            Reply::Error(e) => BytesFrame::Error(String::from_utf8(e.to_vec()).unwrap().into()),
            Reply::Integer(n) => BytesFrame::Integer(*n),
            Reply::Bulk(b) | Reply::Verbatim(b) => BytesFrame::BulkString(b.clone()),
            Reply::Null => BytesFrame::Null,
            Reply::Array(items) => BytesFrame::Array(items.iter().map(resp2_frame).collect()),
            Reply::Map(pairs) => BytesFrame::Array(
                pairs
                    .iter()
                    .flat_map(|(k, v)| [resp2_frame(k), resp2_frame(v)])
                    .collect(),
            ),
        }
    }

    fn samples() -> Vec<Reply> {
        let b = |s: &'static str| Reply::Bulk(Bytes::from_static(s.as_bytes()));
        vec![
            Reply::Status(Bytes::from_static(b"OK")),
            Reply::Error(Bytes::from_static(b"ERR syntax error")),
            Reply::Integer(0),
            Reply::Integer(-1),
            Reply::Integer(i64::MIN),
            Reply::Integer(i64::MAX),
            b(""),
            Reply::Bulk(Bytes::from_static(b"\0\r\n\xff")),
            Reply::Null,
            Reply::Array(vec![]),
            Reply::Array(vec![
                b("a"),
                Reply::Null,
                Reply::Array(vec![Reply::Integer(7)]),
            ]),
            Reply::Map(vec![]),
            Reply::Map(vec![(b("save"), b("")), (b("proto"), Reply::Integer(3))]),
            Reply::Verbatim(Bytes::from_static(b"# Server\r\nx:1\r\n")),
        ]
    }

    #[test]
    fn resp2_is_byte_for_byte_what_redis_protocol_writes() {
        for reply in samples() {
            let mut ours = BytesMut::new();
            reply.encode(Protocol::Resp2, &mut ours);
            let mut theirs = BytesMut::new();
            extend_encode(&mut theirs, &resp2_frame(&reply), false).unwrap();
            assert_eq!(ours, theirs, "{reply:?}");
        }
    }

    #[test]
    fn resp3_decodes_as_the_resp3_types() {
        use redis_protocol::resp3::decode::complete::decode_bytes_mut;
        use redis_protocol::resp3::types::{BytesFrame as F, VerbatimStringFormat};
        for reply in samples() {
            let mut ours = BytesMut::new();
            reply.encode(Protocol::Resp3, &mut ours);
            let (frame, used, _) = decode_bytes_mut(&mut ours.clone()).unwrap().unwrap();
            assert_eq!(used, ours.len(), "{reply:?}");
            match (&reply, frame) {
                (Reply::Null, f) => assert_eq!(f, F::Null),
                (Reply::Map(pairs), F::Map { data, .. }) => assert_eq!(data.len(), pairs.len()),
                (Reply::Verbatim(text), F::VerbatimString { data, format, .. }) => {
                    assert_eq!(data, *text);
                    assert_eq!(format, VerbatimStringFormat::Text);
                }
                (Reply::Map(_) | Reply::Verbatim(_), f) => panic!("{reply:?} decoded as {f:?}"),
                _ => {
                    let mut resp2 = BytesMut::new();
                    reply.encode(Protocol::Resp2, &mut resp2);
                    if !format!("{reply:?}").contains("Null") {
                        assert_eq!(ours, resp2, "{reply:?} differs between protocols");
                    }
                }
            }
        }
    }
}
