//! Publication of an index's model layout, and the per-thread pins that let an operation use it
//! without touching anything another thread writes (RocksDB pins a thread-local SuperVersion per
//! thread for the same reason; an `ArcSwap` load costs a fifth of a get).
//!
//! [`Published`] holds the current layout in an `ArcSwap` and its version in a word alone on its
//! cache lines. Each thread keeps [`PIN_SLOTS`] pins: (index id, layout version, `Arc<Layout>`);
//! an index uses slot `id % PIN_SLOTS` (ids come from a global counter, never reused, so a pin of
//! a dropped index is never taken for another's). [`Published::with`] loads the version word; if
//! the thread's slot pins this index at that version, it runs the operation on the pinned layout
//! under a shared borrow of the slots: no reference count is touched, nothing shared is written.
//! Otherwise (a miss) it runs on an `ArcSwap::load` guard, as before pins, and installs the
//! current layout into the slot (`load_full`, one reference count increment) only when the slot
//! is empty, pins an older version of this index, or pinned another index and missed
//! [`MISSES_BEFORE_EVICTION`] times in a row since its last hit; so a thread that alternates
//! between indexes sharing a slot (a FineStore has one index per key-prefix layer) does not clone
//! an `Arc` per operation.
//!
//! Who may do what: any thread calls [`Published::with`], re-entrantly too (an `upsert` closure,
//! or a model retraining a write triggers, that calls an index): the slots are borrowed shared
//! for the length of an operation, so a call inside one still hits with a second shared borrow,
//! and an install, which needs the slots mutably, finds them borrowed, gives up and runs on a
//! guard; nothing panics. Only model retraining (under `retrain_lock`, `index.rs`) calls
//! [`Published::publish`].
//!
//! Invariants and why a pinned read is still linearizable:
//! 1. `publish` stores the new version (`SeqCst`) before it stores the new layout, and a pin is
//!    tagged with the version its layout carries, never with the version word it was compared
//!    with. So a pin is used only while the version word equals its layout's version.
//! 2. A write through a new layout starts after that layout was stored, hence after the version
//!    word changed. A pinned operation loaded the old version (`SeqCst`), before that change: it
//!    is ordered before every write made through the new layout, and what it reads of the old
//!    layout (frozen moved records included, `record.rs`) was current at its version load.
//!    Writes through an old pinned layout are refused by moved records and retried, as with a
//!    guard; the version word changes only at publication, so they wait for the copy phase at
//!    most.
//! 3. A pin holds a strong reference, so the layout it points to stays alive while pinned.
//!
//! Memory: each thread keeps at most [`PIN_SLOTS`] layouts alive (of any indexes). A layout
//! replaced by a retraining (the old copies of the retrained nodes; other nodes are shared with
//! the current layout), or the whole layout of a dropped index, stays allocated until the thread
//! pins another layout in that slot (its next operation on that index, or the
//! [`MISSES_BEFORE_EVICTION`]th miss in a row of another index sharing the slot) or exits. So a
//! thread that goes idle after a retraining holds up to 8 old layouts. Dropping an index clears
//! the dropping thread's slot only.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};
use lidb_sync::CachePadded;

use crate::layout::Layout;

/// Pins per thread (a power of two).
pub(crate) const PIN_SLOTS: usize = 8;

/// Misses in a row (with no hit between) after which a slot pinning another index is taken over.
pub(crate) const MISSES_BEFORE_EVICTION: u32 = 64;

const _: () = assert!(PIN_SLOTS.is_power_of_two());

/// Ids of indexes: unique for the life of the process.
static NEXT_INDEX_ID: AtomicU64 = AtomicU64::new(1);

/// A layout pinned by this thread.
struct Pin {
    index: u64,
    /// The version of `layout` (invariant 1).
    version: u64,
    layout: Arc<Layout>,
    /// Misses by other indexes of this slot since the last hit.
    misses: Cell<u32>,
}

/// A thread's pins, one slot per `id % PIN_SLOTS`.
type Pins = [Option<Pin>; PIN_SLOTS];

thread_local! {
    static PINS: RefCell<Pins> = const { RefCell::new([const { None }; PIN_SLOTS]) };
}

/// The published layout of one index.
#[derive(Debug)]
pub(crate) struct Published {
    /// The current layout's version, stored before the layout (invariant 1); alone on its cache
    /// lines, so that writers' counters nearby never invalidate it.
    version: CachePadded<AtomicU64>,
    layout: ArcSwap<Layout>,
    id: u64,
}

impl Published {
    pub fn new(layout: Layout) -> Published {
        Published {
            version: CachePadded(AtomicU64::new(layout.version)),
            layout: ArcSwap::from_pointee(layout),
            id: NEXT_INDEX_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A guard of the current layout (not pinned: for work that is not a point operation).
    pub fn load(&self) -> Guard<Arc<Layout>> {
        self.layout.load()
    }

    /// The current layout.
    pub fn load_full(&self) -> Arc<Layout> {
        self.layout.load_full()
    }

    /// Makes `layout` current. Only under the index's `retrain_lock`; `layout.version` is one
    /// more than the current one.
    pub fn publish(&self, layout: Layout) {
        self.version.store(layout.version, Ordering::SeqCst);
        self.layout.store(Arc::new(layout));
    }

    fn slot(&self) -> usize {
        self.id as usize & (PIN_SLOTS - 1)
    }

    /// Runs `f` on the current layout: this thread's pin when it is current, else a guard (and
    /// maybe a new pin). See the module documentation.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&Layout) -> R) -> R {
        let version = self.version.load(Ordering::SeqCst);
        let mut f = Some(f);
        // `try_with` fails only while this thread's locals are being destroyed.
        let hit = PINS.try_with(|pins| {
            let pins = pins.try_borrow().ok()?;
            let pin = pins.get(self.slot())?.as_ref()?;
            if pin.index != self.id || pin.version != version {
                return None;
            }
            pin.misses.set(0);
            let f = f.take()?;
            Some(f(&pin.layout))
        });
        if let Ok(Some(r)) = hit {
            return r;
        }
        match f.take() {
            Some(f) => self.miss(f),
            None => unreachable!("a pinned call ran and returned nothing"),
        }
    }

    /// [`Published::with`] when this thread's slot does not pin the current layout.
    #[inline(never)]
    fn miss<R>(&self, f: impl FnOnce(&Layout) -> R) -> R {
        let installed = PINS.try_with(|pins| {
            // Borrowed: a call re-entered from an operation of this thread; use a guard.
            let mut pins = pins.try_borrow_mut().ok()?;
            let slot = pins.get_mut(self.slot())?;
            if let Some(pin) = slot.as_ref()
                && pin.index != self.id
            {
                let misses = pin.misses.get().saturating_add(1);
                pin.misses.set(misses);
                if misses < MISSES_BEFORE_EVICTION {
                    return None;
                }
            }
            let layout = self.layout.load_full();
            *slot = Some(Pin {
                index: self.id,
                version: layout.version,
                layout: Arc::clone(&layout),
                misses: Cell::new(0),
            });
            Some(layout)
        });
        match installed {
            Ok(Some(layout)) => f(&layout),
            _ => f(&self.layout.load()),
        }
    }

    /// The version of the layout this thread pins for this index, if it pins one.
    #[cfg(test)]
    pub fn pinned_version(&self) -> Option<u64> {
        PINS.with(|pins| {
            let pins = pins.borrow();
            let pin = pins.get(self.slot())?.as_ref()?;
            (pin.index == self.id).then_some(pin.version)
        })
    }
}

impl Drop for Published {
    /// Unpins this index in the dropping thread (other threads let go on their next miss of the
    /// slot, or when they exit).
    fn drop(&mut self) {
        let _ = PINS.try_with(|pins| {
            if let Ok(mut pins) = pins.try_borrow_mut()
                && let Some(slot) = pins.get_mut(self.slot())
                && slot.as_ref().is_some_and(|p| p.index == self.id)
            {
                *slot = None;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use crate::record::NewRecord;

    fn layout(version: u64) -> Layout {
        let mut l = Layout::build(vec![NewRecord::live(0, version)], &Config::default());
        l.version = version;
        l
    }

    /// The value of key 0 in the layout an operation runs on: the layout's version.
    fn seen(p: &Published) -> Option<u64> {
        p.with(|l| {
            l.node_for(0)
                .and_then(|(_, n)| n.record(0))
                .and_then(|r| r.read())
        })
    }

    #[test]
    fn a_pin_is_used_while_its_version_is_current_and_replaced_after() {
        let p = Published::new(layout(1));
        assert_eq!(p.pinned_version(), None);
        assert_eq!(seen(&p), Some(1));
        assert_eq!(p.pinned_version(), Some(1), "the first call pins");
        assert_eq!(
            Arc::strong_count(&p.load_full()),
            3,
            "ArcSwap, pin, and this load"
        );
        p.publish(layout(2));
        assert_eq!(seen(&p), Some(2), "a stale pin was used");
        assert_eq!(
            p.pinned_version(),
            Some(2),
            "the stale pin was not replaced"
        );
        drop(p);
        let q = Published::new(layout(7));
        assert_eq!(seen(&q), Some(7));
    }

    #[test]
    fn indexes_sharing_a_slot_take_it_over_only_after_many_misses_in_a_row() {
        // 64 indexes in 8 slots: some share one.
        let all: Vec<Published> = (0..64).map(|v| Published::new(layout(v + 1))).collect();
        let Some((a, b)) = all.iter().enumerate().find_map(|(i, a)| {
            all.iter()
                .skip(i + 1)
                .find(|b| b.slot() == a.slot())
                .map(|b| (a, b))
        }) else {
            panic!("64 indexes and no two share one of {PIN_SLOTS} slots");
        };
        let (va, vb) = (a.load_full().version, b.load_full().version);
        assert_eq!(seen(a), Some(va));
        assert_eq!(a.pinned_version(), Some(va));
        // Alternating: a's hits reset b's misses, so b never takes the slot (and runs on a guard).
        for _ in 0..MISSES_BEFORE_EVICTION * 2 {
            assert_eq!(seen(b), Some(vb));
            assert_eq!(seen(a), Some(va));
        }
        assert_eq!(a.pinned_version(), Some(va));
        assert_eq!(b.pinned_version(), None);
        // b alone: after MISSES_BEFORE_EVICTION misses in a row it takes the slot.
        for _ in 0..MISSES_BEFORE_EVICTION - 1 {
            assert_eq!(seen(b), Some(vb));
        }
        assert_eq!(b.pinned_version(), None, "evicted before its time");
        assert_eq!(seen(b), Some(vb));
        assert_eq!(b.pinned_version(), Some(vb));
        assert_eq!(a.pinned_version(), None);
    }

    #[test]
    fn a_call_from_inside_a_call_runs_on_a_guard_and_never_panics() {
        let outer = Published::new(layout(1));
        let Some(inner) = (0..64)
            .map(|_| Published::new(layout(5)))
            .find(|p| p.slot() != outer.slot())
        else {
            panic!("no index in a slot of its own");
        };
        assert_eq!(seen(&outer), Some(1));
        let got = outer.with(|l| {
            // Pins are borrowed here: the inner index cannot install its pin, but it answers.
            let v = seen(&inner);
            let again = seen(&outer);
            (l.version, v, again)
        });
        assert_eq!(got, (1, Some(5), Some(1)));
        assert_eq!(inner.pinned_version(), None);
        assert_eq!(seen(&inner), Some(5));
        assert_eq!(inner.pinned_version(), Some(5), "installed once outside");
    }
}
