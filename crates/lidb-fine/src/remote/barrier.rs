//! The extended RCU barrier (the FineStore paper, section 4.2; docs/format/fine-wire.md, "Extended RCU
//! barrier"): which regions a remote read may still name, which clients took which layout
//! version, and when old regions are reclaimed.
//!
//! Threads: [`Barrier::lookup`] is lock-free (one `ArcSwap` load) and is what the remote-read
//! thread calls; every other method takes the barrier's mutex for a short bookkeeping step and
//! may be called from any thread. Time is passed in (`now`), so the policy is a pure function
//! of the calls and tests drive it without sleeping.
//!
//! Invariants:
//! 1. The lookup map holds exactly the regions of the last synced layout plus the retained ones.
//! 2. A region left out of a synced layout is retained, tagged with that layout's version, until
//!    every live client has acked a version `>=` its tag; a client not heard from for `timeout`
//!    is no longer live.
//! 3. Client ids are unique and never 0.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use super::{RemoteLayout, TrainedRegion};
use crate::FineIndex;

/// Region ids a remote read may name, versions and client acks of one server.
#[derive(Debug)]
pub struct Barrier {
    lookup: ArcSwap<HashMap<u64, TrainedRegion>>,
    state: Mutex<State>,
    timeout: Duration,
}

#[derive(Debug)]
struct State {
    layout: RemoteLayout,
    retained: Vec<(u64, TrainedRegion)>,
    clients: HashMap<u64, Client>,
    next_client: u64,
    reclaimed: u64,
    timed_out: u64,
}

#[derive(Debug, Clone, Copy)]
struct Client {
    acked: u64,
    last_seen: Instant,
}

/// Figures of a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierStats {
    /// The last synced layout version.
    pub version: u64,
    /// Old regions still readable.
    pub retained: u64,
    /// Old regions reclaimed so far.
    pub reclaimed: u64,
    /// Clients counted.
    pub clients: u64,
    /// Clients dropped from the count for silence.
    pub timed_out: u64,
}

impl Barrier {
    /// A barrier over `index`'s current layout; clients silent for `timeout` stop counting.
    pub fn new(index: &FineIndex, timeout: Duration) -> Barrier {
        let layout = index.remote_layout();
        let map = layout.regions.iter().map(|r| (r.id(), r.clone())).collect();
        Barrier {
            lookup: ArcSwap::from_pointee(map),
            state: Mutex::new(State {
                layout,
                retained: Vec::new(),
                clients: HashMap::new(),
                next_client: 1,
                reclaimed: 0,
                timed_out: 0,
            }),
            timeout,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The region `id` if a remote read may still copy it (current or retained). Lock-free.
    pub fn lookup(&self, id: u64) -> Option<TrainedRegion> {
        self.lookup.load().get(&id).cloned()
    }

    /// Takes in `index`'s layout if it is newer than the last synced one; the layout clients
    /// should fetch now.
    pub fn sync(&self, index: &FineIndex) -> RemoteLayout {
        let mut st = self.state();
        if index.layout_version() > st.layout.version {
            let fresh = index.remote_layout();
            let live: std::collections::HashSet<u64> =
                fresh.regions.iter().map(TrainedRegion::id).collect();
            let old = std::mem::replace(&mut st.layout, fresh);
            let tag = st.layout.version;
            for r in old.regions {
                if !live.contains(&r.id()) {
                    st.retained.push((tag, r));
                }
            }
            self.publish(&st);
        }
        st.layout.clone()
    }

    /// The last synced layout version.
    pub fn version(&self) -> u64 {
        self.state().layout.version
    }

    /// A new client id. The client counts from its first [`Barrier::ack`] (its first layout
    /// fetch): a client that never reads trained data (on-server mode) never holds regions back,
    /// and regions retired before its first fetch are tagged with versions it already has.
    pub fn register(&self) -> u64 {
        let mut st = self.state();
        let id = st.next_client;
        st.next_client += 1;
        id
    }

    /// Client `id` is gone (its connection closed): it stops counting. If it comes back, its
    /// next layout fetch counts it again; a read of a region reclaimed meanwhile answers stale.
    pub fn forget(&self, id: u64) {
        self.state().clients.remove(&id);
    }

    /// Client `id` took layout `version` (a fetch or an ACK). An unknown id (timed out, or from
    /// before a restart) is counted again from here.
    pub fn ack(&self, id: u64, version: u64, now: Instant) {
        if id == 0 {
            return;
        }
        let mut st = self.state();
        let c = st.clients.entry(id).or_insert(Client {
            acked: 0,
            last_seen: now,
        });
        c.acked = c.acked.max(version);
        c.last_seen = now;
        if st.next_client <= id {
            st.next_client = id.saturating_add(1);
        }
    }

    /// Client `id` was heard from.
    pub fn touch(&self, id: u64, now: Instant) {
        if let Some(c) = self.state().clients.get_mut(&id) {
            c.last_seen = now;
        }
    }

    /// Drops clients silent for longer than the timeout, then the retained regions every live
    /// client has moved past; how many regions were reclaimed.
    pub fn reclaim(&self, now: Instant) -> u64 {
        let mut st = self.state();
        let before = st.clients.len();
        let timeout = self.timeout;
        st.clients
            .retain(|_, c| now.saturating_duration_since(c.last_seen) <= timeout);
        st.timed_out += (before - st.clients.len()) as u64;
        let floor = st
            .clients
            .values()
            .map(|c| c.acked)
            .min()
            .unwrap_or(u64::MAX);
        let held = st.retained.len();
        st.retained.retain(|(tag, _)| *tag > floor);
        let freed = (held - st.retained.len()) as u64;
        if freed > 0 {
            st.reclaimed += freed;
            self.publish(&st);
        }
        freed
    }

    /// Figures for tests and reports.
    pub fn stats(&self) -> BarrierStats {
        let st = self.state();
        BarrierStats {
            version: st.layout.version,
            retained: st.retained.len() as u64,
            reclaimed: st.reclaimed,
            clients: st.clients.len() as u64,
            timed_out: st.timed_out,
        }
    }

    /// Invariant 1: rebuilds the lookup map from the state.
    fn publish(&self, st: &State) {
        let map: HashMap<u64, TrainedRegion> = st
            .layout
            .regions
            .iter()
            .chain(st.retained.iter().map(|(_, r)| r))
            .map(|r| (r.id(), r.clone()))
            .collect();
        self.lookup.store(Arc::new(map));
    }
}
