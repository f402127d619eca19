//! HELLO and RESP3 on the wire, `--requirepass` (NOAUTH, WRONGPASS, the delay and the INFO
//! count), protected mode at start, and the redis-rs client over RESP3 with a password.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use lidb_engines::{self as engines, EngineConfig};
use lidb_server::{Password, Server, ServerConfig, ServerError};
use redis::Value;
use support::{exchange_upto, reply_text, resp, start, start_with};

fn with_password(pw: &str) -> ServerConfig {
    ServerConfig {
        requirepass: Password::new(pw),
        ..ServerConfig::default()
    }
}

const HELLO3: &str = "%7\r\n$6\r\nserver\r\n$4\r\nlidb\r\n$7\r\nversion\r\n";

#[test]
fn hello_switches_the_protocol_of_that_connection_only() {
    let server = start("lsm");
    let addr = server.addr();
    // A pipeline: a RESP2 null, HELLO 3 as a map, then RESP3's null, map, verbatim string.
    let mut input = resp(&[b"GET", b"missing"]);
    input.extend(resp(&[b"HELLO", b"3", b"SETNAME", b"me"]));
    input.extend(resp(&[b"GET", b"missing"]));
    input.extend(resp(&[b"CONFIG", b"GET", b"save"]));
    input.extend(resp(&[b"COMMAND", b"DOCS"]));
    input.extend(resp(&[b"CLIENT", b"GETNAME"]));
    input.extend(resp(&[b"INFO", b"server"]));
    let (got, _) = exchange_upto(addr, &input, Duration::from_secs(1), usize::MAX);
    let got = String::from_utf8_lossy(&got).into_owned();
    let rest = got.strip_prefix("$-1\r\n").expect(&got);
    assert!(rest.starts_with(HELLO3), "{rest}");
    let tail = "$5\r\nproto\r\n:3\r\n$2\r\nid\r\n";
    assert!(rest.contains(tail), "{rest}");
    let after = rest.split("$7\r\nmodules\r\n*0\r\n").nth(1).expect(rest);
    let after = after
        .strip_prefix("_\r\n%1\r\n$4\r\nsave\r\n$0\r\n\r\n%0\r\n$2\r\nme\r\n=")
        .expect(after);
    assert!(after.contains("\r\ntxt:# Server\r\n"), "{after}");

    // Another connection still speaks RESP2, byte for byte as before.
    let mut input = resp(&[b"GET", b"missing"]);
    input.extend(resp(&[b"CONFIG", b"GET", b"save"]));
    input.extend(resp(&[b"COMMAND", b"DOCS"]));
    let want = "$-1\r\n*2\r\n$4\r\nsave\r\n$0\r\n\r\n*0\r\n";
    assert_eq!(reply_text(addr, &input, want), want);

    // HELLO 2 answers as a flat array; HELLO 3 then HELLO 2 goes back.
    let mut input = resp(&[b"HELLO", b"3"]);
    input.extend(resp(&[b"HELLO", b"2"]));
    input.extend(resp(&[b"GET", b"missing"]));
    let (got, _) = exchange_upto(addr, &input, Duration::from_secs(1), usize::MAX);
    let got = String::from_utf8_lossy(&got).into_owned();
    let second = got.split("*0\r\n").nth(1).expect(&got);
    assert!(second.starts_with("*14\r\n$6\r\nserver\r\n"), "{second}");
    assert!(second.contains("$5\r\nproto\r\n:2\r\n"), "{second}");
    assert!(got.ends_with("*0\r\n$-1\r\n"), "{got}");
    server.stop();
}

#[test]
fn every_command_waits_for_the_password() {
    let server = start_with("lsm", with_password("s3cret"));
    let addr = server.addr();
    let noauth = "-NOAUTH Authentication required.\r\n";
    // SETs in a row (written as one group when authenticated) and GETs (answered from memory
    // when authenticated) are refused alike; QUIT is not.
    let mut input = resp(&[b"SET", b"k", b"v"]);
    input.extend(resp(&[b"SET", b"k2", b"v"]));
    input.extend(resp(&[b"GET", b"k"]));
    input.extend(resp(&[b"NOSUCH"]));
    input.extend(resp(&[b"CLIENT", b"ID"]));
    input.extend(resp(&[b"QUIT"]));
    let want = format!("{noauth}{noauth}{noauth}{noauth}{noauth}+OK\r\n");
    assert_eq!(reply_text(addr, &input, &want), want);

    let mut input = resp(&[b"HELLO", b"3"]);
    input.extend(resp(&[b"AUTH", b"s3cret"]));
    input.extend(resp(&[b"SET", b"k", b"v"]));
    input.extend(resp(&[b"GET", b"k"]));
    let got = reply_text(addr, &input, &"x".repeat(300));
    let want = "+OK\r\n+OK\r\n$1\r\nv\r\n";
    assert!(got.starts_with("-NOAUTH HELLO must be called"), "{got}");
    assert!(got.ends_with(want), "{got}");

    // The written key is in memory now: an unauthenticated GET still gets NOAUTH.
    assert_eq!(reply_text(addr, &resp(&[b"GET", b"k"]), noauth), noauth);
    let mut input = resp(&[b"HELLO", b"3", b"AUTH", b"default", b"s3cret"]);
    input.extend(resp(&[b"GET", b"nothing"]));
    let got = reply_text(addr, &input, &"x".repeat(200));
    assert!(got.starts_with(HELLO3) && got.ends_with("_\r\n"), "{got}");
    server.stop();
}

#[test]
fn wrong_passwords_are_refused_slowed_and_counted() {
    let server = start_with("lsm", with_password("s3cret"));
    let addr = server.addr();
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    let cases: &[&[&[u8]]] = &[
        &[b"AUTH", b"s3cre"],
        &[b"AUTH", b"s3cret!"],
        &[b"AUTH", b""],
        &[b"AUTH", b"root", b"s3cret"],
        &[b"HELLO", b"3", b"AUTH", b"default", b"wrong"],
    ];
    for args in cases {
        let started = Instant::now();
        assert_eq!(
            reply_text(addr, &resp(args), wrongpass),
            wrongpass,
            "{args:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(150), "{args:?}");
    }
    let mut input = resp(&[b"AUTH", b"default", b"s3cret"]);
    input.extend(resp(&[b"INFO", b"stats"]));
    let got = reply_text(addr, &input, &"x".repeat(400));
    assert!(got.contains("acl_access_denied_auth:5\r\n"), "{got}");
    server.stop();
}

#[test]
fn auth_without_a_password_is_refused_clearly() {
    let server = start("lsm");
    let want = "-ERR AUTH <password> called without any password configured for the default \
                user. Are you sure your configuration is correct?\r\n";
    assert_eq!(
        reply_text(server.addr(), &resp(&[b"AUTH", b"x"]), want),
        want
    );
    let hello = resp(&[b"HELLO", b"3", b"AUTH", b"default", b"x"]);
    assert_eq!(reply_text(server.addr(), &hello, want), want);
    server.stop();
}

#[test]
fn redis_rs_over_resp3_with_a_password() {
    let server = start_with("lsm", with_password("s3cret"));
    let open = |url: String| {
        redis::Client::open(url)
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
    };
    let addr = server.addr();
    let mut c = open(format!("redis://:s3cret@{addr}/?protocol=resp3")).unwrap();
    let set: Value = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    assert_eq!(set, Value::Okay);
    let got: Value = redis::cmd("MGET")
        .arg("k")
        .arg("none")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        got,
        Value::Array(vec![Value::BulkString(b"v".to_vec()), Value::Nil])
    );
    let cfg: Value = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut c)
        .unwrap();
    assert!(matches!(cfg, Value::Map(ref m) if m.len() == 1), "{cfg:?}");
    let info: Value = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    assert!(matches!(info, Value::VerbatimString { .. }), "{info:?}");

    // RESP2 with the password, as before.
    let mut c2 = open(format!("redis://:s3cret@{addr}/")).unwrap();
    let got: Option<String> = redis::cmd("GET").arg("k").query(&mut c2).unwrap();
    assert_eq!(got.as_deref(), Some("v"));

    // A wrong password fails the connection; none gets NOAUTH on the first command.
    let wrong = open(format!("redis://:nope@{addr}/?protocol=resp3"));
    assert!(wrong.is_err());
    let mut bare = open(format!("redis://{addr}/")).unwrap();
    let err = redis::cmd("GET")
        .arg("k")
        .query::<Value>(&mut bare)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOAUTH"), "{err}");
    server.stop();
}

/// Binds (and drops) a server on `listen`; the refusal if there is one.
fn bind(
    listen: &str,
    requirepass: Option<Password>,
    protected_mode: bool,
) -> Result<(), ServerError> {
    let dir = lidb_testkit::Scratch::new("server-protected");
    let engine = engines::open("lsm", &EngineConfig::new(dir.to_path_buf())).unwrap();
    let config = ServerConfig {
        listen: listen.into(),
        requirepass,
        protected_mode,
        ..ServerConfig::default()
    };
    Server::bind(config, engine).map(drop)
}

#[test]
fn protected_mode_refuses_the_network_without_a_password() {
    match bind("0.0.0.0:0", None, true) {
        Err(e @ ServerError::Unprotected { .. }) => {
            let line = e.to_string();
            assert!(line.contains("0.0.0.0:0") && !line.contains('\n'), "{line}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(bind("127.0.0.1:0", None, true).is_ok());
    assert!(bind("0.0.0.0:0", Password::new("pw"), true).is_ok());
    assert!(bind("0.0.0.0:0", None, false).is_ok());
}
