//! Servers and clients on 127.0.0.1 in one process: gets from trained data in one round trip
//! (on-client: two or more, its bins read remotely; torn bin copies rejected),
//! torn reads rejected, model-based runs against a BTreeMap while the servers retrain all the
//! time (tiny bins plus a retraining thread), clients that vanish, servers replaced under
//! running clients, and malformed frames. Every loop is bounded by a count and a deadline;
//! failures print the seed.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lidb_fine::{Config, FineIndex};
use lidb_fine_net::codec::consts::STATUS_BAD_REQUEST;
use lidb_fine_net::codec::{decode_reply, encode_frame, split_frame};
use lidb_fine_net::{Client, Mode, Server, ServerConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn tiny() -> Config {
    Config {
        root_slots: 2,
        child_slots: 2,
        threshold: 2,
        learning_step: 4,
        learning_rate: 0.5,
        model_retrain_after_nested: 1,
        model_retrain_divisor: 0,
    }
}

fn index(keys: impl Iterator<Item = u64>, cfg: Config) -> Arc<FineIndex> {
    let entries: Vec<(u64, u64)> = keys.map(|k| (k, k + 1)).collect();
    Arc::new(FineIndex::bulk_load(&entries, cfg).unwrap())
}

fn server(ix: Arc<FineIndex>, lo: u64, hi: u64) -> Server {
    let cfg = ServerConfig {
        shard_lo: lo,
        shard_hi: hi,
        ..ServerConfig::default()
    };
    Server::start(ix, "127.0.0.1:0", cfg).unwrap()
}

fn connect(servers: &[&Server], mode: Mode) -> Client {
    let addrs: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    Client::connect(&addrs, mode, Duration::from_secs(5)).unwrap()
}

#[test]
fn a_get_of_trained_data_takes_one_round_trip() {
    let s = server(
        index((0..20_000u64).map(|k| k * 3), Config::default()),
        0,
        u64::MAX,
    );
    let mut c = connect(&[&s], Mode::Pipeline);
    assert_eq!(c.get(0).unwrap(), Some(1)); // fetches the layout
    let before = c.stats();
    for k in 0..20_000u64 {
        assert_eq!(c.get(k * 3).unwrap(), Some(k * 3 + 1), "key {}", k * 3);
    }
    let after = c.stats();
    let per_get = (after.round_trips - before.round_trips) as f64 / 20_000.0;
    println!("round trips per get of trained data: {per_get}");
    assert!(per_get <= 1.05, "{per_get} round trips per get: {after:?}");
    assert_eq!(s.counters().pipeline_ops.load(Ordering::Relaxed), 0);
    // A key that is not trained takes the read plus one level-bin op, at its address.
    assert_eq!(c.get(1).unwrap(), None);
    assert_eq!(c.insert(1, 10).unwrap(), None);
    assert_eq!(c.get(1).unwrap(), Some(10));
    assert!(s.counters().at_address.load(Ordering::Relaxed) >= 2);
    // On-server: every op one RPC and no remote reads.
    let mut o = connect(&[&s], Mode::OnServer);
    let hello = o.stats().round_trips;
    assert_eq!(o.get(3).unwrap(), Some(4));
    assert_eq!(o.stats().reads, 0);
    assert_eq!(o.stats().round_trips - hello, 1);
}

#[test]
fn on_client_gets_take_two_round_trips_or_more_and_pipeline_at_most_1_05() {
    let s = server(
        index((0..20_000u64).map(|k| k * 3), Config::default()),
        0,
        u64::MAX,
    );
    let per_get = |mode| {
        let mut c = connect(&[&s], mode);
        assert_eq!(c.get(0).unwrap(), Some(1));
        let before = c.stats().round_trips;
        for k in 0..5_000u64 {
            assert_eq!(
                c.get(k * 12).unwrap(),
                Some(k * 12 + 1),
                "{mode:?} key {}",
                k * 12
            );
        }
        (c.stats().round_trips - before) as f64 / 5_000.0
    };
    let pipeline = per_get(Mode::Pipeline);
    let on_client = per_get(Mode::OnClient);
    println!("round trips per trained get: pipeline {pipeline}, on-client {on_client}");
    assert!(pipeline <= 1.05, "pipeline {pipeline}");
    assert!(on_client >= 2.0, "on-client {on_client}");
    assert_eq!(s.counters().pipeline_ops.load(Ordering::Relaxed), 0);
}

#[test]
fn on_client_gets_of_untrained_keys_read_the_level_bins_remotely() {
    let cfg = Config {
        root_slots: 4,
        child_slots: 4,
        ..Config::default()
    };
    let s = server(index((0..2_000u64).map(|k| k * 100), cfg), 0, u64::MAX);
    let mut w = connect(&[&s], Mode::Pipeline);
    // Gap below 1000: a flat root bin (2 keys). Gap below 5000: a root index over child bins.
    for k in [1_001u64, 1_002] {
        assert_eq!(w.insert(k, k + 7).unwrap(), None);
    }
    for k in 5_001u64..5_010 {
        assert_eq!(w.insert(k, k + 7).unwrap(), None);
    }
    let mut c = connect(&[&s], Mode::OnClient);
    let ops = s.counters().pipeline_ops.load(Ordering::Relaxed);
    let rt = c.stats().round_trips;
    for k in [1_001u64, 1_002] {
        assert_eq!(c.get(k).unwrap(), Some(k + 7));
    }
    assert_eq!(c.get(1_003).unwrap(), None);
    // Model, window, root bin.
    assert_eq!(c.stats().round_trips - rt, 9);
    let rt = c.stats().round_trips;
    for k in 5_001u64..5_010 {
        assert_eq!(c.get(k).unwrap(), Some(k + 7), "key {k}");
    }
    // Model, window, root bin, child bin (unless the bins became a small model: by key).
    let st = c.stats();
    println!("{st:?}");
    assert!(st.round_trips - rt >= 9 * 4, "{st:?}");
    assert_eq!(st.torn, 0, "{st:?}");
    let by_key = s.counters().pipeline_ops.load(Ordering::Relaxed) - ops;
    assert_eq!(by_key, st.fallbacks, "{st:?}");
    assert_eq!(st.fallbacks, 0, "{st:?}");
    // A torn bin copy (the bins' write section taken halfway) is rejected, then read again.
    s.tear_next_bin_reads(3);
    assert_eq!(c.get(1_001).unwrap(), Some(1_008));
    assert_eq!(c.get(5_003).unwrap(), Some(5_010));
    assert!(c.stats().torn >= 3, "{:?}", c.stats());
    // Past the retry bound the get goes by key and is still right.
    s.tear_next_bin_reads(1_000);
    assert_eq!(c.get(5_004).unwrap(), Some(5_011));
    assert!(c.stats().fallbacks >= 1);
    s.tear_next_bin_reads(0);
    // Writes are RPCs by key.
    let rt = c.stats().round_trips;
    assert_eq!(c.insert(5_020, 1).unwrap(), None);
    assert_eq!(c.stats().round_trips - rt, 1);
    assert_eq!(c.get(5_020).unwrap(), Some(1));
}

#[test]
fn torn_remote_reads_are_rejected_by_validation() {
    let s = server(
        index((0..5_000u64).map(|k| k * 2), Config::default()),
        0,
        u64::MAX,
    );
    let mut c = connect(&[&s], Mode::Pipeline);
    assert_eq!(c.get(2).unwrap(), Some(3));
    // The first key of the region is rewritten mid-copy: every one of these copies is torn.
    s.tear_next_reads(5);
    for k in [0u64, 4, 6] {
        assert_eq!(c.get(k).unwrap(), Some(k + 1));
    }
    let st = c.stats();
    assert_eq!(st.torn, 5, "{st:?}");
    // Past the retry bound the op goes by key and is still right.
    s.tear_next_reads(100);
    assert_eq!(c.get(8).unwrap(), Some(9));
    assert!(c.stats().fallbacks >= 1);
    s.tear_next_reads(0);
}

/// One client thread's run: ops on its own keys (`k % threads == t`), each answer compared with
/// its model.
fn model_run(
    addrs: &[String],
    mode: Mode,
    t: u64,
    threads: u64,
    seed: u64,
    deadline: Instant,
) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ t);
    let mut c = Client::connect(addrs, mode, Duration::from_secs(5)).unwrap();
    let mut model: BTreeMap<u64, u64> = (0..4_000u64)
        .map(|k| k * 8)
        .filter(|k| k % threads == t)
        .map(|k| (k, k + 1))
        .collect();
    let mut ops = 0u64;
    for i in 0..30_000u64 {
        if Instant::now() > deadline {
            break;
        }
        let k = rng.gen_range(0..32_000u64 / threads) * threads + t;
        let v = (i << 16) | t;
        match rng.gen_range(0..10) {
            0..=3 => assert_eq!(
                c.get(k).unwrap(),
                model.get(&k).copied(),
                "seed {seed} {mode:?}: get {k}"
            ),
            4..=6 => assert_eq!(
                c.insert(k, v).unwrap(),
                model.insert(k, v),
                "seed {seed}: insert {k}"
            ),
            7 => {
                let want = model.get(&k).copied();
                if want.is_some() {
                    model.insert(k, v);
                }
                assert_eq!(c.update(k, v).unwrap(), want, "seed {seed}: update {k}");
            }
            8 => assert_eq!(
                c.remove(k).unwrap(),
                model.remove(&k),
                "seed {seed}: remove {k}"
            ),
            _ => {
                let got: Vec<(u64, u64)> = c
                    .range(k, k + 400, 1_000)
                    .unwrap()
                    .into_iter()
                    .filter(|(x, _)| x % threads == t)
                    .collect();
                let want: Vec<(u64, u64)> =
                    model.range(k..=k + 400).map(|(a, b)| (*a, *b)).collect();
                assert_eq!(got, want, "seed {seed}: range from {k}");
            }
        }
        ops += 1;
    }
    for (k, v) in &model {
        assert_eq!(c.get(*k).unwrap(), Some(*v), "seed {seed}: final get {k}");
    }
    println!("{mode:?} thread {t}: {:?}", c.stats());
    ops
}

fn model_based(mode: Mode) {
    let seed: u64 = rand::random();
    println!("seed {seed} mode {mode:?}");
    let split = 16_000u64;
    let locks = mode == Mode::Locks;
    // Locks mode: writers never retrain, the servers' retraining takes the exclusive layout
    // lock; the others: writers retrain too.
    let cfg = |lo, hi| ServerConfig {
        shard_lo: lo,
        shard_hi: hi,
        retrain_every: locks.then_some(Duration::from_millis(2)),
        layout_locks: locks,
        ..ServerConfig::default()
    };
    let icfg = Config {
        model_retrain_after_nested: if locks { 0 } else { 1 },
        ..tiny()
    };
    let a_ix = index((0..2_000u64).map(|k| k * 8), icfg.clone());
    let b_ix = index((2_000..4_000u64).map(|k| k * 8), icfg);
    let a = Arc::new(Server::start(a_ix, "127.0.0.1:0", cfg(0, split - 1)).unwrap());
    let b = Arc::new(Server::start(b_ix, "127.0.0.1:0", cfg(split, u64::MAX)).unwrap());
    let addrs = vec![a.addr().to_string(), b.addr().to_string()];
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(4);
    // Every model retrained every 3 ms (in locks mode under the exclusive layout lock).
    let retrainers: Vec<_> = [Arc::clone(&a), Arc::clone(&b)]
        .into_iter()
        .map(|s| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    s.retrain_now();
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        })
        .collect();
    let threads = 3u64;
    let clients: Vec<_> = (0..threads)
        .map(|t| {
            let addrs = addrs.clone();
            std::thread::spawn(move || model_run(&addrs, mode, t, threads, seed, deadline))
        })
        .collect();
    let ops: u64 = clients.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    for r in retrainers {
        r.join().unwrap();
    }
    let (sa, sb) = (a.barrier_stats(), b.barrier_stats());
    println!("ops {ops}; barrier a {sa:?}; b {sb:?}");
    assert!(ops > 300, "seed {seed}: only {ops} ops");
    // The clients are gone: their connections closed, so nothing holds old regions back.
    let deadline = Instant::now() + Duration::from_secs(3);
    while a.barrier_stats().retained + b.barrier_stats().retained > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        a.barrier_stats().retained,
        0,
        "seed {seed}: {:?}",
        a.barrier_stats()
    );
    assert_eq!(
        b.barrier_stats().retained,
        0,
        "seed {seed}: {:?}",
        b.barrier_stats()
    );
    assert!(
        sa.version > 3 && sb.version > 3,
        "seed {seed}: too little retraining"
    );
}

#[test]
fn pipeline_clients_match_a_btreemap_while_servers_retrain() {
    model_based(Mode::Pipeline);
}

#[test]
fn on_client_clients_match_a_btreemap_while_servers_retrain() {
    model_based(Mode::OnClient);
}

#[test]
fn on_server_clients_match_a_btreemap_while_servers_retrain() {
    model_based(Mode::OnServer);
}

#[test]
fn locks_clients_match_a_btreemap_while_servers_retrain_under_the_lock() {
    model_based(Mode::Locks);
}

#[test]
fn a_vanished_client_is_timed_out_and_old_regions_are_reclaimed() {
    let ix = index((0..3_000u64).map(|k| k * 2), Config::default());
    let cfg = ServerConfig {
        client_timeout: Duration::from_millis(1_000),
        reclaim_every: Duration::from_millis(20),
        ..ServerConfig::default()
    };
    let s = Server::start(Arc::clone(&ix), "127.0.0.1:0", cfg).unwrap();
    let mut live = connect(&[&s], Mode::Pipeline);
    let mut stuck = connect(&[&s], Mode::Pipeline);
    assert_eq!(live.get(2).unwrap(), Some(3));
    assert_eq!(stuck.get(2).unwrap(), Some(3));
    // `stuck` hangs (its connection stays open): it never acks the next version.
    live.retrain_all().unwrap();
    assert_eq!(live.get(4).unwrap(), Some(5)); // refreshes: acks the new version
    let held = s.barrier_stats();
    assert!(held.retained > 0, "{held:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.barrier_stats().retained > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let _ = live.get(6).unwrap();
        // Pipeline ops tell the server the client is alive (reads take no lock, so they don't).
        let _ = live.insert(7, 7).unwrap();
    }
    let st = s.barrier_stats();
    assert_eq!(st.retained, 0, "{st:?}");
    assert_eq!(st.timed_out, 1, "{st:?}");
    // The stuck client wakes up: its old region is gone, it refreshes and reads right.
    assert_eq!(stuck.get(4).unwrap(), Some(5));
    assert!(stuck.stats().stale >= 1, "{:?}", stuck.stats());
}

#[test]
fn clients_reconnect_and_refresh_when_a_server_is_replaced() {
    let ix = index((0..3_000u64).map(|k| k * 2), Config::default());
    let s = server(Arc::clone(&ix), 0, u64::MAX);
    let addr = s.addr();
    let mut c =
        Client::connect(&[addr.to_string()], Mode::Pipeline, Duration::from_secs(5)).unwrap();
    assert_eq!(c.insert(1, 100).unwrap(), None);
    assert_eq!(c.get(2).unwrap(), Some(3));
    s.shutdown();
    // The restarted server holds what the old one acknowledged (here: its index's entries,
    // rebuilt as recovery would), with new region ids and a new layout.
    let entries = ix.range(0, u64::MAX, usize::MAX);
    let fresh = Arc::new(FineIndex::bulk_load(&entries, Config::default()).unwrap());
    let s2 = Server::start(fresh, &addr.to_string(), ServerConfig::default()).unwrap();
    assert_eq!(c.get(1).unwrap(), Some(100));
    assert_eq!(c.get(2).unwrap(), Some(3));
    assert_eq!(c.insert(3, 7).unwrap(), None);
    assert_eq!(s2.index().get(3), Some(7));
    assert!(c.stats().reconnects >= 1, "{:?}", c.stats());
}

#[test]
fn malformed_frames_close_the_connection_and_the_server_lives_on() {
    let s = server(
        index((0..100u64).map(|k| k * 2), Config::default()),
        0,
        u64::MAX,
    );
    // Garbage: the connection is closed.
    let mut raw = TcpStream::connect(s.addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(&[0xff; 64]).unwrap();
    let mut buf = Vec::new();
    let _ = raw.read_to_end(&mut buf);
    assert!(buf.is_empty());
    // A well-framed body with an unknown op: BAD_REQUEST naming the id, then close.
    let mut body = 77u64.to_le_bytes().to_vec();
    body.push(0x7e);
    let mut frame = Vec::new();
    encode_frame(&body, &mut frame);
    let mut raw = TcpStream::connect(s.addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(&frame).unwrap();
    let mut buf = Vec::new();
    let _ = raw.read_to_end(&mut buf);
    let (reply, _) = split_frame(&buf).unwrap().unwrap();
    let reply = decode_reply(reply).unwrap();
    assert_eq!((reply.id, reply.status), (77, STATUS_BAD_REQUEST));
    // The server still serves.
    let mut c = connect(&[&s], Mode::Pipeline);
    assert_eq!(c.get(4).unwrap(), Some(5));
}

#[test]
fn a_client_killed_holding_a_layout_lock_does_not_stall_retraining() {
    let ix = index((0..1_000u64).map(|k| k * 2), Config::default());
    let cfg = ServerConfig {
        layout_locks: true,
        ..ServerConfig::default()
    };
    let s = Arc::new(Server::start(ix, "127.0.0.1:0", cfg).unwrap());
    // A client takes a share of the layout lock, then hangs.
    let mut raw = TcpStream::connect(s.addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut body = Vec::new();
    lidb_fine_net::codec::encode_request(1, &lidb_fine_net::codec::Request::Lock, &mut body);
    let mut frame = Vec::new();
    encode_frame(&body, &mut frame);
    raw.write_all(&frame).unwrap();
    let mut reply = [0u8; 8 + 18];
    raw.read_exact(&mut reply).unwrap();
    // A retraining now waits for that share...
    let (tx, rx) = std::sync::mpsc::channel();
    let retrainer = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || {
            s.retrain_now();
            tx.send(()).unwrap();
        })
    };
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "retraining did not wait for a held layout lock"
    );
    // ...until the client is killed: its connection closes and its share is given back.
    drop(raw);
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "a dead client's share stalled retraining"
    );
    retrainer.join().unwrap();
    assert_eq!(s.barrier_stats().version, 2);
}

/// `--delay-us` stand-in for netem: through a relay holding bytes 2 ms each way, every get of
/// trained data still takes one round trip, returns the right value, and takes at least 4 ms
/// (2 ms each direction); a mixed write/read sequence through it matches a model.
#[test]
fn gets_through_a_delaying_relay_are_right_and_pay_the_delay_per_round_trip() {
    use lidb_fine_net::relay::Relay;
    let s = server(
        index((0..5_000u64).map(|k| k * 3), Config::default()),
        0,
        u64::MAX,
    );
    let delay = Duration::from_micros(2_000);
    let relay = Relay::start(s.addr(), delay).unwrap();
    let mut c = Client::connect(
        &[relay.addr().to_string()],
        Mode::Pipeline,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(c.get(0).unwrap(), Some(1)); // fetches the layout
    let gets = 40u64;
    let before = c.stats();
    let t = Instant::now();
    for i in 0..gets {
        let k = (i * 97 % 5_000) * 3;
        assert_eq!(c.get(k).unwrap(), Some(k + 1), "key {k}");
    }
    let took = t.elapsed();
    let rts = c.stats().round_trips - before.round_trips;
    println!("{gets} gets through a 2 ms relay: {took:?}, {rts} round trips");
    assert!(rts <= gets + 2, "{rts} round trips for {gets} gets");
    assert!(
        took >= 2 * delay * rts as u32,
        "{took:?} for {rts} round trips: the relay added less than 2 x {delay:?} per trip"
    );
    // Writes and absent keys through the relay agree with a model.
    let mut model = BTreeMap::new();
    for i in 0..20u64 {
        let k = i * 3 + 1; // not loaded
        assert_eq!(c.insert(k, i).unwrap(), None);
        model.insert(k, i);
    }
    for k in 0..70u64 {
        let want = model.get(&k).copied().or((k % 3 == 0).then_some(k + 1));
        assert_eq!(c.get(k).unwrap(), want, "key {k}");
    }
}
