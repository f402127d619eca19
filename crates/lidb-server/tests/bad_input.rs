//! Bytes no well-behaved client sends: malformed frames, negative and huge lengths, requests over
//! the caps, half-sent frames, dropped connections, garbage. Each gets an error reply and a closed
//! connection (or, for a half-sent frame, a wait), never a panic, and a client beside it keeps
//! being served throughout. Also the connection cap and the idle timeout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use lidb_server::{Limits, ServerConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{exchange, exchange_text, resp, start, start_with};

fn small_limits() -> ServerConfig {
    ServerConfig {
        limits: Limits {
            max_bulk_bytes: 1024,
            max_args: 64,
            max_request_bytes: 4096,
            max_inline_bytes: 256,
        },
        ..ServerConfig::default()
    }
}

/// The bystander: a connection that must keep working.
fn still_served(c: &mut redis::Connection, i: usize) {
    let _: () = redis::cmd("SET").arg("bystander").arg(i).query(c).unwrap();
    let v: usize = redis::cmd("GET").arg("bystander").query(c).unwrap();
    assert_eq!(v, i);
}

#[test]
fn malformed_and_oversized_requests_get_an_error_and_a_close() {
    let server = start_with("lsm", small_limits());
    let mut bystander = server.client();
    let huge_bulk = format!("*2\r\n$3\r\nGET\r\n${}\r\n", 1u64 << 62);
    let over_request = {
        let mut r = b"*8\r\n".to_vec();
        for _ in 0..8 {
            r.extend_from_slice(format!("$1000\r\n{}\r\n", "x".repeat(1000)).as_bytes());
        }
        r
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"*1\r\n$-3\r\n".to_vec(), "invalid bulk length"),
        (huge_bulk.into_bytes(), "invalid bulk length"),
        (b"*1\r\n$1025\r\n".to_vec(), "invalid bulk length"),
        (b"*99999999999\r\n".to_vec(), "invalid multibulk length"),
        (b"*65\r\n".to_vec(), "invalid multibulk length"),
        (b"*abc\r\n".to_vec(), "invalid multibulk length"),
        (b"*1\r\n:5\r\n".to_vec(), "expected '$', got ':'"),
        (
            b"*1\r\n$2\r\nabcd\r\n".to_vec(),
            "bulk string not followed by CRLF",
        ),
        (over_request, "request too big"),
        (vec![b'x'; 300], "too big inline request"),
        (b"GET \"unclosed\r\n".to_vec(), "unbalanced quotes"),
    ];
    for (i, (bytes, want)) in cases.iter().enumerate() {
        let (got, closed) = exchange(server.addr(), bytes, Duration::from_secs(2));
        let got = String::from_utf8_lossy(&got);
        assert!(
            got.starts_with("-ERR Protocol error: ") && got.contains(want) && closed,
            "case {i}: {got:?} closed={closed}"
        );
        still_served(&mut bystander, i);
    }
    // Requests before the bad bytes in the same read are answered first.
    let (got, closed) = exchange_text(server.addr(), b"PING\r\n*1\r\n$-3\r\n");
    assert!(
        got.starts_with("+PONG\r\n-ERR Protocol error") && closed,
        "{got}"
    );
    server.stop();
}

#[test]
fn half_sent_frames_and_dropped_connections_leave_others_alone() {
    let server = start("lsm");
    let mut bystander = server.client();
    // A frame cut at every point, then dropped: the server waits, then sees the close.
    let frame = resp(&[b"SET", b"half", b"value"]);
    for cut in 0..frame.len() {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(&frame[..cut]).unwrap();
        drop(s);
    }
    still_served(&mut bystander, 1);
    // A frame sent in pieces with pauses is answered once whole.
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for piece in frame.chunks(3) {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"+OK\r\n");
    // A client that pipelines many requests and leaves without reading the replies.
    let mut s = TcpStream::connect(server.addr()).unwrap();
    let many: Vec<u8> = (0..2000)
        .flat_map(|i| resp(&[b"SET", format!("gone{i}").as_bytes(), b"v"]))
        .collect();
    s.write_all(&many).unwrap();
    drop(s);
    still_served(&mut bystander, 2);
    server.stop();
}

#[test]
fn random_garbage_never_takes_the_server_down() {
    let seed = 0x5eed_u64;
    let server = start_with("lsm", small_limits());
    let mut bystander = server.client();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let alphabet = b"*$:+-\r\n0123456789-abcSETGET \"'\\x";
    for i in 0..60 {
        let len = rng.gen_range(1..200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.gen_bool(0.8) {
                    alphabet[rng.gen_range(0..alphabet.len())]
                } else {
                    rng.r#gen()
                }
            })
            .collect();
        let _ = exchange(server.addr(), &bytes, Duration::from_millis(20));
        still_served(&mut bystander, i);
    }
    server.stop();
}

#[test]
fn connections_over_the_cap_are_refused_and_idle_ones_closed() {
    let config = ServerConfig {
        max_connections: 2,
        idle_timeout: Some(Duration::from_millis(1000)),
        ..ServerConfig::default()
    };
    let server = start_with("lsm", config);
    let mut a = server.client();
    let mut b = server.client();
    let (got, closed) = exchange_text(server.addr(), b"PING\r\n");
    assert_eq!(
        (got.as_str(), closed),
        ("-ERR max number of clients reached\r\n", true)
    );
    still_served(&mut a, 1);
    still_served(&mut b, 2);
    // Idle for longer than the timeout: both are closed, and new clients get in.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(redis::cmd("PING").query::<String>(&mut a).is_err());
    drop((a, b));
    let mut c = server.client();
    still_served(&mut c, 3);
    server.stop();
}
