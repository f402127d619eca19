// Shared by the engine test files (included, not a module of its own).

use lidb_index::{Family, Params};
use lidb_lsm::{IndexOptions, Options};

pub fn small_options(family: Family, boundary: u64) -> Options {
    Options {
        index: IndexOptions { family, params: Params::new(boundary), level_boundaries: vec![], kind: Default::default() },
        sst_size_bytes: 16 * 1024,
        write_buffer_bytes: 64 * 1024,
        l0_compaction_trigger: 2,
        l0_stop_writes: 6,
        block_cache_bytes: 64 * 1024,
        background_compaction: false,
        ..Options::default()
    }
}
