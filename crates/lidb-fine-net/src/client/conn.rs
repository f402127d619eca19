//! One client connection to one server: blocking request/reply, one round trip per call, with
//! reconnection after a broken socket.
//!
//! Owned by one client thread (`&mut self`). Counts round trips. A call that fails on I/O
//! reconnects (bounded tries over `reconnect_for`) and sends the request again: writes are
//! whole-value sets or removals, so a repeat leaves the same state, though the old value it
//! reports may then be the repeat's.

use std::io::{BufReader, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::codec::msg::{Reply, Request};
use crate::codec::{decode_reply, encode_frame, encode_request, read_frame};
use crate::error::WireError;

#[derive(Debug)]
struct Socket {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

/// A connection to one server.
#[derive(Debug)]
pub(crate) struct Conn {
    addr: String,
    socket: Option<Socket>,
    next_id: u64,
    body: Vec<u8>,
    frame: Vec<u8>,
    pub round_trips: u64,
    pub reconnects: u64,
    reconnect_for: Duration,
}

impl Conn {
    pub fn connect(addr: &str, reconnect_for: Duration) -> Result<Conn, WireError> {
        let mut c = Conn {
            addr: addr.to_string(),
            socket: None,
            next_id: 1,
            body: Vec::new(),
            frame: Vec::new(),
            round_trips: 0,
            reconnects: 0,
            reconnect_for,
        };
        c.socket = Some(open(addr)?);
        Ok(c)
    }

    /// Whether the last call had to reconnect (the caller re-introduces itself).
    pub fn call(&mut self, req: &Request) -> Result<(Reply, bool), WireError> {
        match self.try_call(req) {
            Ok(r) => return Ok((r, false)),
            Err(WireError::Io(_)) => {}
            Err(e) => return Err(e),
        }
        let started = Instant::now();
        let mut wait = Duration::from_millis(5);
        loop {
            self.socket = None;
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_millis(200));
            if let Ok(s) = open(&self.addr) {
                self.socket = Some(s);
                self.reconnects += 1;
                match self.try_call(req) {
                    Ok(r) => return Ok((r, true)),
                    Err(WireError::Io(e)) if started.elapsed() >= self.reconnect_for => {
                        return Err(WireError::Io(e));
                    }
                    Err(WireError::Io(_)) => {}
                    Err(e) => return Err(e),
                }
            } else if started.elapsed() >= self.reconnect_for {
                return Err(WireError::Io(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    format!("{} unreachable for {:?}", self.addr, self.reconnect_for),
                )));
            }
        }
    }

    fn try_call(&mut self, req: &Request) -> Result<Reply, WireError> {
        let Some(s) = self.socket.as_mut() else {
            return Err(WireError::Io(std::io::ErrorKind::NotConnected.into()));
        };
        let id = self.next_id;
        self.next_id += 1;
        self.body.clear();
        encode_request(id, req, &mut self.body);
        self.frame.clear();
        encode_frame(&self.body, &mut self.frame);
        s.writer.write_all(&self.frame)?;
        s.writer.flush()?;
        read_frame(&mut s.reader, &mut self.body)?;
        self.round_trips += 1;
        let reply = decode_reply(&self.body)?;
        if reply.id != id || reply.op != req.op() {
            return Err(WireError::malformed(format!(
                "reply to request {}/{:#04x} answers {}/{:#04x}",
                id,
                req.op(),
                reply.id,
                reply.op
            )));
        }
        Ok(reply)
    }
}

fn open(addr: &str) -> Result<Socket, WireError> {
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| WireError::ShardMap {
            detail: format!("{addr} resolves to no address"),
        })?;
    let s = TcpStream::connect_timeout(&sa, Duration::from_secs(2))?;
    s.set_nodelay(true)?;
    Ok(Socket {
        reader: BufReader::new(s.try_clone()?),
        writer: BufWriter::new(s),
    })
}
