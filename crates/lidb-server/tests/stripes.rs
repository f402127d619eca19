//! The key stripes under many clients at once (`stripes.rs` in the server): a SETNX race on one
//! key has exactly one winner, a plain SET racing SETNXs is never overwritten by them, GETSET
//! chains hand every value on exactly once, and MSET is atomic to MGET readers, with reads
//! answered in memory and on the engine threads, on the work-stealing runtime and thread-per-core.
//!
//! Bounded in rounds and in time; every server runs on 127.0.0.1 and is stopped by its test.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::needless_range_loop
)]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lidb_engines::{Engine, EngineConfig, EngineResult, MemorySplit, Probe, ReadSplit, Space};
use lidb_server::{Server, ServerConfig};
use support::{start, start_with};

const CLIENTS: usize = 12;

fn connect(addr: std::net::SocketAddr) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    con
}

/// lsm whose `get` of a `mixed:` key takes 5 ms: a SETNX on such a key holds its check
/// open long enough that a plain SET sent meanwhile lands inside it unless the stripe stops it.
struct SlowChecks(Box<dyn Engine>);

impl Engine for SlowChecks {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.0.put(key, value)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let got = self.0.get(key);
        if key.starts_with(b"mixed:") {
            std::thread::sleep(Duration::from_millis(5));
        }
        got
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        self.0.delete(key)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        self.0.scan(start, end, limit, each)
    }
    fn gc(&self) -> EngineResult<()> {
        self.0.gc()
    }
    fn flush(&self) -> EngineResult<()> {
        self.0.flush()
    }
}

impl Probe for SlowChecks {
    fn space(&self) -> Space {
        self.0.space()
    }
    fn memory(&self) -> MemorySplit {
        self.0.memory()
    }
    fn read_split(&self) -> ReadSplit {
        self.0.read_split()
    }
}

#[test]
fn setnx_races_have_one_winner_and_never_overwrite_a_set() {
    const ROUNDS: usize = 40;
    let dir = lidb_testkit::Scratch::new("server-slowchecks");
    let engine = lidb_engines::open("lsm", &EngineConfig::new(dir.to_path_buf())).unwrap();
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        // More engine threads than clients: SETNXs waiting for the stripe leave a thread free for
        // the SET.
        threads: 2 * CLIENTS,
        ..ServerConfig::default()
    };
    let server = Server::bind(config, Box::new(SlowChecks(engine)))
        .unwrap()
        .spawn();
    let addr = server.addr();
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut c = connect(addr);
                let mut won = Vec::new();
                for round in 0..ROUNDS {
                    barrier.wait();
                    let first: i64 = redis::cmd("SETNX")
                        .arg(format!("race:{round}"))
                        .arg(id)
                        .query(&mut c)
                        .unwrap();
                    // Client 0 sends a plain SET into the SETNXs' race on the second key, a
                    // little after they start.
                    let second: i64 = if id == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                        let () = redis::cmd("SET")
                            .arg(format!("mixed:{round}"))
                            .arg("set")
                            .query(&mut c)
                            .unwrap();
                        0
                    } else {
                        redis::cmd("SETNX")
                            .arg(format!("mixed:{round}"))
                            .arg(id)
                            .query(&mut c)
                            .unwrap()
                    };
                    won.push((first, second));
                }
                won
            })
        })
        .collect();
    let results: Vec<Vec<(i64, i64)>> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    let mut c = connect(addr);
    for round in 0..ROUNDS {
        let winners: Vec<usize> = (0..CLIENTS)
            .filter(|&id| results[id][round].0 == 1)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: SETNX winners {winners:?}");
        let value: String = redis::cmd("GET")
            .arg(format!("race:{round}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(value, winners[0].to_string(), "round {round}");
        // A SETNX that wrote did so before the SET, so the SET's value is the last one.
        let mixed: String = redis::cmd("GET")
            .arg(format!("mixed:{round}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(
            mixed, "set",
            "round {round}: a SETNX overwrote an acknowledged SET"
        );
    }
    // The SET came while a SETNX held its check open in most rounds: the race was run.
    let raced = (0..ROUNDS)
        .filter(|&round| (0..CLIENTS).any(|id| results[id][round].1 == 1))
        .count();
    assert!(raced > ROUNDS / 4, "only {raced} rounds raced");
    server.stop().unwrap();
}

#[test]
fn getset_chains_hand_on_every_value_once() {
    const PER_CLIENT: usize = 300;
    let server = start("lsm");
    let addr = server.addr();
    let mut c = server.client();
    let () = redis::cmd("SET")
        .arg("chain")
        .arg("start")
        .query(&mut c)
        .unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            std::thread::spawn(move || {
                let mut c = connect(addr);
                let mut got = Vec::new();
                for i in 0..PER_CLIENT {
                    // Pipelines of two: the engine threads run GETSETs of one client back to back.
                    let (a, b): (String, String) = redis::pipe()
                        .cmd("GETSET")
                        .arg("chain")
                        .arg(format!("{id}:{i}:a"))
                        .cmd("GETSET")
                        .arg("chain")
                        .arg(format!("{id}:{i}:b"))
                        .query(&mut c)
                        .unwrap();
                    got.push(a);
                    got.push(b);
                }
                got
            })
        })
        .collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for t in clients {
        for old in t.join().unwrap() {
            *seen.entry(old).or_default() += 1;
        }
    }
    let last: String = redis::cmd("GET").arg("chain").query(&mut c).unwrap();
    *seen.entry(last).or_default() += 1;
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).take(5).collect();
    assert!(
        twice.is_empty(),
        "values handed on more than once: {twice:?}"
    );
    // Every value written, and the first one, came back exactly once.
    assert_eq!(seen.len(), CLIENTS * PER_CLIENT * 2 + 1);
    assert!(seen.contains_key("start"));
    server.stop();
}

/// Runs MSET writers against MGET readers of the same keys for a bounded time; returns how many
/// MGETs the readers made.
fn mset_against_mget(memory_reads: bool, thread_per_core: bool) -> u64 {
    let config = ServerConfig {
        memory_reads,
        thread_per_core,
        threads: 2,
        ..ServerConfig::default()
    };
    let server = start_with("lsm", config);
    let addr = server.addr();
    let keys: Vec<String> = (0..4).map(|i| format!("pair:{i}")).collect();
    {
        let mut c = server.client();
        let mut mset = redis::cmd("MSET");
        for k in &keys {
            mset.arg(k).arg(0);
        }
        let () = mset.query(&mut c).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(3);
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c = connect(addr);
                for i in 0..3000u64 {
                    if Instant::now() > deadline {
                        break;
                    }
                    let mut mset = redis::cmd("MSET");
                    for k in &keys {
                        mset.arg(k).arg(i * 2 + w);
                    }
                    let () = mset.query(&mut c).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..CLIENTS - 2)
        .map(|_| {
            let (keys, stop) = (keys.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut c = connect(addr);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let mut pipe = redis::pipe();
                    for _ in 0..4 {
                        pipe.cmd("MGET").arg(&keys);
                    }
                    let got: Vec<Vec<String>> = pipe.query(&mut c).unwrap();
                    for values in got {
                        assert!(
                            values.iter().all(|v| *v == values[0]),
                            "MGET saw half an MSET: {values:?}"
                        );
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads = readers.into_iter().map(|r| r.join().unwrap()).sum();
    server.stop();
    reads
}

#[test]
fn mset_is_atomic_to_mget_readers() {
    for (memory_reads, thread_per_core) in [(true, false), (false, false), (true, true)] {
        let reads = mset_against_mget(memory_reads, thread_per_core);
        assert!(
            reads > 100,
            "memory_reads {memory_reads}, thread_per_core {thread_per_core}: only {reads} MGETs"
        );
    }
}
