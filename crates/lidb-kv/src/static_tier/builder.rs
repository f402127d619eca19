//! Writes one generation of the static tier. One thread; `finish` consumes the builder.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use lidb_lsm::keys::KeyMapBuilder;
use lidb_lsm::storage::{Storage, WritableFile};

use super::format::{
    KeyListHeader, Layout, MAX_TIER_KEY_BYTES, ModelFile, PAGE_BYTES, encode_entry, seal_page,
};
use super::{TierMeta, TierOptions, keys_path, model_path, svlog_path};
use crate::vlog::{VlogKind, VlogWriter};
use crate::{Error, Pointer, Result};

/// Pages written to the key list per append.
const WRITE_BATCH_PAGES: usize = 64;

/// Builds `{g:06}.svlog`, `{g:06}.keys` and `{g:06}.model` from keys in strictly increasing
/// order. Values go to the svlog at once; (key, pointer) pairs stay in memory until `finish`.
#[derive(Debug)]
pub struct StaticTierBuilder {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    generation: u64,
    opts: TierOptions,
    svlog: VlogWriter,
    /// Every key, concatenated; key `i` ends at `key_ends[i]`.
    key_bytes: Vec<u8>,
    key_ends: Vec<u64>,
    pointers: Vec<(u64, u32)>,
    max_key_len: u32,
    keymap: KeyMapBuilder,
}

impl StaticTierBuilder {
    /// Creates the svlog of `generation` in `dir` (replacing leftovers of a failed build).
    pub fn new(
        storage: Arc<dyn Storage>,
        dir: &Path,
        generation: u64,
        opts: TierOptions,
    ) -> Result<StaticTierBuilder> {
        let mut params = opts.params.clone();
        params.boundary = opts.page_boundary;
        params
            .validate()
            .map_err(|e| Error::InvalidOption(format!("static tier page_boundary/params: {e}")))?;
        let opts = TierOptions { params, ..opts };
        let svlog = VlogWriter::create_at(
            storage.as_ref(),
            &svlog_path(dir, generation),
            VlogKind::Static,
            generation,
        )?;
        Ok(StaticTierBuilder {
            storage,
            dir: dir.to_path_buf(),
            generation,
            opts,
            svlog,
            key_bytes: Vec::new(),
            key_ends: Vec::new(),
            pointers: Vec::new(),
            max_key_len: 0,
            keymap: KeyMapBuilder::new(),
        })
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = i
            .checked_sub(1)
            .and_then(|j| self.key_ends.get(j))
            .copied()
            .unwrap_or(0);
        let end = self.key_ends.get(i).copied().unwrap_or(start);
        self.key_bytes
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.key_ends.len() as u64
    }

    /// Appends `key`'s record to the svlog. Keys must strictly increase and be at most 4078
    /// bytes (`InvalidOption` otherwise).
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() as u64 > MAX_TIER_KEY_BYTES {
            return Err(Error::InvalidOption(format!(
                "key of {} bytes is longer than a static tier allows ({MAX_TIER_KEY_BYTES})",
                key.len()
            )));
        }
        if let Some(n) = self.key_ends.len().checked_sub(1)
            && self.key(n) >= key
        {
            return Err(Error::InvalidOption(
                "static tier keys must be added in strictly increasing order".into(),
            ));
        }
        let p = self.svlog.append(key, value)?;
        self.key_bytes.extend_from_slice(key);
        self.key_ends.push(self.key_bytes.len() as u64);
        self.pointers.push((p.offset, p.len));
        self.max_key_len = self.max_key_len.max(key.len() as u32);
        self.keymap.observe(key);
        Ok(())
    }

    /// Writes the key list and the model, syncs the three files and the directory.
    pub fn finish(mut self) -> Result<TierMeta> {
        let n = self.key_ends.len();
        let layout = Layout::new(self.max_key_len).ok_or_else(|| {
            Error::InvalidOption(format!("key width {} too large", self.max_key_len))
        })?;
        let pages = layout.pages_for(n as u64);
        let per_page = layout.entries_per_page as usize;
        let header = KeyListHeader {
            generation: self.generation,
            entries: n as u64,
            pages,
            layout,
            svlog_bytes: self.svlog.len(),
        };
        let keys_file = keys_path(&self.dir, self.generation);
        let mut kf = self.storage.create(&keys_file)?;
        kf.append(&header.encode())?;
        self.write_pages(kf.as_mut(), &layout, pages)?;

        let started = Instant::now();
        let mut model = ModelFile {
            generation: self.generation,
            entries: n as u64,
            pages,
            key_width: layout.key_width,
            family_tag: 0,
            page_boundary: 0,
            max_image_run: 0,
            keymap: self.keymap.finish(b""),
            train_nanos: 0,
            smallest: Vec::new(),
            largest: Vec::new(),
            index: Vec::new(),
        };
        if let Some(last) = n.checked_sub(1) {
            let map = self.keymap.finish(self.key(last));
            let images: Vec<u64> = (0..pages as usize)
                .map(|p| map.image(self.key(((p + 1) * per_page).min(n) - 1)))
                .collect();
            let index = lidb_index::build(self.opts.family, &images, &self.opts.params)?;
            model.family_tag = self.opts.family.tag();
            model.page_boundary = self.opts.page_boundary;
            model.max_image_run = longest_run(&images);
            model.keymap = map;
            model.smallest = self.key(0).to_vec();
            model.largest = self.key(last).to_vec();
            model.index = index.encode();
        }
        let train_time = started.elapsed();
        model.train_nanos = train_time.as_nanos() as u64;
        let model_bytes = model.encode();
        let mut mf = self
            .storage
            .create(&model_path(&self.dir, self.generation))?;
        mf.append(&model_bytes)?;
        mf.sync()?;
        kf.sync()?;
        self.svlog.sync()?;
        self.storage.sync_dir(&self.dir)?;
        Ok(TierMeta {
            generation: self.generation,
            entries: n as u64,
            svlog_bytes: self.svlog.len(),
            keylist_bytes: header.file_bytes(),
            model_bytes: model_bytes.len() as u64,
            train_time,
        })
    }

    /// Appends the data pages, `WRITE_BATCH_PAGES` per append.
    fn write_pages(&self, kf: &mut dyn WritableFile, layout: &Layout, pages: u64) -> Result<()> {
        let n = self.key_ends.len();
        let per_page = layout.entries_per_page as usize;
        let width = layout.entry_width as usize;
        let mut batch: Vec<u8> = Vec::with_capacity(WRITE_BATCH_PAGES * PAGE_BYTES as usize);
        for p in 0..pages as usize {
            let mut page = vec![0u8; PAGE_BYTES as usize];
            for (slot, i) in (p * per_page..((p + 1) * per_page).min(n)).enumerate() {
                let (offset, len) = self.pointers.get(i).copied().unwrap_or_default();
                let ptr = Pointer {
                    file: self.generation,
                    offset,
                    len,
                };
                if let Some(out) = page.get_mut(slot * width..) {
                    encode_entry(out, layout, self.key(i), ptr);
                }
            }
            seal_page(&mut page, p as u64);
            batch.extend_from_slice(&page);
            if batch.len() >= WRITE_BATCH_PAGES * PAGE_BYTES as usize {
                kf.append(&batch)?;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            kf.append(&batch)?;
        }
        Ok(())
    }
}

/// Length of the longest run of equal values in sorted `v` (0 when empty).
fn longest_run(v: &[u64]) -> u64 {
    let (mut best, mut run) = (0u64, 0u64);
    let mut prev = None;
    for &x in v {
        run = if prev == Some(x) { run + 1 } else { 1 };
        best = best.max(run);
        prev = Some(x);
    }
    best
}
