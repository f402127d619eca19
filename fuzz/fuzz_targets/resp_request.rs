//! The request decoder of `lidb serve` (lidb-server codec.rs and inline.rs): never panics on any
//! bytes; feeding the input in two pieces (split where the second byte says) gives the same
//! requests and the same error as feeding it whole; every request decoded re-encodes as a RESP2
//! multibulk that decodes to itself; and where the input starts with a multibulk frame that the
//! `redis-protocol` crate decodes as a command (a non-empty array of bulk strings) and ours
//! decodes too, both give the same arguments. The first byte picks tiny limits (so the caps are
//! hit) or the defaults.
//!
//! Then every request runs through a connection's session (lidb-server session.rs: AUTH, HELLO,
//! CLIENT, QUIT and the NOAUTH gate), on a server with the password `pw` or none (the first
//! byte's second bit), with a connection command put in front of the arguments when the first
//! byte's next two bits say so (so AUTH and HELLO frames are the common case): each reply,
//! encoded in the protocol the session has after it, is one whole frame to `redis-protocol`'s
//! RESP2 or RESP3 decoder; the protocol changes only by a HELLO answered with a map; with a
//! password, a session is let past the gate only after a request that held `pw`.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use lidb_server::session::{Outcome, Session, connection_command};
use lidb_server::{Limits, Password, Protocol, Reply, RequestCodec, decode_all};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame;
use tokio_util::codec::Decoder;

/// What the first byte's bits 2 and 3 put in front of every request's arguments.
const PREFIXES: [Option<&str>; 4] = [None, Some("HELLO"), Some("AUTH"), Some("CLIENT")];

/// Runs `requests` through one session as a connection would and checks the replies.
fn check_session(requests: &[Vec<Bytes>], with_password: bool, prefix: Option<&'static str>) {
    let password = with_password.then(|| Password::new("pw")).flatten();
    let mut session = Session::new(1, password.as_ref());
    for request in requests {
        let mut args = Vec::with_capacity(request.len() + 1);
        if let Some(p) = prefix {
            args.push(Bytes::from_static(p.as_bytes()));
        }
        args.extend(request.iter().cloned());
        let before = (session.protocol, session.authenticated);
        let outcome = connection_command(&mut session, password.as_ref(), &args);
        if session.authenticated && !before.1 {
            assert!(
                args.iter().any(|a| &a[..] == b"pw"),
                "authenticated by {args:?}"
            );
        }
        let reply = match outcome {
            Outcome::Pass => {
                assert!(session.authenticated, "{args:?} passed the gate");
                continue;
            }
            Outcome::Refused(reply) => {
                assert!(!session.authenticated);
                reply
            }
            Outcome::Answered(reply) => reply,
        };
        if session.protocol != before.0 {
            assert!(
                matches!(reply, Reply::Map(_)),
                "{args:?} switched with {reply:?}"
            );
        }
        let mut out = BytesMut::new();
        reply.encode(session.protocol, &mut out);
        let used = match session.protocol {
            Protocol::Resp2 => decode_bytes_mut(&mut out.clone()).map(|f| f.map(|(_, n, _)| n)),
            Protocol::Resp3 => {
                redis_protocol::resp3::decode::complete::decode_bytes_mut(&mut out.clone())
                    .map(|f| f.map(|(_, n, _)| n))
            }
        };
        assert!(
            matches!(used, Ok(Some(n)) if n == out.len()),
            "{reply:?} encoded as {out:?}: {used:?}"
        );
        if session.quit {
            return;
        }
    }
}

fn limits(tiny: bool) -> Limits {
    if tiny {
        Limits {
            max_bulk_bytes: 16,
            max_args: 8,
            max_request_bytes: 64,
            max_inline_bytes: 32,
        }
    } else {
        Limits::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let limits = limits(mode & 1 == 1);
    let (whole, whole_err, _) = decode_all(input, limits);

    let cut = usize::from(input.first().copied().unwrap_or(0)) % (input.len() + 1);
    let (head, tail) = input.split_at(cut);
    let mut codec = RequestCodec::new(limits);
    let mut buf = BytesMut::from(head);
    let mut pieces = Vec::new();
    let mut piece_err = false;
    loop {
        match codec.decode(&mut buf) {
            Ok(Some(r)) => pieces.push(r),
            Ok(None) => break,
            Err(_) => {
                piece_err = true;
                break;
            }
        }
    }
    if !piece_err {
        buf.extend_from_slice(tail);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(r)) => pieces.push(r),
                Ok(None) => break,
                Err(_) => {
                    piece_err = true;
                    break;
                }
            }
        }
    }
    assert_eq!(pieces, whole, "split at {cut}");
    assert_eq!(piece_err, whole_err.is_some(), "split at {cut}");

    for request in &whole {
        let mut encoded = format!("*{}\r\n", request.len()).into_bytes();
        for arg in request {
            encoded.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            encoded.extend_from_slice(arg);
            encoded.extend_from_slice(b"\r\n");
        }
        let (again, err, rest) = decode_all(&encoded, Limits::default());
        assert!(err.is_none() && rest.is_empty());
        assert_eq!(again, vec![request.clone()]);
    }

    if input.first() == Some(&b'*')
        && let Some(first) = whole.first()
        && let Ok(Some((BytesFrame::Array(items), _, _))) =
            decode_bytes_mut(&mut BytesMut::from(input))
        && !items.is_empty()
    {
        let theirs: Option<Vec<_>> = items
            .into_iter()
            .map(|item| match item {
                BytesFrame::BulkString(b) => Some(b),
                _ => None,
            })
            .collect();
        if let Some(theirs) = theirs {
            assert_eq!(
                first, &theirs,
                "redis-protocol decodes the first frame otherwise"
            );
        }
    }

    let prefix = PREFIXES
        .get(usize::from(mode >> 2) % PREFIXES.len())
        .copied()
        .flatten();
    check_session(&whole, mode & 2 == 2, prefix);
});
