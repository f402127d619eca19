//! A page written back while a checkpoint commits must not take a slot that checkpoint names.
//!
//! `PageFile::commit_checkpoint` snapshots the translation table, writes it, syncs and writes
//! the header. A write-back during that time (an eviction of a page the learned path's leaf
//! refit dirtied without the writers' gate) moves its page to a new slot and releases the old
//! one; before the fix, that old slot went back on the free list although the committing
//! checkpoint names it, the next write-back took it, and the reopened file read "slot S (page
//! P) holds page Q (misdirected write)". The device here runs the write-backs at the commit's
//! first sync, then the test reopens the file and reads every page of the checkpoint.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use lidb_btree::Result;
use lidb_btree::device::{IoCounters, MemDevice, PageDevice};
use lidb_btree::page::{self, PageKind};
use lidb_btree::pagefile::PageFile;

const PAGE: usize = 4096;

type Hook = Box<dyn FnOnce() + Send>;

/// A memory device that runs a hook at its next sync.
#[derive(Debug)]
struct HookedDevice {
    inner: MemDevice,
    hook: Mutex<Option<HookBox>>,
}

struct HookBox(Hook);

impl std::fmt::Debug for HookBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookBox")
    }
}

impl PageDevice for HookedDevice {
    fn page_size(&self) -> usize {
        self.inner.page_size()
    }
    fn read(&self, slot: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read(slot, buf)
    }
    fn write(&self, slot: u64, buf: &[u8]) -> Result<()> {
        self.inner.write(slot, buf)
    }
    fn sync(&self) -> Result<()> {
        let hook = self
            .hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(HookBox(run)) = hook {
            run();
        }
        self.inner.sync()
    }
    fn slot_count(&self) -> u64 {
        self.inner.slot_count()
    }
    fn counters(&self) -> IoCounters {
        self.inner.counters()
    }
    fn name(&self) -> &Path {
        self.inner.name()
    }
}

/// A leaf page of `pid` whose body is `fill` (the page file sets the id and seals it).
fn leaf(fill: u8) -> Vec<u8> {
    let mut buf = vec![fill; PAGE];
    page::init_header(&mut buf, PageKind::Leaf, 0);
    buf
}

fn write(pf: &PageFile, pid: u64, fill: u8) {
    pf.write_page(pid, &mut leaf(fill))
        .unwrap_or_else(|e| panic!("write of page {pid}: {e}"));
}

#[test]
fn write_backs_during_a_commit_never_reuse_its_slots() {
    let dev = Arc::new(HookedDevice {
        inner: MemDevice::new(PAGE).unwrap_or_else(|e| panic!("device: {e}")),
        hook: Mutex::new(None),
    });
    let (pf, loaded) = PageFile::open(dev.clone()).unwrap_or_else(|e| panic!("open: {e}"));
    assert!(loaded.is_none());
    let pf = Arc::new(pf);
    // Checkpoint 1 over pages 1..=8, then page 1 is written again (a new slot) for checkpoint 2.
    for pid in 1..=8 {
        write(&pf, pid, pid as u8);
    }
    pf.commit_checkpoint(1, 100, 10, b"")
        .unwrap_or_else(|e| panic!("checkpoint 1: {e}"));
    write(&pf, 1, 0x11);
    // While checkpoint 2 commits: page 1 moves twice more and new pages 50..60 are written.
    // Before the fix, the slot checkpoint 2 names for page 1 was handed to one of them.
    let weak: Weak<PageFile> = Arc::downgrade(&pf);
    *dev.hook
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(HookBox(Box::new(move || {
        let Some(pf) = weak.upgrade() else { return };
        write(&pf, 1, 0x12);
        write(&pf, 1, 0x13);
        for pid in 50..60 {
            write(&pf, pid, pid as u8);
        }
    })));
    pf.commit_checkpoint(1, 100, 20, b"")
        .unwrap_or_else(|e| panic!("checkpoint 2: {e}"));
    drop(pf);
    // Reopen at checkpoint 2 (as after a kill): every page it names reads back as itself.
    let (pf, loaded) = PageFile::open(dev).unwrap_or_else(|e| panic!("reopen: {e}"));
    let info = loaded.unwrap_or_else(|| panic!("no checkpoint after reopen"));
    assert_eq!(info.lsn, 20, "the reopen found checkpoint 2");
    let mut buf = vec![0u8; PAGE];
    for pid in 1..=8 {
        let kind = pf
            .read_page(pid, &mut buf)
            .unwrap_or_else(|e| panic!("page {pid} after reopen: {e}"));
        assert_eq!(kind, Some(PageKind::Leaf), "page {pid}");
        let body = buf.get(PAGE - 1).copied();
        let want = if pid == 1 { 0x11 } else { pid as u8 };
        assert_eq!(body, Some(want), "page {pid} holds another version");
    }
}
