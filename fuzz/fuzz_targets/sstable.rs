//! SSTables (lidb-lsm table/, docs/format/sstable.md), learned index block included: open any
//! bytes as a table; an opened table iterates every entry and answers gets without panicking.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lidb_lsm::table::Table;
use lidb_lsm::{ReadStats, SortedIter};
use lidb_storage::mem::MemStorage;
use lidb_storage::{ReadMode, Storage};

fn open(bytes: &[u8]) -> Option<Arc<Table>> {
    let storage = MemStorage::new();
    storage.create_dir_all(Path::new("/db")).expect("dir");
    let path = Path::new("/db/000001.sst");
    let mut f = storage.create(path).expect("create");
    f.append(bytes).expect("append");
    drop(f);
    Table::open(&storage, path, 1, ReadMode::Buffered, None)
        .ok()
        .map(Arc::new)
}

fn exercise(table: &Arc<Table>) {
    let mut keys = Vec::new();
    let mut it = table.iter();
    if it.seek_to_first().is_ok() {
        while it.valid() && keys.len() < 10_000 {
            keys.push(it.key().to_vec());
            let _ = (it.value(), it.kind(), it.seq());
            if it.next().is_err() {
                break;
            }
        }
    }
    let mut stats = ReadStats::default();
    for key in keys.iter().take(64) {
        let _ = table.get(key, &mut stats);
        let mut s = table.iter();
        let _ = s.seek(key);
    }
    for key in [&b""[..], b"\x00", b"m", b"\xff\xff\xff\xff"] {
        let _ = table.get(key, &mut stats);
        let _ = table.covers(key);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_table(b));
    let Some(table) = open(&bytes) else {
        return;
    };
    exercise(&table);
    if lidb_fuzz::wants_seal(data) {
        // Now that the slot width is known, seal the slots too and go again.
        lidb_fuzz::seal_table_slots(&mut bytes, table.entries(), table.slot_width());
        if let Some(table) = open(&bytes) {
            exercise(&table);
        }
    }
});
