//! Compaction: the picker (a pure function of the version) chooses inputs; the job merges them
//! newest first, keeps one version per key (dropping deletions when nothing older lies below),
//! writes output tables cut at the target size, trains each table's index as it is written (or a
//! level model over the whole output level), and installs the result with one manifest edit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::compaction::picker::{self, CompactionTask, PickerOptions};
use crate::db::level_index::LevelIndex;
use crate::db::output::{open_handle, table_options};
use crate::db::state::{Shared, SuperVersion, TableHandle, lock};
use crate::iter::MergingIter;
use crate::keys::KeyMapBuilder;
use crate::manifest::VersionEdit;
use crate::options::Granularity;
use crate::table::builder::TableBuilder;
use crate::types::{EntryKind, SortedIter};
use lidb_storage::error::{Result, corruption};

/// Levels the engine uses at most.
pub(crate) const MAX_LEVELS: usize = 7;

pub(crate) fn picker_options(s: &Shared) -> PickerOptions {
    PickerOptions::from_options(&s.opts, MAX_LEVELS)
}

/// Runs picked compactions until the picker finds nothing to do.
pub(crate) fn compact_until_settled(s: &Shared) -> Result<()> {
    loop {
        // Pick and run under the lock, so no other compaction consumes the inputs in between.
        let _one_at_a_time = lock(&s.compaction_lock);
        let task = {
            let sv = s.current();
            let cursors = lock(&s.cursors).clone();
            picker::pick(&sv.tables.version, &picker_options(s), &cursors)
        };
        match task {
            Some(task) => run(s, &task)?,
            None => return Ok(()),
        }
    }
}

/// Manual full compaction: every level, top to bottom, merged into the next non-empty one.
pub(crate) fn compact_all(s: &Shared) -> Result<()> {
    compact_until_settled(s)?;
    for level in 0..MAX_LEVELS - 1 {
        loop {
            let sv = s.current();
            let deeper = sv
                .tables
                .version
                .levels
                .iter()
                .skip(level + 1)
                .any(|l| !l.is_empty());
            let here = sv
                .tables
                .version
                .levels
                .get(level)
                .is_some_and(|l| !l.is_empty());
            if !here || (!deeper && level > 0) {
                break;
            }
            let _one_at_a_time = lock(&s.compaction_lock);
            let sv = s.current();
            match picker::manual_task(&sv.tables.version, level) {
                Some(task) => run(s, &task)?,
                None => break,
            }
        }
    }
    Ok(())
}

/// Times spent inside a source iterator, shared with the job.
struct TimedIter {
    inner: Box<dyn SortedIter>,
    nanos: Arc<AtomicU64>,
}

impl TimedIter {
    fn time<T>(&mut self, f: impl FnOnce(&mut dyn SortedIter) -> T) -> T {
        let t = Instant::now();
        let r = f(self.inner.as_mut());
        self.nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
}

impl SortedIter for TimedIter {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.time(|i| i.seek_to_first())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.time(|i| i.seek(target))
    }
    fn next(&mut self) -> Result<()> {
        self.time(|i| i.next())
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn kind(&self) -> EntryKind {
        self.inner.kind()
    }
    fn seq(&self) -> u64 {
        self.inner.seq()
    }
}

/// The handles of `task`'s inputs in merge order (newest first).
fn input_handles(sv: &SuperVersion, task: &CompactionTask) -> Result<Vec<Arc<TableHandle>>> {
    let mut out = Vec::new();
    let level = task.level as usize;
    let groups = [
        (level, &task.inputs),
        (task.output_level as usize, &task.next_inputs),
    ];
    for (lvl, metas) in groups {
        let tables = sv
            .tables
            .levels
            .get(lvl)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // L0 keeps its newest-first order; deeper levels are disjoint, any order merges the same.
        for t in tables {
            if metas.iter().any(|m| m.number == t.meta.number) {
                out.push(Arc::clone(t));
            }
        }
    }
    let wanted = task.inputs.len() + task.next_inputs.len();
    if out.len() != wanted {
        return Err(corruption(
            "compaction",
            format!(
                "{} of {wanted} input tables are not in the current version",
                wanted - out.len()
            ),
        ));
    }
    Ok(out)
}

struct Outputs {
    tables: Vec<Arc<TableHandle>>,
    /// Keys of the whole output, for a level model.
    level_keys: Option<Vec<Vec<u8>>>,
    write: Duration,
    train: Duration,
    index_write: Duration,
    bytes_written: u64,
}

/// Runs one compaction task to completion. The caller holds `compaction_lock` and picked the
/// task under it. A failure installs nothing (the manifest names no output table) and stops
/// writes until reopen, as a failed flush does (flush.rs): an output table or the manifest may
/// have failed its sync, and a manifest writer that failed is poisoned.
fn run(s: &Shared, task: &CompactionTask) -> Result<()> {
    run_task(s, task).inspect_err(|e| s.set_bg_error(e))
}

fn run_task(s: &Shared, task: &CompactionTask) -> Result<()> {
    let started = Instant::now();
    let sv = s.current();
    let inputs = input_handles(&sv, task)?;
    let out_level = task.output_level as usize;
    let drop_deletes = sv
        .tables
        .version
        .levels
        .iter()
        .skip(out_level + 1)
        .all(|l| l.is_empty());
    let read_nanos = Arc::new(AtomicU64::new(0));
    let mut sources: Vec<Box<dyn SortedIter>> = Vec::new();
    let (mut max_key, mut max_value) = (0u32, 0u32);
    let mut bytes_read = 0;
    for h in &inputs {
        max_key = max_key.max(h.table.max_key_len());
        max_value = max_value.max(h.table.max_value_len());
        bytes_read += h.meta.file_size;
        sources.push(Box::new(TimedIter {
            inner: Box::new(h.table.iter()),
            nanos: Arc::clone(&read_nanos),
        }));
    }
    let mut merged = MergingIter::new(sources);
    merged.seek_to_first()?;
    let whole_level = s.opts.granularity == Granularity::Level && out_level >= 1;
    let outputs = write_outputs(
        s,
        &mut merged,
        out_level,
        (max_key, max_value),
        drop_deletes,
        whole_level,
    )?;

    let mut level_index = None;
    if let Some(keys) = &outputs.level_keys {
        let t = Instant::now();
        let number = lock(&s.manifest).new_file_number();
        let li = LevelIndex::build(number, keys, &outputs.tables, &s.opts.index, out_level)?;
        let train = t.elapsed();
        let t = Instant::now();
        li.write(&*s.storage, &s.dir)?;
        s.storage.sync_dir(&s.dir)?;
        lock(&s.compaction_stats).train_time += train;
        lock(&s.compaction_stats).index_write_time += t.elapsed();
        level_index = Some(Arc::new(li));
    }
    install(s, task, &inputs, &outputs, level_index)?;

    let total = started.elapsed();
    let read = Duration::from_nanos(read_nanos.load(Ordering::Relaxed));
    let mut st = lock(&s.compaction_stats);
    st.compactions += 1;
    st.bytes_read += bytes_read;
    st.bytes_written += outputs.bytes_written;
    st.read_time += read;
    st.write_time += outputs.write;
    st.train_time += outputs.train;
    st.index_write_time += outputs.index_write;
    st.merge_time +=
        total.saturating_sub(read + outputs.write + outputs.train + outputs.index_write);
    drop(st);
    {
        let mut c = lock(&s.cursors);
        if c.len() <= task.level as usize {
            c.resize(task.level as usize + 1, Vec::new());
        }
        if let Some(slot) = c.get_mut(task.level as usize) {
            *slot = task.next_cursor();
        }
    }
    s.notify();
    Ok(())
}

fn write_outputs(
    s: &Shared,
    merged: &mut MergingIter,
    out_level: usize,
    (max_key, max_value): (u32, u32),
    drop_deletes: bool,
    whole_level: bool,
) -> Result<Outputs> {
    let mut out = Outputs {
        tables: Vec::new(),
        level_keys: whole_level.then(Vec::new),
        write: Duration::ZERO,
        train: Duration::ZERO,
        index_write: Duration::ZERO,
        bytes_written: 0,
    };
    let mut builder: Option<TableBuilder> = None;
    while merged.valid() {
        if !(drop_deletes && merged.kind() == EntryKind::Delete) {
            let b = match builder.as_mut() {
                Some(b) => b,
                None => {
                    let number = lock(&s.manifest).new_file_number();
                    let b = TableBuilder::new(
                        &*s.storage,
                        &s.table_path(number),
                        number,
                        max_key,
                        max_value,
                        table_options(s, out_level),
                    )?;
                    builder.insert(b)
                }
            };
            b.add(merged.key(), merged.seq(), merged.kind(), merged.value())?;
            if let Some(keys) = out.level_keys.as_mut() {
                keys.push(merged.key().to_vec());
            }
            if b.estimated_file_size() >= s.opts.sst_size_bytes
                && let Some(b) = builder.take()
            {
                finish(s, b, &mut out)?;
            }
        }
        merged.next()?;
    }
    if let Some(b) = builder.take() {
        finish(s, b, &mut out)?;
    }
    s.storage.sync_dir(&s.dir)?;
    Ok(out)
}

fn finish(s: &Shared, b: TableBuilder, out: &mut Outputs) -> Result<()> {
    let built = b.finish()?;
    out.write += built.timings.write;
    out.train += built.timings.train;
    out.index_write += built.timings.index_write;
    out.bytes_written += built.meta.file_size;
    let handle = open_handle(s, built.meta)?;
    // An unclustered index is trained when the table opens (from its mapped-keys block).
    out.train += handle.table.unclustered_build_time();
    out.tables.push(handle);
    Ok(())
}

fn install(
    s: &Shared,
    task: &CompactionTask,
    inputs: &[Arc<TableHandle>],
    outputs: &Outputs,
    level_index: Option<Arc<LevelIndex>>,
) -> Result<()> {
    let out_level = task.output_level;
    let added: Vec<(u32, Arc<TableHandle>)> = outputs
        .tables
        .iter()
        .map(|h| (out_level, Arc::clone(h)))
        .collect();
    let mut removed: Vec<(u32, u64)> = task.inputs.iter().map(|m| (task.level, m.number)).collect();
    removed.extend(task.next_inputs.iter().map(|m| (out_level, m.number)));
    let mut level_changes = Vec::new();
    if s.opts.granularity == Granularity::Level {
        if out_level >= 1 {
            level_changes.push((out_level, level_index.clone()));
        }
        if task.level >= 1 {
            // The input level was merged whole into the next one: its model goes with it.
            level_changes.push((task.level, None));
        }
    }
    let mut m = lock(&s.manifest);
    let edit = VersionEdit {
        next_file_number: Some(m.next_file_number),
        last_sequence: Some(s.last_seq.load(Ordering::SeqCst)),
        added: added.iter().map(|(l, h)| (*l, h.meta.clone())).collect(),
        removed: removed.clone(),
        level_index: level_changes
            .iter()
            .map(|(l, li)| (*l, li.as_ref().map(|x| x.number)))
            .collect(),
        ..VersionEdit::default()
    };
    m.manifest.log_edit(&edit)?;
    let mut failed = None;
    let mut replaced = Vec::new();
    s.update(
        |sv| match sv.tables.apply(&added, &removed, &level_changes) {
            Ok(tables) => {
                for (level, _) in &level_changes {
                    if let Some(Some(old)) = sv.tables.level_indexes.get(*level as usize) {
                        replaced.push(old.number);
                    }
                }
                SuperVersion {
                    tables: Arc::new(tables),
                    ..sv.clone()
                }
            }
            Err(e) => {
                failed = Some(e);
                sv.clone()
            }
        },
    );
    drop(m);
    // Level models live in memory once loaded; the replaced ones' files can go now.
    for number in replaced {
        let _ = s.storage.remove(&LevelIndex::path(&s.dir, number));
    }
    let _ = inputs;
    match failed {
        Some(e) => Err(corruption(
            &s.dir,
            format!("compaction produced an invalid version: {e}"),
        )),
        None => Ok(()),
    }
}

/// Key-map builder over a whole level's keys (first and last decide the prefix).
pub(crate) fn keymap_for(keys: &[Vec<u8>]) -> crate::keys::KeyMap {
    let mut b = KeyMapBuilder::new();
    for k in keys {
        b.observe(k);
    }
    b.finish(keys.last().map(Vec::as_slice).unwrap_or_default())
}
