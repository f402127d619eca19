//! The write path: one writer at a time (the write mutex), WAL record first, then the memtable.
//! When the memtable is full it becomes immutable and a new memtable and WAL take writes; writers
//! stall while too many immutable memtables wait for flush or L0 is too deep.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::batch::WriteBatch;
use crate::compaction::picker::should_stall;
use crate::db::state::{Shared, SuperVersion, WriteState, lock};
use crate::db::{compact, flush};
use crate::error::{Error, Result};
use crate::log::LogWriter;
use crate::memtable::MemTable;

/// Immutable memtables allowed to wait for flush before writers stall.
const MAX_IMMUTABLE: usize = 2;

pub(crate) fn write(s: &Arc<Shared>, batch: WriteBatch) -> Result<()> {
    batch.validate()?;
    if batch.is_empty() {
        return Ok(());
    }
    let mut w = lock(&s.write);
    check_open(s)?;
    make_room(s, &mut w)?;
    let first_seq = s.last_seq.load(Ordering::SeqCst) + 1;
    let payload = batch.encode(first_seq);
    w.wal.add_record(&payload)?;
    if s.opts.sync {
        w.wal.sync()?;
    }
    let sv = s.current();
    for (i, op) in batch.ops().iter().enumerate() {
        sv.mem
            .insert(first_seq + i as u64, op.kind, &op.key, &op.value);
    }
    s.last_seq
        .store(first_seq + batch.len() as u64 - 1, Ordering::SeqCst);
    Ok(())
}

fn check_open(s: &Shared) -> Result<()> {
    if let Some(e) = lock(&s.bg_error).as_ref() {
        return Err(Error::Closed(format!(
            "a background error stopped writes: {e}"
        )));
    }
    if s.closing.load(Ordering::SeqCst) {
        return Err(Error::Closed("the database is closing".into()));
    }
    Ok(())
}

/// Ensures the memtable has room, switching it and stalling as needed. Holds the write mutex.
fn make_room(s: &Arc<Shared>, w: &mut WriteState) -> Result<()> {
    let mut stalled = Duration::ZERO;
    loop {
        let sv = s.current();
        let full = sv.mem.approximate_bytes() >= s.opts.write_buffer_bytes;
        let l0_deep = should_stall(&sv.tables.version, s.opts.l0_stop_writes);
        if !full && !l0_deep {
            break;
        }
        if !s.opts.background_compaction {
            // No background thread: do the work inline, deterministically.
            if full {
                switch_memtable(s, w)?;
            }
            flush::flush_immutables(s)?;
            compact::compact_until_settled(s)?;
            continue;
        }
        if full && sv.imm.len() < MAX_IMMUTABLE {
            switch_memtable(s, w)?;
            s.notify();
            continue;
        }
        // Stall: wait for the background thread to flush or compact.
        let t = Instant::now();
        let g = lock(&s.work);
        s.notify_locked();
        let _ = s.work_cv.wait_timeout(g, Duration::from_millis(50));
        stalled += t.elapsed();
        check_open(s)?;
    }
    if stalled > Duration::ZERO {
        lock(&s.compaction_stats).stall_time += stalled;
    }
    Ok(())
}

/// Makes the memtable immutable and starts a new memtable with a new WAL.
pub(crate) fn switch_memtable(s: &Shared, w: &mut WriteState) -> Result<()> {
    let number = lock(&s.manifest).new_file_number();
    let path = s.wal_path(number);
    let file = s.storage.create(&path)?;
    s.storage.sync_dir(&s.dir)?;
    let old_wal = std::mem::replace(&mut w.wal, LogWriter::new(file, path));
    let old_number = std::mem::replace(&mut w.wal_number, number);
    // The old WAL stays until its memtable is flushed; make what it holds durable now.
    let mut old_wal = old_wal;
    old_wal.sync()?;
    s.update(|sv| {
        let mut imm = vec![(Arc::clone(&sv.mem), old_number)];
        imm.extend(sv.imm.iter().cloned());
        SuperVersion {
            mem: Arc::new(MemTable::new()),
            mem_wal: number,
            imm,
            tables: Arc::clone(&sv.tables),
        }
    });
    Ok(())
}

/// Syncs the current WAL (close, flush).
pub(crate) fn sync_wal(s: &Shared) -> Result<()> {
    lock(&s.write).wal.sync()
}
