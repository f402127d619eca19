//! Compaction: the pure picker that chooses what to merge ([`picker`]), and (added by the engine)
//! the job that performs a task.
//!
//! Threads: the picker is a pure function of a [`crate::version::Version`] snapshot, callable
//! from any thread; the engine runs at most one compaction at a time on its background thread.

pub mod picker;

pub use picker::{CompactionTask, PickerOptions, level_targets, manual_task, pick, should_stall};
