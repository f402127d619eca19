//! A version: the set of live SSTables of every level at one instant.
//!
//! Threads: a `Version` is immutable once built. The engine publishes each one behind an `Arc`;
//! readers clone the `Arc` and read freely while the single compaction/flush thread builds the
//! next version with [`Version::apply`] (which never modifies `self`).
//!
//! Invariants (checked by [`Version::check_invariants`], kept by `apply`):
//! 1. Every table has `smallest <= largest`, and a file number appears once in the whole version.
//! 2. L0 is ordered newest first, that is by file number descending (tables are numbered in
//!    flush order and only flushes add to L0). L0 tables may overlap.
//! 3. Every level L >= 1 is sorted by smallest key and its tables do not overlap:
//!    `tables[i].largest < tables[i + 1].smallest`.

use crate::types::TableMeta;

/// Live tables per level. `levels[0]` is L0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Version {
    pub levels: Vec<Vec<TableMeta>>,
}

/// True when the inclusive ranges [a_lo, a_hi] and [b_lo, b_hi] share a key.
fn ranges_overlap(a_lo: &[u8], a_hi: &[u8], b_lo: &[u8], b_hi: &[u8]) -> bool {
    a_lo <= b_hi && b_lo <= a_hi
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn new(num_levels: usize) -> Version {
        Version {
            levels: vec![Vec::new(); num_levels],
        }
    }

    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// The tables of `level` (empty past the last level).
    pub fn tables(&self, level: usize) -> &[TableMeta] {
        self.levels.get(level).map_or(&[], |t| t.as_slice())
    }

    /// Sum of file sizes of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.tables(level).iter().map(|t| t.file_size).sum()
    }

    /// Sum of entries of `level`.
    pub fn level_entries(&self, level: usize) -> u64 {
        self.tables(level).iter().map(|t| t.entries).sum()
    }

    /// Tables in all levels.
    pub fn table_count(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// A new version: `removed` (level, file number) taken out, then `added` (level, table) put in
    /// (levels grow as needed). Errors name the table when a removed table is absent, an added
    /// table's number is already live, its key range is inverted, or an added L1+ table
    /// overlaps its level.
    pub fn apply(
        &self,
        added: &[(u32, TableMeta)],
        removed: &[(u32, u64)],
    ) -> Result<Version, String> {
        let mut next = self.clone();
        for &(level, number) in removed {
            let tables = next
                .levels
                .get_mut(level as usize)
                .ok_or_else(|| format!("removed table {number:06} is absent: no level {level}"))?;
            let at = tables
                .iter()
                .position(|t| t.number == number)
                .ok_or_else(|| format!("removed table {number:06} is absent from L{level}"))?;
            tables.remove(at);
        }
        for (level, table) in added {
            next.add(*level as usize, table.clone())?;
        }
        Ok(next)
    }

    /// Inserts `table` into `level` at its place, or says why it cannot go there.
    fn add(&mut self, level: usize, table: TableMeta) -> Result<(), String> {
        let number = table.number;
        if table.smallest > table.largest {
            return Err(format!(
                "added table {number:06} has smallest key above its largest"
            ));
        }
        if self.levels.iter().flatten().any(|t| t.number == number) {
            return Err(format!("added table {number:06} is already live"));
        }
        if self.levels.len() <= level {
            self.levels.resize(level + 1, Vec::new());
        }
        let Some(tables) = self.levels.get_mut(level) else {
            return Err(format!("no level {level}"));
        };
        if level == 0 {
            let at = tables.partition_point(|t| t.number > number);
            tables.insert(at, table);
            return Ok(());
        }
        let at = tables.partition_point(|t| t.smallest < table.smallest);
        let overlaps_prev = at
            .checked_sub(1)
            .and_then(|i| tables.get(i))
            .is_some_and(|prev| prev.largest >= table.smallest);
        let overlaps_next = tables
            .get(at)
            .is_some_and(|next| next.smallest <= table.largest);
        if overlaps_prev || overlaps_next {
            return Err(format!(
                "added table {number:06} overlaps another table of L{level}"
            ));
        }
        tables.insert(at, table);
        Ok(())
    }

    /// In a level >= 1, the index of the one table whose [smallest, largest] may hold `key`.
    /// Always None for L0 (its tables overlap: use [`Version::overlapping`]).
    pub fn find(&self, level: usize, key: &[u8]) -> Option<usize> {
        if level == 0 {
            return None;
        }
        let tables = self.tables(level);
        let at = tables.partition_point(|t| t.largest.as_slice() < key);
        tables
            .get(at)
            .is_some_and(|t| t.smallest.as_slice() <= key)
            .then_some(at)
    }

    /// Indexes of the tables of `level` that share a key with [smallest, largest] (inclusive), in
    /// the level's order.
    pub fn overlapping(&self, level: usize, smallest: &[u8], largest: &[u8]) -> Vec<usize> {
        let tables = self.tables(level);
        if level == 0 {
            return tables
                .iter()
                .enumerate()
                .filter(|(_, t)| ranges_overlap(&t.smallest, &t.largest, smallest, largest))
                .map(|(i, _)| i)
                .collect();
        }
        if smallest > largest {
            return Vec::new();
        }
        let start = tables.partition_point(|t| t.largest.as_slice() < smallest);
        let end = tables.partition_point(|t| t.smallest.as_slice() <= largest);
        (start..end.max(start)).collect()
    }

    /// Checks the invariants of the module documentation; the message names the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut numbers = std::collections::HashSet::new();
        for (level, tables) in self.levels.iter().enumerate() {
            for t in tables {
                if t.smallest > t.largest {
                    return Err(format!(
                        "L{level} table {:06} has smallest key above its largest",
                        t.number
                    ));
                }
                if !numbers.insert(t.number) {
                    return Err(format!("table {:06} appears twice", t.number));
                }
            }
            for pair in tables.windows(2) {
                let [a, b] = pair else { continue };
                if level == 0 {
                    if a.number <= b.number {
                        return Err(format!(
                            "L0 table {:06} comes before {:06}: L0 must be newest (highest number) first",
                            a.number, b.number
                        ));
                    }
                } else if a.largest >= b.smallest {
                    return Err(format!(
                        "L{level} tables {:06} and {:06} overlap or are out of order",
                        a.number, b.number
                    ));
                }
            }
        }
        Ok(())
    }
}
