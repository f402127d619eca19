//! Thread-per-core serving (`ServerConfig::thread_per_core`): one thread per core, each driving
//! a single-threaded tokio runtime, and the accept loop deals each new connection to one of them
//! in turn. A connection then lives on one thread: its socket's readiness, its in-memory reads
//! (`on_worker.rs`) and the wake-up when the engine pool answers its batch all happen there,
//! with no work stealing and no wake-up of a second async thread to take over a task.
//!
//! Engine calls that may block still go to the engine pool (`pool.rs`): lsm's writers stall
//! behind flushes and compactions and can wait on a WAL sync, so a write run on a worker would
//! stop every connection of that core.
//!
//! Threads: [`Workers::start`] spawns them; each runs until [`Workers`] is dropped, which tells
//! them to stop, joins them, and drops the tasks still on their runtimes (the accept loop has
//! drained its connections before that). Invariant: a task spawned on a worker's [`Handle`] runs
//! only on that worker's thread.

use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The worker threads and their runtimes' handles.
#[derive(Debug)]
pub struct Workers {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// `count` workers (at least one), each with a current-thread runtime.
    pub fn start(count: usize) -> std::io::Result<Workers> {
        let mut workers = Workers {
            handles: Vec::new(),
            stops: Vec::new(),
            threads: Vec::new(),
        };
        for i in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            workers.handles.push(runtime.handle().clone());
            workers.stops.push(stop);
            let thread = std::thread::Builder::new()
                .name(format!("lidb-serve-{i}"))
                .spawn(move || {
                    // Drives the runtime (and every connection spawned on it) until stopped.
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
                })?;
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// Where the accept loop spawns connections, one handle per worker.
    pub fn handles(&self) -> Vec<Handle> {
        self.handles.clone()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
