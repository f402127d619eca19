//! The page file's translation table (pid -> slot) under damage that keeps every checksum: an
//! entry or header naming a page id near 2^40 costs one entry in memory, not a table sized by
//! the pid (the open used to resize a dense vector to the pid: 8 TiB, an abort), and ends in a
//! `Corruption` naming the page; a pid mapped twice is `Corruption` at open.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use lidb_btree::{BTree, Error, MemDevice, Options, PageDevice, page};

const PAGE: usize = 4096;
/// Header fields (docs/format/btree-pagefile.md): next page id, first slot of the table chain.
const H_NEXT_PID: usize = 72;
const H_TABLE: usize = 80;
/// Where a table page's (pid u64, slot u64) pairs start.
const CHAIN_DATA: usize = 48;

fn opts() -> Options {
    Options {
        page_size: PAGE,
        pool_bytes: 64 * PAGE as u64,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: false,
    }
}

fn key(i: u64) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

fn read(dev: &MemDevice, slot: u64) -> Vec<u8> {
    let mut buf = vec![0u8; PAGE];
    dev.read(slot, &mut buf)
        .unwrap_or_else(|e| panic!("slot {slot}: {e}"));
    buf
}

/// A durable tree of 5000 keys; `edit` gets the newest header and the first page of its
/// translation table, both resealed and written back after.
fn damaged(mut edit: impl FnMut(&mut [u8], &mut [u8])) -> MemDevice {
    let dev = Arc::new(MemDevice::new(PAGE).unwrap_or_else(|e| panic!("{e}")));
    let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let pairs = (0..5000u64).map(|i| (key(i), vec![b'v'; 16]));
    tree.bulk_load(pairs, 0.9).unwrap_or_else(|e| panic!("{e}"));
    tree.checkpoint(1, &[]).unwrap_or_else(|e| panic!("{e}"));
    drop(tree);
    let dev = dev.snapshot();
    let newest = (0..2u64)
        .map(|slot| (slot, read(&dev, slot)))
        .filter(|(_, h)| page::kind(h) == Some(page::PageKind::FileHeader))
        .max_by_key(|(_, h)| page::get_u64(h, 48))
        .unwrap_or_else(|| panic!("no header"));
    let (header_slot, mut header) = newest;
    let table_slot = page::get_u64(&header, H_TABLE);
    let mut table = read(&dev, table_slot);
    assert_eq!(page::kind(&table), Some(page::PageKind::Table));
    edit(&mut header, &mut table);
    for (slot, buf) in [(header_slot, &mut header), (table_slot, &mut table)] {
        page::seal(buf);
        dev.write(slot, buf).unwrap_or_else(|e| panic!("{e}"));
    }
    dev
}

/// Opens `dev` and reads every 97th key and a full scan, on a thread (an abort or a hang fails
/// the test): the open's error, or the reads' errors.
fn open_and_read(dev: MemDevice) -> Result<Vec<Error>, Error> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = BTree::with_device(Arc::new(dev), &opts()).map(|tree| {
            let mut errors: Vec<Error> = (0..5000u64)
                .step_by(97)
                .filter_map(|i| tree.get(&key(i)).err())
                .collect();
            errors.extend(tree.scan(b"", None, usize::MAX).err());
            errors
        });
        let _ = tx.send(result);
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the open or the reads did not end"))
}

#[test]
fn a_translation_entry_near_2_pow_40_costs_one_entry_and_reads_name_the_lost_page() {
    let mut lost = 0;
    let dev = damaged(|header, table| {
        // The header allows pids up to 2^40 and the first entry names pid 2^40 - 1 (its page,
        // the one it named before, is lost): before the fix the open sized a dense table by it.
        page::put_u64(header, H_NEXT_PID, 1 << 40);
        lost = page::get_u64(table, CHAIN_DATA);
        page::put_u64(table, CHAIN_DATA, (1 << 40) - 1);
    });
    let errors = match open_and_read(dev) {
        Err(e) => vec![e],
        Ok(errors) => errors,
    };
    assert!(!errors.is_empty(), "the lost page {lost} went unnoticed");
    for e in &errors {
        assert!(matches!(e, Error::Corruption { .. }), "{e}");
    }
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains(&format!("page {lost} "))),
        "no error names page {lost}: {errors:?}"
    );
}

#[test]
fn a_translation_entry_past_the_next_page_id_is_corruption_at_open() {
    let dev = damaged(|_, table| page::put_u64(table, CHAIN_DATA, (1 << 40) - 1));
    let err = open_and_read(dev).err().map(|e| e.to_string());
    assert!(
        err.as_deref().is_some_and(|e| e.contains("out of range")),
        "{err:?}"
    );
}

#[test]
fn a_page_mapped_twice_is_corruption_at_open() {
    let dev = damaged(|_, table| {
        let first = page::get_u64(table, CHAIN_DATA);
        page::put_u64(table, CHAIN_DATA + 16, first);
    });
    let err = open_and_read(dev).err().map(|e| e.to_string());
    assert!(
        err.as_deref().is_some_and(|e| e.contains("twice")),
        "{err:?}"
    );
}
