//! The client library (the FineStore paper, section 4.1): a shard map over fine-wire servers, each
//! server's model layout cached, gets that predict a window and read it in one round trip, and
//! pipeline requests to level bins for the rest.
//!
//! Threads: a [`Client`] is owned by one thread (`&mut self`); run one per thread.
//!
//! Modes: [`Mode::Pipeline`] (the design: remote read of trained data, then a level-bin op only
//! when needed; a write reads its window to find its record or bin, then sends the op there)
//! and [`Mode::OnServer`] (every op one RPC routed by key on the server, as EMT), and
//! [`Mode::OnClient`] (no cached model: every get reads the model region, then the window, then
//! the level bin and maybe a child bin, all with remote reads, as Cell's clients walk a B-tree;
//! writes are RPCs by key, as Cell's are server-side).
//!
//! Invariants:
//! 1. A get answers from trained data only from a validated copy (head == tail, no WRITING, not
//!    retired), so a torn or retired copy never becomes an answer.
//! 2. A reply announcing a layout version above the cached one makes the next read fetch the
//!    layout first; a STALE or RETIRED answer does so at once.
//! 3. Every loop is bounded: [`MAX_TRIES`] reads, then the op goes to the server by key.

mod cached;
mod conn;

use std::time::Duration;

use crate::codec::consts::*;
use crate::codec::msg::{
    BinAddr, BinCopy, BinResult, Payload, ReadItem, ReadResult, Reply, Request, WireLayout,
    WireRegion,
};
use crate::error::WireError;
use cached::{Found, Window, find, window};
use conn::Conn;
use lidb_fine::{BIN_REGION_RETIRED, RETIRED, bin_copy_is_valid, copy_is_valid};

/// Reads of one key's window before the op goes to the server by key.
pub const MAX_TRIES: u32 = 8;

/// How a client runs operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    Pipeline,
    OnServer,
    /// Pipeline ops, each inside a remote shared lock of the server's layout (LOCK before,
    /// UNLOCK after: 2 more round trips) instead of relying on the extended RCU barrier; the
    /// server retrains under the exclusive lock (the FineStore paper, Figure 20).
    Locks,
    /// The client caches no model: a get reads the model region (READ_MODEL), the predicted
    /// window of trained data (READ), and when the key is not trained its level bin
    /// (READ_BIN: the root bin, then a child bin if the root is an index), each copy validated;
    /// writes and ranges are RPCs by key (the FineStore paper's comparison with Cell, section 5.7).
    OnClient,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pipeline => "pipeline",
            Mode::OnServer => "on-server",
            Mode::Locks => "locks",
            Mode::OnClient => "on-client",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "pipeline" => Some(Mode::Pipeline),
            "on-server" => Some(Mode::OnServer),
            "locks" => Some(Mode::Locks),
            "on-client" => Some(Mode::OnClient),
            _ => None,
        }
    }
}

/// Counters of one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Request/reply exchanges, layout fetches included.
    pub round_trips: u64,
    /// Remote reads sent.
    pub reads: u64,
    /// Gets answered from trained data.
    pub trained_hits: u64,
    /// Copies rejected as torn.
    pub torn: u64,
    /// Reads answered STALE or RETIRED.
    pub stale: u64,
    /// Layout fetches.
    pub refreshes: u64,
    /// Pipeline (level-bin or by-key) ops sent.
    pub pipeline_ops: u64,
    /// Ops that gave up on remote reads and went by key.
    pub fallbacks: u64,
    /// Reconnections.
    pub reconnects: u64,
}

#[derive(Debug)]
struct Shard {
    lo: u64,
    hi: u64,
    conn: Conn,
    client_id: u64,
    layout: Option<WireLayout>,
    server_version: u64,
}

/// A client of one deployment (a shard map of servers).
#[derive(Debug)]
pub struct Client {
    shards: Vec<Shard>,
    mode: Mode,
    stats: ClientStats,
}

impl Client {
    /// Connects to every server, learns their ranges (HELLO) and checks the shard map. A broken
    /// connection is retried for up to `reconnect_for`.
    pub fn connect(
        addrs: &[String],
        mode: Mode,
        reconnect_for: Duration,
    ) -> Result<Client, WireError> {
        let mut shards = Vec::with_capacity(addrs.len());
        for a in addrs {
            let mut conn = Conn::connect(a, reconnect_for)?;
            let (reply, _) = conn.call(&Request::Hello { client_id: 0 })?;
            let Payload::Hello {
                client_id,
                shard_lo,
                shard_hi,
            } = ok(reply)?.payload
            else {
                return Err(WireError::malformed("HELLO reply without its payload"));
            };
            shards.push(Shard {
                lo: shard_lo,
                hi: shard_hi,
                conn,
                client_id,
                layout: None,
                server_version: 0,
            });
        }
        shards.sort_by_key(|s| s.lo);
        if shards.is_empty() {
            return Err(WireError::ShardMap {
                detail: "no servers".into(),
            });
        }
        for w in shards.windows(2) {
            if let [a, b] = w
                && b.lo <= a.hi
            {
                return Err(WireError::ShardMap {
                    detail: format!("ranges {}-{} and {}-{} overlap", a.lo, a.hi, b.lo, b.hi),
                });
            }
        }
        Ok(Client {
            shards,
            mode,
            stats: ClientStats::default(),
        })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Counters so far (round trips summed over connections).
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats;
        s.round_trips = self.shards.iter().map(|x| x.conn.round_trips).sum();
        s.reconnects = self.shards.iter().map(|x| x.conn.reconnects).sum();
        s
    }

    /// Fetches every shard's layout that is not cached (or older than its server's) now.
    pub fn fetch_layouts(&mut self) -> Result<(), WireError> {
        for i in 0..self.shards.len() {
            self.layout(i)?;
        }
        Ok(())
    }

    /// Bytes the cached layouts hold: per shard the layout's fields, per region its fields and
    /// its segment arrays (first key u64, slope f32, intercept f32 each: 16 bytes a model), the
    /// heap this client keeps to predict windows without the server.
    pub fn cached_model_bytes(&self) -> u64 {
        self.shards
            .iter()
            .filter_map(|s| s.layout.as_ref())
            .map(|l| {
                let regions: u64 = l
                    .regions
                    .iter()
                    .map(|r| {
                        std::mem::size_of::<WireRegion>() as u64
                            + r.segments.len() as u64 * lidb_index::segment::SEGMENT_BYTES
                    })
                    .sum();
                std::mem::size_of::<WireLayout>() as u64 + regions
            })
            .sum()
    }

    /// Models and regions in the cached layouts.
    pub fn cached_models(&self) -> (u64, u64) {
        let layouts = self.shards.iter().filter_map(|s| s.layout.as_ref());
        layouts.fold((0, 0), |(m, r), l| {
            let models: u64 = l.regions.iter().map(|x| x.segments.len() as u64).sum();
            (m + models, r + l.regions.len() as u64)
        })
    }

    fn shard_of(&self, key: u64) -> Result<usize, WireError> {
        let i = self
            .shards
            .partition_point(|s| s.lo <= key)
            .checked_sub(1)
            .ok_or(WireError::NoShard { key })?;
        match self.shards.get(i) {
            Some(s) if key <= s.hi => Ok(i),
            _ => Err(WireError::NoShard { key }),
        }
    }

    /// The value of `key`.
    pub fn get(&mut self, key: u64) -> Result<Option<u64>, WireError> {
        let i = self.shard_of(key)?;
        self.locked(i, |c| c.get_in(i, key))
    }

    /// Runs `f` inside the remote layout lock of shard `i` in [`Mode::Locks`], else just runs
    /// it. The lock is given back even when `f` fails (a broken connection releases it too).
    fn locked<T>(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut Client) -> Result<T, WireError>,
    ) -> Result<T, WireError> {
        if self.mode != Mode::Locks {
            return f(self);
        }
        ok(self.call(i, &Request::Lock)?)?;
        let out = f(self);
        let unlocked = self.call(i, &Request::Unlock).and_then(ok);
        let out = out?;
        unlocked?;
        Ok(out)
    }

    fn get_in(&mut self, i: usize, key: u64) -> Result<Option<u64>, WireError> {
        if self.mode == Mode::OnClient {
            return self.get_on_client(i, key);
        }
        if self.mode == Mode::OnServer {
            return self.op_by_key(
                i,
                key,
                Request::Search {
                    addr: BinAddr::default(),
                    key,
                },
            );
        }
        match self.locate(i, key)? {
            Some((_, Found::Trained(v, _))) => {
                self.stats.trained_hits += 1;
                Ok(v)
            }
            Some((w, Found::InGap(pos))) => {
                let addr = BinAddr {
                    region: w.region,
                    position: pos,
                };
                self.pipeline(i, Request::Search { addr, key })
            }
            None => self.search_by_key(i, key),
        }
    }

    /// Sets `key` to `value`; the old value.
    pub fn insert(&mut self, key: u64, value: u64) -> Result<Option<u64>, WireError> {
        self.write(key, |addr| Request::Insert { addr, key, value })
    }

    /// Overwrites `key` only if present; the old value.
    pub fn update(&mut self, key: u64, value: u64) -> Result<Option<u64>, WireError> {
        self.write(key, |addr| Request::Update { addr, key, value })
    }

    /// Removes `key`; the old value.
    pub fn remove(&mut self, key: u64) -> Result<Option<u64>, WireError> {
        self.write(key, |addr| Request::Remove { addr, key })
    }

    /// Entries with `lo <= key <= hi`, at most `limit`, across shards.
    pub fn range(&mut self, lo: u64, hi: u64, limit: u32) -> Result<Vec<(u64, u64)>, WireError> {
        let mut out = Vec::new();
        let mut from = lo;
        let limit = limit.min(MAX_RANGE_LIMIT);
        while from <= hi && (out.len() as u32) < limit {
            let i = self.shard_of(from)?;
            let want = limit - out.len() as u32;
            let req = Request::Range {
                addr: BinAddr::default(),
                lo: from,
                hi,
                limit: want,
            };
            let reply = self.call(i, &req)?;
            let Payload::Range(entries) = ok(reply)?.payload else {
                return Err(WireError::malformed("RANGE reply without entries"));
            };
            out.extend(entries);
            let shard_hi = self.shards.get(i).map_or(u64::MAX, |s| s.hi);
            if shard_hi >= hi || shard_hi == u64::MAX {
                break;
            }
            from = shard_hi + 1;
        }
        Ok(out)
    }

    /// Asks every server to retrain all its models now (an admin op, for benches and tests).
    pub fn retrain_all(&mut self) -> Result<(), WireError> {
        for i in 0..self.shards.len() {
            ok(self.call(i, &Request::Retrain)?)?;
        }
        Ok(())
    }

    fn write(
        &mut self,
        key: u64,
        make: impl Fn(BinAddr) -> Request,
    ) -> Result<Option<u64>, WireError> {
        let i = self.shard_of(key)?;
        self.locked(i, |c| c.write_in(i, key, make))
    }

    fn write_in(
        &mut self,
        i: usize,
        key: u64,
        make: impl Fn(BinAddr) -> Request,
    ) -> Result<Option<u64>, WireError> {
        if matches!(self.mode, Mode::OnServer | Mode::OnClient) {
            return self.op_by_key(i, key, make(BinAddr::default()));
        }
        let addr = match self.locate(i, key)? {
            Some((w, Found::Trained(_, pos) | Found::InGap(pos))) => BinAddr {
                region: w.region,
                position: pos,
            },
            None => {
                self.stats.fallbacks += 1;
                BinAddr::default()
            }
        };
        self.pipeline(i, make(addr))
    }

    /// Predicts `key`'s window with the cached layout and reads it (one round trip), retrying
    /// torn copies and refreshing on stale ones; `None` after [`MAX_TRIES`].
    fn locate(&mut self, i: usize, key: u64) -> Result<Option<(Window, Found)>, WireError> {
        for _ in 0..MAX_TRIES {
            let w = {
                let layout = self.layout(i)?;
                match window(layout, key) {
                    Some(w) => w,
                    None => return Ok(None),
                }
            };
            match self.read_window(i, &w, key)? {
                Copy::Good(found) => return Ok(found.map(|f| (w, f))),
                Copy::Stale => self.drop_layout(i),
                Copy::Torn => {}
            }
        }
        Ok(None)
    }

    /// Reads window `w` and places `key` in it: `Good(None)` when the words cannot place it.
    fn read_window(
        &mut self,
        i: usize,
        w: &Window,
        key: u64,
    ) -> Result<Copy<Option<Found>>, WireError> {
        if w.lo >= w.hi {
            // The window is empty: the key is past every trained record of the region.
            return Ok(Copy::Good(
                w.lo.checked_sub(1)
                    .and_then(|p| u32::try_from(p).ok())
                    .map(Found::InGap),
            ));
        }
        let item = ReadItem {
            region: w.region,
            offset: u32::try_from(w.lo).unwrap_or(u32::MAX),
            records: u32::try_from(w.hi - w.lo)
                .unwrap_or(MAX_READ_RECORDS)
                .min(MAX_READ_RECORDS),
        };
        self.stats.reads += 1;
        let reply = self.call(i, &Request::Read { items: vec![item] })?;
        let Payload::Read(results) = ok(reply)?.payload else {
            return Err(WireError::malformed("READ reply without results"));
        };
        match results.into_iter().next() {
            Some(ReadResult::Words(words)) => {
                // The decoder gives 3 x records + 2 words: a head and a tail around the body.
                let &[head, ref body @ .., tail] = words.as_slice() else {
                    return Err(WireError::malformed("READ result without version words"));
                };
                if copy_is_valid(head, tail) {
                    return Ok(Copy::Good(find(w, body, key)));
                }
                if head & RETIRED != 0 || tail & RETIRED != 0 {
                    self.stats.stale += 1;
                    Ok(Copy::Stale)
                } else {
                    self.stats.torn += 1;
                    Ok(Copy::Torn)
                }
            }
            Some(ReadResult::Stale) => {
                self.stats.stale += 1;
                Ok(Copy::Stale)
            }
            None => Err(WireError::malformed("READ reply with no result")),
        }
    }

    /// [`Mode::OnClient`]'s get: model region, window, then level bins, all remote reads; a
    /// torn or stale copy restarts from the model (bounded by [`MAX_TRIES`]), then the get
    /// goes to the server by key.
    fn get_on_client(&mut self, i: usize, key: u64) -> Result<Option<u64>, WireError> {
        for _ in 0..MAX_TRIES {
            self.stats.reads += 1;
            let reply = self.call(i, &Request::ReadModel)?;
            let Payload::Model { head, layout, tail } = ok(reply)?.payload else {
                return Err(WireError::malformed("READ_MODEL reply without a model"));
            };
            if head != tail || layout.version != head {
                self.stats.torn += 1;
                continue;
            }
            let Some(w) = window(&layout, key) else {
                break;
            };
            let found = match self.read_window(i, &w, key)? {
                Copy::Good(Some(f)) => f,
                Copy::Good(None) => break,
                Copy::Stale | Copy::Torn => continue,
            };
            let pos = match found {
                Found::Trained(v, _) => {
                    self.stats.trained_hits += 1;
                    return Ok(v);
                }
                Found::InGap(pos) => pos,
            };
            match self.read_bins(i, w.region, pos, key)? {
                Copy::Good(Some(v)) => return Ok(v),
                // The bins were retrained into a small model: the server walks it.
                Copy::Good(None) => break,
                Copy::Stale | Copy::Torn => {}
            }
        }
        self.search_by_key(i, key)
    }

    /// Gives up on remote reads for a get: one SEARCH routed by key on the server (counted as a
    /// fallback).
    fn search_by_key(&mut self, i: usize, key: u64) -> Result<Option<u64>, WireError> {
        self.stats.fallbacks += 1;
        let addr = BinAddr::default();
        self.op_by_key(i, key, Request::Search { addr, key })
    }

    /// Reads the level bin below record `pos` of `region` (the root bin, then the child bin
    /// `key` routes to if the root is an index) and looks `key` up: `Good(Some(value))`;
    /// `Good(None)` when the bins were retrained into a small model (remote reads stop there).
    fn read_bins(
        &mut self,
        i: usize,
        region: u64,
        pos: u32,
        key: u64,
    ) -> Result<Copy<Option<Option<u64>>>, WireError> {
        let root = match self.read_bin(i, region, pos, BIN_ROOT)? {
            Copy::Good(c) => c,
            Copy::Stale => return Ok(Copy::Stale),
            Copy::Torn => return Ok(Copy::Torn),
        };
        let Some(root) = root else {
            return Ok(Copy::Good(None));
        };
        if root.aux == 0 {
            return Ok(Copy::Good(Some(lookup(&root.entries, key))));
        }
        // The last child whose first key is <= key, or the first (as the server routes).
        let at = root
            .entries
            .iter()
            .skip(1)
            .take_while(|&&(k, _)| k <= key)
            .count();
        let Some(&(_, child)) = root.entries.get(at) else {
            self.stats.torn += 1;
            return Ok(Copy::Torn);
        };
        let Ok(child) = u32::try_from(child) else {
            self.stats.torn += 1;
            return Ok(Copy::Torn);
        };
        match self.read_bin(i, region, pos, child)? {
            // The child's copy carries the root's version: routing unchanged since the root copy.
            Copy::Good(Some(c)) if c.aux == root.head => {
                Ok(Copy::Good(Some(lookup(&c.entries, key))))
            }
            Copy::Good(Some(_)) => {
                self.stats.torn += 1;
                Ok(Copy::Torn)
            }
            other => Ok(other.map(|_| None)),
        }
    }

    /// One READ_BIN: `Good(Some(copy))` when valid; `Good(None)` when the bin latch is retired
    /// (the bins became a small model).
    fn read_bin(
        &mut self,
        i: usize,
        region: u64,
        position: u32,
        child: u32,
    ) -> Result<Copy<Option<BinCopy>>, WireError> {
        self.stats.reads += 1;
        let reply = self.call(
            i,
            &Request::ReadBin {
                region,
                position,
                child,
            },
        )?;
        let Payload::Bin(result) = ok(reply)?.payload else {
            return Err(WireError::malformed("READ_BIN reply without a bin"));
        };
        let c = match result {
            BinResult::Copy(c) => c,
            BinResult::Stale => {
                self.stats.stale += 1;
                return Ok(Copy::Stale);
            }
        };
        if bin_copy_is_valid(c.head, c.tail) {
            return Ok(Copy::Good(Some(c)));
        }
        let either = c.head | c.tail;
        if either & BIN_REGION_RETIRED != 0 {
            self.stats.stale += 1;
            Ok(Copy::Stale)
        } else if either & RETIRED != 0 && c.head == c.tail {
            Ok(Copy::Good(None))
        } else {
            self.stats.torn += 1;
            Ok(Copy::Torn)
        }
    }

    fn drop_layout(&mut self, i: usize) {
        if let Some(s) = self.shards.get_mut(i) {
            s.layout = None;
        }
    }

    /// The cached layout of shard `i`, fetched first if absent or older than the server's.
    fn layout(&mut self, i: usize) -> Result<&WireLayout, WireError> {
        let stale = self.shards.get(i).is_none_or(|s| {
            s.layout
                .as_ref()
                .is_none_or(|l| l.version < s.server_version)
        });
        if stale {
            let client_id = self.shards.get(i).map_or(0, |s| s.client_id);
            self.stats.refreshes += 1;
            let reply = self.call(i, &Request::Layout { client_id })?;
            let Payload::Layout(l) = ok(reply)?.payload else {
                return Err(WireError::malformed("LAYOUT reply without a layout"));
            };
            if let Some(s) = self.shards.get_mut(i) {
                s.server_version = s.server_version.max(l.version);
                s.layout = Some(l);
            }
        }
        self.shards
            .get(i)
            .and_then(|s| s.layout.as_ref())
            .ok_or_else(|| WireError::malformed("no layout"))
    }

    fn pipeline(&mut self, i: usize, req: Request) -> Result<Option<u64>, WireError> {
        self.stats.pipeline_ops += 1;
        let reply = self.call(i, &req)?;
        if reply.status == STATUS_RETIRED {
            self.drop_layout(i);
        }
        value(ok(reply)?)
    }

    fn op_by_key(&mut self, i: usize, key: u64, req: Request) -> Result<Option<u64>, WireError> {
        self.stats.pipeline_ops += 1;
        let reply = self.call(i, &req)?;
        if reply.status == STATUS_WRONG_SHARD {
            return Err(WireError::WrongShard { key });
        }
        value(ok(reply)?)
    }

    /// One round trip to shard `i`; notes the server's version; after a reconnection says HELLO
    /// again with the same client id and drops the cached layout (the server may have restarted).
    fn call(&mut self, i: usize, req: &Request) -> Result<Reply, WireError> {
        let s = self
            .shards
            .get_mut(i)
            .ok_or_else(|| WireError::malformed("no such shard"))?;
        let (reply, reconnected) = s.conn.call(req)?;
        if reconnected {
            s.layout = None;
            s.server_version = 0;
            let (hello, _) = s.conn.call(&Request::Hello {
                client_id: s.client_id,
            })?;
            s.server_version = hello.version;
        }
        s.server_version = s.server_version.max(reply.version);
        if reconnected {
            s.server_version = reply.version;
        }
        Ok(reply)
    }
}

/// What one remote copy gave.
enum Copy<T> {
    /// Validated.
    Good(T),
    /// Torn: read again.
    Torn,
    /// Of a retired or reclaimed region: read the model (or the layout) again.
    Stale,
}

impl<T> Copy<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Copy<U> {
        match self {
            Copy::Good(t) => Copy::Good(f(t)),
            Copy::Torn => Copy::Torn,
            Copy::Stale => Copy::Stale,
        }
    }
}

/// The value of `key` in a bin's sorted entries.
fn lookup(entries: &[(u64, u64)], key: u64) -> Option<u64> {
    entries
        .binary_search_by_key(&key, |&(k, _)| k)
        .ok()
        .and_then(|j| entries.get(j))
        .map(|&(_, v)| v)
}

/// The reply if its status carries a payload (OK or RETIRED), else the error it stands for.
fn ok(reply: Reply) -> Result<Reply, WireError> {
    match reply.status {
        STATUS_OK | STATUS_RETIRED => Ok(reply),
        STATUS_BAD_REQUEST => Err(WireError::BadRequest {
            detail: match reply.payload {
                Payload::Message(m) => m,
                _ => String::new(),
            },
        }),
        other => Err(WireError::malformed(format!("unexpected status {other}"))),
    }
}

fn value(reply: Reply) -> Result<Option<u64>, WireError> {
    match reply.payload {
        Payload::Value(v) => Ok(v),
        _ => Err(WireError::malformed("op reply without a value")),
    }
}
