//! The learned tier of LearnedKV (the LearnedKV paper, sections 4.1 to 4.4): for generation `g`, a
//! static value log `{g:06}.svlog` (records in key order), a key list `{g:06}.keys` (sorted
//! fixed-width entries in 4 KiB pages) and a model `{g:06}.model` (key map plus a lidb-index index
//! over the key list's pages). Byte layouts: docs/format/static-tier.md.
//!
//! - [`StaticTierBuilder`] writes a generation from keys in strictly increasing order, streaming
//!   the values to the svlog and keeping only (key, pointer) pairs in memory, as the paper does;
//!   one thread.
//! - [`StaticTier`] answers point lookups and range scans (sequential reads of both files) from
//!   any thread; it is immutable once open. A GC-built generation's get is ONE read of a window
//!   of svlog pages found by the svlog page model (`page_model`, `one_read`), unless its page
//!   cache holds the whole key list (then the cached key list and one read of the record); a
//!   converted generation or a version-2 model reads a key-list window, then the record.
//!
//! Greedy-PLR+: the paper bounds the model error in PAGES of the key list. Any family is trained
//! over one point per page (the image of the page's last key, position = page number) with
//! position boundary `page_boundary` pages; `Family::Plr` is Bourbon's greedy PLR.
//!
//! - [`StaticTierBuilder::referencing`] writes a converted generation (the LearnedKV paper, section
//!   4.5.1): entries point at existing records in `.vlog` or older `.svlog` files named by the
//!   key list's file table, and no svlog is written.
//!
//! Invariants: keys strictly increase over the key list; every entry points inside a file of the
//! file table, whose files are frozen; in a GC-built (packed) generation entry `i` points to the
//! `i`-th record of its own svlog; the key list and model agree on generation, entries, pages and
//! key width, and every file of the table has its recorded size (checked at open).

mod builder;
pub mod format;
mod iter;
mod one_read;
pub mod page_model;
mod reader;

use std::path::{Path, PathBuf};
use std::time::Duration;

use lidb_index::{Family, Params};

pub use builder::StaticTierBuilder;
pub use iter::{TierEntry, TierIter};
pub use reader::{StaticTier, TierReadStats};

/// The default window of the page model: 4 pages (error 1 page), see `TierOptions::default`.
pub const DEFAULT_PAGE_BOUNDARY: u64 = 4;

/// How a generation's model is built.
#[derive(Debug, Clone, PartialEq)]
pub struct TierOptions {
    /// The lidb-index family trained over the key list's pages.
    pub family: Family,
    /// Position boundary of the model, in key-list pages: a lookup reads at most this many
    /// pages plus one (more only where page images tie). At least 2.
    pub page_boundary: u64,
    /// Family-specific parameters; `boundary` is replaced by `page_boundary`.
    pub params: Params,
}

impl Default for TierOptions {
    /// `plr` (Greedy-PLR+) with a 4-page window (error 1 page): a lookup reads at most 5 pages
    /// (20 KiB) in one I/O. Measured on 1M tweet ids (tests/tier_measure.rs): at B = 2 (error 0)
    /// the plr model is 43 KB, twice fence pointers over the same pages (21.6 KB), for 12 KiB
    /// reads; at B = 4 it is 3.2 KB (13x smaller) for 20 KiB reads, which on an SSD cost about one
    /// 4 KiB read more. B = 16 saves only 1.6 KB more and reads 68 KiB.
    fn default() -> TierOptions {
        TierOptions {
            family: Family::Plr,
            page_boundary: DEFAULT_PAGE_BOUNDARY,
            params: Params::new(DEFAULT_PAGE_BOUNDARY),
        }
    }
}

/// What a finished (or opened) generation holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierMeta {
    pub generation: u64,
    pub entries: u64,
    pub svlog_bytes: u64,
    pub keylist_bytes: u64,
    pub model_bytes: u64,
    /// Time spent choosing the key map and training the model.
    pub train_time: Duration,
}

/// `dir/{g:06}.svlog`.
pub fn svlog_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:06}.svlog"))
}

/// `dir/{g:06}.keys`.
pub fn keys_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:06}.keys"))
}

/// `dir/{g:06}.model`.
pub fn model_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:06}.model"))
}
