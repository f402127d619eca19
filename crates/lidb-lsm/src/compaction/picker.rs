//! The compaction picker: which tables to merge next, as a pure function of a version snapshot.
//!
//! No I/O, no clock, no randomness: the same (version, options, cursors) always gives the same
//! task, so a simulator can drive the policy for thousands of steps without disks. Callable from
//! any thread; the engine calls it on its compaction thread after every flush and compaction.
//!
//! Policy (leveling, as LevelDB):
//! 1. L0 holding `l0_compaction_trigger` files or more: all L0 files, plus the L1 files that
//!    overlap their key range (all of L1 in whole-level mode), into L1.
//! 2. Otherwise the level L in 1..max_levels-1 with the highest score bytes(L) / target(L), if that
//!    score is at least 1 (ties: the lower level). target(1) = `level1_target_bytes`,
//!    target(L+1) = target(L) * `size_ratio`. One file of L is chosen round robin (the first whose
//!    smallest key is above the level's cursor, wrapping to the first file), plus the files of
//!    L+1 overlapping it. In whole-level mode: every file of L and every file of L+1.
//! 3. The last level (max_levels - 1) is never compacted out of; it may exceed its target.
//!
//! The cursor of a level is kept by the caller: after running a task, set
//! `cursors[task.level] = task.next_cursor()`.

use crate::options::{Granularity, Options};
use crate::types::TableMeta;
use crate::version::Version;

/// What the picker needs of the engine's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerOptions {
    /// L0 files that trigger an L0 -> L1 compaction (0 is taken as 1).
    pub l0_compaction_trigger: usize,
    /// Growth of the target size from one level to the next.
    pub size_ratio: u64,
    /// Target bytes of L1 (0 is taken as 1).
    pub level1_target_bytes: u64,
    /// Levels including L0; outputs go at most to level `max_levels - 1`. Below 2, nothing is
    /// ever picked.
    pub max_levels: usize,
    /// Every compaction takes whole levels (needed by per-level learned models).
    pub whole_level: bool,
}

impl PickerOptions {
    /// The picker options of an engine: L1's target is the size of L0 at its trigger
    /// (`write_buffer_bytes * l0_compaction_trigger`), and whole-level mode follows
    /// `Granularity::Level`.
    pub fn from_options(options: &Options, max_levels: usize) -> PickerOptions {
        PickerOptions {
            l0_compaction_trigger: options.l0_compaction_trigger,
            size_ratio: options.size_ratio,
            level1_target_bytes: options
                .write_buffer_bytes
                .saturating_mul(options.l0_compaction_trigger as u64),
            max_levels,
            whole_level: options.granularity == Granularity::Level,
        }
    }
}

/// One merge: `inputs` (all from `level`) and `next_inputs` (from `level + 1`) are replaced by the
/// merged output written to `output_level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionTask {
    pub level: u32,
    /// Tables of `level`, in the level's order (L0: newest first).
    pub inputs: Vec<TableMeta>,
    /// Tables of `level + 1`, in key order.
    pub next_inputs: Vec<TableMeta>,
    pub output_level: u32,
    /// Why it was picked, for logs and stats.
    pub reason: String,
}

impl CompactionTask {
    /// The round-robin cursor of `level` after this task: the largest key of its inputs.
    pub fn next_cursor(&self) -> Vec<u8> {
        self.inputs
            .iter()
            .map(|t| t.largest.as_slice())
            .max()
            .unwrap_or_default()
            .to_vec()
    }

    /// The (level, file number) of every input, as a version edit removes them.
    pub fn removed(&self) -> Vec<(u32, u64)> {
        let this = self.inputs.iter().map(|t| (self.level, t.number));
        let next = self
            .next_inputs
            .iter()
            .map(|t| (self.output_level, t.number));
        this.chain(next).collect()
    }

    /// Bytes of all inputs.
    pub fn input_bytes(&self) -> u64 {
        self.inputs
            .iter()
            .chain(&self.next_inputs)
            .map(|t| t.file_size)
            .sum()
    }

    /// One table of `level` with nothing below to merge with: the engine may move it down
    /// instead of rewriting it (unless whole-level models need the rewrite).
    pub fn is_trivial_move(&self) -> bool {
        self.level >= 1 && self.inputs.len() == 1 && self.next_inputs.is_empty()
    }
}

/// Target bytes per level: `targets[0]` is 0 (L0 is triggered by file count), `targets[1]` is
/// `level1_target_bytes` (at least 1), each next one `size_ratio` times the previous (saturating).
pub fn level_targets(opts: &PickerOptions, max_levels: usize) -> Vec<u64> {
    let mut targets = Vec::with_capacity(max_levels);
    let mut target = opts.level1_target_bytes.max(1);
    for level in 0..max_levels {
        if level == 0 {
            targets.push(0);
        } else {
            targets.push(target);
            target = target.saturating_mul(opts.size_ratio.max(1));
        }
    }
    targets
}

/// True when writes must wait for compaction: L0 holds `l0_stop` files or more.
pub fn should_stall(version: &Version, l0_stop: usize) -> bool {
    version.tables(0).len() >= l0_stop
}

/// The next compaction, or None when every level is within its target. `cursors[L]` is the
/// round-robin cursor of level L (missing or empty: start from the first file).
pub fn pick(
    version: &Version,
    opts: &PickerOptions,
    cursors: &[Vec<u8>],
) -> Option<CompactionTask> {
    if opts.max_levels < 2 {
        return None;
    }
    let l0 = version.tables(0);
    let trigger = opts.l0_compaction_trigger.max(1);
    if l0.len() >= trigger {
        let reason = format!("L0 holds {} files (trigger {trigger})", l0.len());
        return Some(task(version, 0, l0.to_vec(), opts.whole_level, reason));
    }

    let targets = level_targets(opts, opts.max_levels);
    // (level, bytes, target) of the best score so far; scores compare as exact fractions.
    let mut best: Option<(usize, u64, u64)> = None;
    for (level, &target) in targets.iter().enumerate().take(opts.max_levels - 1).skip(1) {
        let bytes = version.level_bytes(level);
        if bytes < target {
            continue;
        }
        let better = best.is_none_or(|(_, best_bytes, best_target)| {
            u128::from(bytes) * u128::from(best_target)
                > u128::from(best_bytes) * u128::from(target)
        });
        if better {
            best = Some((level, bytes, target));
        }
    }
    let (level, bytes, target) = best?;
    let tables = version.tables(level);
    let inputs = if opts.whole_level {
        tables.to_vec()
    } else {
        let cursor = cursors.get(level).map_or(&[][..], |c| c.as_slice());
        let at = if cursor.is_empty() {
            0
        } else {
            tables.partition_point(|t| t.smallest.as_slice() <= cursor)
        };
        let chosen = tables.get(at).or_else(|| tables.first())?;
        vec![chosen.clone()]
    };
    let reason = format!(
        "L{level} holds {bytes} bytes, target {target} (score {:.2})",
        bytes as f64 / target as f64
    );
    Some(task(version, level, inputs, opts.whole_level, reason))
}

/// A full manual compaction of `level`: all of its files and all files of `level + 1` (so that a
/// compaction of every level in turn rewrites the whole tree). None when `level` is empty.
pub fn manual_task(version: &Version, level: usize) -> Option<CompactionTask> {
    let inputs = version.tables(level);
    if inputs.is_empty() {
        return None;
    }
    let reason = format!("manual compaction of L{level}");
    Some(task(version, level, inputs.to_vec(), true, reason))
}

/// The task merging `inputs` of `level` with the next level's files: those overlapping the inputs'
/// key range, or all of them when `whole_next`.
fn task(
    version: &Version,
    level: usize,
    inputs: Vec<TableMeta>,
    whole_next: bool,
    reason: String,
) -> CompactionTask {
    let next_level = level + 1;
    let next_tables = version.tables(next_level);
    let next_inputs = if whole_next {
        next_tables.to_vec()
    } else {
        let smallest = inputs.iter().map(|t| t.smallest.as_slice()).min();
        let largest = inputs.iter().map(|t| t.largest.as_slice()).max();
        match (smallest, largest) {
            (Some(lo), Some(hi)) => version
                .overlapping(next_level, lo, hi)
                .into_iter()
                .filter_map(|i| next_tables.get(i).cloned())
                .collect(),
            _ => Vec::new(),
        }
    };
    CompactionTask {
        level: level as u32,
        inputs,
        next_inputs,
        output_level: next_level as u32,
        reason,
    }
}
