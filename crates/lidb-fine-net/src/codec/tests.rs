//! Round trips of every message through frames, and random or damaged bytes that must be
//! refused without a panic. Seeded; the seed is printed.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use lidb_index::segment::Segments;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::codec::consts::*;

fn requests() -> Vec<Request> {
    let addr = BinAddr {
        region: 7,
        position: 3,
    };
    vec![
        Request::Hello { client_id: 0 },
        Request::Layout { client_id: 9 },
        Request::Ack {
            client_id: 9,
            version: 4,
        },
        Request::Retrain,
        Request::Lock,
        Request::Unlock,
        Request::Read {
            items: vec![
                ReadItem {
                    region: 1,
                    offset: 2,
                    records: 3,
                },
                ReadItem {
                    region: u64::MAX,
                    offset: u32::MAX,
                    records: MAX_READ_RECORDS,
                },
            ],
        },
        Request::ReadModel,
        Request::ReadBin {
            region: 7,
            position: 3,
            child: BIN_ROOT,
        },
        Request::ReadBin {
            region: u64::MAX,
            position: 0,
            child: 2,
        },
        Request::Search { addr, key: 5 },
        Request::Insert {
            addr,
            key: 5,
            value: 6,
        },
        Request::Update {
            addr,
            key: u64::MAX,
            value: 0,
        },
        Request::Remove { addr, key: 1 },
        Request::Range {
            addr,
            lo: 1,
            hi: 2,
            limit: 3,
        },
    ]
}

fn replies() -> Vec<Reply> {
    let layout = WireLayout {
        version: 3,
        eps: 32,
        shard_lo: 0,
        shard_hi: u64::MAX,
        regions: vec![
            WireRegion {
                id: 1,
                first_key: 0,
                records: 10,
                segments: Segments {
                    keys: vec![0, 5],
                    slopes: vec![0.5, 1.25],
                    intercepts: vec![0, 4],
                },
            },
            WireRegion {
                id: 2,
                first_key: 100,
                records: 1,
                segments: Segments::default(),
            },
        ],
    };
    let r = |op, status, payload| Reply {
        id: 42,
        op,
        status,
        version: 7,
        payload,
    };
    vec![
        r(
            OP_HELLO,
            STATUS_OK,
            Payload::Hello {
                client_id: 1,
                shard_lo: 2,
                shard_hi: 3,
            },
        ),
        r(OP_LAYOUT, STATUS_OK, Payload::Layout(layout.clone())),
        r(
            OP_READ_MODEL,
            STATUS_OK,
            Payload::Model {
                head: 3,
                layout,
                tail: 3,
            },
        ),
        r(OP_READ_BIN, STATUS_OK, Payload::Bin(BinResult::Stale)),
        r(
            OP_READ_BIN,
            STATUS_OK,
            Payload::Bin(BinResult::Copy(BinCopy {
                head: 4,
                aux: 1,
                entries: vec![(10, 0), (20, 1)],
                tail: 4,
            })),
        ),
        r(
            OP_READ_BIN,
            STATUS_OK,
            Payload::Bin(BinResult::Copy(BinCopy {
                head: 0,
                aux: 0,
                entries: Vec::new(),
                tail: 0,
            })),
        ),
        r(OP_ACK, STATUS_OK, Payload::Empty),
        r(
            OP_READ,
            STATUS_OK,
            Payload::Read(vec![
                ReadResult::Stale,
                ReadResult::Words(vec![2, 1, 0, 10, 2]),
                ReadResult::Words(vec![4, 4]),
            ]),
        ),
        r(OP_SEARCH, STATUS_OK, Payload::Value(Some(5))),
        r(OP_INSERT, STATUS_RETIRED, Payload::Value(None)),
        r(OP_RANGE, STATUS_OK, Payload::Range(vec![(1, 2), (3, 4)])),
        r(OP_SEARCH, STATUS_WRONG_SHARD, Payload::Empty),
        r(OP_READ, STATUS_STALE, Payload::Empty),
        r(
            OP_SEARCH,
            STATUS_BAD_REQUEST,
            Payload::Message("nope é".into()),
        ),
    ]
}

#[test]
fn every_request_and_reply_round_trips_through_a_frame() {
    for (i, req) in requests().into_iter().enumerate() {
        let mut body = Vec::new();
        encode_request(i as u64, &req, &mut body);
        let mut frame = Vec::new();
        encode_frame(&body, &mut frame);
        let (got, rest) = split_frame(&frame).unwrap().unwrap();
        assert!(rest.is_empty());
        assert_eq!(decode_request(got).unwrap(), (i as u64, req));
    }
    for reply in replies() {
        let mut body = Vec::new();
        encode_reply(&reply, &mut body);
        assert_eq!(decode_reply(&body).unwrap(), reply);
    }
}

#[test]
fn damaged_frames_are_refused() {
    let mut body = Vec::new();
    encode_request(1, &Request::Retrain, &mut body);
    let mut frame = Vec::new();
    encode_frame(&body, &mut frame);
    for i in 0..frame.len() {
        let mut bad = frame.clone();
        bad[i] ^= 0x10;
        assert!(
            !matches!(split_frame(&bad), Ok(Some(_))),
            "a bit flipped at byte {i} passed"
        );
    }
    assert!(split_frame(&frame[..frame.len() - 1]).unwrap().is_none());
    // Trailing bytes, an unknown op, and over-limit counts are refused with the id kept.
    body.push(0);
    assert!(matches!(decode_request(&body), Err((Some(1), _))));
    let mut unknown = Vec::new();
    unknown.extend_from_slice(&5u64.to_le_bytes());
    unknown.push(0x7f);
    assert!(matches!(decode_request(&unknown), Err((Some(5), _))));
    let mut big = Vec::new();
    encode_request(
        2,
        &Request::Read {
            items: vec![
                ReadItem {
                    region: 1,
                    offset: 0,
                    records: 1,
                };
                65
            ],
        },
        &mut big,
    );
    assert!(decode_request(&big).is_err());
    assert!(decode_request(&[1, 2, 3]).is_err_and(|(id, _)| id.is_none()));
}

#[test]
fn bin_copies_with_counts_past_the_body_or_the_limit_are_refused() {
    let reply = Reply {
        id: 1,
        op: OP_READ_BIN,
        status: STATUS_OK,
        version: 1,
        payload: Payload::Bin(BinResult::Copy(BinCopy {
            head: 2,
            aux: 0,
            entries: vec![(1, 1)],
            tail: 2,
        })),
    };
    let mut body = Vec::new();
    encode_reply(&reply, &mut body);
    // The entry count sits after id, op, status, version, bin status, head and aux.
    let at = 8 + 1 + 1 + 8 + 1 + 8 + 8;
    for n in [2u32, MAX_BIN_ENTRIES + 1, u32::MAX] {
        let mut bad = body.clone();
        bad[at..at + 4].copy_from_slice(&n.to_le_bytes());
        assert!(decode_reply(&bad).is_err(), "count {n} passed");
    }
    // Without its tail word, or with a byte more, the copy is refused.
    assert!(decode_reply(&body[..body.len() - 8]).is_err());
    let mut longer = body.clone();
    longer.push(0);
    assert!(decode_reply(&longer).is_err());
    assert_eq!(decode_reply(&body).unwrap(), reply);
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for (i, req) in requests().iter().enumerate() {
        let mut b = Vec::new();
        encode_request(i as u64, req, &mut b);
        seeds.push(b);
    }
    for reply in replies() {
        let mut b = Vec::new();
        encode_reply(&reply, &mut b);
        seeds.push(b);
    }
    for _ in 0..20_000 {
        let mut b = seeds[rng.gen_range(0..seeds.len())].clone();
        for _ in 0..rng.gen_range(1..4) {
            match rng.gen_range(0..3) {
                0 if !b.is_empty() => {
                    let i = rng.gen_range(0..b.len());
                    b[i] = rng.r#gen();
                }
                1 if !b.is_empty() => b.truncate(rng.gen_range(0..b.len())),
                _ => b.push(rng.r#gen()),
            }
        }
        let _ = decode_request(&b);
        let _ = decode_reply(&b);
        let _ = split_frame(&b);
    }
}

#[test]
fn the_fuzz_corpus_seeds_of_the_on_client_messages_decode() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/fine_wire/");
    for name in ["read_model", "read_bin"] {
        let body = std::fs::read(format!("{dir}{name}")).unwrap();
        assert!(decode_request(&body).is_ok(), "{name}");
    }
    for name in ["reply_model", "reply_bin"] {
        let body = std::fs::read(format!("{dir}{name}")).unwrap();
        assert!(decode_reply(&body).is_ok(), "{name}");
    }
}
