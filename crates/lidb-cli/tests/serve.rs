//! `lidb serve` as a process: SIGTERM stops it with exit 0 and every write kept, also in the
//! middle of a pipeline (whole replies only, each for a kept write); SIGKILL under
//! `--sync` at random instants of a write load from several client connections at once loses no
//! write a client saw acknowledged (the server is restarted on the same directory and read back
//! through the protocol). Protected mode refuses a network address without a password at start;
//! a password from --requirepass-file is asked for. `--metrics-listen` prints its address and is
//! scraped, and is held to protected mode.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Served {
    child: Child,
    addr: String,
}

/// A server left running by a failed assertion would outlive the test (and hold its stderr).
impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `lidb serve` on a free port and reads its first line for the address.
fn serve(dir: &Path, engine: &str, extra: &[&str]) -> Served {
    serve_on("127.0.0.1:0", dir, engine, extra)
}

/// `serve` on `listen`.
fn serve_on(listen: &str, dir: &Path, engine: &str, extra: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["serve", "--engine", engine, "--listen", listen, "--db"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line {line:?}"))
        .to_string();
    Served { child, addr }
}

fn connect(addr: &str) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

/// Waits up to 20 s for the child to exit.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    panic!("lidb serve did not exit within 20 s");
}

#[test]
fn sigterm_exits_zero_and_keeps_every_write() {
    for engine in ["lsm", "learnedkv", "finedex", "learnedstore"] {
        let scratch = Scratch::new(&format!("serve-term-{engine}"));
        // `--db` names a directory that does not exist yet.
        let dir = scratch.join("db");
        let mut s = serve(&dir, engine, &[]);
        let mut c = connect(&s.addr);
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.set(format!("key{i:04}"), format!("value{i}")).ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
        let status = Command::new("kill")
            .args(["-TERM", &s.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = wait_exit(&mut s.child);
        assert!(exit.success(), "{engine}: lidb serve exited with {exit}");
        drop(c);

        let mut s = serve(&dir, engine, &[]);
        let mut c = connect(&s.addr);
        let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 500, "{engine}");
        let v: String = redis::cmd("GET").arg("key0499").query(&mut c).unwrap();
        assert_eq!(v, "value499", "{engine}");
        s.child.kill().unwrap();
        s.child.wait().unwrap();
    }
}

/// SIGTERM while a client's long pipeline is being answered: the server finishes the batch it is
/// running, sends whole replies only, exits 0, and every SET it answered is there after a
/// restart (requests run in order, so those are the first ones sent).
#[test]
fn sigterm_mid_pipeline_answers_whole_replies_for_kept_writes() {
    use std::io::{Read, Write};
    const N: usize = 20_000;
    for engine in ["lsm", "finedex"] {
        let scratch = Scratch::new(&format!("serve-term-mid-{engine}"));
        // `--db` names a directory that does not exist yet.
        let dir = scratch.join("db");
        let mut s = serve(&dir, engine, &[]);
        let mut stream = std::net::TcpStream::connect(&s.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut request = Vec::new();
        for i in 0..N {
            let (k, v) = (format!("mid{i:06}"), format!("v{i}"));
            request.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                    k.len(),
                    v.len()
                )
                .as_bytes(),
            );
        }
        let mut writer = stream.try_clone().unwrap();
        // The server may stop reading before it has all of it: a failed write is expected.
        let sender = std::thread::spawn(move || {
            let _ = writer.write_all(&request);
        });
        // The first reply proves the server is inside the pipeline; then the signal.
        let mut got = vec![0u8; 5];
        stream.read_exact(&mut got).unwrap();
        let status = Command::new("kill")
            .args(["-TERM", &s.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        // A reset instead of a clean close (unread input) ends the read too.
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        got.extend_from_slice(&rest);
        let exit = wait_exit(&mut s.child);
        assert!(exit.success(), "{engine}: lidb serve exited with {exit}");
        let _ = sender.join();
        assert_eq!(got.len() % 5, 0, "{engine}: a partial reply at the end");
        assert!(
            got.chunks(5).all(|r| r == b"+OK\r\n"),
            "{engine}: replies other than +OK"
        );
        let answered = got.len() / 5;
        println!("{engine}: {answered} of {N} SETs answered before the stop");
        assert!((1..=N).contains(&answered), "{engine}: {answered} replies");

        let mut s = serve(&dir, engine, &[]);
        let mut c = connect(&s.addr);
        for i in 0..answered {
            let v: Option<String> = redis::cmd("GET")
                .arg(format!("mid{i:06}"))
                .query(&mut c)
                .unwrap();
            assert_eq!(
                v.as_deref(),
                Some(format!("v{i}").as_str()),
                "{engine}: answered SET {i} of {answered} lost"
            );
        }
        s.child.kill().unwrap();
        s.child.wait().unwrap();
    }
}

/// What a writer saw: the value of every key as of its last acknowledged pipeline, and the values
/// of the pipeline in flight when the server died (which may or may not have landed).
#[derive(Default)]
struct Acked {
    values: BTreeMap<String, String>,
    in_flight: BTreeMap<String, BTreeSet<String>>,
}

/// Writes pipelines of 8 SETs (fresh keys and overwrites of 40 hot keys, all of them this
/// writer's own) until the server dies.
fn write_until_killed(addr: &str, round: u64, writer: u64, mut acked: Acked) -> Acked {
    let mut c = connect(addr);
    acked.in_flight.clear();
    for batch in 0..100_000u64 {
        let mut pipe = redis::pipe();
        let mut sent = Vec::new();
        for j in 0..8u64 {
            let key = if j % 2 == 0 {
                format!("fresh-{writer}-{round}-{batch}-{j}")
            } else {
                format!("hot-{writer}-{}", (batch * 8 + j) % 40)
            };
            let value = format!("v-{writer}-{round}-{batch}-{j}");
            pipe.set(&key, &value).ignore();
            sent.push((key, value));
        }
        if pipe.query::<()>(&mut c).is_err() {
            for (k, v) in sent {
                acked.in_flight.entry(k).or_default().insert(v);
            }
            return acked;
        }
        acked.values.extend(sent);
    }
    acked
}

/// Writer connections at once: more than the cores, so group commit gathers writes of several
/// clients into one log sync and the memtable takes inserts from several engine threads.
const WRITERS: u64 = 4;

#[test]
fn sigkill_under_sync_loses_no_acknowledged_write() {
    let seed: u64 = std::env::var("LIDB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    eprintln!("seed {seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for engine in ["lsm", "learnedkv", "finedex", "learnedstore"] {
        let scratch = Scratch::new(&format!("serve-kill-{engine}"));
        // `--db` names a directory that does not exist yet.
        let dir = scratch.join("db");
        // A small memtable makes the LSM engines flush under the load; the others have none
        // and refuse the option.
        let extra: &[&str] = match engine {
            "lsm" | "learnedkv" => &["--sync", "--write-buffer", "64KiB"],
            _ => &["--sync"],
        };
        let mut acked = Acked::default();
        // Three kills; the fourth start only checks the last one.
        for round in 0..4u64 {
            let mut s = serve(&dir, engine, extra);
            let addr = s.addr.clone();
            // Every write acknowledged before this kill is on disk: check it first.
            let mut c = connect(&addr);
            let mut landed = Vec::new();
            for (k, v) in &acked.values {
                let got: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
                if got.as_ref() == Some(v) {
                    continue;
                }
                // A write in flight at the kill may have landed: then it is the value from now on.
                let maybe = acked.in_flight.get(k);
                match got {
                    Some(g) if maybe.is_some_and(|m| m.contains(&g)) => landed.push((k.clone(), g)),
                    got => panic!(
                        "seed {seed} {engine} round {round}: {k} is {got:?}, acknowledged {v}"
                    ),
                }
            }
            acked.values.extend(landed);
            drop(c);
            if round == 3 {
                s.child.kill().unwrap();
                s.child.wait().unwrap();
                eprintln!(
                    "{engine}: {} keys acknowledged over 3 kills",
                    acked.values.len()
                );
                break;
            }
            // Each writer owns its keys, so its acknowledged values are exact whatever the
            // interleaving; the in-flight sets of all writers are kept.
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let addr = addr.clone();
                    std::thread::spawn(move || {
                        write_until_killed(&addr, round, w, Acked::default())
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(rng.gen_range(100..400)));
            s.child.kill().unwrap();
            s.child.wait().unwrap();
            acked.in_flight.clear();
            let mut acknowledged = 0;
            for writer in writers {
                let got = writer.join().unwrap();
                acknowledged += got.values.len();
                acked.values.extend(got.values);
                acked.in_flight.extend(got.in_flight);
            }
            assert!(
                acknowledged > 0,
                "{engine} round {round}: no write was acknowledged"
            );
        }
    }
}

#[test]
fn protected_mode_refuses_the_network_without_a_password_at_start() {
    let scratch = Scratch::new("serve-protected");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["serve", "--listen", "0.0.0.0:0", "--db"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("protected mode") && stderr.contains("--requirepass-file"),
        "{stderr}"
    );
    assert!(!dir.exists(), "refused, yet created {}", dir.display());
}

#[test]
fn a_password_file_opens_the_network_and_is_asked_for() {
    let dir = Scratch::new("serve-password");
    let file = dir.join("password");
    std::fs::write(&file, "s3cret\n").unwrap();
    let db = dir.join("db");
    let file_arg = file.to_str().unwrap();
    let s = serve_on("0.0.0.0:0", &db, "lsm", &["--requirepass-file", file_arg]);
    let port = s.addr.rsplit(':').next().unwrap();
    let open = |url: String| {
        redis::Client::open(url)
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
    };
    let mut c = open(format!("redis://:s3cret@127.0.0.1:{port}/?protocol=resp3")).unwrap();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap();
    let mut bare = open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let err = redis::cmd("GET")
        .arg("k")
        .query::<String>(&mut bare)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOAUTH"), "{err}");
    assert!(open(format!("redis://:s3cret%0A@127.0.0.1:{port}/")).is_err());
    drop(s);

    // No password and protected mode off: served, no AUTH needed.
    let s = serve_on(
        "0.0.0.0:0",
        &dir.join("db2"),
        "lsm",
        &["--protected-mode", "no"],
    );
    let port = s.addr.rsplit(':').next().unwrap();
    let mut c = open(format!("redis://127.0.0.1:{port}/")).unwrap();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    drop(s);
}

/// `--metrics-listen` on port 0: the line after `listening on` names the metrics address, and a
/// scrape there counts a SET sent to the server; on the network without a password it is
/// refused at start like --listen.
#[test]
fn metrics_listen_prints_its_address_and_is_scraped() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("serve-metrics");
    // `--db` names a directory that does not exist yet.
    let dir = scratch.join("db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&dir)
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = [String::new(), String::new()];
    for line in &mut lines {
        out.read_line(line).unwrap();
    }
    let s = Served {
        child,
        addr: lines[0]
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .into(),
    };
    let metrics = lines[1]
        .trim()
        .strip_prefix("metrics listening on ")
        .unwrap_or_else(|| panic!("second line {:?}", lines[1]));
    let mut c = connect(&s.addr);
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap();
    let mut http = std::net::TcpStream::connect(metrics).unwrap();
    http.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(
        text.contains("\nlidb_commands_total{command=\"set\"} 1\n"),
        "{text}"
    );
    drop(c);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&dir)
        .args(["--metrics-listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("0.0.0.0:0"), "{stderr}");
    assert!(!dir.exists(), "refused, yet created {}", dir.display());
}
