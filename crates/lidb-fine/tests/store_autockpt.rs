//! FineStore's automatic checkpoints (`FineStoreOptions::checkpoint_log_bytes`): a small
//! threshold keeps the files and the log bounded under many writes and loses nothing, also
//! right after `close`; explicit checkpoints take turns with automatic ones; 0 never
//! checkpoints; `close` waits for a checkpoint that is running and ends cleanly; a failed
//! automatic checkpoint stops writes with an error naming it. Crashes during automatic
//! checkpoints are in `store_crash.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lidb_fine::{FineStore, FineStoreOptions};
use lidb_storage::Error;
use lidb_storage::mem::MemStorage;
use lidb_storage::{RandomAccessFile, ReadMode, Storage, WritableFile};

const DIR: &str = "/fine";
const THRESHOLD: u64 = 64 << 10;

fn opts(checkpoint_log_bytes: u64) -> FineStoreOptions {
    FineStoreOptions {
        checkpoint_log_bytes,
        ..FineStoreOptions::default()
    }
}

fn open(storage: Arc<dyn Storage>, checkpoint_log_bytes: u64) -> FineStore {
    FineStore::open_with_storage(storage, Path::new(DIR), opts(checkpoint_log_bytes)).unwrap()
}

/// Files of the store, as (name, bytes), sorted by name.
type Listing = Vec<(String, u64)>;

/// The store's files whose names start with `prefix`.
fn files(mem: &MemStorage, prefix: &str) -> Listing {
    let mut names: Vec<String> = mem
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    // A checkpoint may remove a file between the listing and its size: count it as 0.
    names
        .into_iter()
        .map(|n| {
            let len = mem.file_size(&Path::new(DIR).join(&n)).unwrap_or(0);
            (n, len)
        })
        .collect()
}

/// The number in a file name such as `checkpoint-000012`.
fn id_of(name: &str) -> u64 {
    name.rsplit('-').next().unwrap().parse().unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:05}", i % 2000).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(100, b'v');
    v
}

/// Waits (at most 10 s) until the automatic checkpoints are done: one log below the threshold,
/// at most one checkpoint. Returns them.
fn settled(mem: &MemStorage) -> (Listing, Listing) {
    let start = Instant::now();
    loop {
        let (logs, checkpoints) = (files(mem, "log-"), files(mem, "checkpoint-"));
        if logs.len() == 1 && logs[0].1 < THRESHOLD && checkpoints.len() <= 1 {
            return (logs, checkpoints);
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no settled state after 10 s: logs {logs:?}, checkpoints {checkpoints:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// 40 times the threshold of writes over 2000 keys: the store checkpoints by itself, never
/// holds more than two checkpoints and three logs, ends with a log below the threshold, and
/// every write is there after a close and reopen.
#[test]
fn a_small_threshold_checkpoints_by_itself() {
    let mem = MemStorage::new();
    let store = open(Arc::new(mem.clone()), THRESHOLD);
    let mut model = BTreeMap::new();
    let writes = 40 * THRESHOLD as u32 / 120;
    for i in 0..writes {
        store.put(&key(i), &value(i)).unwrap();
        model.insert(key(i), value(i));
        if i % 500 == 0 {
            let (logs, checkpoints) = (files(&mem, "log-"), files(&mem, "checkpoint-"));
            assert!(
                logs.len() <= 3 && checkpoints.len() <= 2,
                "after {i} writes: logs {logs:?}, checkpoints {checkpoints:?}"
            );
        }
    }
    store.flush().unwrap();
    let (logs, checkpoints) = settled(&mem);
    // The log crossed the threshold about 40 times; checkpoints coalesce when the writer
    // outruns them (a slow machine), never vanish.
    let done = id_of(&checkpoints[0].0);
    assert!(
        done >= 2,
        "only {done} checkpoints for 40 thresholds of log"
    );
    assert_eq!(
        id_of(&logs[0].0),
        done + 1,
        "{logs:?} after {checkpoints:?}"
    );
    store.close().unwrap();
    let store = open(Arc::new(mem.clone()), THRESHOLD);
    let got: BTreeMap<_, _> = store.scan(&[], None, usize::MAX).into_iter().collect();
    assert!(got == model, "the reopened store differs from the writes");
}

/// `close` right after the writes lets a due checkpoint finish: the closed store has one
/// checkpoint and one log below the threshold, whatever the checkpointer had caught up with.
#[test]
fn close_leaves_a_log_below_the_threshold() {
    let mem = MemStorage::new();
    let store = open(Arc::new(mem.clone()), THRESHOLD);
    let writes = 10 * THRESHOLD as u32 / 120;
    for i in 0..writes {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap();
    let (logs, checkpoints) = (files(&mem, "log-"), files(&mem, "checkpoint-"));
    assert_eq!(checkpoints.len(), 1, "{checkpoints:?}");
    assert!(logs.len() == 1 && logs[0].1 < THRESHOLD, "{logs:?}");
    let store = open(Arc::new(mem.clone()), THRESHOLD);
    assert_eq!(store.get(&key(writes - 1)), Some(value(writes - 1)));
}

/// Explicit checkpoints from one thread while two writers drive automatic ones: they never
/// overlap (overlapping switches of the logger trip its debug assertion), every call succeeds,
/// and the reopened store holds each key's last write.
#[test]
fn explicit_and_automatic_checkpoints_take_turns() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mem = MemStorage::new();
    let store = open(Arc::new(mem.clone()), 8 << 10);
    let writers_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u32)
            .map(|t| {
                let store = &store;
                s.spawn(move || {
                    for i in 0..3000u32 {
                        store.put(&key(t * 1000 + i % 1000), &value(i)).unwrap();
                    }
                })
            })
            .collect();
        s.spawn(|| {
            while !writers_done.load(Ordering::SeqCst) {
                store.checkpoint().unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        writers_done.store(true, Ordering::SeqCst);
    });
    store.close().unwrap();
    let store = open(Arc::new(mem.clone()), 0);
    for t in 0..2u32 {
        for i in 2000..3000u32 {
            assert_eq!(store.get(&key(t * 1000 + i % 1000)), Some(value(i)));
        }
    }
}

/// With threshold 0 the log only grows: no checkpoint file appears, however much is written.
#[test]
fn threshold_zero_never_checkpoints() {
    let mem = MemStorage::new();
    let store = open(Arc::new(mem.clone()), 0);
    let writes = 20 * THRESHOLD as u32 / 120;
    for i in 0..writes {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap();
    assert_eq!(files(&mem, "checkpoint-"), vec![]);
    let logs = files(&mem, "log-");
    assert_eq!(logs.len(), 1);
    assert!(logs[0].1 > 20 * THRESHOLD, "{logs:?}");
    let store = open(Arc::new(mem.clone()), 0);
    assert_eq!(store.get(&key(writes - 1)), Some(value(writes - 1)));
    assert_eq!(files(&mem, "checkpoint-"), vec![]);
}

/// What the gate does to the first creation of a checkpoint file.
#[derive(Debug, Clone, Copy)]
enum GateMode {
    /// Says so on `entered`, then waits for `release`.
    Hold,
    /// Fails it.
    Fail,
}

/// MemStorage whose first creation of a checkpoint file is held or failed (`GateMode`).
#[derive(Debug)]
struct Gate {
    mem: MemStorage,
    mode: GateMode,
    entered: Mutex<Option<Sender<()>>>,
    release: Mutex<Option<Receiver<()>>>,
}

impl Gate {
    /// The gate, a receiver told when a checkpoint reaches it, and the sender that releases it.
    fn new(mem: &MemStorage, mode: GateMode) -> (Arc<Gate>, Receiver<()>, Sender<()>) {
        let (entered_tx, entered_rx) = channel();
        let (release_tx, release_rx) = channel();
        let gate = Gate {
            mem: mem.clone(),
            mode,
            entered: Mutex::new(Some(entered_tx)),
            release: Mutex::new(Some(release_rx)),
        };
        (Arc::new(gate), entered_rx, release_tx)
    }
}

impl Storage for Gate {
    fn create(&self, path: &Path) -> lidb_storage::Result<Box<dyn WritableFile>> {
        let name = path.file_name().unwrap().to_string_lossy();
        let first = name.starts_with("checkpoint-") && self.entered.lock().unwrap().is_some();
        if first {
            self.entered
                .lock()
                .unwrap()
                .take()
                .unwrap()
                .send(())
                .unwrap();
            match self.mode {
                GateMode::Hold => {
                    let release = self.release.lock().unwrap().take().unwrap();
                    release.recv().unwrap();
                }
                GateMode::Fail => {
                    return Err(Error::Io {
                        file: path.to_path_buf(),
                        source: std::io::Error::other("injected: no space left"),
                    });
                }
            }
        }
        self.mem.create(path)
    }
    fn open_append(&self, path: &Path) -> lidb_storage::Result<Box<dyn WritableFile>> {
        self.mem.open_append(path)
    }
    fn open(&self, path: &Path, mode: ReadMode) -> lidb_storage::Result<Arc<dyn RandomAccessFile>> {
        self.mem.open(path, mode)
    }
    fn read_all(&self, path: &Path) -> lidb_storage::Result<Vec<u8>> {
        self.mem.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> lidb_storage::Result<()> {
        self.mem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> lidb_storage::Result<()> {
        self.mem.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> lidb_storage::Result<()> {
        self.mem.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> lidb_storage::Result<Vec<String>> {
        self.mem.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> lidb_storage::Result<()> {
        self.mem.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> lidb_storage::Result<()> {
        self.mem.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.mem.exists(path)
    }
    fn file_size(&self, path: &Path) -> lidb_storage::Result<u64> {
        self.mem.file_size(path)
    }
    fn lock(&self, path: &Path) -> lidb_storage::Result<Box<dyn Send + Sync + std::fmt::Debug>> {
        self.mem.lock(path)
    }
}

/// Writes until the gate reports an automatic checkpoint at it (within 10 s) or a write fails
/// (a failed checkpoint may stop writes before the report is seen); returns the number of
/// writes acknowledged.
fn write_until_gate(store: &FineStore, entered: &Receiver<()>) -> u32 {
    let mut i = 0;
    let start = Instant::now();
    loop {
        if store.put(&key(i), &value(i)).is_err() {
            return i;
        }
        i += 1;
        if entered.try_recv().is_ok() {
            return i;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no automatic checkpoint after {i} writes"
        );
    }
}

/// An automatic checkpoint held inside (its snapshot taken, its file not yet written): writers
/// go on meanwhile, `close` waits for it, then ends cleanly; the reopened store holds every write
/// in one checkpoint and one log, and its state records the clean close.
#[test]
fn close_waits_for_a_running_checkpoint() {
    let mem = MemStorage::new();
    let (gate, entered, release) = Gate::new(&mem, GateMode::Hold);
    let store = open(gate, THRESHOLD);
    let mut n = write_until_gate(&store, &entered);
    // The checkpoint is held: writes still return at once.
    for _ in 0..100 {
        store.put(&key(n), &value(n)).unwrap();
        n += 1;
    }
    let closing = std::thread::spawn(move || store.close());
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !closing.is_finished(),
        "close returned with a checkpoint running"
    );
    release.send(()).unwrap();
    closing.join().unwrap().unwrap();

    assert_eq!(files(&mem, "checkpoint-").len(), 1);
    assert_eq!(files(&mem, "log-").len(), 1);
    let store = open(Arc::new(mem.clone()), 0);
    for i in n.saturating_sub(2000)..n {
        assert_eq!(store.get(&key(i)), Some(value(i)), "write {i} of {n}");
    }
    assert!(store.recovery_report().checkpoint.is_some());
}

/// An automatic checkpoint that fails (its file cannot be created) is not silent: writes fail
/// with `Closed` naming it, `close` returns the error, and every write acknowledged before it
/// is found after a reopen (without `sync`: the failure keeps the log going and flushes it).
#[test]
fn a_failed_automatic_checkpoint_stops_writes() {
    let mem = MemStorage::new();
    let (gate, entered, _release) = Gate::new(&mem, GateMode::Fail);
    let store = open(gate, THRESHOLD);
    let mut n = write_until_gate(&store, &entered);
    let start = Instant::now();
    let err = loop {
        match store.put(&key(n), &value(n)) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(start.elapsed() < Duration::from_secs(10), "writes go on");
    };
    assert!(
        matches!(&err, Error::Closed(why) if why.contains("automatic checkpoint failed")),
        "{err}"
    );
    assert!(store.get(&key(0)).is_some(), "reads go on");
    assert!(store.close().is_err());
    let store = open(Arc::new(mem.clone()), 0);
    for i in n.saturating_sub(2000)..n {
        assert_eq!(store.get(&key(i)), Some(value(i)), "write {i} of {n}");
    }
}

/// A log recovered above the threshold (written with automatic checkpoints off) is
/// checkpointed soon after the open, without a write.
#[test]
fn a_long_recovered_log_is_checkpointed_after_the_open() {
    let mem = MemStorage::new();
    let store = open(Arc::new(mem.clone()), 0);
    for i in 0..3 * THRESHOLD as u32 / 120 {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap();
    assert_eq!(files(&mem, "checkpoint-"), vec![]);
    let store = open(Arc::new(mem.clone()), THRESHOLD);
    let (logs, checkpoints) = settled(&mem);
    assert_eq!(checkpoints.len(), 1, "{logs:?}");
    store.close().unwrap();
}
