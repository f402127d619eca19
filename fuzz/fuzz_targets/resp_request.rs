//! The request decoder of `lidb serve` (lidb-server codec.rs and inline.rs): never panics on any
//! bytes; feeding the input in two pieces (split where the second byte says) gives the same
//! requests and the same error as feeding it whole; every request decoded re-encodes as a RESP2
//! multibulk that decodes to itself; and where the input starts with a multibulk frame that the
//! `redis-protocol` crate decodes as a command (a non-empty array of bulk strings) and ours
//! decodes too, both give the same arguments. The first byte picks tiny limits (so the caps are
//! hit) or the defaults.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use lidb_server::{Limits, RequestCodec, decode_all};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame;
use tokio_util::codec::Decoder;

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
});
