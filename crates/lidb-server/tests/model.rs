//! Model-based tests through the server: several connections, each owning a slice of the key
//! space, send random pipelines of string commands and compare every reply with a BTreeMap; at
//! the end SCAN and LIDB.RANGE must list exactly the union of the models. And SCAN run while
//! other connections write returns every key nobody touched during the scan.
//!
//! Seeded; a failure prints the seed (LIDB_SEED=N replays it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::Value;
use support::start;

const CLIENTS: u64 = 4;
const PIPELINES: usize = 150;

fn seed() -> u64 {
    std::env::var("LIDB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn bulk(v: Option<&Vec<u8>>) -> Value {
    v.map_or(Value::Nil, |v| Value::BulkString(v.clone()))
}

/// One client's run: random pipelines over its own keys (prefix `c{id}:`, some binary).
fn client_run(addr: std::net::SocketAddr, id: u64, seed: u64) -> Model {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (id * 0x9e37_79b9));
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut model = Model::new();
    let key = |rng: &mut ChaCha8Rng| -> Vec<u8> {
        let mut k = format!("c{id}:").into_bytes();
        k.extend_from_slice(&rng.gen_range(0u16..64).to_be_bytes());
        if rng.gen_bool(0.2) {
            k.extend_from_slice(b"\r\n\x00");
        }
        k
    };
    for round in 0..PIPELINES {
        let mut pipe = redis::pipe();
        let mut want = Vec::new();
        for _ in 0..rng.gen_range(1..24) {
            let k = key(&mut rng);
            let v: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.r#gen()).collect();
            match rng.gen_range(0..9) {
                0 | 1 => {
                    pipe.cmd("SET").arg(&k).arg(&v);
                    model.insert(k, v);
                    want.push(Value::Okay);
                }
                2 => {
                    pipe.cmd("GET").arg(&k);
                    want.push(bulk(model.get(&k)));
                }
                3 => {
                    let k2 = key(&mut rng);
                    pipe.cmd("DEL").arg(&k).arg(&k2);
                    let mut n = i64::from(model.remove(&k).is_some());
                    n += i64::from(model.remove(&k2).is_some());
                    want.push(Value::Int(n));
                }
                4 => {
                    pipe.cmd("SETNX").arg(&k).arg(&v);
                    let fresh = !model.contains_key(&k);
                    if fresh {
                        model.insert(k, v);
                    }
                    want.push(Value::Int(i64::from(fresh)));
                }
                5 => {
                    pipe.cmd("GETSET").arg(&k).arg(&v);
                    want.push(bulk(model.insert(k, v).as_ref()));
                }
                6 => {
                    let k2 = key(&mut rng);
                    pipe.cmd("MSET").arg(&k).arg(&v).arg(&k2).arg(b"m");
                    model.insert(k, v);
                    model.insert(k2, b"m".to_vec());
                    want.push(Value::Okay);
                }
                7 => {
                    let k2 = key(&mut rng);
                    pipe.cmd("MGET").arg(&k).arg(&k2);
                    want.push(Value::Array(vec![
                        bulk(model.get(&k)),
                        bulk(model.get(&k2)),
                    ]));
                }
                _ => {
                    pipe.cmd("EXISTS").arg(&k);
                    want.push(Value::Int(i64::from(model.contains_key(&k))));
                }
            }
        }
        let got: Vec<Value> = pipe.query(&mut con).unwrap();
        assert_eq!(got, want, "seed {seed}, client {id}, pipeline {round}");
    }
    model
}

#[test]
fn concurrent_pipelines_match_a_btreemap() {
    let seed = seed();
    eprintln!("seed {seed} (LIDB_SEED={seed} replays it)");
    let server = start("lsm");
    let addr = server.addr();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|id| std::thread::spawn(move || client_run(addr, id, seed)))
        .collect();
    let mut all = Model::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    let mut c = server.client();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, all.len(), "seed {seed}");
    // The whole key space through LIDB.RANGE pages, values included.
    let (mut got, mut start) = (Model::new(), b"-".to_vec());
    for _ in 0..1000 {
        let (next, items): (Option<Vec<u8>>, Vec<Vec<u8>>) = redis::cmd("LIDB.RANGE")
            .arg(&start)
            .arg("+")
            .arg("LIMIT")
            .arg(50)
            .arg("WITHVALUES")
            .query(&mut c)
            .unwrap();
        for kv in items.chunks(2) {
            got.insert(kv[0].clone(), kv[1].clone());
        }
        let Some(next) = next else { break };
        start = [b"[".as_slice(), &next].concat();
    }
    assert_eq!(got, all, "seed {seed}");
    server.stop();
}

#[test]
fn scan_returns_every_key_untouched_during_it_while_others_write() {
    let seed = seed();
    eprintln!("seed {seed} (LIDB_SEED={seed} replays it)");
    let server = start("lsm");
    let addr = server.addr();
    let mut c = server.client();
    // Stable keys k00000a.. k01999a, between which the writers insert and delete kNNNNNb.
    let stable: BTreeSet<String> = (0..2000).map(|i| format!("k{i:05}a")).collect();
    let mut pipe = redis::pipe();
    for k in &stable {
        pipe.set(k, "s").ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed + w);
                let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
                let mut con = client.get_connection().unwrap();
                let deadline = Instant::now() + Duration::from_secs(20);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let mut pipe = redis::pipe();
                    for _ in 0..16 {
                        let k = format!("k{:05}b", rng.gen_range(0..2000));
                        if rng.gen_bool(0.6) {
                            pipe.set(k, "w").ignore();
                        } else {
                            pipe.del(k).ignore();
                        }
                    }
                    pipe.query::<()>(&mut con).unwrap();
                }
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    let (mut cursor, mut calls) = (0u64, 0);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(17)
            .query(&mut c)
            .unwrap();
        seen.extend(keys);
        calls += 1;
        assert!(calls < 10_000, "seed {seed}: SCAN does not end");
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let missing: Vec<_> = stable.difference(&seen).take(5).collect();
    assert!(missing.is_empty(), "seed {seed}: SCAN missed {missing:?}");
    server.stop();
}
