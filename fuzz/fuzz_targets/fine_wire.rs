//! fine-wire (docs/format/fine-wire.md, lidb-fine-net's codec): the input is split into frames
//! (`split_frame`) and every frame body, and the input itself, is decoded as a request and as a
//! reply. Nothing panics; whatever decodes re-encodes to bytes that decode to the same message
//! (the round trip), and a re-framed body splits back to itself. The on-client mode's READ_MODEL
//! and READ_BIN (requests and replies) go through the same decoders; the input is also read as
//! the fields of a READ_BIN request and a bin copy reply, which must round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_fine_net::codec::consts::{OP_READ_BIN, STATUS_OK};
use lidb_fine_net::codec::{
    BinCopy, BinResult, Payload, Reply, Request, decode_reply, decode_request, encode_frame,
    encode_reply, encode_request, split_frame,
};

/// The input's words as a READ_BIN request and a bin copy: both must round trip.
fn check_bin_messages(data: &[u8]) {
    let mut words = data
        .chunks(8)
        .map(|c| c.iter().rev().fold(0u64, |a, &b| (a << 8) | u64::from(b)));
    let mut next = || words.next().unwrap_or(0);
    let req = Request::ReadBin {
        region: next(),
        position: next() as u32,
        child: next() as u32,
    };
    let mut body = Vec::new();
    encode_request(1, &req, &mut body);
    assert_eq!(decode_request(&body).ok(), Some((1, req)));
    let (head, aux, n) = (next(), next(), (next() % 64) as usize);
    let entries = (0..n).map(|_| (next(), next())).collect();
    let reply = Reply {
        id: 2,
        op: OP_READ_BIN,
        status: STATUS_OK,
        version: next(),
        payload: Payload::Bin(BinResult::Copy(BinCopy {
            head,
            aux,
            entries,
            tail: next(),
        })),
    };
    body.clear();
    encode_reply(&reply, &mut body);
    assert_eq!(decode_reply(&body).ok(), Some(reply));
}

fn check_body(body: &[u8]) {
    if let Ok((id, req)) = decode_request(body) {
        let mut again = Vec::new();
        encode_request(id, &req, &mut again);
        assert_eq!(decode_request(&again).ok(), Some((id, req)));
    }
    if let Ok(reply) = decode_reply(body) {
        let mut again = Vec::new();
        encode_reply(&reply, &mut again);
        let back = decode_reply(&again).ok();
        // A slope that is NaN never equals itself; compare the bytes instead.
        let mut twice = Vec::new();
        if let Some(b) = &back {
            encode_reply(b, &mut twice);
        }
        assert_eq!(twice, again);
    }
    let mut framed = Vec::new();
    encode_frame(body, &mut framed);
    if let Ok(Some((b, rest))) = split_frame(&framed) {
        assert_eq!(b, body);
        assert!(rest.is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    check_body(data);
    check_bin_messages(data);
    let mut rest = data;
    for _ in 0..64 {
        match split_frame(rest) {
            Ok(Some((body, after))) => {
                check_body(body);
                rest = after;
            }
            Ok(None) | Err(_) => break,
        }
    }
});
