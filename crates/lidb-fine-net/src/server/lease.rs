//! The remote layout lock of the locks mode (the FineStore paper, Figure 20: remote locks instead of the
//! extended RCU barrier): clients hold it shared for the length of each operation that uses
//! their cached models; the server's retrainer takes it exclusively, so a retraining waits for
//! every operation in flight and new operations wait for the retraining.
//!
//! Threads: any. Invariants: `writer` is set only by the one retrainer thread; a connection
//! releases the shares it holds when it closes (`release_all`), so a vanished client cannot
//! block retraining forever.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A reader-writer lock whose holders are remote clients.
#[derive(Debug, Default)]
pub(crate) struct Lease {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    readers: u64,
    writer: bool,
}

impl Lease {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(g, Duration::from_millis(10))
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0)
    }

    /// Takes a share (waits while the retrainer holds the lock).
    pub fn share(&self) {
        let mut g = self.state();
        while g.writer {
            g = self.wait(g);
        }
        g.readers += 1;
    }

    /// Gives `n` shares back.
    pub fn release(&self, n: u64) {
        let mut g = self.state();
        g.readers = g.readers.saturating_sub(n);
        drop(g);
        self.changed.notify_all();
    }

    /// Runs `f` with the lock held exclusively (new shares wait; waits for current ones).
    pub fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut g = self.state();
        while g.writer {
            g = self.wait(g);
        }
        g.writer = true;
        while g.readers > 0 {
            g = self.wait(g);
        }
        drop(g);
        let out = f();
        self.state().writer = false;
        self.changed.notify_all();
        out
    }
}
