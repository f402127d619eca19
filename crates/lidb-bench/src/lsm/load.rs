//! Loading a database for an LSM experiment: the key sample, how u64 keys become byte keys, the
//! values, the engine options (with small runs scaled down), and the load itself.
//!
//! Called from the experiment runners of `lsm/` on one thread. Invariants:
//! 1. `value_of(key)` depends on the key alone, so every lookup can check the value it got.
//! 2. A load directory carries a marker naming what was loaded; it is reused only if the marker
//!    matches exactly, and only directories holding a marker (or empty) are ever wiped.
//! 3. The load inserts in a seeded random order (as YCSB loads do) in batches of
//!    [`BATCH_ENTRIES`] with compactions run inline (no background thread): each full memtable
//!    is flushed and the picker's compactions run to completion before the next write. The
//!    tree's shape is therefore a function of the data and options, and every index pays for the
//!    same compactions. A last `flush()` empties the memtable (L0 may then hold up to the
//!    compaction trigger's number of tables, as after any leveled load). `Db::compact()` is not
//!    used: it merges everything into the last level, which would leave a one-level tree.

use std::path::{Path, PathBuf};
use std::time::Instant;

use lidb_lsm::batch::WriteBatch;
use lidb_lsm::{CacheMode, Db, Granularity, IndexOptions, Options};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::Error;
use crate::progress;

/// Entries per write batch during a load.
pub const BATCH_ENTRIES: usize = 100;
/// The file in a load directory naming what was loaded there.
const MARKER: &str = "lidb-bench.load";
const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

pub use lidb_storage::size::parse_size;

pub use lidb_engines::{format_size, human_size};

/// Whether every key up to `max_key` can be rendered in `key_size` bytes.
pub fn check_key_size(key_size: u32, max_key: u64) -> Result<(), String> {
    if key_size < 8 {
        return Err(format!("key size {key_size} is below 8 bytes"));
    }
    if key_size > 8 && key_size < 20 && u128::from(max_key) >= 10u128.pow(key_size) {
        return Err(format!(
            "key {max_key} has more than {key_size} decimal digits; use --key-size 8 or at least 20"
        ));
    }
    if u64::from(key_size) > lidb_lsm::batch::MAX_KEY_BYTES {
        return Err(format!("key size {key_size} is above the engine's limit"));
    }
    Ok(())
}

/// Renders `key` as `key_size` bytes into `out` (cleared first): big-endian for 8 bytes,
/// zero-padded decimal for longer keys (the papers' 24-byte keys). Both keep the order of u64s.
/// `key_size` must have passed [`check_key_size`].
pub fn render_key(key: u64, key_size: u32, out: &mut Vec<u8>) {
    out.clear();
    if key_size == 8 {
        out.extend_from_slice(&key.to_be_bytes());
    } else {
        let digits = key.to_string();
        let pad = (key_size as usize).saturating_sub(digits.len());
        out.resize(pad, b'0');
        out.extend_from_slice(digits.as_bytes());
    }
}

/// Bytes per key of a run (`--key-size`): one size, or a range `min..max` (inclusive) in which
/// each key gets a length of its own (the LSM study's variable-length keys, section 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySize {
    pub min: u32,
    pub max: u32,
}

impl KeySize {
    /// One size for every key.
    pub fn fixed(size: u32) -> KeySize {
        KeySize {
            min: size,
            max: size,
        }
    }

    /// `24` or `8..24` (both ends included, 8 <= min < max).
    pub fn parse(text: &str) -> Result<KeySize, String> {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("\"{s}\" is not a whole number"))
        };
        match text.split_once("..") {
            None => Ok(KeySize::fixed(num(text)?)),
            Some((a, b)) => {
                let (min, max) = (num(a)?, num(b)?);
                if min < 8 || min >= max {
                    return Err(format!("range {min}..{max} needs 8 <= min < max"));
                }
                Ok(KeySize { min, max })
            }
        }
    }

    /// Whether every key up to `max_key` can be rendered (see [`check_key_size`]).
    pub fn check(&self, max_key: u64) -> Result<(), String> {
        if self.min == self.max {
            return check_key_size(self.min, max_key);
        }
        check_key_size(8, max_key)?;
        check_key_size(self.max, u64::MAX)
    }

    /// Mean bytes per key.
    pub fn mean(&self) -> u32 {
        self.min + (self.max - self.min) / 2
    }

    /// The length of `key`'s rendering: `min` for a fixed size; in a range, drawn uniformly by a
    /// hash of the key, so every lookup renders the key the load wrote.
    pub fn len_of(&self, key: u64) -> u32 {
        let span = u64::from(self.max - self.min) + 1;
        self.min + (mix(key) % span) as u32
    }

    /// Renders `key` into `out` (cleared first). A fixed size renders as [`render_key`]; in a
    /// range, the key's 8 big-endian bytes (which keep the order of u64s) are followed by filler
    /// bytes derived from the key up to [`KeySize::len_of`].
    pub fn render(&self, key: u64, out: &mut Vec<u8>) {
        if self.min == self.max {
            return render_key(key, self.min, out);
        }
        out.clear();
        out.extend_from_slice(&key.to_be_bytes());
        let len = self.len_of(key) as usize;
        let mut state = key ^ 0x6b65_7973;
        while out.len() < len {
            state = mix(state);
            let take = (len - out.len()).min(8);
            out.extend(state.to_le_bytes().iter().take(take));
        }
    }

    /// The inverse of [`KeySize::render`]; None for bytes it could not have produced.
    pub fn parse_key(&self, bytes: &[u8]) -> Option<u64> {
        if self.min == self.max {
            return parse_key(bytes, self.min);
        }
        let key = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let mut again = Vec::new();
        self.render(key, &mut again);
        (again == bytes).then_some(key)
    }
}

impl std::fmt::Display for KeySize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}..{}", self.min, self.max)
        }
    }
}

/// splitmix64's finaliser.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The inverse of [`render_key`]; None for bytes it could not have produced.
pub fn parse_key(bytes: &[u8], key_size: u32) -> Option<u64> {
    if bytes.len() != key_size as usize {
        return None;
    }
    if key_size == 8 {
        return Some(u64::from_be_bytes(bytes.try_into().ok()?));
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// The value stored under `key`: `value_size` bytes of a splitmix64 stream seeded by the key,
/// into `out` (cleared first).
pub fn value_of(key: u64, value_size: u32, out: &mut Vec<u8>) {
    out.clear();
    let mut state = key;
    while out.len() < value_size as usize {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let take = (value_size as usize - out.len()).min(8);
        out.extend(z.to_le_bytes().iter().take(take));
    }
}

/// The keys of a run: `all` deduplicated, then (if `sample` is below their count) a seeded
/// uniform sample without replacement; sorted.
pub fn sample_keys(mut all: Vec<u64>, sample: Option<usize>, seed: u64) -> Vec<u64> {
    all.sort_unstable();
    all.dedup();
    let Some(n) = sample.filter(|&n| n < all.len()) else {
        return all;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x005A_4D50_4C45_u64);
    let mut picked: Vec<u64> = rand::seq::index::sample(&mut rng, all.len(), n)
        .into_iter()
        .filter_map(|i| all.get(i).copied())
        .collect();
    picked.sort_unstable();
    picked
}

/// The key set of a run and how it is rendered.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// What the keys came from (a path or synthetic spec), for reports and load markers.
    pub source: String,
    /// Sorted, unique.
    pub keys: Vec<u64>,
    pub key_size: KeySize,
    pub value_size: u32,
    pub seed: u64,
}

impl Dataset {
    /// Bytes of user data (keys and values).
    pub fn data_bytes(&self) -> u64 {
        self.keys.len() as u64 * u64::from(self.key_size.mean() + self.value_size)
    }
}

/// Engine options an experiment varies or the user sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Engine {
    pub sst_size_bytes: u64,
    pub write_buffer_bytes: u64,
    pub granularity: Granularity,
    pub direct_io: bool,
    /// Whether the sizes were scaled down to the data (the user set neither).
    pub scaled: bool,
    /// `--memory`: one budget for indexes + filters + cache. The database opens with all of it
    /// as its cache and is fitted before each configuration is measured ([`super::fit_budget`]).
    /// None: the fixed 8 MiB cache, indexes outside it.
    pub memory_budget_bytes: Option<u64>,
    /// What point lookups keep in the cache (`--cache-mode`): entries (the default) or pages.
    pub cache_mode: CacheMode,
}

/// The cache without `--memory`.
pub const DEFAULT_CACHE_BYTES: u64 = 8 * MIB;
/// The papers' 64 MiB tables and write buffer.
pub const PAPER_SST_BYTES: u64 = 64 * MIB;
/// Smallest table size scaling picks.
const MIN_SCALED_BYTES: u64 = 64 * KIB;
/// Scaling keeps about this many tables' worth of data, so a small run still has several levels
/// (L1's target is four write buffers, each next level ten times more).
const SCALE_TABLES: u64 = 256;

impl Engine {
    /// Options for `data_bytes` of data. Sizes the user gave are kept; if the user gave neither,
    /// both become the largest power of two at most `data_bytes / 256` (between 64 KiB and
    /// 64 MiB), so a run of a few hundred MB has three levels like the papers' 100 GiB runs.
    pub fn resolve(
        data_bytes: u64,
        sst: Option<u64>,
        write_buffer: Option<u64>,
        granularity: Granularity,
        direct_io: bool,
    ) -> Engine {
        let scaled_size = {
            let target = (data_bytes / SCALE_TABLES).clamp(MIN_SCALED_BYTES, PAPER_SST_BYTES);
            1u64 << (63 - target.leading_zeros())
        };
        let scaled = sst.is_none() && write_buffer.is_none();
        let default = if scaled { scaled_size } else { PAPER_SST_BYTES };
        Engine {
            sst_size_bytes: sst.unwrap_or(default),
            write_buffer_bytes: write_buffer.unwrap_or(default),
            granularity,
            direct_io,
            scaled,
            memory_budget_bytes: None,
            cache_mode: CacheMode::default(),
        }
    }

    /// The engine options for `index`: leveling, ratio 10, 10-bit Bloom filters, 8 MiB cache
    /// (the budget under `--memory`), compactions inline (no background thread; see the module
    /// doc).
    pub fn options(&self, index: IndexOptions) -> Options {
        Options {
            index,
            // The study's variable is the boundary itself: every table gets the B it names.
            max_window_bytes: 0,
            granularity: self.granularity,
            sst_size_bytes: self.sst_size_bytes,
            write_buffer_bytes: self.write_buffer_bytes,
            bloom_bits_per_key: 10,
            block_cache_bytes: self.memory_budget_bytes.unwrap_or(DEFAULT_CACHE_BYTES),
            cache_mode: self.cache_mode,
            direct_io: self.direct_io,
            background_compaction: false,
            ..Options::default()
        }
    }

    /// What decides the layout of a load (everything but the read mode), for load markers.
    pub fn layout(&self) -> String {
        format!(
            "sst_size={} write_buffer={} granularity={} bloom_bits=10 size_ratio=10",
            self.sst_size_bytes,
            self.write_buffer_bytes,
            granularity_name(self.granularity)
        )
    }

    pub fn describe(&self) -> String {
        format!(
            "sst_size={} write_buffer={}{} granularity={} direct_io={} bloom_bits=10 {} size_ratio=10",
            format_size(self.sst_size_bytes),
            format_size(self.write_buffer_bytes),
            if self.scaled {
                " (scaled to the data; set --sst-size for the papers' 64MiB)"
            } else {
                ""
            },
            granularity_name(self.granularity),
            self.direct_io,
            match self.memory_budget_bytes {
                Some(b) => format!(
                    "memory={} (index+filters+cache; the cache gets what the indexes leave)",
                    format_size(b)
                ),
                None => format!("cache={}", format_size(DEFAULT_CACHE_BYTES)),
            }
        )
    }
}

pub fn granularity_name(g: Granularity) -> &'static str {
    match g {
        Granularity::Table => "table",
        Granularity::Level => "level",
    }
}

/// A loaded (or reused) database and what loading it cost.
#[derive(Debug)]
pub struct Loaded {
    pub db: Db,
    /// Seconds the load took (inserts plus settling); 0 when reused.
    pub load_s: f64,
    pub reused: bool,
}

/// Opens the database in `dir` if its marker says it holds exactly `what`; otherwise wipes `dir`
/// (only if it is empty or holds a marker) and loads `data` into it with `opts`.
pub fn open_or_load(
    dir: &Path,
    data: &Dataset,
    opts: Options,
    what: &str,
    progress: bool,
) -> Result<Loaded, Error> {
    let marker = dir.join(MARKER);
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(what) {
        let db = Db::open(dir, opts)?;
        return Ok(Loaded {
            db,
            load_s: 0.0,
            reused: true,
        });
    }
    wipe(dir)?;
    let started = Instant::now();
    let db = load(dir, data, opts, progress)?;
    let load_s = started.elapsed().as_secs_f64();
    std::fs::write(&marker, what).map_err(io_err(&marker))?;
    Ok(Loaded {
        db,
        load_s,
        reused: false,
    })
}

/// Loads `data` into a new database in `dir` (which must not hold one): seeded random order,
/// batches of [`BATCH_ENTRIES`], compactions inline, then a flush (see the module doc).
pub fn load(dir: &Path, data: &Dataset, opts: Options, progress: bool) -> Result<Db, Error> {
    let db = Db::open(
        dir,
        Options {
            background_compaction: false,
            ..opts
        },
    )?;
    let mut order = data.keys.clone();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(data.seed ^ 0x004C_4F41_4400));
    let bar = progress.then(|| progress::bar(order.len() as u64, "load"));
    let (mut k, mut v) = (Vec::new(), Vec::new());
    for chunk in order.chunks(BATCH_ENTRIES) {
        let mut batch = WriteBatch::new();
        for &key in chunk {
            data.key_size.render(key, &mut k);
            value_of(key, data.value_size, &mut v);
            batch.put(&k, &v);
        }
        db.write(batch)?;
        if let Some(bar) = &bar {
            bar.inc(chunk.len() as u64);
        }
    }
    if let Some(bar) = &bar {
        bar.set_message("flush");
    }
    db.flush()?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(db)
}

/// Removes `dir` if it is a load directory of ours (it holds the marker) or is empty; errors if
/// it holds anything else.
pub fn wipe(dir: &Path) -> Result<(), Error> {
    let Ok(mut entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    if dir.join(MARKER).exists() || entries.next().is_none() {
        return std::fs::remove_dir_all(dir).map_err(io_err(dir));
    }
    Err(Error::Invalid(format!(
        "{} holds files that are not a lidb bench load; choose a new or empty --db directory",
        dir.display()
    )))
}

/// Copies the files of the closed database in `from` to a new directory `to` (wiped first).
pub fn copy_db(from: &Path, to: &Path) -> Result<(), Error> {
    wipe(to)?;
    std::fs::create_dir_all(to).map_err(io_err(to))?;
    for entry in std::fs::read_dir(from).map_err(io_err(from))? {
        let entry = entry.map_err(io_err(from))?;
        let name = entry.file_name();
        if name == "LOCK" || !entry.path().is_file() {
            continue;
        }
        let dst = to.join(&name);
        std::fs::copy(entry.path(), &dst).map_err(io_err(&dst))?;
    }
    Ok(())
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + use<> {
    let path: PathBuf = path.to_path_buf();
    move |source| Error::Io { path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(key: u64, size: u32) -> Vec<u8> {
        let mut out = Vec::new();
        render_key(key, size, &mut out);
        out
    }

    #[test]
    fn keys_render_big_endian_or_zero_padded_and_keep_order() {
        assert_eq!(rendered(0x0102, 8), vec![0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(rendered(42, 24), b"000000000000000000000042".to_vec());
        assert_eq!(rendered(u64::MAX, 20), u64::MAX.to_string().into_bytes());
        let keys = [0u64, 1, 9, 10, 255, 256, 1 << 40, u64::MAX - 1, u64::MAX];
        for size in [8, 20, 24] {
            for pair in keys.windows(2) {
                if let [a, b] = pair {
                    assert!(rendered(*a, size) < rendered(*b, size), "{a} {b} at {size}");
                    assert_eq!(parse_key(&rendered(*a, size), size), Some(*a));
                }
            }
        }
    }

    #[test]
    fn key_size_ranges_render_every_length_in_order_and_parse_back() {
        assert_eq!(KeySize::parse("24"), Ok(KeySize::fixed(24)));
        let ks = KeySize { min: 8, max: 24 };
        assert_eq!(KeySize::parse("8..24"), Ok(ks));
        assert!(KeySize::parse("4..24").is_err() && KeySize::parse("24..8").is_err());
        let mut lens = std::collections::BTreeSet::new();
        let mut prev: Option<Vec<u8>> = None;
        for key in (0..2_000u64).map(|i| i * 0x0001_0000_0001) {
            let mut out = Vec::new();
            ks.render(key, &mut out);
            assert!((8..=24).contains(&out.len()));
            lens.insert(out.len());
            assert_eq!(ks.parse_key(&out), Some(key));
            assert!(prev.as_ref().is_none_or(|p| *p < out), "order at {key}");
            prev = Some(out);
        }
        assert_eq!(lens.len(), 17, "every length of the range occurs");
    }

    #[test]
    fn key_sizes_that_cannot_hold_the_keys_are_refused() {
        assert!(check_key_size(4, 1).is_err());
        assert!(check_key_size(8, u64::MAX).is_ok());
        assert!(check_key_size(12, 999_999_999_999).is_ok());
        assert!(check_key_size(12, 1_000_000_000_000).is_err());
        assert!(check_key_size(20, u64::MAX).is_ok());
    }

    #[test]
    fn sizes_format_in_the_largest_exact_unit() {
        assert_eq!(format_size(64 << 20), "64MiB");
        assert_eq!(format_size(1000), "1000B");
    }

    #[test]
    fn values_are_a_function_of_the_key() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        value_of(7, 1000, &mut a);
        value_of(7, 1000, &mut b);
        assert_eq!((a.len(), &a), (1000, &b));
        value_of(8, 1000, &mut b);
        assert_ne!(a, b);
        value_of(7, 3, &mut b);
        assert_eq!(b.as_slice(), a.get(..3).unwrap_or_default());
    }

    #[test]
    fn samples_are_seeded_sorted_and_unique() {
        let all: Vec<u64> = (0..1000).rev().chain(0..10).collect();
        let s = sample_keys(all.clone(), Some(100), 3);
        assert_eq!(s.len(), 100);
        assert!(s.windows(2).all(|w| w.first() < w.get(1)));
        assert_eq!(s, sample_keys(all.clone(), Some(100), 3));
        assert_eq!(sample_keys(all, None, 3).len(), 1000);
    }

    #[test]
    fn small_runs_scale_sizes_unless_the_user_set_one() {
        let e = Engine::resolve(200 << 20, None, None, Granularity::Table, false);
        assert_eq!(
            (e.sst_size_bytes, e.write_buffer_bytes, e.scaled),
            (512 << 10, 512 << 10, true)
        );
        let e = Engine::resolve(1 << 20, None, None, Granularity::Table, false);
        assert_eq!(e.sst_size_bytes, 64 << 10);
        let e = Engine::resolve(200 << 20, Some(8 << 20), None, Granularity::Table, false);
        assert_eq!(
            (e.sst_size_bytes, e.write_buffer_bytes, e.scaled),
            (8 << 20, 64 << 20, false)
        );
    }
}
