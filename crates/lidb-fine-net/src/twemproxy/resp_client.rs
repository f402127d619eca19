//! A minimal blocking RESP2 client: GET and SET of u64 keys and values as decimal text, one
//! request and one reply per call (1 round trip per op), for the twemproxy baseline. Frames are
//! encoded and decoded by the redis-protocol crate, as `lidb serve` does; this file only moves
//! bytes and maps replies.
//!
//! Threads: one owner thread (`&mut self`). Every read is bounded: a reply of at most
//! [`MAX_REPLY`] bytes buffered (a value is at most 20 digits, so [`MAX_BULK`] bounds a bulk
//! string) and the socket's read timeout; anything else is a [`WireError::Malformed`], never a
//! panic.

use std::io::{BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::BytesMut;
use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::encode::extend_encode_borrowed;
use redis_protocol::resp2::types::{BorrowedFrame, OwnedFrame};

use crate::error::WireError;
use crate::resp_shard::parse_decimal;
use crate::target::Target;

/// Longest bulk string (a value is at most 20 digits).
pub const MAX_BULK: usize = 1024;
/// Most bytes one reply may take before it is refused (a status line or error up to 4 KiB, or
/// one bulk string).
pub const MAX_REPLY: usize = 4096 + MAX_BULK;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespReply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
}

/// A connection to a RESP server or proxy.
#[derive(Debug)]
pub struct RespClient {
    reader: TcpStream,
    writer: BufWriter<TcpStream>,
    round_trips: u64,
    /// Bytes read and not yet decoded (the start of the next reply).
    pending: Vec<u8>,
    /// Requests encoded and not yet written.
    out: BytesMut,
}

impl RespClient {
    /// Connects to `addr`; every reply must arrive within `timeout`.
    pub fn connect(addr: &str, timeout: Duration) -> Result<RespClient, WireError> {
        let target = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| WireError::malformed(format!("{addr}: no address")))?;
        let stream = TcpStream::connect_timeout(&target, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let w = stream.try_clone()?;
        Ok(RespClient {
            reader: stream,
            writer: BufWriter::new(w),
            round_trips: 0,
            pending: Vec::new(),
            out: BytesMut::new(),
        })
    }

    /// Encodes one command into the output buffer.
    fn encode(&mut self, args: &[&[u8]]) -> Result<(), WireError> {
        let items: Vec<BorrowedFrame> = args.iter().map(|a| BorrowedFrame::BulkString(a)).collect();
        extend_encode_borrowed(&mut self.out, &BorrowedFrame::Array(&items), false)
            .map_err(|e| WireError::malformed(format!("RESP encode: {e}")))?;
        Ok(())
    }

    /// Writes what is encoded and flushes it.
    fn send(&mut self) -> Result<(), WireError> {
        self.writer.write_all(&self.out)?;
        self.out.clear();
        self.writer.flush()?;
        Ok(())
    }

    /// Sends one command and reads its reply.
    pub fn request(&mut self, args: &[&[u8]]) -> Result<RespReply, WireError> {
        self.encode(args)?;
        self.send()?;
        self.round_trips += 1;
        self.read_reply()
    }

    /// Reads until one whole reply is buffered, decodes it and keeps what follows it.
    fn read_reply(&mut self) -> Result<RespReply, WireError> {
        loop {
            let decoded = decode(&self.pending)
                .map_err(|e| WireError::malformed(format!("RESP reply: {e}")))?;
            if let Some((frame, used)) = decoded {
                // redis-protocol takes a bulk string's length and skips two bytes after it
                // without reading them: a frame must end in CRLF.
                let whole = self.pending.get(..used).unwrap_or(&[]);
                if !whole.ends_with(b"\r\n") {
                    return Err(WireError::malformed("RESP reply without its final CRLF"));
                }
                self.pending.drain(..used.min(self.pending.len()));
                return reply_of(frame);
            }
            if self.pending.len() >= MAX_REPLY {
                return Err(WireError::malformed(format!(
                    "RESP reply longer than {MAX_REPLY} bytes"
                )));
            }
            let mut chunk = [0u8; 4096];
            let n = self.reader.read(&mut chunk)?;
            if n == 0 {
                return Err(WireError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.pending
                .extend_from_slice(chunk.get(..n).unwrap_or(&[]));
        }
    }

    /// SETs every entry in one pipelined batch (one round trip): all requests, then all
    /// replies.
    pub fn set_many(&mut self, entries: &[(u64, u64)]) -> Result<(), WireError> {
        for (k, v) in entries {
            let (k, v) = (k.to_string(), v.to_string());
            self.encode(&[b"SET", k.as_bytes(), v.as_bytes()])?;
        }
        self.send()?;
        self.round_trips += 1;
        for &(k, _) in entries {
            match self.read_reply()? {
                RespReply::Simple(s) if s == "OK" => {}
                other => return Err(refused("SET", k, other)),
            }
        }
        Ok(())
    }

    /// GET `key`: its value, None when absent.
    pub fn get(&mut self, key: u64) -> Result<Option<u64>, WireError> {
        let k = key.to_string();
        match self.request(&[b"GET", k.as_bytes()])? {
            RespReply::Bulk(None) => Ok(None),
            RespReply::Bulk(Some(v)) => parse_decimal(&v).map(Some).ok_or_else(|| {
                WireError::malformed(format!(
                    "GET {key}: value {:?} is not a u64",
                    String::from_utf8_lossy(&v)
                ))
            }),
            other => Err(refused("GET", key, other)),
        }
    }

    /// SET `key` `value`.
    pub fn set(&mut self, key: u64, value: u64) -> Result<(), WireError> {
        let (k, v) = (key.to_string(), value.to_string());
        match self.request(&[b"SET", k.as_bytes(), v.as_bytes()])? {
            RespReply::Simple(s) if s == "OK" => Ok(()),
            other => Err(refused("SET", key, other)),
        }
    }

    pub fn round_trips(&self) -> u64 {
        self.round_trips
    }
}

/// A decoded frame as a reply this client reads: a bulk string of at most [`MAX_BULK`] bytes,
/// no arrays.
fn reply_of(frame: OwnedFrame) -> Result<RespReply, WireError> {
    match frame {
        OwnedFrame::SimpleString(s) => {
            Ok(RespReply::Simple(String::from_utf8_lossy(&s).into_owned()))
        }
        OwnedFrame::Error(e) => Ok(RespReply::Error(e)),
        OwnedFrame::Integer(i) => Ok(RespReply::Integer(i)),
        OwnedFrame::Null => Ok(RespReply::Bulk(None)),
        OwnedFrame::BulkString(b) if b.len() <= MAX_BULK => Ok(RespReply::Bulk(Some(b))),
        OwnedFrame::BulkString(b) => Err(WireError::malformed(format!(
            "RESP bulk string of {} bytes (at most {MAX_BULK})",
            b.len()
        ))),
        OwnedFrame::Array(_) => Err(WireError::malformed(
            "RESP reply of type array (this client reads +, -, :, $)",
        )),
    }
}

fn refused(cmd: &str, key: u64, reply: RespReply) -> WireError {
    WireError::BadRequest {
        detail: format!("{cmd} {key}: {reply:?}"),
    }
}

impl Target for RespClient {
    fn get(&mut self, key: u64) -> Result<Option<u64>, WireError> {
        RespClient::get(self, key)
    }
    /// SET returns no old value: an acknowledged SET is the right answer.
    fn update_ok(&mut self, key: u64, value: u64) -> Result<bool, WireError> {
        self.set(key, value).map(|()| true)
    }
    fn insert_ok(&mut self, key: u64, value: u64) -> Result<bool, WireError> {
        self.set(key, value).map(|()| true)
    }
    fn range(&mut self, lo: u64, _hi: u64, _limit: u32) -> Result<Vec<(u64, u64)>, WireError> {
        Err(WireError::BadRequest {
            detail: format!(
                "scan from {lo}: twemproxy hashes keys over its servers and has no range scans"
            ),
        })
    }
    fn round_trips(&self) -> u64 {
        self.round_trips
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// GET 1 against a one-connection server that answers `reply` (then waits for the client
    /// to close, so no reset races the reply).
    fn get_with_reply(reply: Vec<u8>) -> Result<Result<Option<u64>, WireError>, WireError> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let server = std::thread::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = listener.accept()?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(&reply)?;
            s.shutdown(std::net::Shutdown::Write)?;
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
            Ok(())
        });
        let got = {
            let mut c = RespClient::connect(&addr, Duration::from_secs(5))?;
            c.get(1)
        };
        let _ = server.join();
        Ok(got)
    }

    #[test]
    fn replies_are_read_or_refused() -> Result<(), WireError> {
        assert_eq!(get_with_reply(b"$1\r\n7\r\n".to_vec())?.ok(), Some(Some(7)));
        assert_eq!(get_with_reply(b"$-1\r\n".to_vec())?.ok(), Some(None));
        for bad in [
            &b"-ERR engine: no\r\n"[..],
            b"$99999999\r\n",
            b"$2\r\n7",
            b"*1\r\n$1\r\n7\r\n",
            b"$3\r\nabc\r\n",
            b"$1\r\n7xx",
            b"+OK",
            b"",
        ] {
            assert!(get_with_reply(bad.to_vec())?.is_err(), "{bad:?}");
        }
        let long = vec![b'+'; MAX_REPLY + 10];
        assert!(get_with_reply(long)?.is_err());
        Ok(())
    }

    #[test]
    fn random_replies_never_panic() -> Result<(), WireError> {
        let seed = 12;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..64 {
            let n = rng.gen_range(0..64);
            let mut reply: Vec<u8> = (0..n).map(|_| rng.r#gen()).collect();
            if let Some(first) = reply.first_mut() {
                *first = *b"+-:$*".get(rng.gen_range(0..5)).unwrap_or(&b'$');
            }
            let _ = get_with_reply(reply)?;
        }
        Ok(())
    }
}
