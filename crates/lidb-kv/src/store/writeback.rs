//! Phases 3 and 4 of GC for `lsm+` (the paper's RocksDB+, `TierKind::WriteBack`): the valid
//! values of the frozen LSM are rewritten, in key order, to the GC's output value log (created
//! and named second in `KVSTATE` at the switch), and their new pointers are written back into the
//! active LSM, the one LSM that holds every key.
//!
//! Per batch: the records are appended and the output log synced, then, under the write mutex,
//! each pointer goes into the LSM unless the LSM already knows the key (a write or deletion since
//! the switch is newer; a pointer written back by an earlier, crashed run of this GC is already
//! there). So a GC resumed after a crash appends to the same output log and skips what is done,
//! and no pointer ever names a record that is not durable. Install flushes the LSM before
//! `KVSTATE` drops the frozen LSM, so the written-back pointers are durable when it goes.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lidb_lsm::batch::WriteBatch;
use lidb_storage::Result;
use lidb_storage::error::corruption;

use crate::pointer::Pointer;
use crate::store::Shared;
use crate::store::gc::{collect, install};
use crate::store::state::{Tiers, lock};
use crate::vlog::VlogWriter;

/// Records rewritten between two syncs of the output log (and pointers per LSM batch).
const BATCH: usize = 256;

pub(crate) fn run(s: &Shared, view: &Arc<Tiers>) -> Result<()> {
    let target = view.vlogs.get(1).cloned().ok_or_else(|| {
        corruption(
            s.dir.join("KVSTATE"),
            "a write-back GC is running but no output value log is named",
        )
    })?;
    let (mut out, _) =
        VlogWriter::reopen(&*s.storage, &s.dir, target.number, s.opts.lsm.recovery_mode)?;
    let mut it = collect(s, view)?;
    let mut pending: Vec<(Vec<u8>, Pointer)> = Vec::with_capacity(BATCH);
    let mut live = 0u64;
    while it.valid() {
        s.note_live_key(it.key());
        let p = out.append(it.key(), it.value())?;
        pending.push((it.key().to_vec(), p));
        if pending.len() >= BATCH {
            live += write_back(s, &mut out, &mut pending)?;
        }
        it.next()?;
    }
    drop(it);
    live += write_back(s, &mut out, &mut pending)?;
    // The written-back pointers must be durable before KVSTATE forgets the frozen LSM.
    s.current().active.db().flush()?;
    install(s, None, vec![target], live, out.len())?;
    s.counters.gcs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Makes the batch's records durable, then puts each pointer into the active LSM unless the key
/// is there already; returns the bytes written back.
fn write_back(
    s: &Shared,
    out: &mut VlogWriter,
    pending: &mut Vec<(Vec<u8>, Pointer)>,
) -> Result<u64> {
    if pending.is_empty() {
        return Ok(0);
    }
    out.sync()?;
    let _writers_wait = lock(&s.write);
    // A failure stops writes before the write mutex is released (see `gc::switch`).
    write_back_locked(s, pending).inspect_err(|e| s.stop_writes(e))
}

fn write_back_locked(s: &Shared, pending: &mut Vec<(Vec<u8>, Pointer)>) -> Result<u64> {
    let active = Arc::clone(&s.current().active);
    let mut batch = WriteBatch::new();
    let mut live = 0u64;
    for (key, p) in pending.drain(..) {
        if active.db().get(&key)?.is_none() {
            batch.put(&key, &p.encode());
            live += u64::from(p.len);
        }
    }
    if !batch.is_empty() {
        active.db().write(batch)?;
    }
    Ok(live)
}
