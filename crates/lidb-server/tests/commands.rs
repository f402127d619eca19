//! Each command through a real client, its replies and Redis's error shapes, and LIDB.RANGE's
//! bounds, paging and REV.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use redis::Value;
use support::{exchange_text, reply_text, resp, start};

#[test]
fn error_shapes_are_redis_s() {
    let server = start("lsm");
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"NOSUCH", b"a", b"b"],
            "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n",
        ),
        (
            &[b"GET"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &[b"get", b"a", b"b"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &[b"MSET", b"a", b"1", b"b"],
            "-ERR wrong number of arguments for 'mset' command\r\n",
        ),
        (
            &[b"SET", b"a", b"1", b"EX", b"10"],
            "-ERR lidb keeps no expiry times: SET EX/PX/EXAT/PXAT are not supported\r\n",
        ),
        (
            &[b"SET", b"a", b"1", b"PX", b"10"],
            "-ERR lidb keeps no expiry times: SET EX/PX/EXAT/PXAT are not supported\r\n",
        ),
        (&[b"SET", b"a", b"1", b"NX", b"XX"], "-ERR syntax error\r\n"),
        (&[b"SELECT", b"1"], "-ERR DB index is out of range\r\n"),
        (
            &[b"SELECT", b"x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&[b"SCAN", b"x"], "-ERR invalid cursor\r\n"),
        (&[b"SCAN", b"0", b"COUNT", b"0"], "-ERR syntax error\r\n"),
        (
            &[b"LIDB.RANGE", b"a", b"+"],
            "-ERR min or max not valid string range item\r\n",
        ),
        (
            &[b"CONFIG", b"BOGUS"],
            "-ERR unknown subcommand 'BOGUS'. Try CONFIG HELP.\r\n",
        ),
        (&[b"SELECT", b"0"], "+OK\r\n"),
        (&[b"CLIENT", b"SETNAME", b"me"], "+OK\r\n"),
        (&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"x"], "+OK\r\n"),
        (
            &[b"CONFIG", b"GET", b"save"],
            "*2\r\n$4\r\nsave\r\n$0\r\n\r\n",
        ),
        (
            &[b"CONFIG", b"GET", b"appendonly"],
            "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
        ),
        (&[b"COMMAND", b"DOCS"], "*0\r\n"),
        (&[b"COMMAND", b"COUNT"], ":22\r\n"),
        (&[b"PING", b"hi"], "$2\r\nhi\r\n"),
        (&[b"ECHO", b"x y"], "$3\r\nx y\r\n"),
    ];
    for (args, want) in cases {
        let got = reply_text(server.addr(), &resp(args), want);
        assert_eq!(
            got,
            *want,
            "{:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        );
    }
    let (got, _) = exchange_text(server.addr(), &resp(&[b"HELLO", b"4"]));
    assert_eq!(got, "-NOPROTO unsupported protocol version\r\n");
    let (got, closed) = exchange_text(server.addr(), b"QUIT\r\nPING\r\n");
    assert_eq!((got.as_str(), closed), ("+OK\r\n", true));
    server.stop();
}

#[test]
fn string_commands_answer_as_redis_does() {
    let server = start("lsm");
    let mut c = server.client();
    let q = |c: &mut redis::Connection, args: &[&str]| -> Value {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(c).unwrap()
    };
    let okay = Value::Okay;
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(q(&mut c, &["SET", "a", "1"]), okay);
    assert_eq!(q(&mut c, &["SET", "a", "2", "NX"]), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "b", "2", "XX"]), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "a", "3", "XX", "GET"]), bulk("1"));
    assert_eq!(q(&mut c, &["SETNX", "a", "x"]), Value::Int(0));
    assert_eq!(q(&mut c, &["SETNX", "b", "x"]), Value::Int(1));
    assert_eq!(q(&mut c, &["GETSET", "b", "y"]), bulk("x"));
    assert_eq!(q(&mut c, &["GETSET", "c", "z"]), Value::Nil);
    assert_eq!(q(&mut c, &["MSET", "d", "4", "e", "5"]), okay);
    assert_eq!(
        q(&mut c, &["MGET", "a", "nope", "e"]),
        Value::Array(vec![bulk("3"), Value::Nil, bulk("5")])
    );
    assert_eq!(q(&mut c, &["EXISTS", "a", "a", "nope"]), Value::Int(2));
    assert_eq!(q(&mut c, &["DBSIZE"]), Value::Int(5));
    assert_eq!(q(&mut c, &["DEL", "a", "nope", "b"]), Value::Int(2));
    assert_eq!(q(&mut c, &["GET", "a"]), Value::Nil);
    assert_eq!(q(&mut c, &["DBSIZE"]), Value::Int(3));
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    assert!(
        info.contains("# Server\r\n") && info.contains("engine:lsm\r\n"),
        "{info}"
    );
    let memory: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    assert!(
        memory.starts_with("# Memory\r\n") && !memory.contains("# Server"),
        "{memory}"
    );
    // The split adds up to used_memory, and the memtable holds what was written.
    let field = |name: &str| -> u64 {
        let line = memory.lines().find(|l| l.starts_with(&format!("{name}:")));
        line.and_then(|l| l.split(':').nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("INFO memory has no {name}: {memory}"))
    };
    let parts: u64 = ["index", "filter", "cache", "memtable", "data"]
        .iter()
        .map(|p| field(&format!("engine_{p}_bytes")))
        .sum();
    assert_eq!(field("used_memory"), parts, "{memory}");
    assert!(field("engine_memtable_bytes") > 0, "{memory}");
    let disk: String = redis::cmd("INFO").arg("disk").query(&mut c).unwrap();
    assert!(disk.starts_with("# Disk\r\nlsm_bytes:"), "{disk}");
    assert_eq!(q(&mut c, &["FLUSHDB"]), okay);
    assert_eq!(q(&mut c, &["DBSIZE"]), Value::Int(0));
    server.stop();
}

/// `[next_key, items]` of one LIDB.RANGE call.
fn range(c: &mut redis::Connection, args: &[&str]) -> (Option<String>, Vec<String>) {
    let mut cmd = redis::cmd("LIDB.RANGE");
    for a in args {
        cmd.arg(*a);
    }
    let (next, items): (Option<String>, Vec<String>) = cmd.query(c).unwrap();
    (next, items)
}

#[test]
fn lidb_range_bounds_paging_and_rev() {
    let server = start("lsm");
    let mut c = server.client();
    let keys: Vec<String> = (0..50).map(|i| format!("k{i:02}")).collect();
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.set(k, format!("v-{k}")).ignore();
    }
    pipe.query::<()>(&mut c).unwrap();

    assert_eq!(range(&mut c, &["-", "+"]).1, keys);
    assert_eq!(range(&mut c, &["[k10", "(k13"]).1, ["k10", "k11", "k12"]);
    assert_eq!(range(&mut c, &["(k10", "[k13"]).1, ["k11", "k12", "k13"]);
    assert_eq!(
        range(&mut c, &["[k10", "[k11", "WITHVALUES"]).1,
        ["k10", "v-k10", "k11", "v-k11"]
    );
    assert_eq!(range(&mut c, &["[k20", "(k20"]), (None, vec![]));
    assert_eq!(range(&mut c, &["+", "-"]), (None, vec![]));

    // Forward paging: every key once, in order.
    let (mut seen, mut start, mut calls) = (Vec::new(), "-".to_string(), 0);
    loop {
        let (next, items) = range(&mut c, &[&start, "+", "LIMIT", "7"]);
        assert!(items.len() <= 7);
        seen.extend(items);
        calls += 1;
        match next {
            Some(k) => start = format!("[{k}"),
            None => break,
        }
        assert!(calls < 100);
    }
    assert_eq!(seen, keys);

    // Reverse paging from the top.
    let (mut seen, mut end, mut calls) = (Vec::new(), "+".to_string(), 0);
    loop {
        let (next, items) = range(&mut c, &["[k05", &end, "LIMIT", "6", "REV"]);
        seen.extend(items);
        calls += 1;
        match next {
            Some(k) => end = format!("[{k}"),
            None => break,
        }
        assert!(calls < 100);
    }
    let want: Vec<String> = keys[5..].iter().rev().cloned().collect();
    assert_eq!(seen, want);
    server.stop();
}

#[test]
fn scan_walks_every_key_with_match_and_count() {
    let server = start("lsm");
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..300 {
        pipe.set(format!("user:{i:03}"), i).ignore();
        pipe.set(format!("item:{i:03}"), i).ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    let (mut cursor, mut seen, mut calls) = (0u64, Vec::<String>::new(), 0);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("user:*")
            .arg("COUNT")
            .arg(25)
            .query(&mut c)
            .unwrap();
        seen.extend(keys);
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(calls < 1000);
    }
    let want: Vec<String> = (0..300).map(|i| format!("user:{i:03}")).collect();
    assert_eq!(seen, want);
    // An unknown cursor restarts from the first key.
    let (_, keys): (u64, Vec<String>) = redis::cmd("SCAN").arg(987_654).query(&mut c).unwrap();
    assert_eq!(keys.first().map(String::as_str), Some("item:000"));
    server.stop();
}

#[test]
fn every_engine_serves_the_basic_commands() {
    for engine in lidb_engines::names() {
        let server = start(engine);
        let mut c = server.client();
        let _: () = redis::cmd("SET")
            .arg(b"\x00bin\xffkey")
            .arg(b"\r\nval\x00")
            .query(&mut c)
            .unwrap();
        let v: Vec<u8> = redis::cmd("GET")
            .arg(b"\x00bin\xffkey")
            .query(&mut c)
            .unwrap();
        assert_eq!(v, b"\r\nval\x00", "{engine}");
        let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 1, "{engine}");
        // A pipeline's run of SETs is one Engine::put_many: in order, the last of a key wins.
        let got: (String, String, String, String, Option<String>) = redis::pipe()
            .set("p", "1")
            .set("q", "x")
            .set("p", "2")
            .get("p")
            .get("nope")
            .query(&mut c)
            .unwrap();
        assert_eq!(
            got,
            ("OK".into(), "OK".into(), "OK".into(), "2".into(), None),
            "{engine}"
        );
        let (_, many): (String, Vec<String>) = redis::pipe()
            .cmd("MSET")
            .arg("m1")
            .arg("a")
            .arg("m2")
            .arg("b")
            .arg("m1")
            .arg("c")
            .cmd("MGET")
            .arg("m1")
            .arg("m2")
            .query(&mut c)
            .unwrap();
        assert_eq!(many, ["c", "b"], "{engine}");
        // INFO names only the parts the engine has.
        let info: String = redis::cmd("INFO").query(&mut c).unwrap();
        let (lsm, tiered) = match engine {
            "lsm" => (true, false),
            "learnedkv" | "lsm+" | "lsm+tier" => (true, true),
            _ => (false, false),
        };
        assert_eq!(info.contains("reads_from_lsm:"), lsm, "{engine}: {info}");
        assert_eq!(
            info.contains("reads_from_tier:"),
            tiered,
            "{engine}: {info}"
        );
        assert_eq!(info.contains("\ngcs:"), tiered, "{engine}: {info}");
        server.stop();
    }
}
