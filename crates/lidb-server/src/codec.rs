//! The request decoder: bytes from a client to requests (each a list of arguments), a multibulk
//! (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, what clients send in RESP2 and RESP3 alike) or an inline
//! command (`GET k\r\n`, what nc, telnet and redis-benchmark's PING_INLINE send). Replies are
//! encoded in `reply.rs`.
//!
//! Pure: no I/O, no engine, so it is fuzzed (`fuzz/fuzz_targets/resp_request.rs`). One codec per
//! connection, used from that connection's task only.
//!
//! Invariants:
//! 1. No input makes it panic or allocate beyond the [`Limits`]: a multibulk's headers are checked
//!    against the limits as they arrive (element count, each bulk length, the bytes declared so
//!    far), before the frame is buffered whole, and an inline line longer than its cap is refused
//!    before its newline arrives. So a connection's read buffer holds at most one request of
//!    `max_request_bytes` (plus headers) that is still incomplete.
//! 2. A request over a limit, or malformed, is a [`DecodeError::Protocol`] with Redis's own
//!    message; the connection answers it and closes (as Redis does), since the stream can no
//!    longer be framed.
//! 3. Splitting the input at any points gives the same requests as feeding it whole.
//!
//! A multibulk is parsed here, in the one pass that checks its headers against the limits: its
//! arguments are zero-copy slices of the read buffer. The `redis-protocol` crate decoded each
//! frame a second time before; that second pass was a tenth of the server's CPU on pipelined
//! GETs, and the fuzz target checks this parser against that crate's decoder. Inline commands
//! are ours too (`inline.rs`).

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

use crate::inline;

/// Size caps on what one request may declare or hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest bulk string (one key, value or argument).
    pub max_bulk_bytes: u64,
    /// The most arguments in one request.
    pub max_args: u64,
    /// The most bytes of bulk strings one request may declare in all.
    pub max_request_bytes: u64,
    /// The longest inline command line.
    pub max_inline_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bulk_bytes: 16 << 20,
            max_args: 1 << 20,
            max_request_bytes: 64 << 20,
            max_inline_bytes: 64 << 10,
        }
    }
}

/// Why a connection's input cannot be decoded.
#[derive(Debug)]
pub enum DecodeError {
    /// Malformed or over a limit: the text after `-ERR ` that Redis sends before it closes.
    Protocol(String),
    /// The socket failed (tokio-util's codec traits need this case).
    Io(std::io::Error),
}

impl From<std::io::Error> for DecodeError {
    fn from(e: std::io::Error) -> DecodeError {
        DecodeError::Io(e)
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Protocol(m) => f.write_str(m),
            DecodeError::Io(e) => write!(f, "i/o: {e}"),
        }
    }
}

fn protocol(msg: impl Into<String>) -> DecodeError {
    DecodeError::Protocol(format!("Protocol error: {}", msg.into()))
}

/// The longest count line (`*N` or `$N`) accepted before its CRLF: Redis's own cap.
const MAX_COUNT_LINE: usize = 64 << 10;

/// Requests in (multibulk or inline).
#[derive(Debug, Clone, Default)]
pub struct RequestCodec {
    limits: Limits,
}

impl RequestCodec {
    pub fn new(limits: Limits) -> RequestCodec {
        RequestCodec { limits }
    }
}

/// What the header scan of a multibulk found.
enum Scan {
    /// More bytes are needed.
    Incomplete,
    /// A whole frame of this many bytes; each argument's offset and length within it.
    Frame {
        len: usize,
        args: Vec<(usize, usize)>,
    },
    /// `*0`, `*-1` and the like: a frame of this many bytes that is no command (Redis skips it).
    Empty { len: usize },
}

/// Reads `<digits>\r\n` at `at` after a type byte; `None` when the CRLF has not arrived.
fn count_line(buf: &[u8], at: usize, what: &str) -> Result<Option<(i64, usize)>, DecodeError> {
    let rest = buf.get(at..).unwrap_or_default();
    let Some(cr) = rest.iter().position(|&b| b == b'\r') else {
        if rest.len() > MAX_COUNT_LINE {
            return Err(protocol(format!("too big {what} count string")));
        }
        return Ok(None);
    };
    if rest.len() < cr + 2 {
        return Ok(None);
    }
    let digits = rest.get(..cr).unwrap_or_default();
    let n = std::str::from_utf8(digits)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse::<i64>().ok());
    match (n, rest.get(cr + 1)) {
        (Some(n), Some(b'\n')) => Ok(Some((n, at + cr + 2))),
        _ => Err(protocol(format!("invalid {what} length"))),
    }
}

/// Checks a multibulk's headers against the limits, up to what `buf` holds.
fn scan_multibulk(buf: &[u8], limits: &Limits) -> Result<Scan, DecodeError> {
    let Some((count, mut at)) = count_line(buf, 1, "multibulk")? else {
        return Ok(Scan::Incomplete);
    };
    if count <= 0 {
        return Ok(Scan::Empty { len: at });
    }
    if count as u64 > limits.max_args {
        return Err(protocol("invalid multibulk length"));
    }
    let mut declared: u64 = 0;
    let mut args = Vec::with_capacity((count as usize).min(64));
    for _ in 0..count {
        match buf.get(at) {
            None => return Ok(Scan::Incomplete),
            Some(b'$') => {}
            Some(&other) => {
                return Err(protocol(format!(
                    "expected '$', got '{}'",
                    char::from(other).escape_default()
                )));
            }
        }
        let Some((len, data)) = count_line(buf, at + 1, "bulk")? else {
            return Ok(Scan::Incomplete);
        };
        if len < 0 || len as u64 > limits.max_bulk_bytes {
            return Err(protocol("invalid bulk length"));
        }
        declared += len as u64;
        if declared > limits.max_request_bytes {
            return Err(protocol("request too big"));
        }
        let end = data + len as usize;
        match buf.get(end..end + 2) {
            None => return Ok(Scan::Incomplete),
            Some(b"\r\n") => at = end + 2,
            Some(_) => return Err(protocol("bulk string not followed by CRLF")),
        }
        args.push((data, len as usize));
    }
    Ok(Scan::Frame { len: at, args })
}

impl Decoder for RequestCodec {
    type Item = Vec<Bytes>;
    type Error = DecodeError;

    /// The next request of `buf`, consuming its bytes; `None` until one is complete. Empty
    /// requests (blank inline lines, `*0`) are consumed and skipped.
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, DecodeError> {
        loop {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first != b'*' {
                match inline::decode(buf, self.limits.max_inline_bytes)? {
                    Some(args) if args.is_empty() => continue,
                    other => return Ok(other),
                }
            }
            match scan_multibulk(buf, &self.limits)? {
                Scan::Incomplete => return Ok(None),
                Scan::Empty { len } => {
                    let _ = buf.split_to(len);
                }
                Scan::Frame { len, args } => {
                    let whole = buf.split_to(len).freeze();
                    return Ok(Some(
                        args.into_iter()
                            .map(|(at, n)| whole.slice(at..at + n))
                            .collect(),
                    ));
                }
            }
        }
    }
}

/// Decodes every complete request of `input` as a connection would, stopping at the first error;
/// for the fuzz target and tests.
pub fn decode_all(
    input: &[u8],
    limits: Limits,
) -> (Vec<Vec<Bytes>>, Option<DecodeError>, BytesMut) {
    let mut codec = RequestCodec::new(limits);
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    loop {
        match codec.decode(&mut buf) {
            Ok(Some(req)) => out.push(req),
            Ok(None) => return (out, None, buf),
            Err(e) => return (out, Some(e), buf),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn small() -> Limits {
        Limits {
            max_bulk_bytes: 8,
            max_args: 4,
            max_request_bytes: 16,
            max_inline_bytes: 32,
        }
    }

    fn error_of(input: &[u8]) -> String {
        match decode_all(input, small()).1 {
            Some(DecodeError::Protocol(m)) => m,
            other => panic!("{input:?}: expected a protocol error, got {other:?}"),
        }
    }

    #[test]
    fn decodes_pipelines_of_both_kinds() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\n*0\r\n*1\r\n$4\r\nPI";
        let (reqs, err, rest) = decode_all(input, small());
        assert!(err.is_none());
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0], vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(reqs[1], vec![Bytes::from("PING")]);
        assert_eq!(&rest[..], b"*1\r\n$4\r\nPI");
    }

    #[test]
    fn binary_arguments_pass_through() {
        let input = b"*2\r\n$3\r\nGET\r\n$4\r\n\0\r\n\xff\r\n";
        let (reqs, err, _) = decode_all(input, small());
        assert!(err.is_none());
        assert_eq!(&reqs[0][1][..], b"\0\r\n\xff");
    }

    #[test]
    fn refuses_what_is_over_a_limit_or_malformed() {
        assert_eq!(
            error_of(b"*5\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error_of(b"*1\r\n$9\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error_of(b"*1\r\n$-5\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error_of(b"*1\r\n$99999999999999999999999\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error_of(b"*3\r\n$8\r\naaaaaaaa\r\n$8\r\nbbbbbbbb\r\n$1\r\n"),
            "Protocol error: request too big"
        );
        assert_eq!(
            error_of(b"*1\r\n:1\r\n"),
            "Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            error_of(b"*x\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error_of(b"*1\r\n$1\r\nab\r\n"),
            "Protocol error: bulk string not followed by CRLF"
        );
        assert_eq!(
            error_of(&[b'a'; 40]),
            "Protocol error: too big inline request"
        );
        assert_eq!(
            error_of(b"SET \"a b\n"),
            "Protocol error: unbalanced quotes in request"
        );
    }

    #[test]
    fn any_split_gives_the_same_requests() {
        let input: &[u8] =
            b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\nECHO 'x y'\n*1\r\n$4\r\nPING\r\n";
        let (whole, _, _) = decode_all(input, Limits::default());
        for cut in 0..input.len() {
            let mut codec = RequestCodec::default();
            let mut buf = BytesMut::from(&input[..cut]);
            let mut got = Vec::new();
            while let Some(r) = codec.decode(&mut buf).unwrap() {
                got.push(r);
            }
            buf.extend_from_slice(&input[cut..]);
            while let Some(r) = codec.decode(&mut buf).unwrap() {
                got.push(r);
            }
            assert_eq!(got, whole, "cut at {cut}");
        }
    }
}
