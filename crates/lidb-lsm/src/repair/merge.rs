//! Phase 2 of a repair: merge the kept tables and the WAL records into one sorted run at the
//! bottom level. Sources may overlap in any way (tables of any level, orphans of a crashed
//! compaction, WALs already flushed), so the merge orders versions by sequence number, not by
//! source: for each key the entry with the highest sequence wins. Deletions are dropped: at the
//! bottom level, with every other source merged, nothing older remains for them to hide.

use std::path::Path;
use std::sync::Arc;

use crate::db::compact::MAX_LEVELS;
use crate::db::level_index::LevelIndex;
use crate::db::output::{open_handle_in, read_mode_for, table_options_for};
use crate::db::state::table_path;
use crate::options::{Granularity, Options};
use crate::table::builder::TableBuilder;
use crate::types::{EntryKind, SortedIter, TableMeta};
use lidb_storage::Storage;
use lidb_storage::cache::PageCache;
use lidb_storage::error::Result;

/// The level repair writes to.
pub(crate) const BOTTOM: usize = MAX_LEVELS - 1;

/// For each key, the source entry with the highest sequence number (sources yield one entry per
/// key, in key order). `O(sources)` per key: repair merges a handful of sources once.
struct SeqMerge {
    sources: Vec<Box<dyn SortedIter>>,
}

impl SeqMerge {
    /// The index of the winning source for the smallest key, if any source is valid.
    fn current(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, s) in self.sources.iter().enumerate() {
            if !s.valid() {
                continue;
            }
            best = match best.and_then(|b| self.sources.get(b).map(|x| (b, x))) {
                None => Some(i),
                Some((b, cur)) => match s.key().cmp(cur.key()) {
                    std::cmp::Ordering::Less => Some(i),
                    std::cmp::Ordering::Equal if s.seq() > cur.seq() => Some(i),
                    _ => Some(b),
                },
            };
        }
        best
    }

    /// Advances every source positioned at `key`.
    fn advance(&mut self, key: &[u8]) -> Result<()> {
        for s in &mut self.sources {
            if s.valid() && s.key() == key {
                s.next()?;
            }
        }
        Ok(())
    }
}

/// What the merge wrote.
pub(crate) struct Written {
    pub tables: Vec<TableMeta>,
    /// The level model's file number, for `Granularity::Level`.
    pub level_index: Option<u64>,
    pub deletions_dropped: u64,
}

/// Merges `sources` into tables numbered from `*next` on (advancing it), at the bottom level,
/// with its level model when the options ask for one. Every file is synced, and the directory.
pub(crate) fn write_merged(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    opts: &Options,
    mut sources: Vec<Box<dyn SortedIter>>,
    (max_key, max_value): (u32, u32),
    next: &mut u64,
) -> Result<Written> {
    for s in &mut sources {
        s.seek_to_first()?;
    }
    let mut merge = SeqMerge { sources };
    let whole_level = opts.granularity == Granularity::Level;
    let mut level_keys: Vec<Vec<u8>> = Vec::new();
    let mut out = Written {
        tables: Vec::new(),
        level_index: None,
        deletions_dropped: 0,
    };
    let mut builder: Option<TableBuilder> = None;
    while let Some(i) = merge.current() {
        let Some(s) = merge.sources.get(i) else { break };
        let key = s.key().to_vec();
        if s.kind() == EntryKind::Delete {
            out.deletions_dropped += 1;
        } else {
            let b = match builder.as_mut() {
                Some(b) => b,
                None => {
                    let number = *next;
                    *next += 1;
                    let b = TableBuilder::new(
                        &**storage,
                        &table_path(dir, number),
                        number,
                        max_key,
                        max_value,
                        table_options_for(opts, BOTTOM),
                    )?;
                    builder.insert(b)
                }
            };
            b.add(&key, s.seq(), s.kind(), s.value())?;
            if whole_level {
                level_keys.push(key.clone());
            }
            if b.estimated_file_size() >= opts.sst_size_bytes
                && let Some(b) = builder.take()
            {
                out.tables.push(b.finish()?.meta);
            }
        }
        merge.advance(&key)?;
    }
    if let Some(b) = builder.take() {
        out.tables.push(b.finish()?.meta);
    }
    if whole_level && !out.tables.is_empty() {
        let cache = Arc::new(PageCache::with_mode(
            opts.block_cache_bytes,
            opts.cache_mode,
        ));
        let mut handles = Vec::new();
        for m in &out.tables {
            let h = open_handle_in(storage, dir, read_mode_for(opts), &cache, m.clone())?;
            handles.push(h);
        }
        let number = *next;
        *next += 1;
        let li = LevelIndex::build(number, &level_keys, &handles, &opts.index, BOTTOM)?;
        li.write(&**storage, dir)?;
        out.level_index = Some(number);
    }
    storage.sync_dir(dir)?;
    Ok(out)
}
