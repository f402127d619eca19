//! The index's settings: level-bin sizes, the LPA parameters, when model retraining runs.
//!
//! Plain data, validated once by [`Config::validate`] when an index is built; every other module
//! may then rely on the bounds checked there (at least two root slots, child bins able to hold
//! half a split).

use crate::error::{FineError, Result};

/// Settings of a [`crate::FineIndex`].
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Slots of a root bin (the paper's m; default 8). At least 2.
    pub root_slots: u32,
    /// Slots of a child bin (the paper's n; default 16). At least 2, and `2 * child_slots` must
    /// exceed `root_slots` so that a full root bin splits into two child bins.
    pub child_slots: u32,
    /// LPA: the largest model error tolerated, in positions (default 32, the paper's choice).
    pub threshold: u64,
    /// LPA: points the probe adds per forward step (default 1000, the authors' code).
    pub learning_step: u64,
    /// LPA: how fast the backward steps shrink, in (0, 1) (default 0.1, the authors' code). After
    /// each model the step restarts at the power of ten at or below that model's length.
    pub learning_rate: f64,
    /// Model retraining runs on the writer that sets it off (when no other retraining runs) once
    /// this many level-bin retrainings have happened below a small model, that is once "a small
    /// model needs a smaller model" (the paper's trigger is 1), or at once when small models nest
    /// 8 deep below a top-level node. 0 turns automatic model retraining on writers off (a
    /// [`crate::Retrainer`] or [`crate::FineIndex::retrain_models`] still retrain).
    pub model_retrain_after_nested: u64,
    /// ... and once the small models made since the last model retraining hold at least
    /// `records / model_retrain_divisor` entries (default 8), so that the O(records) retraining
    /// is amortised over the inserts that made it necessary. 0 drops this condition (tests use it
    /// to retrain as often as the paper's trigger allows).
    pub model_retrain_divisor: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            root_slots: 8,
            child_slots: 16,
            threshold: 32,
            learning_step: 1000,
            learning_rate: 0.1,
            model_retrain_after_nested: 1,
            model_retrain_divisor: 8,
        }
    }
}

impl Config {
    /// Checks the bounds the structure relies on.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(FineError::InvalidConfig(msg));
        if self.root_slots < 2 {
            return bad(format!("root_slots {} is below 2", self.root_slots));
        }
        if self.child_slots < 2 {
            return bad(format!("child_slots {} is below 2", self.child_slots));
        }
        if u64::from(self.child_slots) * 2 <= u64::from(self.root_slots) {
            return bad(format!(
                "child_slots {} cannot hold half of a full root bin of {} slots",
                self.child_slots, self.root_slots
            ));
        }
        if self.root_slots > 4096 || self.child_slots > 4096 {
            return bad("bins above 4096 slots are not supported".into());
        }
        if self.learning_step < 1 {
            return bad("learning_step must be at least 1".into());
        }
        if !(self.learning_rate > 0.0 && self.learning_rate < 1.0) {
            return bad(format!(
                "learning_rate {} is not in (0, 1)",
                self.learning_rate
            ));
        }
        if self.threshold > u64::from(u32::MAX) {
            return bad(format!("threshold {} is above 2^32 - 1", self.threshold));
        }
        Ok(())
    }
}
