//! The engine pool: a few threads that run batches of requests against the engine, so engine
//! calls (which may wait on I/O: a WAL sync, a table read) never run on tokio's async workers.
//!
//! A connection task hands a batch over with [`EnginePool::run`] and awaits its replies on a
//! oneshot channel. Under load the queue is rarely empty, so a pool thread takes the next batch
//! without sleeping and the async workers go on reading sockets; `block_in_place`, used before,
//! handed the async worker's core to a new blocking-pool thread on every batch, which a profile
//! showed as half of the server's time in the scheduler.
//!
//! Threads: the pool owns its threads; dropping it lets them finish the queued jobs, then joins
//! them. A job that panics (a bug) drops its reply channel, which ends its connection; the
//! thread goes on.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

#[derive(Default)]
struct Inner {
    queue: Mutex<Queue>,
    ready: Condvar,
}

/// Threads that run engine work off the async workers.
pub struct EnginePool {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for EnginePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnginePool")
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl EnginePool {
    /// A pool of `threads` threads (at least one).
    pub fn new(threads: usize) -> std::io::Result<EnginePool> {
        let inner = Arc::new(Inner::default());
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let inner = Arc::clone(&inner);
            let handle = std::thread::Builder::new()
                .name(format!("lidb-engine-{i}"))
                .spawn(move || work(&inner))?;
            handles.push(handle);
        }
        Ok(EnginePool {
            inner,
            threads: handles,
        })
    }

    /// Queues `f`; its result arrives on the returned channel (closed if `f` panicked).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        let mut q = self
            .inner
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        q.jobs.push_back(job);
        drop(q);
        self.inner.ready.notify_one();
        rx
    }
}

impl Drop for EnginePool {
    fn drop(&mut self) {
        self.inner
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.inner.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A pool thread: runs jobs until the pool is closed and the queue empty.
fn work(inner: &Inner) {
    loop {
        let job = {
            let mut q = inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.closed {
                    return;
                }
                q = inner.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        // A panicking job drops its reply sender: the waiting connection ends, the pool goes on.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_and_a_panic_only_closes_its_own_reply() {
        let pool = EnginePool::new(2).unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let answers: Vec<u64> = rt.block_on(async {
            let mut out = Vec::new();
            for i in 0..100u64 {
                out.push(pool.run(move || i * 2).await.unwrap_or(u64::MAX));
            }
            out
        });
        assert_eq!(answers, (0..100u64).map(|i| i * 2).collect::<Vec<_>>());
        let failed = rt.block_on(pool.run(|| -> u64 { panic!("a bug in a command") }));
        assert!(failed.is_err());
        assert_eq!(rt.block_on(pool.run(|| 7u64)).ok(), Some(7));
        drop(pool);
    }
}
