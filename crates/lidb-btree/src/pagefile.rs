//! The shadow-slot page file (docs/format/btree-pagefile.md): logical page ids map to physical
//! slots through a translation table, so a page written back never overwrites a slot the last
//! durable checkpoint uses, and a checkpoint becomes durable with one header write.
//!
//! Callers: the buffer pool (write-back on eviction and checkpoint, reads on a miss) from any
//! thread; `commit_checkpoint` from the one thread that checkpoints (the tree serialises them).
//!
//! Invariants:
//! 1. Slots 0 and 1 hold the two header copies; checkpoint `seq` is written to slot `seq % 2`.
//! 2. A slot handed out by [`PageFile::write_page`] is free in both `durable` (the slots the last
//!    durable checkpoint references: its pages, table and blob, and from its snapshot on, the
//!    slots of the checkpoint being committed) and `current` (the slots the in-memory table
//!    references): so no write can damage the last checkpoint's tree, nor the next one's.
//! 3. `durable` changes only after the new header is synced; the slots only the old checkpoint
//!    used become free then.
//! 4. The table lock is a leaf of the lock order: it is taken under frame latches, never the
//!    other way round, and no I/O happens while it is held.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::device::PageDevice;
use crate::error::{Error, Result};
use crate::page::{self, PageKind};

/// The marker of "no slot" in the translation table.
pub const NO_SLOT: u64 = u64::MAX;
/// The first slot a page may use (slots 0 and 1 are the header copies).
pub const FIRST_DATA_SLOT: u64 = 2;
/// Page ids a file may use (ids are never reused, so they stay far below this).
const MAX_PIDS: u64 = 1 << 40;
/// The magic bytes of a header page.
pub const MAGIC: &[u8; 8] = b"LIDBBTRE";
/// Where table and blob pages keep their payload.
const CHAIN_NEXT: usize = 32;
const CHAIN_LEN: usize = 40;
const CHAIN_DATA: usize = 48;

// Header page fields (after the common header).
const H_MAGIC: usize = 32;
const H_PAGE_SIZE: usize = 40;
const H_SEQ: usize = 48;
const H_LSN: usize = 56;
const H_ROOT: usize = 64;
const H_NEXT_PID: usize = 72;
const H_TABLE: usize = 80;
const H_TABLE_ENTRIES: usize = 88;
const H_BLOB: usize = 96;
const H_BLOB_LEN: usize = 104;
const H_SLOTS: usize = 112;

/// What a checkpoint records besides the pages: loaded at open, written by `commit_checkpoint`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The checkpoint's sequence number (1 for the first one).
    pub seq: u64,
    /// The log position the caller gave: the state includes every logged write before it.
    pub lsn: u64,
    /// The root node's page id.
    pub root_pid: u64,
    /// The next page id to hand out.
    pub next_pid: u64,
    /// The caller's opaque blob (the learned model), stored as is.
    pub extra: Vec<u8>,
}

#[derive(Debug, Default)]
struct Tables {
    /// pid -> slot of every page written and not freed. Sparse (a map, not a vector indexed by
    /// pid): ids of merged-away pages are never reused, and a damaged entry or header naming
    /// a pid near 2^40 must cost one entry, not terabytes.
    map: BTreeMap<u64, u64>,
    current: Vec<bool>,
    durable: Vec<bool>,
    /// Slots below `slot_count` free in both `current` and `durable` (allocation in O(log n)).
    free: BTreeSet<u64>,
    /// Slots the file has (the next new slot number).
    slot_count: u64,
}

impl Tables {
    fn used(&self, slot: u64) -> bool {
        let i = slot as usize;
        self.current.get(i).copied().unwrap_or(false)
            || self.durable.get(i).copied().unwrap_or(false)
    }

    fn set(v: &mut Vec<bool>, slot: u64, on: bool) {
        let i = slot as usize;
        if v.len() <= i {
            v.resize(i + 1, false);
        }
        if let Some(b) = v.get_mut(i) {
            *b = on;
        }
    }

    /// A slot free in both tables, marked used in `current`.
    fn alloc(&mut self) -> u64 {
        let found = self.free.pop_first();
        debug_assert!(
            found.is_none_or(|s| !self.used(s)),
            "a used slot on the free set"
        );
        let slot = found.unwrap_or_else(|| {
            let s = self.slot_count.max(FIRST_DATA_SLOT);
            self.slot_count = s + 1;
            s
        });
        Self::set(&mut self.current, slot, true);
        slot
    }

    fn release_current(&mut self, slot: u64) {
        if slot != NO_SLOT {
            Self::set(&mut self.current, slot, false);
            if !self.used(slot) && slot < self.slot_count {
                self.free.insert(slot);
            }
        }
    }

    /// Recomputes the free set after `durable` or `current` changed wholesale.
    fn rebuild_free(&mut self) {
        self.free = (FIRST_DATA_SLOT..self.slot_count)
            .filter(|s| !self.used(*s))
            .collect();
    }
}

/// The page file over a device.
#[derive(Debug)]
pub struct PageFile {
    dev: Arc<dyn PageDevice>,
    page_size: usize,
    tables: RwLock<Tables>,
    last: Mutex<CheckpointInfo>,
    /// Off only in the test that shows what the checksum catches (a test that turns a check off shows the check matters).
    verify_pages: AtomicBool,
}

impl PageFile {
    /// Opens the page file on `dev`: the newest valid checkpoint, or `None` when the device is
    /// empty (the caller creates the first checkpoint).
    pub fn open(dev: Arc<dyn PageDevice>) -> Result<(PageFile, Option<CheckpointInfo>)> {
        let page_size = dev.page_size();
        let slots = dev.slot_count();
        let pf = PageFile {
            dev,
            page_size,
            tables: RwLock::new(Tables {
                slot_count: slots.max(FIRST_DATA_SLOT),
                ..Tables::default()
            }),
            last: Mutex::new(CheckpointInfo::default()),
            verify_pages: AtomicBool::new(true),
        };
        if slots == 0 {
            return Ok((pf, None));
        }
        let mut best: Option<(u64, Vec<u8>)> = None;
        let mut errors = Vec::new();
        for slot in 0..FIRST_DATA_SLOT.min(slots) {
            let mut buf = vec![0u8; page_size];
            let checked = pf.dev.read(slot, &mut buf).and_then(|()| {
                page::verify(&buf, pf.dev.name(), slot, slot, &[PageKind::FileHeader])
            });
            let raw_size = page::get_u32(&buf, H_PAGE_SIZE) as usize;
            if buf.get(H_MAGIC..H_MAGIC + 8) == Some(MAGIC.as_slice()) && raw_size != page_size {
                return Err(Error::InvalidOption(format!(
                    "{} has page size {raw_size}, opened with {page_size}",
                    pf.dev.name().display()
                )));
            }
            match checked {
                Ok(_) if buf.get(H_MAGIC..H_MAGIC + 8) == Some(MAGIC.as_slice()) => {
                    let seq = page::get_u64(&buf, H_SEQ);
                    if best.as_ref().is_none_or(|(s, _)| seq > *s) {
                        best = Some((seq, buf));
                    }
                }
                Ok(_) => errors.push(format!("slot {slot}: bad magic")),
                Err(e) => errors.push(e.to_string()),
            }
        }
        let Some((_, header)) = best else {
            return Err(pf.corrupt(format!(
                "no valid header copy (page size {page_size}): {}",
                errors.join("; ")
            )));
        };
        let stored_size = page::get_u32(&header, H_PAGE_SIZE) as usize;
        if stored_size != page_size {
            return Err(Error::InvalidOption(format!(
                "{} has page size {stored_size}, opened with {page_size}",
                pf.dev.name().display()
            )));
        }
        let info = pf.load_checkpoint(&header, slots)?;
        *pf.last_info() = info.clone();
        Ok((pf, Some(info)))
    }

    fn corrupt(&self, detail: String) -> Error {
        Error::Corruption {
            file: self.dev.name().to_path_buf(),
            detail,
        }
    }

    fn last_info(&self) -> std::sync::MutexGuard<'_, CheckpointInfo> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tables_read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        self.tables
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tables_write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        self.tables
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the chain of `kind` pages from `first`, returning their slots and payloads.
    fn read_chain(&self, first: u64, kind: PageKind, slots: u64) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut slot = first;
        while slot != NO_SLOT {
            if slot < FIRST_DATA_SLOT || slot >= slots || out.len() as u64 >= slots {
                return Err(self.corrupt(format!("{kind:?} chain reaches slot {slot}")));
            }
            let mut buf = vec![0u8; self.page_size];
            self.dev.read(slot, &mut buf)?;
            page::verify(&buf, self.dev.name(), slot, slot, &[kind])?;
            let len = page::get_u32(&buf, CHAIN_LEN) as usize;
            let data = buf
                .get(CHAIN_DATA..CHAIN_DATA + len)
                .ok_or_else(|| self.corrupt(format!("slot {slot}: {kind:?} length {len}")))?
                .to_vec();
            out.push((slot, data));
            slot = page::get_u64(&buf, CHAIN_NEXT);
        }
        Ok(out)
    }

    fn load_checkpoint(&self, h: &[u8], slots: u64) -> Result<CheckpointInfo> {
        let info = CheckpointInfo {
            seq: page::get_u64(h, H_SEQ),
            lsn: page::get_u64(h, H_LSN),
            root_pid: page::get_u64(h, H_ROOT),
            next_pid: page::get_u64(h, H_NEXT_PID),
            extra: Vec::new(),
        };
        let entries = page::get_u64(h, H_TABLE_ENTRIES);
        let table = self.read_chain(page::get_u64(h, H_TABLE), PageKind::Table, slots)?;
        let blob = self.read_chain(page::get_u64(h, H_BLOB), PageKind::Blob, slots)?;
        let mut t = Tables {
            // The device's length, not the header's count: slots past the device's end hold
            // nothing the checkpoint uses (its table and chains are checked against `slots`),
            // and a damaged count must not make the open list terabytes of free slots.
            slot_count: slots.max(FIRST_DATA_SLOT),
            // One entry per pid the table names, whatever the pids (a damaged header or entry
            // must not make the open allocate for pids no entry uses).
            map: BTreeMap::new(),
            ..Tables::default()
        };
        let mut seen = 0u64;
        for (_, data) in &table {
            for pair in data.chunks_exact(16) {
                let pid = page::get_u64(pair, 0);
                let slot = page::get_u64(pair, 8);
                let ok = pid < info.next_pid
                    && pid < MAX_PIDS
                    && (FIRST_DATA_SLOT..slots).contains(&slot);
                if !ok {
                    return Err(self.corrupt(format!(
                        "translation entry page {pid} -> slot {slot} out of range (next page \
                         id {}, {slots} slots)",
                        info.next_pid
                    )));
                }
                if let Some(first) = t.map.insert(pid, slot) {
                    return Err(self.corrupt(format!(
                        "translation table maps page {pid} twice (slots {first} and {slot})"
                    )));
                }
                Tables::set(&mut t.current, slot, true);
                Tables::set(&mut t.durable, slot, true);
                seen += 1;
            }
        }
        if seen != entries {
            return Err(self.corrupt(format!(
                "translation table holds {seen} entries, header says {entries}"
            )));
        }
        for (slot, _) in &table {
            Tables::set(&mut t.durable, *slot, true);
        }
        let mut extra = Vec::new();
        for (slot, data) in &blob {
            Tables::set(&mut t.durable, *slot, true);
            extra.extend_from_slice(data);
        }
        let blob_len = page::get_u64(h, H_BLOB_LEN);
        if extra.len() as u64 != blob_len {
            return Err(self.corrupt(format!(
                "extra blob holds {} bytes, header says {blob_len}",
                extra.len()
            )));
        }
        t.rebuild_free();
        *self.tables_write() = t;
        Ok(CheckpointInfo { extra, ..info })
    }

    /// The device's page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The device (for counters and names).
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        &self.dev
    }

    /// The checkpoint loaded at open, or the last one committed since.
    pub fn last_checkpoint(&self) -> CheckpointInfo {
        self.last_info().clone()
    }

    /// Turns page verification on reads of nodes off (`false`) or on: only for the test that
    /// shows a corrupt page goes unnoticed without it. Never turn it off otherwise.
    #[doc(hidden)]
    pub fn set_verify_pages_for_test(&self, on: bool) {
        self.verify_pages.store(on, Ordering::Relaxed);
    }

    /// Whether page `pid` has a slot (was written back at least once and not freed).
    pub fn has_slot(&self, pid: u64) -> bool {
        self.tables_read().map.contains_key(&pid)
    }

    /// Reads page `pid` into `buf` and checks it is a node (leaf or inner) with that id.
    /// `Ok(None)` when the page has no slot.
    pub fn read_page(&self, pid: u64, buf: &mut [u8]) -> Result<Option<PageKind>> {
        let slot = self.tables_read().map.get(&pid).copied();
        let Some(slot) = slot else {
            return Ok(None);
        };
        self.dev.read(slot, buf)?;
        if !self.verify_pages.load(Ordering::Relaxed) {
            return Ok(page::kind(buf));
        }
        page::verify(
            buf,
            self.dev.name(),
            slot,
            pid,
            &[PageKind::Leaf, PageKind::Inner],
        )
        .map(Some)
    }

    /// Writes node page `pid` (its id field and checksum are set here) to a slot free in both
    /// the durable checkpoint and the current table (invariant 2), then points `pid` at it.
    pub fn write_page(&self, pid: u64, buf: &mut [u8]) -> Result<()> {
        page::set_id(buf, pid);
        page::seal(buf);
        let slot = self.tables_write().alloc();
        if let Err(e) = self.dev.write(slot, buf) {
            self.tables_write().release_current(slot);
            return Err(e);
        }
        let mut t = self.tables_write();
        let old = t.map.insert(pid, slot).unwrap_or(NO_SLOT);
        t.release_current(old);
        Ok(())
    }

    /// Forgets page `pid` (merged away); its slot is free once no checkpoint references it.
    pub fn free_page(&self, pid: u64) {
        let mut t = self.tables_write();
        let old = t.map.remove(&pid).unwrap_or(NO_SLOT);
        t.release_current(old);
    }

    /// Writes a chain of `kind` pages holding `data` to fresh slots (marked in `current`
    /// and pushed to `meta` before any write, for the caller to undo). Returns the first slot.
    fn write_chain(
        &self,
        kind: PageKind,
        data: &[u8],
        unit: usize,
        meta: &mut Vec<u64>,
    ) -> Result<u64> {
        let per_page = (self.page_size - CHAIN_DATA) / unit * unit;
        let chunks: Vec<&[u8]> = data.chunks(per_page).collect();
        let slots: Vec<u64> = {
            let mut t = self.tables_write();
            chunks.iter().map(|_| t.alloc()).collect()
        };
        meta.extend_from_slice(&slots);
        for (i, (chunk, slot)) in chunks.iter().zip(&slots).enumerate() {
            let mut buf = vec![0u8; self.page_size];
            page::init_header(&mut buf, kind, *slot);
            page::put_u64(
                &mut buf,
                CHAIN_NEXT,
                slots.get(i + 1).copied().unwrap_or(NO_SLOT),
            );
            page::put_u32(&mut buf, CHAIN_LEN, chunk.len() as u32);
            page::put_bytes(&mut buf, CHAIN_DATA, chunk);
            page::seal(&mut buf);
            self.dev.write(*slot, &buf)?;
        }
        Ok(slots.first().copied().unwrap_or(NO_SLOT))
    }

    /// Makes the current state a durable checkpoint. The caller has written back every dirty
    /// page and keeps writers out until this returns. Writes the translation table and the
    /// extra blob to free slots, syncs, writes the other header copy, syncs; then the slots only
    /// the old checkpoint used are free (invariant 3).
    pub fn commit_checkpoint(
        &self,
        root_pid: u64,
        next_pid: u64,
        lsn: u64,
        extra: &[u8],
    ) -> Result<CheckpointInfo> {
        let (entries, slot_snapshot) = {
            let mut t = self.tables_write();
            let mut bytes = Vec::new();
            let mut n = 0u64;
            let mut slots = Vec::with_capacity(t.map.len());
            // In pid order, as the format has always written them.
            for (pid, slot) in &t.map {
                bytes.extend_from_slice(&pid.to_le_bytes());
                bytes.extend_from_slice(&slot.to_le_bytes());
                slots.push(*slot);
                n += 1;
            }
            // The slots this checkpoint will name stay protected from now on, not only once it
            // is durable: a page written back while the commit runs (an eviction, a thread that
            // dirties pages without the writers' gate) moves to a new slot and releases its
            // old one from `current`, and that slot must not be handed to another page before
            // the header naming it is replaced (invariant 2). Without this, a learnedstore run
            // under kills reopened to "slot 255 (page 193) holds page 261".
            for slot in slots {
                Tables::set(&mut t.durable, slot, true);
            }
            (n, bytes)
        };
        let mut meta = Vec::new();
        let result = self
            .write_meta(&slot_snapshot, extra, &mut meta)
            .and_then(|(table, blob)| {
                let seq = self.last_info().seq + 1;
                let slots = self.tables_read().slot_count;
                let mut h = vec![0u8; self.page_size];
                page::init_header(&mut h, PageKind::FileHeader, seq % 2);
                page::put_bytes(&mut h, H_MAGIC, MAGIC);
                page::put_u32(&mut h, H_PAGE_SIZE, self.page_size as u32);
                page::put_u64(&mut h, H_SEQ, seq);
                page::put_u64(&mut h, H_LSN, lsn);
                page::put_u64(&mut h, H_ROOT, root_pid);
                page::put_u64(&mut h, H_NEXT_PID, next_pid);
                page::put_u64(&mut h, H_TABLE, table);
                page::put_u64(&mut h, H_TABLE_ENTRIES, entries);
                page::put_u64(&mut h, H_BLOB, blob);
                page::put_u64(&mut h, H_BLOB_LEN, extra.len() as u64);
                page::put_u64(&mut h, H_SLOTS, slots);
                page::seal(&mut h);
                self.dev.sync()?;
                self.dev.write(seq % 2, &h)?;
                self.dev.sync()?;
                Ok(seq)
            });
        let mut t = self.tables_write();
        for s in &meta {
            t.release_current(*s);
        }
        // After a failure the new header may or may not be on disk: keep the slots of both
        // checkpoints protected until a later checkpoint succeeds.
        let mut durable = match &result {
            Ok(_) => vec![false; t.slot_count as usize],
            Err(_) => t.durable.clone(),
        };
        for pair in slot_snapshot.chunks_exact(16) {
            Tables::set(&mut durable, page::get_u64(pair, 8), true);
        }
        for s in &meta {
            Tables::set(&mut durable, *s, true);
        }
        t.durable = durable;
        t.rebuild_free();
        drop(t);
        let seq = result?;
        let info = CheckpointInfo {
            seq,
            lsn,
            root_pid,
            next_pid,
            extra: extra.to_vec(),
        };
        *self.last_info() = info.clone();
        Ok(info)
    }

    /// Writes the table and blob chains; `meta` collects every slot used (even on failure).
    fn write_meta(&self, table: &[u8], extra: &[u8], meta: &mut Vec<u64>) -> Result<(u64, u64)> {
        let t = self.write_chain(PageKind::Table, table, 16, meta)?;
        let b = self.write_chain(PageKind::Blob, extra, 1, meta)?;
        Ok((t, b))
    }

    /// Slots of the file and how many the current table or the durable checkpoint use (stats).
    pub fn slot_usage(&self) -> (u64, u64) {
        let t = self.tables_read();
        let used = (0..t.slot_count).filter(|s| t.used(*s)).count() as u64;
        (t.slot_count, used)
    }
}
