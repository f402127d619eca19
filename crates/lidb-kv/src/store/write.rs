//! The write path: the value goes to the value log, its pointer to the active LSM (a deletion is
//! the empty tombstone in the LSM, with no value-log record). Writers hold the write mutex, which
//! a GC also takes to switch to a new LSM and value log, so no write lands in a frozen LSM.
//!
//! Refusal: under the write mutex, every write (a deletion too, which appends nothing to the
//! value log) first checks `Shared::bg_error` and that the active value log is not poisoned. A
//! failed append or sync of the active log poisons it while holding the log's mutex, whichever
//! thread synced (a writer, `Store::flush`, a GC's switch, an LSM's flush hook), so a write that
//! starts after that failure is refused with an error naming it. A failed WAL append or sync
//! poisons the LSM's WAL, which refuses the write in `Db::put` the same way. A failed flush or
//! compaction of any LSM of the view (active, frozen, lsm+tier's tier) stops writes too.

use std::sync::atomic::Ordering;

use lidb_lsm::{Error, Result};

use crate::store::Shared;
use crate::store::state::{Tier, Tiers, lock};

pub(crate) fn put(s: &Shared, key: &[u8], value: Option<&[u8]>) -> Result<()> {
    let mut w = lock(&s.write);
    if let Some(e) = lock(&s.bg_error).as_ref() {
        return Err(Error::Closed(format!(
            "writes stopped until reopen after a GC or conversion failed: {e}"
        )));
    }
    w.vlog.check_usable()?;
    let view = s.current();
    check_other_lsms(&view)?;
    let encoded = match value {
        Some(v) => {
            let p = w.vlog.append(key, v)?;
            if s.opts.sync {
                w.vlog.sync()?;
            }
            w.appended_since_gc += u64::from(p.len);
            s.appended_records.0.fetch_add(1, Ordering::Relaxed);
            s.appended_records
                .1
                .fetch_add(u64::from(p.len), Ordering::Relaxed);
            s.vlog_bytes.fetch_add(u64::from(p.len), Ordering::Relaxed);
            let all = std::sync::Arc::clone(
                &s.all_keys
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if !all.may_contain(key) {
                all.insert(key);
                s.live_bytes.fetch_add(u64::from(p.len), Ordering::Relaxed);
            }
            p.encode().to_vec()
        }
        None => Vec::new(),
    };
    view.active.db().put(key, &encoded)?;
    if value.is_some() {
        s.note_live_key(key);
    }
    if let Some(b) = &view.active.bloom {
        b.insert(key);
    }
    drop(w);
    if s.opts.auto_gc && s.gc_due() {
        let mut wake = lock(&s.gc_wake);
        *wake = true;
        s.gc_cv.notify_all();
    }
    Ok(())
}

/// `Closed` if a background job of an LSM the store does not write to failed (the frozen LSM
/// during a GC, lsm+tier's tier LSM): its thread flushes and compacts on its own, and a failed
/// sync there stops writes as any failed sync does. The active LSM refuses writes itself.
fn check_other_lsms(view: &Tiers) -> Result<()> {
    let tier = view.tier.iter().filter_map(|t| match &t.tier {
        Tier::Lsm(part) => Some(part),
        Tier::Learned(_) => None,
    });
    for part in view.frozen.iter().chain(tier) {
        if let Some(e) = part.db().background_error() {
            return Err(Error::Closed(format!(
                "writes stopped until reopen: a background job of {} failed: {e}",
                part.dir.display()
            )));
        }
    }
    Ok(())
}

/// Flushes the active LSM and syncs the value log.
pub(crate) fn flush(s: &Shared) -> Result<()> {
    flush_vlog(s)?;
    s.current().active.db().flush()
}

pub(crate) fn flush_vlog(s: &Shared) -> Result<()> {
    lock(&s.write).vlog.sync()
}
