//! A delaying TCP relay: a userspace stand-in for `tc qdisc ... netem delay` on machines without
//! the sch_netem kernel module (`lidb fine bench --delay-us N`).
//!
//! A [`Relay`] listens on 127.0.0.1 and forwards every accepted connection to one target. Each
//! chunk of bytes read in either direction is held until `delay` after it *arrived*, then
//! written on, in order. Delays are measured from arrival, so pipelined chunks overlap their
//! delays instead of queueing behind each other: a request/reply round trip gains at least
//! `2 * delay`, as one-way netem delay on both veth ends would add. Timer slack makes the added
//! time somewhat larger than asked (tens of microseconds on Linux).
//!
//! Threads: one accept thread per relay, two per direction of each connection (a reader that
//! stamps chunks, a writer that waits out each stamp). A connection's threads end when either
//! side closes; the accept thread ends when the relay is dropped.
//!
//! Not a model of bandwidth, loss or reordering: only of propagation delay.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest chunk read at once.
const CHUNK_BYTES: usize = 64 * 1024;

/// A running relay; dropping it stops accepting (open connections run until a side closes).
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Relay {
    /// Listens on 127.0.0.1 (any port) and relays each connection to `target`, delaying every
    /// chunk by `delay` in each direction.
    pub fn start(target: SocketAddr, delay: Duration) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let accept = std::thread::Builder::new()
            .name("fine-relay-accept".into())
            .spawn(move || accept_loop(&listener, target, delay, &stop2))?;
        Ok(Relay {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// The address clients connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; it sees the flag and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, delay: Duration, stop: &AtomicBool) {
    for inbound in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(inbound) = inbound else { continue };
        let Ok(outbound) = TcpStream::connect_timeout(&target, Duration::from_secs(5)) else {
            continue;
        };
        let _ = inbound.set_nodelay(true);
        let _ = outbound.set_nodelay(true);
        let pairs = inbound
            .try_clone()
            .and_then(|i2| outbound.try_clone().map(|o2| (i2, o2)));
        let Ok((inbound2, outbound2)) = pairs else {
            continue;
        };
        // Thread spawn failures drop the streams, closing the connection: the client sees it.
        let _ = forward(inbound, outbound2, delay);
        let _ = forward(outbound, inbound2, delay);
    }
}

/// Starts the reader and writer threads of one direction.
fn forward(from: TcpStream, to: TcpStream, delay: Duration) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::Builder::new()
        .name("fine-relay-read".into())
        .spawn(move || read_side(from, &tx))?;
    std::thread::Builder::new()
        .name("fine-relay-write".into())
        .spawn(move || write_side(to, &rx, delay))?;
    Ok(())
}

fn read_side(mut from: TcpStream, tx: &mpsc::Sender<(Instant, Vec<u8>)>) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = buf.get(..n).map(<[u8]>::to_vec).unwrap_or_default();
                if tx.send((Instant::now(), chunk)).is_err() {
                    break;
                }
            }
        }
    }
    // Dropping `tx` ends the writer after it flushed what is queued.
}

fn write_side(mut to: TcpStream, rx: &mpsc::Receiver<(Instant, Vec<u8>)>, delay: Duration) {
    while let Ok((arrived, chunk)) = rx.recv() {
        let due = arrived + delay;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if to.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server through the relay: bytes come back unchanged, and each round trip takes
    /// at least twice the delay.
    #[test]
    fn echo_through_relay_is_delayed_and_intact() -> std::io::Result<()> {
        let echo = TcpListener::bind("127.0.0.1:0")?;
        let echo_addr = echo.local_addr()?;
        let server = std::thread::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = echo.accept()?;
            let mut buf = [0u8; 4096];
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                s.write_all(buf.get(..n).unwrap_or_default())?;
            }
        });
        let delay = Duration::from_millis(2);
        let relay = Relay::start(echo_addr, delay)?;
        let mut c = TcpStream::connect(relay.addr())?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        for round in 0u8..10 {
            let msg: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(round)).collect();
            let t = Instant::now();
            c.write_all(&msg)?;
            let mut back = vec![0u8; msg.len()];
            c.read_exact(&mut back)?;
            let took = t.elapsed();
            assert_eq!(back, msg, "round {round}: bytes changed in the relay");
            assert!(
                took >= 2 * delay,
                "round {round}: round trip {took:?} < 2 x {delay:?}"
            );
        }
        drop(c);
        let joined = server.join();
        assert!(matches!(joined, Ok(Ok(()))), "echo server: {joined:?}");
        Ok(())
    }
}
