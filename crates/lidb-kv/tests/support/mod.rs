// Shared by the store test files (included).

use lidb_index::{Family, Params};
use lidb_kv::{StoreOptions, TierKind};
use lidb_lsm::{IndexOptions, Options};

pub fn small(tier: TierKind) -> StoreOptions {
    StoreOptions {
        lsm: Options {
            index: IndexOptions {
                family: Family::Pgm,
                params: Params::new(16),
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
        },
        tier,
        auto_gc: false,
        ..StoreOptions::default()
    }
}

pub fn learned() -> TierKind {
    TierKind::Learned {
        family: Family::Plr,
        page_boundary: 4,
        params: Params::new(4),
    }
}
