//! Reads answered from memory on the async workers (`memory_reads.rs`): the same replies as the
//! engine threads give, in pipeline order around writes; counted in INFO; none with the option
//! off; and keys whose pages are not cached still answered (by the engine threads).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use lidb_server::ServerConfig;
use redis::Value;
use support::{start_prepared, start_with};

fn answered_in_memory(c: &mut redis::Connection) -> u64 {
    let stats: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("reads_answered_in_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no reads_answered_in_memory in {stats}"))
}

fn key(i: u64) -> String {
    format!("key:{i:06}")
}

fn value(i: u64) -> String {
    format!("{i}-{}", "v".repeat(100))
}

/// GETs every key of `0..n` in one pipeline and checks the values.
fn get_all(c: &mut redis::Connection, n: u64) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("GET").arg(key(i));
    }
    let got: Vec<Option<String>> = pipe.query(c).unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(v.as_deref(), Some(value(i as u64).as_str()), "key {i}");
    }
}

#[test]
fn pipelines_mixing_reads_and_writes_answer_in_order() {
    for (engine, memory_reads) in [
        ("lsm", true),
        ("lsm", false),
        ("finedex", true),
        ("learnedstore", true),
    ] {
        let config = ServerConfig {
            memory_reads,
            ..ServerConfig::default()
        };
        let server = start_with(engine, config);
        let mut c = server.client();
        let () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
        // The leading reads can be answered from memory; from the SET on, the engine threads
        // answer the rest of the pipeline.
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg("a");
        pipe.cmd("GET").arg("a");
        pipe.cmd("SET").arg("a").arg("2");
        pipe.cmd("GET").arg("a");
        pipe.cmd("MGET").arg("a").arg("b");
        pipe.cmd("EXISTS").arg("a").arg("b").arg("a");
        pipe.cmd("PING");
        pipe.cmd("ECHO").arg("x");
        pipe.cmd("DEL").arg("a");
        pipe.cmd("GET").arg("a");
        let got: Vec<Value> = pipe.query(&mut c).unwrap();
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let want = [
            bulk("1"),
            bulk("1"),
            Value::Okay,
            bulk("2"),
            Value::Array(vec![bulk("2"), Value::Nil]),
            Value::Int(2),
            Value::SimpleString("PONG".into()),
            bulk("x"),
        ];
        assert_eq!(
            got.get(..want.len()),
            Some(&want[..]),
            "{engine} {memory_reads}"
        );
        assert_eq!(
            got[8..],
            [Value::Int(1), Value::Nil],
            "{engine} {memory_reads}"
        );
        let counted = answered_in_memory(&mut c);
        if memory_reads {
            assert!(counted >= 2, "{engine}: {counted} reads answered in memory");
        } else {
            assert_eq!(counted, 0, "{engine}: the option is off");
        }
        server.stop();
    }
}

#[test]
fn keys_not_in_memory_go_to_the_engine_threads_and_then_are_cached() {
    // Every key in tables after a full compaction, none of their pages cached: the first pass
    // needs storage reads, which the engine threads do (caching the pages);
    // nothing writes afterwards, so the second pass is answered from memory entirely.
    let n = 3000;
    let server = start_prepared("lsm", ServerConfig::default(), |engine| {
        for i in 0..n {
            engine.put(key(i).as_bytes(), value(i).as_bytes()).unwrap();
        }
        engine.flush().unwrap();
        engine.gc().unwrap();
    });
    let mut c = server.client();
    get_all(&mut c, n);
    // A batch that arrives after an earlier one cached its pages is answered from memory (how
    // many depends on how the pipeline's bytes arrive), but the first batch's cannot be.
    let first = answered_in_memory(&mut c);
    assert!(first < n, "{first} of {n} answered from a cold cache");
    get_all(&mut c, n);
    let second = answered_in_memory(&mut c) - first;
    assert_eq!(second, n, "the first pass cached every page");
    server.stop();
}
