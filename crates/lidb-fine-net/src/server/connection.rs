//! One connection: read a frame, answer it, repeat (docs/format/fine-wire.md).
//!
//! Runs on the connection's own thread. A malformed frame is answered BAD_REQUEST when its
//! request id could be read, and the connection is closed (a frame boundary can no longer be
//! trusted); nothing here panics on any bytes.

use std::io::{BufReader, BufWriter, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lidb_fine::{BinAnswer, BinOp, FineIndex, RemoteLayout};

use super::Shared;
use super::local::by_key;
use crate::codec::consts::*;
use crate::codec::msg::{
    BinAddr, BinCopy, BinResult, Payload, ReadItem, ReadResult, Reply, Request, WireLayout,
    WireRegion,
};
use crate::codec::{decode_request, encode_frame, encode_reply, read_frame};

/// How often a connection tells the barrier its client is alive (pipeline ops only: reads
/// take no lock).
const TOUCH_EVERY: Duration = Duration::from_millis(500);

pub(super) fn serve(stream: TcpStream, shared: &Shared) {
    let Ok(w) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    let mut writer = BufWriter::new(w);
    let mut session = Session {
        client: 0,
        last_touch: Instant::now(),
        shares: 0,
        model: None,
    };
    serve_frames(shared, &mut reader, &mut writer, &mut session);
    if session.client != 0 {
        shared.barrier.forget(session.client);
    }
    shared.lease.release(session.shares);
}

/// What a connection knows of its client.
struct Session {
    client: u64,
    last_touch: Instant,
    /// Shares of the remote layout lock this client holds (released when it closes).
    shares: u64,
    /// The model region as last copied for this connection (READ_MODEL), rebuilt when the
    /// synced layout version moves.
    model: Option<WireLayout>,
}

fn serve_frames(
    shared: &Shared,
    reader: &mut BufReader<TcpStream>,
    writer: &mut BufWriter<TcpStream>,
    session: &mut Session,
) {
    let (mut body, mut out, mut frame) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        if read_frame(reader, &mut body).is_err() {
            return;
        }
        let (reply, close) = match decode_request(&body) {
            Ok((id, req)) => (answer(shared, id, req, session), false),
            Err((Some(id), e)) => {
                shared.counters.malformed.fetch_add(1, Ordering::Relaxed);
                (
                    bad_request(
                        shared,
                        id,
                        body.get(8).copied().unwrap_or(0),
                        &e.to_string(),
                    ),
                    true,
                )
            }
            Err((None, _)) => {
                shared.counters.malformed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        out.clear();
        encode_reply(&reply, &mut out);
        frame.clear();
        encode_frame(&out, &mut frame);
        if writer
            .write_all(&frame)
            .and_then(|()| writer.flush())
            .is_err()
            || close
        {
            return;
        }
    }
}

fn bad_request(shared: &Shared, id: u64, op: u8, msg: &str) -> Reply {
    Reply {
        id,
        op,
        status: STATUS_BAD_REQUEST,
        version: shared.version.load(Ordering::Acquire),
        payload: Payload::Message(msg.to_string()),
    }
}

fn answer(shared: &Shared, id: u64, req: Request, session: &mut Session) -> Reply {
    let op = req.op();
    let mut status = STATUS_OK;
    let payload = match req {
        Request::Read { items } => Payload::Read(read(shared, &items)),
        Request::ReadModel => read_model(shared, session),
        Request::ReadBin {
            region,
            position,
            child,
        } => Payload::Bin(read_bin(shared, region, position, child)),
        Request::Hello { client_id } => {
            let id = if client_id == 0 {
                shared.barrier.register()
            } else {
                client_id
            };
            session.client = id;
            Payload::Hello {
                client_id: id,
                shard_lo: shared.cfg.shard_lo,
                shard_hi: shared.cfg.shard_hi,
            }
        }
        Request::Layout { client_id } => {
            shared.sync_if_newer();
            let layout = shared.barrier.sync(&shared.index);
            shared
                .barrier
                .ack(client_id, layout.version, Instant::now());
            Payload::Layout(wire_layout(shared, &layout))
        }
        Request::Ack { client_id, version } => {
            shared.barrier.ack(client_id, version, Instant::now());
            Payload::Empty
        }
        Request::Lock => {
            shared.lease.share();
            session.shares += 1;
            Payload::Empty
        }
        Request::Unlock => {
            if session.shares > 0 {
                session.shares -= 1;
                shared.lease.release(1);
            }
            Payload::Empty
        }
        Request::Retrain => {
            shared.index.retrain_models();
            shared.sync_if_newer();
            Payload::Empty
        }
        Request::Range {
            addr: _,
            lo,
            hi,
            limit,
        } => {
            if !in_shard(shared, lo) {
                status = STATUS_WRONG_SHARD;
                Payload::Empty
            } else {
                let hi = hi.min(shared.cfg.shard_hi);
                Payload::Range(shared.index.range(lo, hi, limit as usize))
            }
        }
        Request::Search { addr, key } => key_op(shared, addr, key, BinOp::Search, &mut status),
        Request::Insert { addr, key, value } => {
            key_op(shared, addr, key, BinOp::Insert(value), &mut status)
        }
        Request::Update { addr, key, value } => {
            key_op(shared, addr, key, BinOp::Update(value), &mut status)
        }
        Request::Remove { addr, key } => key_op(shared, addr, key, BinOp::Remove, &mut status),
    };
    if op >= OP_SEARCH && session.client != 0 && session.last_touch.elapsed() >= TOUCH_EVERY {
        session.last_touch = Instant::now();
        shared.barrier.touch(session.client, session.last_touch);
    }
    Reply {
        id,
        op,
        status,
        version: shared.version.load(Ordering::Acquire),
        payload,
    }
}

fn in_shard(shared: &Shared, key: u64) -> bool {
    (shared.cfg.shard_lo..=shared.cfg.shard_hi).contains(&key)
}

/// The remote read: copies of region words, no index code, no lock.
fn read(shared: &Shared, items: &[ReadItem]) -> Vec<ReadResult> {
    shared.counters.reads.fetch_add(1, Ordering::Relaxed);
    shared
        .counters
        .read_items
        .fetch_add(items.len() as u64, Ordering::Relaxed);
    items
        .iter()
        .map(|it| match shared.barrier.lookup(it.region) {
            None => ReadResult::Stale,
            Some(r) => {
                let mut words = Vec::new();
                let (off, n) = (u64::from(it.offset), u64::from(it.records));
                if take_tear(shared) {
                    tear_copy(&shared.index, &r, off, n, &mut words);
                } else {
                    r.copy_words(off, n, &mut words);
                }
                ReadResult::Words(words)
            }
        })
        .collect()
}

/// READ_MODEL: the synced layout between two loads of the synced version. The layout is an
/// immutable snapshot; the words say which version it is, and differ when a retraining was
/// synced meanwhile (the client then reads again). Rebuilds this connection's copy only when
/// the version moved since its last one; acks nothing (an
/// on-client client holds no region back: a reclaimed one answers STALE and it reads again).
fn read_model(shared: &Shared, session: &mut Session) -> Payload {
    shared.counters.reads.fetch_add(1, Ordering::Relaxed);
    // As a LAYOUT does: a retraining the index published but nobody synced yet is taken in
    // (a lock only then), so the version words and the copy agree.
    shared.sync_if_newer();
    let head = shared.version.load(Ordering::Acquire);
    if session.model.as_ref().is_none_or(|m| m.version != head) {
        let layout = shared.barrier.sync(&shared.index);
        session.model = Some(wire_layout(shared, &layout));
    }
    let tail = shared.version.load(Ordering::Acquire);
    match &session.model {
        Some(layout) => Payload::Model {
            head,
            layout: layout.clone(),
            tail,
        },
        None => Payload::Empty,
    }
}

/// READ_BIN: a copy of one level bin's words, loads of atomics only (no lock, no index code).
fn read_bin(shared: &Shared, region: u64, position: u32, child: u32) -> BinResult {
    shared.counters.reads.fetch_add(1, Ordering::Relaxed);
    let Some(r) = shared.barrier.lookup(region) else {
        return BinResult::Stale;
    };
    let child = (child != BIN_ROOT).then_some(child);
    let tear = shared
        .tear_bins
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok();
    let mut words = Vec::new();
    if !r.copy_bin(u64::from(position), child, &mut words, tear) {
        return BinResult::Stale;
    }
    // head, aux, len, len x (key, value), tail.
    match words.as_slice() {
        &[head, aux, _len, ref entries @ .., tail] => BinResult::Copy(BinCopy {
            head,
            aux,
            entries: entries
                .chunks_exact(2)
                .filter_map(|p| match *p {
                    [key, value] => Some((key, value)),
                    _ => None,
                })
                .collect(),
            tail,
        }),
        _ => BinResult::Stale,
    }
}

fn take_tear(shared: &Shared) -> bool {
    shared
        .tear_reads
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok()
}

/// The test hook: rewrites the region's first record with its own value halfway through the
/// copy (a real write, so the version words move, though no value changes).
fn tear_copy(
    index: &FineIndex,
    r: &lidb_fine::TrainedRegion,
    off: u64,
    n: u64,
    out: &mut Vec<u64>,
) {
    let key = r.first_key();
    r.copy_words_torn_by(off, n, out, &mut || {
        if let Some(v) = index.get(key) {
            index.update(key, v);
        } else {
            index.remove(key);
        }
    });
}

fn key_op(shared: &Shared, addr: BinAddr, key: u64, op: BinOp, status: &mut u8) -> Payload {
    if !in_shard(shared, key) {
        *status = STATUS_WRONG_SHARD;
        return Payload::Empty;
    }
    shared.counters.pipeline_ops.fetch_add(1, Ordering::Relaxed);
    let region = if addr.region == 0 {
        None
    } else {
        shared.barrier.lookup(addr.region)
    };
    let at = region.as_ref().map(|r| (r, u64::from(addr.position)));
    let answer = match op {
        BinOp::Insert(_) | BinOp::Update(_) | BinOp::Remove => {
            match shared.apply_write(at, key, op) {
                Ok(a) => a,
                Err(e) => {
                    *status = STATUS_BAD_REQUEST;
                    return Payload::Message(format!("write not applied: {e}"));
                }
            }
        }
        _ => match at {
            Some((r, pos)) => shared.index.at_bin(r, pos, key, op),
            None => BinAnswer {
                value: by_key(&shared.index, key, op),
                at_address: false,
            },
        },
    };
    if answer.at_address && addr.region != 0 {
        shared.counters.at_address.fetch_add(1, Ordering::Relaxed);
    } else {
        shared.counters.by_key.fetch_add(1, Ordering::Relaxed);
        if addr.region != 0 {
            // The address was retired, reclaimed or wrong: the op ran by key; refresh.
            *status = STATUS_RETIRED;
        }
    }
    Payload::Value(answer.value)
}

fn wire_layout(shared: &Shared, l: &RemoteLayout) -> WireLayout {
    WireLayout {
        version: l.version,
        eps: l.eps,
        shard_lo: shared.cfg.shard_lo,
        shard_hi: shared.cfg.shard_hi,
        regions: l
            .regions
            .iter()
            .map(|r| WireRegion {
                id: r.id(),
                first_key: r.first_key(),
                records: r.records().min(u64::from(u32::MAX)) as u32,
                segments: r.segments().clone(),
            })
            .collect(),
    }
}
