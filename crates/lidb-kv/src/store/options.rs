//! Options of the tiered store.

use lidb_index::{Family, Params};

/// What settled data is served by after GC.
#[derive(Debug, Clone, PartialEq)]
pub enum TierKind {
    /// LearnedKV: a learned index over a key list and a sorted static value log.
    Learned {
        family: Family,
        page_boundary: u64,
        params: Params,
    },
    /// `lsm+tier`: GC rewrites the valid values to a sorted value log and builds a fresh LSM of
    /// their pointers, which serves as the tier (LearnedKV's tiering with an LSM in place of the
    /// learned index: the ablation that isolates the index itself).
    Lsm,
    /// `lsm+` (the paper's RocksDB+): one LSM holds every pointer; GC rewrites the valid values
    /// to a new value log and writes their pointers back into the LSM (unless a newer write or
    /// deletion of the key is there). No tier: the ablation that isolates LearnedKV's design.
    WriteBack,
}

/// Options of [`crate::store::Store::open`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoreOptions {
    /// Options of the LSMs that map keys to value pointers.
    pub lsm: lidb_lsm::Options,
    pub tier: TierKind,
    /// GC runs when the value logs exceed live data x (1 + this).
    pub over_provisioning: f64,
    /// Start GC from a background thread when the value logs outgrow the live data.
    pub auto_gc: bool,
    /// Bits per key of the in-memory Bloom filter over the LSM's keys, which lets reads of
    /// settled keys skip the LSM (0 turns it off).
    pub lsm_bloom_bits_per_key: u32,
    /// Make each write durable (value log and LSM synced) before it is acknowledged.
    pub sync: bool,
    /// O_DIRECT reads of value logs, key lists and tables.
    pub direct_io: bool,
    /// Convert (range-query-assisted, no values moved) when the active LSM's tables reach this
    /// many bytes; checked by the background thread (`auto_gc`). 0 = off. Learned tier only.
    pub convert_at_lsm_bytes: u64,
    /// Convert when the active LSM has this many non-empty levels. 0 = off. Learned tier only.
    pub convert_at_lsm_levels: usize,
    /// Start a GC (which writes every live value in key order) once scans have wasted this many
    /// times its cost in reads of values scattered through the active value log (`scan_gc`);
    /// checked by the background thread (`auto_gc`). 0 = off.
    pub scan_gc_ratio: f64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            // Pointers are small: cached pages hold far more of them than cached entries would.
            lsm: lidb_lsm::Options {
                cache_mode: lidb_lsm::CacheMode::Pages,
                ..lidb_lsm::Options::default()
            },
            tier: TierKind::Learned {
                family: Family::Plr,
                page_boundary: 2,
                params: Params::new(2),
            },
            over_provisioning: 0.3,
            auto_gc: true,
            lsm_bloom_bits_per_key: 10,
            sync: false,
            direct_io: false,
            // Off: GC already converts whenever the logs outgrow the live data, and a conversion
            // reclaims nothing while it makes scans read values one by one; the paper uses it for
            // over-provisioned or rarely-updated stores, whose threshold depends on the workload.
            convert_at_lsm_bytes: 0,
            convert_at_lsm_levels: 0,
            // The ski-rental point: scans never waste more than a GC would have cost.
            scan_gc_ratio: 1.0,
        }
    }
}

impl StoreOptions {
    pub fn validate(&self) -> lidb_storage::Result<()> {
        self.lsm.validate()?;
        if !(self.over_provisioning > 0.0 && self.over_provisioning <= 10.0) {
            return Err(lidb_storage::Error::InvalidOption(format!(
                "over-provisioning {} is not in (0, 10]",
                self.over_provisioning
            )));
        }
        if !(self.scan_gc_ratio >= 0.0 && self.scan_gc_ratio <= 1000.0) {
            return Err(lidb_storage::Error::InvalidOption(format!(
                "scan GC ratio {} is not in [0, 1000]",
                self.scan_gc_ratio
            )));
        }
        let converts = self.convert_at_lsm_bytes > 0 || self.convert_at_lsm_levels > 0;
        if converts && !matches!(self.tier, TierKind::Learned { .. }) {
            return Err(lidb_storage::Error::InvalidOption(
                "conversion thresholds need the learned tier (lsm+ and lsm+tier have no conversion)".into(),
            ));
        }
        if let TierKind::Learned {
            page_boundary,
            params,
            ..
        } = &self.tier
        {
            if *page_boundary < 2 {
                return Err(lidb_storage::Error::InvalidOption(format!(
                    "page boundary {page_boundary} is below 2"
                )));
            }
            params.validate()?;
        }
        Ok(())
    }
}
