//! Crash during a checkpoint: at every write index of a checkpoint in turn, the device stops
//! and loses, keeps or tears each unsynced write (seeded); reopening gives exactly the previous
//! or the new checkpoint's contents, never a mix and never an error.

use std::collections::BTreeMap;
use std::sync::Arc;

use lidb_btree::{BTree, MemDevice, Options};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options {
        page_size: 4096,
        pool_bytes: 48 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: false,
    }
}

fn ops(tree: &BTree, model: &mut Model, rng: &mut ChaCha8Rng, n: usize) {
    for _ in 0..n {
        let k = format!("key{:05}", rng.gen_range(0..4000)).into_bytes();
        if rng.gen_bool(0.75) {
            let v = vec![rng.r#gen::<u8>(); rng.gen_range(1..200)];
            tree.put(&k, &v).unwrap_or_else(|e| panic!("put: {e}"));
            model.insert(k, v);
        } else {
            tree.delete(&k).unwrap_or_else(|e| panic!("delete: {e}"));
            model.remove(&k);
        }
    }
}

fn contents(tree: &BTree) -> Model {
    tree.scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("scan: {e}"))
        .into_iter()
        .collect()
}

#[test]
fn a_crash_at_any_write_of_a_checkpoint_leaves_old_or_new() {
    let mut crashed_before = 0;
    let mut crashed_after = 0;
    for stop_at in 0..2000u64 {
        let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
        let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut model = Model::new();
        ops(&tree, &mut model, &mut rng, 3000);
        tree.checkpoint(1, b"one").unwrap_or_else(|e| panic!("{e}"));
        let old = model.clone();
        ops(&tree, &mut model, &mut rng, 800);
        dev.fail_after_writes(Some(stop_at));
        let committed = tree.checkpoint(2, b"two").is_ok();
        drop(tree);
        let after = Arc::new(dev.crash(stop_at));
        let reopened = BTree::with_device(after, &opts())
            .unwrap_or_else(|e| panic!("stop at write {stop_at}: reopen: {e}"));
        let info = reopened.checkpoint_info();
        let got = contents(&reopened);
        match info.lsn {
            1 => {
                assert!(
                    !committed,
                    "stop at write {stop_at}: a committed checkpoint was lost"
                );
                assert_eq!(info.extra, b"one");
                assert!(
                    got == old,
                    "stop at write {stop_at}: old checkpoint's contents differ"
                );
                crashed_before += 1;
            }
            2 => {
                assert_eq!(info.extra, b"two");
                assert!(
                    got == model,
                    "stop at write {stop_at}: new checkpoint's contents differ"
                );
                crashed_after += 1;
            }
            other => panic!("stop at write {stop_at}: checkpoint lsn {other}"),
        }
        if committed {
            eprintln!(
                "checkpoint of {} writes: {crashed_before} crashes gave the old state, \
                 {crashed_after} the new",
                stop_at
            );
            assert!(crashed_before > 10);
            return;
        }
    }
    panic!("the checkpoint never completed within 2000 writes");
}

#[test]
fn after_a_failed_checkpoint_the_tree_goes_on_and_a_crash_still_opens() {
    for stop_at in [0u64, 5, 20, 40, 46] {
        let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
        let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut model = Model::new();
        ops(&tree, &mut model, &mut rng, 3000);
        tree.checkpoint(1, b"one").unwrap_or_else(|e| panic!("{e}"));
        let old = model.clone();
        ops(&tree, &mut model, &mut rng, 800);
        dev.fail_after_writes(Some(stop_at));
        let failed = tree.checkpoint(2, b"two").is_err();
        let at_failed = model.clone();
        dev.fail_after_writes(None);
        // More writes (evictions reuse free slots), then a crash without a checkpoint.
        ops(&tree, &mut model, &mut rng, 1500);
        let reopened = BTree::with_device(Arc::new(dev.crash(stop_at + 1000)), &opts())
            .unwrap_or_else(|e| panic!("stop at {stop_at}: reopen after a crash: {e}"));
        let got = contents(&reopened);
        let lsn = reopened.checkpoint_info().lsn;
        assert!(
            (lsn == 1 && got == old) || (lsn == 2 && got == at_failed),
            "stop at {stop_at} (failed: {failed}): lsn {lsn} with other contents"
        );
        // A later checkpoint succeeds and is what a crash then keeps.
        tree.checkpoint(3, b"three")
            .unwrap_or_else(|e| panic!("stop at {stop_at}: {e}"));
        let reopened = BTree::with_device(Arc::new(dev.crash(stop_at)), &opts())
            .unwrap_or_else(|e| panic!("stop at {stop_at}: reopen: {e}"));
        assert_eq!(reopened.checkpoint_info().lsn, 3);
        assert!(
            contents(&reopened) == model,
            "stop at {stop_at}: checkpoint 3 contents"
        );
    }
}
