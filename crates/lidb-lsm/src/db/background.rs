//! The background thread: waits for work, flushes immutable memtables, runs picked compactions.
//! The first error stops it and is reported to writers (`Shared::bg_error`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::db::state::{Shared, lock};
use crate::db::{compact, flush};

pub(crate) fn run(s: &Shared) {
    loop {
        if s.closing.load(Ordering::SeqCst) {
            return;
        }
        let result = flush::flush_immutables(s).and_then(|()| compact::compact_until_settled(s));
        if let Err(e) = result {
            s.set_bg_error(&e);
            return;
        }
        let g = lock(&s.work);
        if s.closing.load(Ordering::SeqCst) {
            return;
        }
        let idle = s.current().imm.is_empty();
        if idle {
            let _ = s.work_cv.wait_timeout(g, Duration::from_millis(100));
        }
    }
}
