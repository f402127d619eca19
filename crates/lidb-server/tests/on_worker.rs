//! Requests answered on the async workers (`on_worker.rs`): reads from memory and SETs written
//! with no wait give the same replies as the engine threads, in pipeline order; both are counted
//! in INFO, none with their option off; keys whose pages are not cached are still answered (by
//! the engine threads), and SETs that meet a full memtable are written by the engine threads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use lidb_server::ServerConfig;
use redis::Value;
use support::{start_prepared, start_with};

/// The INFO stats field `name` as a number.
fn stat(c: &mut redis::Connection, name: &str) -> u64 {
    let stats: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {stats}"))
}

fn answered_in_memory(c: &mut redis::Connection) -> u64 {
    stat(c, "reads_answered_in_memory")
}

fn written_on_worker(c: &mut redis::Connection) -> u64 {
    stat(c, "writes_answered_on_worker")
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
    for (engine, memory_reads, worker_writes) in [
        ("lsm", true, true),
        ("lsm", true, false),
        ("lsm", false, true),
        ("lsm", false, false),
        ("finedex", true, true),
        ("learnedstore", true, true),
    ] {
        let config = ServerConfig {
            memory_reads,
            worker_writes,
            ..ServerConfig::default()
        };
        let server = start_with(engine, config);
        let mut c = server.client();
        let () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
        // The leading reads can be answered from memory, lsm's SET written on the worker and the
        // reads after it answered there too; from the DEL on, the engine threads answer the rest
        // of the pipeline.
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
            "{engine} {memory_reads} {worker_writes}"
        );
        assert_eq!(
            got[8..],
            [Value::Int(1), Value::Nil],
            "{engine} {memory_reads} {worker_writes}"
        );
        let counted = answered_in_memory(&mut c);
        if memory_reads {
            assert!(counted >= 2, "{engine}: {counted} reads answered in memory");
        } else {
            assert_eq!(counted, 0, "{engine}: the option is off");
        }
        let written = written_on_worker(&mut c);
        if worker_writes && (engine == "lsm" || engine == "finedex") {
            // The pipeline's SET follows two GETs: with the reads off, they end the prefix and
            // the whole pipeline goes to the engine threads.
            let sets = if memory_reads { 2 } else { 1 };
            assert_eq!(
                written, sets,
                "{engine} {memory_reads}: SETs written on the worker"
            );
        } else {
            // Off, or an engine with no write that never waits.
            assert_eq!(written, 0, "{engine} {worker_writes}");
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

#[test]
fn pipelined_sets_are_written_on_the_worker_until_the_memtable_is_full() {
    // 256 KiB memtables: 6,000 SETs of some 115 bytes switch it twice or more. A switch syncs
    // the WAL and creates a file, so the run of SETs that meets a full memtable is declined on
    // the worker and written by the engine threads; the others are written on the worker.
    let n = 6000;
    let server = start_with("lsm", ServerConfig::default());
    let mut c = server.client();
    for chunk in (0..n).collect::<Vec<u64>>().chunks(500) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            pipe.cmd("SET").arg(key(i)).arg(value(i));
        }
        let got: Vec<Value> = pipe.query(&mut c).unwrap();
        assert!(got.iter().all(|v| *v == Value::Okay), "{got:?}");
    }
    let written = written_on_worker(&mut c);
    assert!(
        written > 0 && written < n,
        "{written} of {n} SETs written on the worker"
    );
    get_all(&mut c, n);
    let processed = stat(&mut c, "total_commands_processed");
    assert!(processed >= n + n, "{processed} commands counted");
    server.stop();
}
