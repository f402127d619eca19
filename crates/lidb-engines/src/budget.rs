//! One memory budget shared by an engine's resident read structures and its read cache, so
//! engines are compared at equal total memory (`--memory` of `lidb bench ycsb` and
//! `lidb bench lsm`).
//!
//! The rules, one per kind of engine:
//! 1. RocksDB keeps its index and filter blocks in the block cache
//!    (`cache_index_and_filter_blocks`, L0's pinned there, the setting RocksDB documents for a
//!    bounded memory) and gets the whole budget as its block cache, at open.
//! 2. lidb's engines keep indexes, filters, tier models and in-memory Blooms resident. After a
//!    load they measure those ([`MemorySplit::resident_bytes`]) and give the rest of the budget
//!    to the cache ([`plan`]): the LSM engines' block cache, learnedstore's and btree's buffer
//!    pool (opened at the whole budget, shrunk after the load; its learned table and model are
//!    the resident part). If the resident part alone exceeds the budget, the cache gets
//!    nothing and the excess is reported ([`CachePlan::over_bytes`]), never hidden.
//! 3. Memtables are outside the budget and stated separately (every engine gets the same
//!    `--memtable`).
//!
//! Pure arithmetic; callers from any thread.

use crate::MemorySplit;
use lidb_storage::size::human_size;

/// What an engine's cache gets out of a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePlan {
    pub budget_bytes: u64,
    /// Index, filter, tier-model and Bloom bytes the engine keeps in memory outside its cache.
    pub resident_bytes: u64,
    /// The cache's capacity: the budget less the resident bytes, 0 when they exceed it.
    pub cache_bytes: u64,
    /// How far the resident bytes exceed the budget (0 when within it).
    pub over_bytes: u64,
}

/// The cache's share of `budget_bytes` once `resident_bytes` are held outside it.
pub fn plan(budget_bytes: u64, resident_bytes: u64) -> CachePlan {
    CachePlan {
        budget_bytes,
        resident_bytes,
        cache_bytes: budget_bytes.saturating_sub(resident_bytes),
        over_bytes: resident_bytes.saturating_sub(budget_bytes),
    }
}

impl CachePlan {
    /// Whether the resident bytes and the cache fit the budget.
    pub fn fits(&self) -> bool {
        self.over_bytes == 0
    }

    /// "index+filter 1.2MiB, cache 14.8MiB of 16.0MiB", or the excess when over budget.
    pub fn describe(&self) -> String {
        if self.fits() {
            format!(
                "resident index+filter {}, cache {} of budget {}",
                human_size(self.resident_bytes),
                human_size(self.cache_bytes),
                human_size(self.budget_bytes)
            )
        } else {
            format!(
                "OVER BUDGET: resident index+filter {} exceed budget {} by {} (cache 0)",
                human_size(self.resident_bytes),
                human_size(self.budget_bytes),
                human_size(self.over_bytes)
            )
        }
    }
}

/// How an engine took a budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetFit {
    /// The cache was resized to the plan's share (lidb's LSM engines).
    Resized(CachePlan),
    /// The budget was applied at open as the engine's own bounded cache (RocksDB: block cache =
    /// budget, index and filter blocks inside it).
    AtOpen { budget_bytes: u64 },
    /// The engine cannot take a budget; why.
    NotApplied(String),
}

impl BudgetFit {
    /// One cell for a table or JSON row: "fits", "over", "at-open" or "not-applied".
    pub fn status(&self) -> &'static str {
        match self {
            BudgetFit::Resized(p) if p.fits() => "fits",
            BudgetFit::Resized(_) => "over",
            BudgetFit::AtOpen { .. } => "at-open",
            BudgetFit::NotApplied(_) => "not-applied",
        }
    }

    /// A line for the run's notes.
    pub fn describe(&self) -> String {
        match self {
            BudgetFit::Resized(p) => p.describe(),
            BudgetFit::AtOpen { budget_bytes } => format!(
                "block cache = budget {} at open, index and filter blocks cached in it",
                human_size(*budget_bytes)
            ),
            BudgetFit::NotApplied(why) => format!("budget not applied: {why}"),
        }
    }
}

impl MemorySplit {
    /// What stays in memory outside the cache and the memtables: indexes (and tier models) and
    /// filters (and in-memory Blooms). The part a budget charges before the cache.
    pub fn resident_bytes(&self) -> u64 {
        self.index_bytes + self.filter_bytes
    }

    /// What a budget covers: resident bytes and the cache (memtables are stated separately).
    pub fn budgeted_bytes(&self) -> u64 {
        self.resident_bytes() + self.cache_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_cache_gets_what_the_resident_part_leaves() {
        let p = plan(16 * MIB, 3 * MIB);
        assert_eq!(p.cache_bytes, 13 * MIB);
        assert_eq!(p.over_bytes, 0);
        assert!(p.fits());
        assert_eq!(p.resident_bytes + p.cache_bytes, p.budget_bytes);
        assert!(p.describe().contains("cache 13.0MiB of budget 16.0MiB"));
    }

    #[test]
    fn exactly_at_the_budget_leaves_no_cache_but_fits() {
        let p = plan(16 * MIB, 16 * MIB);
        assert_eq!((p.cache_bytes, p.over_bytes), (0, 0));
        assert!(p.fits());
    }

    #[test]
    fn over_budget_is_reported_with_its_excess_and_no_cache() {
        let p = plan(16 * MIB, 20 * MIB);
        assert_eq!(p.cache_bytes, 0);
        assert_eq!(p.over_bytes, 4 * MIB);
        assert!(!p.fits());
        assert_eq!(BudgetFit::Resized(p).status(), "over");
        assert!(p.describe().starts_with("OVER BUDGET"));
        assert!(p.describe().contains("by 4.0MiB"));
    }

    #[test]
    fn resident_bytes_charge_index_and_filters_not_memtables() {
        let m = MemorySplit {
            index_bytes: 100,
            filter_bytes: 20,
            cache_bytes: 1000,
            memtable_bytes: 5000,
            data_bytes: 0,
        };
        assert_eq!(m.resident_bytes(), 120);
        assert_eq!(m.budgeted_bytes(), 1120);
    }
}
