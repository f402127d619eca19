//! fine-wire (docs/format/fine-wire.md, lidb-fine-net's codec): the input is split into frames
//! (`split_frame`) and every frame body, and the input itself, is decoded as a request and as a
//! reply. Nothing panics; whatever decodes re-encodes to bytes that decode to the same message
//! (the round trip), and a re-framed body splits back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_fine_net::codec::{
    decode_reply, decode_request, encode_frame, encode_reply, encode_request, split_frame,
};

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
