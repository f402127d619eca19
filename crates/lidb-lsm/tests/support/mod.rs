//! What the engine tests of lidb-lsm share (`mod support;` in each test file): the small engine
//! options that make flushes and compactions happen within a few thousand writes. Scratch
//! directories, seeded cases and in-memory storage helpers come from lidb-testkit.

use lidb_index::{Family, Params};
use lidb_lsm::{IndexOptions, Options};

/// Options with a 64 KiB write buffer, 16 KiB tables, compaction after two L0 tables and no
/// background compaction (so a test decides when it runs), indexed by `family` at `boundary`.
pub fn small_options(family: Family, boundary: u64) -> Options {
    Options {
        index: IndexOptions {
            family,
            params: Params::new(boundary),
            level_boundaries: vec![],
            kind: Default::default(),
        },
        sst_size_bytes: 16 * 1024,
        write_buffer_bytes: 64 * 1024,
        l0_compaction_trigger: 2,
        l0_stop_writes: 6,
        block_cache_bytes: 64 * 1024,
        background_compaction: false,
        ..Options::default()
    }
}
