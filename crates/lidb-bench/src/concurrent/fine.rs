//! `finedex` behind [`ConcurrentIndex`]: lidb_fine::FineIndex with its default configuration and
//! a background [`Retrainer`] running for the index's whole life (stopped on drop).
//!
//! Threads: any; the Retrainer thread is one more, woken every [`RETRAIN_PERIOD`].

use std::sync::Arc;
use std::time::Duration;

use lidb_fine::{Config, FineIndex, Retrainer};

use super::index::{ConcurrentIndex, Footprint, Retrains};

/// How often the background thread looks for models to retrain.
pub const RETRAIN_PERIOD: Duration = Duration::from_millis(20);

/// FineIndex plus its retraining thread.
#[derive(Debug)]
pub struct FinePeer {
    index: Arc<FineIndex>,
    _retrainer: Retrainer,
}

impl FinePeer {
    /// Trains over `entries` (keys strictly increasing) and starts the Retrainer.
    pub fn bulk_load(entries: &[(u64, u64)]) -> Result<FinePeer, String> {
        let index = FineIndex::bulk_load(entries, Config::default()).map_err(|e| e.to_string())?;
        let index = Arc::new(index);
        let retrainer = Retrainer::spawn(Arc::clone(&index), RETRAIN_PERIOD)
            .map_err(|e| format!("finedex retrainer thread: {e}"))?;
        Ok(FinePeer {
            index,
            _retrainer: retrainer,
        })
    }
}

impl ConcurrentIndex for FinePeer {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        self.index.insert(key, value)
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        self.index.update(key, value)
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.index.get(key)
    }
    fn remove(&self, key: u64) -> Option<u64> {
        self.index.remove(key)
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        self.index.range_into(from, u64::MAX, limit, out);
    }
    fn footprint(&self) -> Footprint {
        let s = self.index.stats();
        Footprint {
            heap_bytes: Some(s.heap_bytes),
            model_bytes: Some(s.model_bytes),
            bin_load_factor: (s.bin_slots > 0).then_some(s.load_factor),
        }
    }
    fn retrains(&self) -> Option<Retrains> {
        let s = self.index.retrain_stats();
        Some(Retrains {
            level_bin: s.level_bin_retrains,
            level_bin_ms: s.level_bin_retrain_ns as f64 / 1e6,
            model: s.model_retrains,
            model_ms: s.model_retrain_us as f64 / 1e3,
        })
    }
}
