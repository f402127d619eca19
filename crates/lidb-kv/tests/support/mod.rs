//! What the store tests of lidb-kv share (`mod support;` in each test file): small store options
//! that make flushes, compactions and GCs happen within a few thousand writes, the learned tier
//! they use, opening a store on any storage, and (`damage`) every engine behind one enum for the
//! damage and repair tests. Scratch directories, seeded cases, snapshots, damage and power cuts
//! come from lidb-testkit.
//!
//! Each test file uses a part of this module, so the rest is dead code in its binary.
#![allow(
    dead_code,
    reason = "each test binary uses a part of the shared support module"
)]

pub mod damage;

use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_lsm::{IndexOptions, Options};

/// Store options over `tier` with lidb-lsm's small options (64 KiB write buffer, 16 KiB tables,
/// compaction after two L0 tables, no background compaction) and no automatic GC.
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

/// The learned tier of these tests: PLR over pages, boundary 4.
pub fn learned() -> TierKind {
    TierKind::Learned {
        family: Family::Plr,
        page_boundary: 4,
        params: Params::new(4),
    }
}

/// Opens the store in `/kv` of `storage`.
pub fn open_on(
    storage: impl lidb_storage::Storage + 'static,
    opts: &StoreOptions,
) -> lidb_storage::Result<Store> {
    open_shared(Arc::new(storage), opts)
}

/// Opens the store in `/kv` of a shared `storage` (the form `lidb_testkit::mem::each_power_cut`
/// hands out).
pub fn open_shared(
    storage: Arc<dyn lidb_storage::Storage>,
    opts: &StoreOptions,
) -> lidb_storage::Result<Store> {
    Store::open_with_storage(storage, Path::new("/kv"), opts.clone())
}
