//! A small blocking RESP2 client, enough for `lidb stress --serve`: requests are arrays of bulk
//! strings; replies are read whole (simple string, error, integer, bulk, null, array) or not at
//! all. Each call is one request and its reply: the stress target's operations are single
//! requests (a batch is one MSET), so nothing is pipelined.
//!
//! Threads: a [`Conn`] is one thread's at a time (`&mut self`); the parser is pure over any
//! `BufRead`.
//!
//! Invariants: a reply cut short, malformed or past the limits below is an error, never a panic
//! and never an allocation of the size a bogus length names; every socket has read and write
//! timeouts ([`IO_TIMEOUT`]), so a dead or hung server fails a call within seconds.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connect, read and write timeout of every socket.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest reply line (type byte, text, CRLF) the client reads.
const MAX_LINE: u64 = 64 << 10;
/// Largest bulk string and longest array the client accepts.
const MAX_BULK: i64 = 64 << 20;
const MAX_ITEMS: i64 = 1 << 20;
/// Deepest nesting of arrays (LIDB.RANGE replies nest one deep).
const MAX_DEPTH: usize = 8;

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    /// The null bulk string (`$-1`) or the null array (`*-1`).
    Nil,
    Array(Vec<Reply>),
}

/// Appends one request, a RESP array of bulk strings, to `out`.
pub fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn io_error(e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no reply within {} s", IO_TIMEOUT.as_secs())
        }
        _ => e.to_string(),
    }
}

/// One line without its CRLF.
fn read_line(r: &mut impl BufRead) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    (&mut *r)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)
        .map_err(io_error)?;
    if line.is_empty() {
        return Err("connection closed".into());
    }
    match line.strip_suffix(b"\r\n") {
        Some(text) => Ok(text.to_vec()),
        None => Err("truncated reply line".into()),
    }
}

fn parse_int(text: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("bad number {:?}", String::from_utf8_lossy(text)))
}

/// Reads one whole reply. A reply cut short, malformed or past the limits is an error.
pub fn read_reply(r: &mut impl BufRead) -> Result<Reply, String> {
    read_nested(r, 0)
}

fn read_nested(r: &mut impl BufRead, depth: usize) -> Result<Reply, String> {
    let line = read_line(r)?;
    let (&kind, rest) = line.split_first().ok_or("empty reply line")?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Reply::Simple(text())),
        b'-' => Ok(Reply::Error(text())),
        b':' => parse_int(rest).map(Reply::Integer),
        b'$' => match parse_int(rest)? {
            -1 => Ok(Reply::Nil),
            n if (0..=MAX_BULK).contains(&n) => {
                let n = n as usize;
                let mut bytes = Vec::new();
                (&mut *r)
                    .take(n as u64 + 2)
                    .read_to_end(&mut bytes)
                    .map_err(io_error)?;
                if bytes.len() < n + 2 {
                    return Err("truncated bulk string".into());
                }
                if bytes.get(n..) != Some(b"\r\n") {
                    return Err("bulk string not ended by CRLF".into());
                }
                bytes.truncate(n);
                Ok(Reply::Bulk(bytes))
            }
            n => Err(format!("bad bulk length {n}")),
        },
        b'*' => match parse_int(rest)? {
            -1 => Ok(Reply::Nil),
            _ if depth >= MAX_DEPTH => Err("arrays nested too deep".into()),
            n if (0..=MAX_ITEMS).contains(&n) => {
                let mut items = Vec::with_capacity((n as usize).min(64));
                for _ in 0..n {
                    items.push(read_nested(r, depth + 1)?);
                }
                Ok(Reply::Array(items))
            }
            n => Err(format!("bad array length {n}")),
        },
        other => Err(format!("unknown reply type {:?}", char::from(other))),
    }
}

/// One client connection, blocking, with timeouts.
#[derive(Debug)]
pub struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Result<Conn, String> {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let setup = |s: &TcpStream| -> std::io::Result<()> {
            s.set_read_timeout(Some(IO_TIMEOUT))?;
            s.set_write_timeout(Some(IO_TIMEOUT))?;
            s.set_nodelay(true)
        };
        setup(&s).map_err(|e| format!("setting up the connection to {addr}: {e}"))?;
        Ok(Conn {
            stream: BufReader::new(s),
        })
    }

    /// Sends one request and reads its reply (an error reply is `Ok(Reply::Error)`).
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut out = Vec::new();
        encode(args, &mut out);
        self.stream.get_mut().write_all(&out).map_err(io_error)?;
        read_reply(&mut self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::{Reply, encode, read_reply};

    fn parse(bytes: &[u8]) -> Result<Reply, String> {
        let mut stream = bytes;
        read_reply(&mut stream)
    }

    #[test]
    fn every_reply_type_parses() {
        assert_eq!(parse(b"+OK\r\n"), Ok(Reply::Simple("OK".into())));
        assert_eq!(
            parse(b"-ERR engine: no\r\n"),
            Ok(Reply::Error("ERR engine: no".into()))
        );
        assert_eq!(parse(b":-42\r\n"), Ok(Reply::Integer(-42)));
        assert_eq!(
            parse(b"$4\r\na\r\nb\r\n"),
            Ok(Reply::Bulk(b"a\r\nb".to_vec()))
        );
        assert_eq!(parse(b"$0\r\n\r\n"), Ok(Reply::Bulk(Vec::new())));
        assert_eq!(parse(b"$-1\r\n"), Ok(Reply::Nil));
        assert_eq!(parse(b"*-1\r\n"), Ok(Reply::Nil));
        assert_eq!(parse(b"*0\r\n"), Ok(Reply::Array(Vec::new())));
        assert_eq!(
            parse(b"*2\r\n$-1\r\n*2\r\n$1\r\n\x00\r\n:7\r\n"),
            Ok(Reply::Array(vec![
                Reply::Nil,
                Reply::Array(vec![Reply::Bulk(vec![0]), Reply::Integer(7)])
            ]))
        );
    }

    #[test]
    fn replies_in_a_row_are_read_one_at_a_time() {
        let mut stream: &[u8] = b"+OK\r\n:1\r\n$-1\r\n";
        assert_eq!(read_reply(&mut stream), Ok(Reply::Simple("OK".into())));
        assert_eq!(read_reply(&mut stream), Ok(Reply::Integer(1)));
        assert_eq!(read_reply(&mut stream), Ok(Reply::Nil));
        assert_eq!(
            read_reply(&mut stream),
            Err("connection closed".to_string())
        );
    }

    #[test]
    fn a_truncated_reply_is_an_error() {
        let whole: &[u8] = b"*3\r\n+OK\r\n$5\r\nhello\r\n:12\r\n";
        assert!(parse(whole).is_ok());
        for cut in 0..whole.len() {
            let part = whole.get(..cut).unwrap_or_default();
            assert!(parse(part).is_err(), "cut at {cut} parsed");
        }
    }

    #[test]
    fn malformed_replies_are_errors() {
        let bad_replies: [&[u8]; 8] = [
            b"?x\r\n",
            b"+OK\n",
            b":12a\r\n",
            b"$-2\r\n",
            b"$3\r\nabcd\r\n",
            b"$99999999999\r\n",
            b"*-5\r\n",
            b"\r\n",
        ];
        for bad in bad_replies {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let deep = b"*1\r\n".repeat(100);
        assert_eq!(parse(&deep), Err("arrays nested too deep".to_string()));
    }

    #[test]
    fn requests_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&[b"SET", b"\x00\r\n", b""], &mut out);
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$3\r\n\x00\r\n\r\n$0\r\n\r\n".to_vec()
        );
    }
}
