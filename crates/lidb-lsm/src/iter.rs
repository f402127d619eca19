//! Iterators that combine sorted sources: [`MergingIter`] (newest source wins per key),
//! [`DbIter`] (what a user scan sees: no deletions, an optional upper bound) and [`LevelIter`]
//! (the tables of one sorted level, opened lazily one at a time). [`VecIter`] is a sorted
//! vector behind the same trait, for tests and small in-memory sources.
//!
//! Threads: an iterator belongs to one thread at a time (they are `Send`, not shared). Sources pin
//! whatever they read (memtables by `Arc`, tables by their handles), so an iterator stays
//! consistent while the engine flushes and compacts.
//!
//! Invariants:
//! 1. Every [`SortedIter`] yields strictly increasing user keys, one entry per key.
//! 2. A [`MergingIter`] source with a lower index is newer: for a key held by several sources
//!    the entry of the lowest index is yielded and the others are skipped.
//! 3. After a positioning call returns an error the iterator is not valid; the next successful
//!    `seek`/`seek_to_first` makes it usable again.

use std::fmt;

use crate::types::{EntryKind, SortedIter};
use lidb_storage::error::Result;

/// Merges sources into one sorted stream; for each user key, the entry of the first source
/// (lowest index, the newest) that holds it.
pub struct MergingIter {
    sources: Vec<Box<dyn SortedIter>>,
    /// The source positioned at the smallest key (lowest index among equals), if any.
    current: Option<usize>,
    /// The current key, copied while the sources holding it advance.
    scratch: Vec<u8>,
}

impl fmt::Debug for MergingIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MergingIter")
            .field("sources", &self.sources.len())
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl MergingIter {
    /// `sources[0]` is the newest. The iterator starts unpositioned.
    pub fn new(sources: Vec<Box<dyn SortedIter>>) -> MergingIter {
        MergingIter {
            sources,
            current: None,
            scratch: Vec::new(),
        }
    }

    pub fn num_sources(&self) -> usize {
        self.sources.len()
    }

    /// Points `current` at the valid source with the smallest key, the lowest index among ties.
    fn find_current(&mut self) {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, source) in self.sources.iter().enumerate() {
            if !source.valid() {
                continue;
            }
            match best {
                Some((_, key)) if source.key() >= key => {}
                _ => best = Some((i, source.key())),
            }
        }
        self.current = best.map(|(i, _)| i);
    }

    fn current_source(&self) -> Option<&dyn SortedIter> {
        self.current
            .and_then(|i| self.sources.get(i))
            .map(|s| s.as_ref())
    }

    /// Runs `step` on every source, then finds the current one; on error the iterator is invalid.
    fn position_all(
        &mut self,
        mut step: impl FnMut(&mut dyn SortedIter) -> Result<()>,
    ) -> Result<()> {
        self.current = None;
        for source in &mut self.sources {
            step(source.as_mut())?;
        }
        self.find_current();
        Ok(())
    }
}

impl SortedIter for MergingIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.position_all(|s| s.seek_to_first())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(|s| s.seek(target))
    }

    fn next(&mut self) -> Result<()> {
        let Some(source) = self.current.and_then(|i| self.sources.get(i)) else {
            return Ok(());
        };
        self.scratch.clear();
        self.scratch.extend_from_slice(source.key());
        self.current = None;
        // Every source positioned at the current key moves past it: the winner and the older
        // versions it shadows.
        for source in &mut self.sources {
            if source.valid() && source.key() == self.scratch.as_slice() {
                source.next()?;
            }
        }
        self.find_current();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current_source().map_or(&[], |s| s.key())
    }

    fn value(&self) -> &[u8] {
        self.current_source().map_or(&[], |s| s.value())
    }

    fn kind(&self) -> EntryKind {
        self.current_source().map_or(EntryKind::Put, |s| s.kind())
    }

    fn seq(&self) -> u64 {
        self.current_source().map_or(0, |s| s.seq())
    }
}

/// What a user scan sees: the live entries of an inner iterator (deletions hidden) below an
/// optional exclusive upper bound.
pub struct DbIter<I: SortedIter = MergingIter> {
    inner: I,
    upper: Option<Vec<u8>>,
    valid: bool,
}

impl<I: SortedIter + fmt::Debug> fmt::Debug for DbIter<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbIter")
            .field("inner", &self.inner)
            .field("upper", &self.upper)
            .field("valid", &self.valid)
            .finish()
    }
}

impl<I: SortedIter> DbIter<I> {
    /// Keys `>= upper` are never yielded. Starts unpositioned.
    pub fn new(inner: I, upper: Option<Vec<u8>>) -> DbIter<I> {
        DbIter {
            inner,
            upper,
            valid: false,
        }
    }

    /// Positions at the first live key `>= start`.
    pub fn seek(&mut self, start: &[u8]) -> Result<()> {
        self.valid = false;
        self.inner.seek(start)?;
        self.settle()
    }

    pub fn seek_to_first(&mut self) -> Result<()> {
        self.valid = false;
        self.inner.seek_to_first()?;
        self.settle()
    }

    /// Moves to the next live key. Does nothing when not valid.
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step, not an Iterator: positioning returns Result<()>"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.valid = false;
        self.inner.next()?;
        self.settle()
    }

    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Only while valid (empty otherwise).
    pub fn key(&self) -> &[u8] {
        if self.valid { self.inner.key() } else { &[] }
    }

    /// Only while valid (empty otherwise).
    pub fn value(&self) -> &[u8] {
        if self.valid { self.inner.value() } else { &[] }
    }

    /// Sequence number of the current entry (0 when not valid).
    pub fn seq(&self) -> u64 {
        if self.valid { self.inner.seq() } else { 0 }
    }

    /// Skips deletions; stops (invalid) at the end or at the upper bound.
    fn settle(&mut self) -> Result<()> {
        loop {
            if !self.inner.valid() {
                return Ok(());
            }
            if let Some(upper) = &self.upper
                && self.inner.key() >= upper.as_slice()
            {
                return Ok(());
            }
            if self.inner.kind() == EntryKind::Put {
                self.valid = true;
                return Ok(());
            }
            self.inner.next()?;
        }
    }
}

/// The tables of one sorted, non-overlapping level as one iterator, opening each table only when
/// the scan reaches it.
///
/// `open` turns a table handle into its iterator; `largest` gives a table's largest key. Tables
/// must be sorted by key and must not overlap; an opened table whose entries run past its
/// `largest` key is the caller's bug.
pub struct LevelIter<T, O, L> {
    tables: Vec<T>,
    open: O,
    largest: L,
    /// Index of the opened table (`tables.len()` when exhausted).
    index: usize,
    current: Option<Box<dyn SortedIter>>,
}

impl<T, O, L> fmt::Debug for LevelIter<T, O, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LevelIter")
            .field("tables", &self.tables.len())
            .field("index", &self.index)
            .field("open", &self.current.is_some())
            .finish_non_exhaustive()
    }
}

impl<T, O, L> LevelIter<T, O, L>
where
    O: Fn(&T) -> Result<Box<dyn SortedIter>>,
    L: Fn(&T) -> &[u8],
{
    /// Starts unpositioned.
    pub fn new(tables: Vec<T>, open: O, largest: L) -> LevelIter<T, O, L> {
        let index = tables.len();
        LevelIter {
            tables,
            open,
            largest,
            index,
            current: None,
        }
    }

    /// Makes table `index` the current one (opening it unless it already is); past the end, the
    /// iterator becomes exhausted.
    fn open_table(&mut self, index: usize) -> Result<()> {
        if index == self.index && self.current.is_some() {
            return Ok(());
        }
        self.current = None;
        self.index = index;
        if let Some(table) = self.tables.get(index) {
            self.current = Some((self.open)(table)?);
        }
        Ok(())
    }

    /// While the current table is exhausted, moves to the start of the next one.
    fn skip_exhausted(&mut self) -> Result<()> {
        while let Some(current) = &self.current {
            if current.valid() {
                break;
            }
            let next = self.index + 1;
            self.open_table(next)?;
            if let Some(current) = self.current.as_mut() {
                current.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// On error the iterator is left exhausted.
    fn guard(&mut self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            self.current = None;
            self.index = self.tables.len();
        }
        result
    }
}

impl<T, O, L> SortedIter for LevelIter<T, O, L>
where
    T: Send,
    O: Fn(&T) -> Result<Box<dyn SortedIter>> + Send,
    L: Fn(&T) -> &[u8] + Send,
{
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let result = (|| {
            self.open_table(0)?;
            if let Some(current) = self.current.as_mut() {
                current.seek_to_first()?;
            }
            self.skip_exhausted()
        })();
        self.guard(result)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let largest = &self.largest;
        let index = self.tables.partition_point(|t| largest(t) < target);
        let result = (|| {
            self.open_table(index)?;
            if let Some(current) = self.current.as_mut() {
                current.seek(target)?;
            }
            self.skip_exhausted()
        })();
        self.guard(result)
    }

    fn next(&mut self) -> Result<()> {
        let result = (|| {
            match self.current.as_mut() {
                Some(current) if current.valid() => current.next()?,
                _ => return Ok(()),
            }
            self.skip_exhausted()
        })();
        self.guard(result)
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn kind(&self) -> EntryKind {
        self.current.as_ref().map_or(EntryKind::Put, |c| c.kind())
    }

    fn seq(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.seq())
    }
}

/// One entry of a [`VecIter`]: key, kind, seq, value.
pub type VecEntry = (Vec<u8>, EntryKind, u64, Vec<u8>);

/// A [`SortedIter`] over entries held in a vector (sorted by key on construction; for equal keys
/// the first given is kept).
#[derive(Debug, Clone)]
pub struct VecIter {
    entries: Vec<VecEntry>,
    pos: usize,
}

impl VecIter {
    /// Starts unpositioned.
    pub fn new(mut entries: Vec<VecEntry>) -> VecIter {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, earlier| later.0 == earlier.0);
        let pos = entries.len();
        VecIter { entries, pos }
    }

    fn entry(&self) -> Option<&VecEntry> {
        self.entries.get(self.pos)
    }
}

impl SortedIter for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self.entries.partition_point(|e| e.0.as_slice() < target);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.pos < self.entries.len() {
            self.pos += 1;
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.entry().map_or(&[], |e| &e.0)
    }

    fn value(&self) -> &[u8] {
        self.entry().map_or(&[], |e| &e.3)
    }

    fn kind(&self) -> EntryKind {
        self.entry().map_or(EntryKind::Put, |e| e.1)
    }

    fn seq(&self) -> u64 {
        self.entry().map_or(0, |e| e.2)
    }
}
