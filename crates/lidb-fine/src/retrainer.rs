//! A background thread for model retraining (the paper runs it "in the background to hide the
//! latency"): it wakes every `period`, or when nudged, and retrains if a small model gathered a
//! smaller one since the last retraining (and the amortisation condition of
//! [`crate::Config::model_retrain_divisor`] holds). Set `model_retrain_after_nested = 0` to leave
//! retraining to this thread alone; otherwise whichever comes first does it.
//!
//! The handle owns the thread: dropping it (or [`Retrainer::stop`]) stops and joins it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::index::FineIndex;

/// The handle of a background model-retraining thread.
#[derive(Debug)]
pub struct Retrainer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Retrainer {
    /// Starts the thread over `index`.
    pub fn spawn(index: Arc<FineIndex>, period: Duration) -> std::io::Result<Retrainer> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("finedex-retrain".into())
            .spawn(move || {
                let mut done = 0u64;
                // Relaxed: the flag carries no data; join() orders everything else.
                while !flag.load(Ordering::Relaxed) {
                    if index.retrain_models_if_wanted().is_some() {
                        done += 1;
                    }
                    std::thread::park_timeout(period);
                }
                done
            })?;
        Ok(Retrainer {
            stop,
            thread: Some(thread),
        })
    }

    /// Wakes the thread now.
    pub fn nudge(&self) {
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    /// Stops and joins the thread; the number of retrainings it ran.
    pub fn stop(mut self) -> u64 {
        self.shutdown()
    }

    fn shutdown(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let Some(t) = self.thread.take() else {
            return 0;
        };
        t.thread().unpark();
        // A panic in the thread would be a bug in the index; report it as no retrainings.
        t.join().unwrap_or(0)
    }
}

impl Drop for Retrainer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
