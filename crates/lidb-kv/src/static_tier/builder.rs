//! Writes one generation of the static tier. One thread; `finish` consumes the builder.
//!
//! Two modes: [`StaticTierBuilder::new`] copies values into the generation's own svlog (GC);
//! [`StaticTierBuilder::referencing`] writes no values at all: each entry points at a record that
//! already exists in a `.vlog` or an older `.svlog` (range-query-assisted conversion, seed paper
//! 001 section 4.5.1), and the generation has no svlog file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use lidb_lsm::keys::KeyMapBuilder;
use lidb_storage::{Storage, WritableFile};

use super::format::{
    EntryRef, KeyListHeader, Layout, MAX_TIER_FILES, MAX_TIER_KEY_BYTES, ModelFile, PAGE_BYTES,
    TierFile, TierFileKind, encode_entry, seal_page,
};
use super::page_model::{SvlogModel, max_lead, plan_pages};
use super::{TierMeta, TierOptions, keys_path, model_path, svlog_path};
use crate::vlog::{VlogKind, VlogWriter, vlog_path};
use crate::{Error, Result};

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
    /// The generation's own svlog (file table row 0); None when referencing.
    svlog: Option<VlogWriter>,
    /// The file table of a referencing build.
    files: Vec<TierFile>,
    /// Every key, concatenated; key `i` ends at `key_ends[i]`.
    key_bytes: Vec<u8>,
    key_ends: Vec<u64>,
    pointers: Vec<EntryRef>,
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
        let mut b = StaticTierBuilder::referencing(storage, dir, generation, opts)?;
        b.svlog = Some(VlogWriter::create_at(
            b.storage.as_ref(),
            &svlog_path(dir, generation),
            VlogKind::Static,
            generation,
        )?);
        Ok(b)
    }

    /// A builder whose entries point at existing records (`add_ref`); it writes no svlog.
    pub fn referencing(
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
        Ok(StaticTierBuilder {
            storage,
            dir: dir.to_path_buf(),
            generation,
            opts,
            svlog: None,
            files: Vec::new(),
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

    /// Appends `key`'s record to the svlog. Keys must strictly increase and be at most 4076
    /// bytes (`InvalidOption` otherwise, and in a referencing build).
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(key)?;
        let Some(svlog) = self.svlog.as_mut() else {
            return Err(Error::InvalidOption(
                "a referencing static tier build takes no values".into(),
            ));
        };
        let p = svlog.append(key, value)?;
        self.push(
            key,
            EntryRef {
                file_idx: 0,
                offset: p.offset,
                len: p.len,
            },
        );
        Ok(())
    }

    /// Adds `key` pointing at the record of `len` bytes at `offset` of an existing file (a
    /// `.vlog` or an older generation's `.svlog` of this directory, which must not change any
    /// more). Only in a referencing build; at most `MAX_TIER_FILES` distinct files.
    pub fn add_ref(
        &mut self,
        key: &[u8],
        kind: TierFileKind,
        number: u64,
        offset: u64,
        len: u32,
    ) -> Result<()> {
        self.check_key(key)?;
        if self.svlog.is_some() || (kind == TierFileKind::Svlog && number == self.generation) {
            return Err(Error::InvalidOption(
                "add_ref is for referencing builds, into other files".into(),
            ));
        }
        let file_idx = match self.files.iter().position(|f| f.number == number) {
            Some(i) if self.files.get(i).is_some_and(|f| f.kind == kind) => i,
            Some(_) => {
                return Err(Error::InvalidOption(format!(
                    "file number {number} names both a vlog and an svlog"
                )));
            }
            None => {
                if self.files.len() as u32 >= MAX_TIER_FILES {
                    return Err(Error::InvalidOption(format!(
                        "a static tier may reference at most {MAX_TIER_FILES} files"
                    )));
                }
                let path = match kind {
                    TierFileKind::Vlog => vlog_path(&self.dir, number),
                    TierFileKind::Svlog => svlog_path(&self.dir, number),
                };
                let bytes = self.storage.file_size(&path)?;
                self.files.push(TierFile {
                    kind,
                    number,
                    bytes,
                });
                self.files.len() - 1
            }
        };
        let inside = self
            .files
            .get(file_idx)
            .is_some_and(|f| offset.saturating_add(u64::from(len)) <= f.bytes);
        if !inside {
            return Err(Error::InvalidOption(format!(
                "record at offset {offset} ({len} bytes) is past the end of file {number}"
            )));
        }
        self.push(
            key,
            EntryRef {
                file_idx: file_idx as u16,
                offset,
                len,
            },
        );
        Ok(())
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
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
        Ok(())
    }

    fn push(&mut self, key: &[u8], p: EntryRef) {
        self.key_bytes.extend_from_slice(key);
        self.key_ends.push(self.key_bytes.len() as u64);
        self.pointers.push(p);
        self.max_key_len = self.max_key_len.max(key.len() as u32);
        self.keymap.observe(key);
    }

    /// Writes the key list and the model, syncs the three files and the directory.
    pub fn finish(mut self) -> Result<TierMeta> {
        let n = self.key_ends.len();
        let layout = Layout::new(self.max_key_len).ok_or_else(|| {
            Error::InvalidOption(format!("key width {} too large", self.max_key_len))
        })?;
        let pages = layout.pages_for(n as u64);
        let per_page = layout.entries_per_page as usize;
        let svlog_bytes = self.svlog.as_ref().map_or(0, VlogWriter::len);
        let files = match &self.svlog {
            Some(_) => vec![TierFile {
                kind: TierFileKind::Svlog,
                number: self.generation,
                bytes: svlog_bytes,
            }],
            None => std::mem::take(&mut self.files),
        };
        let header = KeyListHeader {
            generation: self.generation,
            entries: n as u64,
            pages,
            layout,
            files,
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
            svlog: None,
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
            if self.svlog.is_some() {
                model.svlog = Some(self.svlog_model(&map, svlog_bytes)?);
            }
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
        if let Some(svlog) = self.svlog.as_mut() {
            svlog.sync()?;
        }
        self.storage.sync_dir(&self.dir)?;
        Ok(TierMeta {
            generation: self.generation,
            entries: n as u64,
            svlog_bytes,
            keylist_bytes: header.file_bytes(),
            model_bytes: model_bytes.len() as u64,
            train_time,
        })
    }

    /// The svlog page model of a packed build (docs/format/static-tier.md, "One-read lookup"):
    /// the page-start table, and an index over the image of each svlog page's last key.
    fn svlog_model(&self, map: &lidb_lsm::keys::KeyMap, svlog_bytes: u64) -> Result<SvlogModel> {
        let places: Vec<(u64, u32)> = self.pointers.iter().map(|p| (p.offset, p.len)).collect();
        let plan = plan_pages(&places, svlog_bytes);
        debug_assert!(
            plan.is_some(),
            "the svlog's records are contiguous from byte 32"
        );
        let Some(plan) = plan else {
            return Err(Error::InvalidOption(
                "static tier svlog records are not contiguous".into(),
            ));
        };
        let images: Vec<u64> = plan
            .last_record
            .iter()
            .map(|&i| map.image(self.key(i as usize)))
            .collect();
        let index = lidb_index::build(self.opts.family, &images, &self.opts.params)?;
        let records = plan
            .start_page
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, map.image(self.key(i))));
        Ok(SvlogModel {
            pages: images.len() as u64,
            family_tag: self.opts.family.tag(),
            page_boundary: self.opts.page_boundary,
            max_lead: max_lead(&images, records),
            tail_pages: plan.tail_pages,
            max_record_len: plan.max_record_len,
            page_starts: plan.page_starts,
            index: index.encode(),
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
                let ptr = self.pointers.get(i).copied().unwrap_or(EntryRef {
                    file_idx: 0,
                    offset: 0,
                    len: 0,
                });
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
