//! Writes one SSTable sequentially (docs/format/sstable.md): fixed-width slots as entries arrive,
//! then, at `finish`, the Bloom filter, the learned index (trained over the key images collected
//! while streaming; the data is never read back), the meta block and the footer, and one sync.
//!
//! Who calls it: the flush and the compaction job, each on its own thread with its own builder
//! (`TableBuilder` is `Send`, not shared). `reindex` (benchmarks) rewrites a closed table's tail.
//!
//! Invariants kept for the file: keys strictly increase; every entry fits the slot width W fixed
//! at `new`; the file is durable once `finish` returns Ok. After an I/O error the builder must be
//! dropped (the partial file is garbage and never referenced); an `InvalidOption` from `add`
//! (bad key order or length) leaves it unchanged and usable.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lidb_index::{Family, Params};

use crate::keys::{KeyMapBuilder, KeyTails};
use crate::options::{IndexKind, Unclustered};
use crate::table::filter::{BloomFilter, key_hash};
use crate::table::format::{
    FOOTER_LEN, FORMAT_VERSION, Footer, MAX_ENTRIES, MAX_SLOT_WIDTH, MetaBlock, SLOT_HEADER_LEN,
    encode_slot, frame_block,
};
use crate::table::mapped;
use crate::types::{EntryKind, TableMeta};
use lidb_storage::error::{Error, Result};
use lidb_storage::{Storage, WritableFile};

/// Bytes gathered before one append to storage.
pub const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// How a table is indexed and filtered.
#[derive(Debug, Clone, PartialEq)]
pub struct TableOptions {
    /// The learned index of the table; `None` writes no index block (level granularity, where
    /// one model covers the level).
    pub index: Option<(Family, Params)>,
    /// Bloom filter bits per key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// Clustered (`index` alone), mapped keys retained, or unclustered: the kinds other than
    /// `Clustered` write a mapped-keys block (table/mapped.rs). Unclustered kinds ignore
    /// `index` (no model of a clustered family is built).
    pub kind: IndexKind,
    /// The most bytes a lookup's window may span: the index's boundary B is halved (down to 2)
    /// until B slots fit ([`capped_boundary`]); 0 keeps B as given. See `Options::max_window_bytes`.
    pub max_window_bytes: u64,
}

/// The boundary a table of `slot_width`-byte slots is indexed with: `boundary` halved until a
/// window of that many slots spans at most `max_window_bytes`, but not below 2 (the least any
/// family takes); `boundary` itself when `max_window_bytes` is 0 or the window already fits.
pub fn capped_boundary(boundary: u64, slot_width: u64, max_window_bytes: u64) -> u64 {
    let mut b = boundary;
    if max_window_bytes == 0 {
        return b;
    }
    while b > 2 && b.saturating_mul(slot_width) > max_window_bytes {
        b = (b / 2).max(2);
    }
    b
}

impl TableOptions {
    fn validate(&self) -> Result<()> {
        if let Some((_, params)) = &self.index {
            params
                .validate()
                .map_err(|e| Error::InvalidOption(format!("table index: {e}")))?;
        }
        if self.bloom_bits_per_key > 64 {
            return Err(Error::InvalidOption(format!(
                "bloom bits per key {} is above 64",
                self.bloom_bits_per_key
            )));
        }
        Ok(())
    }
}

/// Where the time of a build went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildTimings {
    /// Appends (data, filter, meta, footer) and the sync.
    pub write: Duration,
    /// `lidb_index::build` over the key images.
    pub train: Duration,
    /// Encoding and appending the index block.
    pub index_write: Duration,
}

/// What `finish` produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltTable {
    pub meta: TableMeta,
    pub timings: BuildTimings,
    /// `size_bytes()` of the index (its encoding, without the 4-byte block trailer) plus the
    /// mapped-keys block payload, if any; 0 if neither. (The unclustered structure is built at
    /// open; `Table::index_bytes` reports its heap size.)
    pub index_bytes: u64,
    /// `size_bytes()` of the filter encoding; 0 if none.
    pub filter_bytes: u64,
}

/// Builds one table; see the module doc.
#[derive(Debug)]
pub struct TableBuilder {
    path: PathBuf,
    number: u64,
    file: Box<dyn WritableFile>,
    opts: TableOptions,
    max_key_len: u32,
    max_value_len: u32,
    slot_width: u64,
    buf: Vec<u8>,
    entries: u64,
    smallest: Vec<u8>,
    last_key: Vec<u8>,
    keymap: KeyMapBuilder,
    tails: KeyTails,
    /// Full keys, kept only for a LITS mapped-keys block.
    full_keys: Vec<Vec<u8>>,
    hashes: Vec<u64>,
    padding_bytes: u64,
    /// Payload bytes the mapped-keys block will take (0 for the clustered kind).
    keys_block_bytes: u64,
    smallest_seq: u64,
    largest_seq: u64,
    deletions: u64,
    write_time: Duration,
}

impl TableBuilder {
    /// Creates `path` for table `number` with slot width `21 + max_key_len + max_value_len`.
    pub fn new(
        storage: &dyn Storage,
        path: &Path,
        number: u64,
        max_key_len: u32,
        max_value_len: u32,
        opts: TableOptions,
    ) -> Result<TableBuilder> {
        opts.validate()?;
        let slot_width = SLOT_HEADER_LEN + u64::from(max_key_len) + u64::from(max_value_len);
        if slot_width > MAX_SLOT_WIDTH {
            return Err(Error::InvalidOption(format!(
                "slot width {slot_width} bytes (key {max_key_len} + value {max_value_len} + \
                 header) is above {MAX_SLOT_WIDTH}"
            )));
        }
        let file = storage.create(path)?;
        Ok(TableBuilder::with_file(
            file,
            path,
            number,
            max_key_len,
            max_value_len,
            opts,
        ))
    }

    /// A builder writing to `file`, whose length so far is the data already in it.
    fn with_file(
        file: Box<dyn WritableFile>,
        path: &Path,
        number: u64,
        max_key_len: u32,
        max_value_len: u32,
        opts: TableOptions,
    ) -> TableBuilder {
        let slot_width = SLOT_HEADER_LEN + u64::from(max_key_len) + u64::from(max_value_len);
        TableBuilder {
            path: path.to_path_buf(),
            number,
            file,
            opts,
            max_key_len,
            max_value_len,
            slot_width,
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES + slot_width as usize),
            entries: 0,
            smallest: Vec::new(),
            last_key: Vec::new(),
            keymap: KeyMapBuilder::new(),
            tails: KeyTails::new(),
            full_keys: Vec::new(),
            hashes: Vec::new(),
            padding_bytes: 0,
            keys_block_bytes: 0,
            smallest_seq: u64::MAX,
            largest_seq: 0,
            deletions: 0,
            write_time: Duration::ZERO,
        }
    }

    /// Appends the next entry. Keys must strictly increase and fit the declared maxima.
    pub fn add(&mut self, key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) -> Result<()> {
        self.check(key, value.len() as u64)?;
        encode_slot(
            &mut self.buf,
            self.entries,
            self.slot_width,
            key,
            seq,
            kind,
            value,
        );
        self.record(key, seq, kind, value.len() as u64);
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Refuses an entry that breaks the order or does not fit the slot.
    fn check(&self, key: &[u8], value_len: u64) -> Result<()> {
        if key.len() as u64 > u64::from(self.max_key_len) {
            return Err(Error::InvalidOption(format!(
                "{}: key of {} bytes is longer than the table's maximum {}",
                self.path.display(),
                key.len(),
                self.max_key_len
            )));
        }
        if value_len > u64::from(self.max_value_len) {
            return Err(Error::InvalidOption(format!(
                "{}: value of {value_len} bytes is longer than the table's maximum {}",
                self.path.display(),
                self.max_value_len
            )));
        }
        if self.entries > 0 && key <= self.last_key.as_slice() {
            return Err(Error::InvalidOption(format!(
                "{}: keys must strictly increase (entry {} is not above its predecessor)",
                self.path.display(),
                self.entries
            )));
        }
        if self.entries >= MAX_ENTRIES {
            return Err(Error::InvalidOption(format!(
                "{}: a table holds at most {MAX_ENTRIES} entries",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Notes an entry (already checked) for the filter, the key images and the meta block.
    fn record(&mut self, key: &[u8], seq: u64, kind: EntryKind, value_len: u64) {
        if self.entries == 0 {
            self.smallest = key.to_vec();
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.keymap.observe(key);
        self.tails.push(key);
        match self.opts.kind {
            IndexKind::Clustered => {}
            IndexKind::Unclustered(Unclustered::Lits) => {
                self.full_keys.push(key.to_vec());
                self.keys_block_bytes += 4 + key.len() as u64;
            }
            IndexKind::MappedKeys | IndexKind::Unclustered(_) => self.keys_block_bytes += 8,
        }
        if self.opts.bloom_bits_per_key > 0 {
            self.hashes.push(key_hash(key));
        }
        self.padding_bytes += self.slot_width - SLOT_HEADER_LEN - key.len() as u64 - value_len;
        self.smallest_seq = self.smallest_seq.min(seq);
        self.largest_seq = self.largest_seq.max(seq);
        if kind == EntryKind::Delete {
            self.deletions += 1;
        }
        self.entries += 1;
    }

    /// A builder that writes only a new tail after the data region `file` already holds: the
    /// entries are replayed with `replay` (same order, same sizes) and nothing of them is
    /// written again. Used by `reindex`.
    pub(crate) fn for_tail(
        file: Box<dyn WritableFile>,
        path: &Path,
        number: u64,
        max_key_len: u32,
        max_value_len: u32,
        opts: TableOptions,
    ) -> Result<TableBuilder> {
        opts.validate()?;
        Ok(TableBuilder::with_file(
            file,
            path,
            number,
            max_key_len,
            max_value_len,
            opts,
        ))
    }

    /// Replays an entry whose slot the file already holds (see `for_tail`).
    pub(crate) fn replay(
        &mut self,
        key: &[u8],
        seq: u64,
        kind: EntryKind,
        value_len: u64,
    ) -> Result<()> {
        self.check(key, value_len)?;
        self.record(key, seq, kind, value_len);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let r = self.file.append(&self.buf);
        self.write_time += t.elapsed();
        self.buf.clear();
        r
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let t = Instant::now();
        let r = self.file.append(bytes);
        self.write_time += t.elapsed();
        r
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The data region so far plus a guess of the tail (filter, mapped keys and meta; the index
    /// is small).
    pub fn estimated_file_size(&self) -> u64 {
        let filter = self.entries * u64::from(self.opts.bloom_bits_per_key) / 8;
        self.entries * self.slot_width
            + filter
            + self.keys_block_bytes
            + 2 * self.last_key.len() as u64
            + 200
            + FOOTER_LEN
    }

    pub fn slot_width(&self) -> u64 {
        self.slot_width
    }

    /// Writes the tail (filter, index, meta, footer) and syncs. A table needs at least one entry.
    pub fn finish(mut self) -> Result<BuiltTable> {
        if self.entries == 0 {
            return Err(Error::InvalidOption(format!(
                "{}: a table needs at least one entry",
                self.path.display()
            )));
        }
        self.flush()?;
        let data_len = self.file.len();
        debug_assert_eq!(data_len, self.entries * self.slot_width);
        let keymap = self.keymap.finish(&self.last_key);

        // Filter block.
        let mut filter_bytes = 0;
        let filter_block = if self.opts.bloom_bits_per_key > 0 {
            let f = BloomFilter::from_hashes(&self.hashes, self.opts.bloom_bits_per_key);
            filter_bytes = f.size_bytes();
            frame_block(&f.encode())
        } else {
            Vec::new()
        };
        self.hashes = Vec::new();

        // Images, their longest tie, and the index trained over them.
        let images = self.tails.images(&keymap);
        self.tails = KeyTails::new();
        let max_image_run = longest_run(&images);
        let mut timings = BuildTimings::default();
        let mut index_bytes = 0;
        let mut index_tag = 0u8;
        let mut index_boundary = 0u64;
        let mut index_block = Vec::new();
        let clustered = !matches!(self.opts.kind, IndexKind::Unclustered(_));
        if let Some((family, params)) = self.opts.index.as_ref().filter(|_| clustered) {
            let t = Instant::now();
            let params = Params {
                boundary: capped_boundary(
                    params.boundary,
                    self.slot_width,
                    self.opts.max_window_bytes,
                ),
                ..params.clone()
            };
            let index = lidb_index::build(*family, &images, &params)?;
            timings.train = t.elapsed();
            let t = Instant::now();
            index_block = frame_block(&index.encode());
            timings.index_write = t.elapsed();
            index_bytes = index.size_bytes();
            index_tag = family.tag();
            index_boundary = index.boundary();
        }
        let t = Instant::now();
        let keys_payload = mapped::encode(
            self.opts.kind,
            &images,
            self.full_keys.iter().map(Vec::as_slice),
        );
        drop(images);
        self.full_keys = Vec::new();
        index_bytes += keys_payload.len() as u64;
        let keys_block = if keys_payload.is_empty() {
            Vec::new()
        } else {
            frame_block(&keys_payload)
        };
        drop(keys_payload);
        timings.index_write += t.elapsed();

        self.append(&filter_block)?;
        let t = Instant::now();
        self.file.append(&index_block)?;
        self.file.append(&keys_block)?;
        timings.index_write += t.elapsed();

        let meta = MetaBlock {
            number: self.number,
            entries: self.entries,
            slot_width: self.slot_width as u32,
            max_key_len: self.max_key_len,
            max_value_len: self.max_value_len,
            padding_bytes: self.padding_bytes,
            keymap,
            index_family_tag: index_tag,
            index_boundary,
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
            max_image_run,
            smallest_seq: self.smallest_seq,
            largest_seq: self.largest_seq,
            deletions: self.deletions,
            smallest: std::mem::take(&mut self.smallest),
            largest: std::mem::take(&mut self.last_key),
            index_kind: self.opts.kind.tag(),
            keys_len: keys_block.len() as u64,
        };
        let meta_block = frame_block(&meta.encode());
        // The index region is the index block followed by the mapped-keys block.
        let index_len = (index_block.len() + keys_block.len()) as u64;
        let footer = Footer {
            version: FORMAT_VERSION,
            filter_offset: data_len,
            filter_len: filter_block.len() as u64,
            index_offset: data_len + filter_block.len() as u64,
            index_len,
            meta_offset: data_len + filter_block.len() as u64 + index_len,
            meta_len: meta_block.len() as u64,
        };
        self.append(&meta_block)?;
        self.append(&footer.encode())?;
        let t = Instant::now();
        self.file.sync()?;
        self.write_time += t.elapsed();
        timings.write = self.write_time;
        Ok(BuiltTable {
            meta: TableMeta {
                number: self.number,
                file_size: self.file.len(),
                entries: self.entries,
                smallest: meta.smallest,
                largest: meta.largest,
            },
            timings,
            index_bytes,
            filter_bytes,
        })
    }
}

/// The longest run of equal values in a sorted slice (1 for distinct values, 0 when empty).
pub fn longest_run(sorted: &[u64]) -> u64 {
    let mut best = 0u64;
    let mut run = 0u64;
    let mut prev = None;
    for &v in sorted {
        run = if prev == Some(v) { run + 1 } else { 1 };
        best = best.max(run);
        prev = Some(v);
    }
    best
}
