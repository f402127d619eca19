//! The write path under many threads (more than the cores): group commit, parallel memtable
//! inserts and the publication of `last_seq`.
//!
//! - A model test: every thread writes keys of its own, so the final state of each key is known;
//!   the database must match it before and after reopening, with `sync` off (clean close) and on
//!   (power cut while the database is still open: every acknowledged write was synced).
//! - Group commit groups: with many writers and a slow WAL sync, the WAL is synced far fewer times
//!   than there are writes, and holds exactly one record per write.
//! - Batches are atomic to snapshots: every thread writes batches of two keys, and a scan (a
//!   snapshot at `last_seq`) that sees one key of a batch sees the other. This fails if `last_seq`
//!   were published before every batch of its group is in the memtable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lidb_index::Family;
use lidb_lsm::batch::WriteBatch;
use lidb_lsm::{Db, Options};
use lidb_storage::mem::{Fault, MemStorage};
use lidb_storage::{Error, Result};
use lidb_storage::{RandomAccessFile, ReadMode, Storage, WritableFile};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::small_options;

/// Writer threads: above the core count of any machine these tests run on in CI.
const WRITERS: u32 = 16;

/// A MemStorage that counts WAL appends and syncs, can make each WAL sync slow (as a disk's is),
/// and can lose power while the database is open.
#[derive(Debug)]
struct Meter {
    inner: MemStorage,
    log_appends: AtomicU64,
    log_syncs: AtomicU64,
    log_sync_delay_us: u64,
    dead: AtomicBool,
}

impl Meter {
    fn new(inner: MemStorage, log_sync_delay_us: u64) -> Arc<Meter> {
        Arc::new(Meter {
            inner,
            log_appends: AtomicU64::new(0),
            log_syncs: AtomicU64::new(0),
            log_sync_delay_us,
            dead: AtomicBool::new(false),
        })
    }

    /// Cuts the power: unsynced bytes are lost and every later call fails.
    fn cut(&self, seed: u64) {
        self.dead.store(true, Ordering::SeqCst);
        self.inner.crash(seed);
    }

    fn alive(&self) -> Result<()> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(Error::Io {
                file: "/power".into(),
                source: std::io::Error::other("power cut"),
            });
        }
        Ok(())
    }
}

#[derive(Debug)]
struct MeteredFile {
    meter: Arc<Meter>,
    is_log: bool,
    inner: Box<dyn WritableFile>,
}

impl WritableFile for MeteredFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.meter.alive()?;
        if self.is_log {
            self.meter.log_appends.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<()> {
        self.meter.alive()?;
        if self.is_log {
            self.meter.log_syncs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(self.meter.log_sync_delay_us));
        }
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

/// The storage the database sees: the meter, shared.
#[derive(Debug, Clone)]
struct Metered(Arc<Meter>);

impl Metered {
    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(MeteredFile {
            meter: Arc::clone(&self.0),
            is_log: path.extension().is_some_and(|e| e == "log"),
            inner,
        })
    }
}

impl Storage for Metered {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.alive()?;
        let f = self.0.inner.create(path)?;
        Ok(self.wrap(path, f))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.alive()?;
        let f = self.0.inner.open_append(path)?;
        Ok(self.wrap(path, f))
    }
    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        self.0.alive()?;
        self.0.inner.open(path, mode)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.0.alive()?;
        self.0.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.alive()?;
        self.0.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0.alive()?;
        self.0.inner.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.0.alive()?;
        self.0.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.0.alive()?;
        self.0.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.0.alive()?;
        self.0.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.alive()?;
        self.0.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.0.alive()?;
        self.0.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + Debug>> {
        self.0.alive()?;
        self.0.inner.lock(path)
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `Db::try_write` calls of `thread_workload` that wrote, and that declined.
static TRIED: (AtomicU64, AtomicU64) = (AtomicU64::new(0), AtomicU64::new(0));

/// Thread `t`'s writes: puts, overwrites, deletes, two-key and 70-key batches over keys only it
/// writes.
/// Returns the final state of its keys (absent: deleted or never written).
fn thread_workload(db: &Db, t: u32, steps: u32, seed: u64) -> Model {
    let mut rng = ChaCha8Rng::seed_from_u64(seed * 1000 + u64::from(t));
    let mut model = Model::new();
    let key = |i: u32| format!("t{t:02}-{i:04}").into_bytes();
    for step in 0..steps {
        let k = key(rng.gen_range(0..150));
        let r = rng.gen_range(0..100);
        if r < 30 {
            let v = format!("{step}-{}", "v".repeat(rng.gen_range(0..120))).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        } else if r < 60 {
            // As `lidb serve` writes on its async worker: only if no wait, else as any write.
            let v = format!("t{step}-{}", "v".repeat(rng.gen_range(0..120))).into_bytes();
            let mut b = WriteBatch::new();
            b.put(&k, &v);
            if db.try_write(&b).unwrap() {
                TRIED.0.fetch_add(1, Ordering::Relaxed);
            } else {
                TRIED.1.fetch_add(1, Ordering::Relaxed);
                db.write(b).unwrap();
            }
            model.insert(k, v);
        } else if r < 75 {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else if r < 80 {
            // A large batch: groups holding one are inserted by every writer in parallel.
            let mut b = WriteBatch::new();
            let v = format!("big{step}").into_bytes();
            for _ in 0..70 {
                let k = key(rng.gen_range(0..150));
                b.put(&k, &v);
                model.insert(k, v.clone());
            }
            db.write(b).unwrap();
        } else {
            let k2 = key(rng.gen_range(0..150));
            let mut b = WriteBatch::new();
            let v = format!("b{step}").into_bytes();
            b.put(&k, &v);
            b.put(&k2, &v);
            db.write(b).unwrap();
            model.insert(k, v.clone());
            model.insert(k2, v);
        }
    }
    model
}

fn check(db: &Db, model: &Model, ctx: &str) {
    for t in 0..WRITERS {
        for i in 0..150u32 {
            let k = format!("t{t:02}-{i:04}").into_bytes();
            assert_eq!(
                db.get(&k).unwrap().as_ref(),
                model.get(&k),
                "{ctx}: get {}",
                String::from_utf8_lossy(&k)
            );
        }
    }
    let mut it = db.scan(b"", None).unwrap();
    let mut scanned = Model::new();
    while it.valid() {
        scanned.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    assert!(scanned == *model, "{ctx}: the scan differs from the model");
}

/// Runs `WRITERS` threads of `thread_workload` at once; returns the union of their models.
fn run_writers(db: &Arc<Db>, steps: u32, seed: u64) -> Model {
    let start = Arc::new(Barrier::new(WRITERS as usize));
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (db, start) = (Arc::clone(db), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                thread_workload(&db, t, steps, seed)
            })
        })
        .collect();
    let mut model = Model::new();
    for h in threads {
        model.extend(h.join().unwrap());
    }
    model
}

#[test]
fn writers_beyond_the_core_count_match_a_btreemap_and_survive_reopen() {
    for (i, (sync, background)) in [(false, false), (false, true), (true, false), (true, true)]
        .into_iter()
        .enumerate()
    {
        let seed = i as u64;
        let ctx = format!("sync {sync}, background compaction {background}, seed {seed}");
        let opts = Options {
            sync,
            background_compaction: background,
            ..small_options(Family::Pgm, 16)
        };
        let mem = MemStorage::new();
        let meter = Meter::new(mem.clone(), 0);
        let db = Arc::new(
            Db::open_with_storage(
                Arc::new(Metered(Arc::clone(&meter))),
                Path::new("/db"),
                opts.clone(),
            )
            .unwrap(),
        );
        let before = (
            TRIED.0.load(Ordering::Relaxed),
            TRIED.1.load(Ordering::Relaxed),
        );
        let model = run_writers(&db, 300, seed);
        check(&db, &model, &ctx);
        let wrote = TRIED.0.load(Ordering::Relaxed) - before.0;
        let declined = TRIED.1.load(Ordering::Relaxed) - before.1;
        if sync {
            // A synced write always waits for its sync: never written without a wait.
            assert_eq!(wrote, 0, "{ctx}: try_write wrote with sync on");
            assert!(declined > 0, "{ctx}");
        } else {
            assert!(
                wrote > 0,
                "{ctx}: no try_write ever wrote ({declined} declined)"
            );
        }
        if sync {
            // Every write was acknowledged after its group's sync: a power cut now loses none.
            meter.cut(seed);
        }
        drop(db);
        let db = Db::open_with_storage(Arc::new(mem), Path::new("/db"), opts).unwrap();
        check(&db, &model, &format!("{ctx}, reopened"));
    }
}

#[test]
fn group_commit_syncs_the_wal_once_per_group() {
    let opts = Options {
        sync: true,
        write_buffer_bytes: 64 << 20,
        ..small_options(Family::Pgm, 16)
    };
    let meter = Meter::new(MemStorage::new(), 300);
    let db = Arc::new(
        Db::open_with_storage(
            Arc::new(Metered(Arc::clone(&meter))),
            Path::new("/db"),
            opts,
        )
        .unwrap(),
    );
    let (appends0, syncs0) = (
        meter.log_appends.load(Ordering::SeqCst),
        meter.log_syncs.load(Ordering::SeqCst),
    );
    let per_thread = 100u32;
    let start = Arc::new(Barrier::new(WRITERS as usize));
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (db, start) = (Arc::clone(&db), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for i in 0..per_thread {
                    db.put(format!("g{t}-{i}").as_bytes(), b"v").unwrap();
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    let writes = u64::from(WRITERS * per_thread);
    let appends = meter.log_appends.load(Ordering::SeqCst) - appends0;
    let syncs = meter.log_syncs.load(Ordering::SeqCst) - syncs0;
    eprintln!("{writes} writes: {appends} WAL appends, {syncs} WAL syncs");
    assert_eq!(appends, writes, "one WAL record per write batch");
    assert!(
        syncs * 3 <= writes,
        "{syncs} WAL syncs for {writes} writes from {WRITERS} threads: group commit did not group"
    );
    assert!(syncs > 0, "sync is on but the WAL was never synced");
    assert_eq!(db.stats().last_sequence, writes);
}

#[test]
fn a_snapshot_sees_both_keys_of_every_batch_or_neither() {
    // A broken publication shows in most rounds, not all (it needs a scan in a short window).
    // Batches of one pair are inserted by the group's leader, batches of 40 pairs by their own
    // writers in parallel.
    for pairs in [1, 1, 1, 40, 40] {
        batches_of_pairs_against_scans(pairs);
    }
}

fn batches_of_pairs_against_scans(pairs: u32) {
    let opts = Options {
        write_buffer_bytes: 64 << 20,
        ..small_options(Family::Pgm, 16)
    };
    let db = Arc::new(
        Db::open_with_storage(Arc::new(MemStorage::new()), Path::new("/db"), opts).unwrap(),
    );
    let writers_done = Arc::new(AtomicBool::new(false));
    let scanner_threads = 4;
    let start = Arc::new(Barrier::new(WRITERS as usize + scanner_threads));
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (db, start) = (Arc::clone(&db), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for n in 0..1500 / pairs {
                    // The key inserted second sorts first, the newest batches' first of all, so a
                    // scan reads the newest second keys right after taking its snapshot: one whose
                    // snapshot covers a batch whose second key is not inserted yet sees the first
                    // key alone.
                    let mut b = WriteBatch::new();
                    for i in n * pairs..(n + 1) * pairs {
                        b.put(format!("z{t:02}-{i:04}").as_bytes(), b"1");
                    }
                    for i in n * pairs..(n + 1) * pairs {
                        b.put(format!("a{:04}-{t:02}", 9999 - i).as_bytes(), b"1");
                    }
                    db.write(b).unwrap();
                }
            })
        })
        .collect();
    let scanners: Vec<_> = (0..scanner_threads)
        .map(|_| {
            let (db, done, start) = (
                Arc::clone(&db),
                Arc::clone(&writers_done),
                Arc::clone(&start),
            );
            std::thread::spawn(move || {
                start.wait();
                let deadline = Instant::now() + Duration::from_secs(20);
                let mut scans = 0u32;
                while !done.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let mut a = std::collections::BTreeSet::new();
                    let mut z = std::collections::BTreeSet::new();
                    let mut it = db.scan(b"", None).unwrap();
                    while it.valid() {
                        let key = String::from_utf8(it.key().to_vec()).unwrap();
                        let (side, rest) = key.split_at(1);
                        if side == "a" {
                            let (i, t) = rest.split_once('-').unwrap();
                            a.insert((t.to_owned(), 9999 - i.parse::<u32>().unwrap()));
                        } else {
                            let (t, i) = rest.split_once('-').unwrap();
                            z.insert((t.to_owned(), i.parse::<u32>().unwrap()));
                        }
                        it.next().unwrap();
                    }
                    assert!(
                        a == z,
                        "a snapshot saw {} first keys and {} second keys of two-key batches",
                        z.len(),
                        a.len()
                    );
                    scans += 1;
                }
                scans
            })
        })
        .collect();
    for h in writers {
        h.join().unwrap();
    }
    writers_done.store(true, Ordering::SeqCst);
    let scans: u32 = scanners.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(scans > 0, "no scan ran");
    assert_eq!(
        db.stats().last_sequence,
        u64::from(WRITERS) * u64::from(1500 / pairs * pairs) * 2
    );
}

#[test]
fn after_a_failed_wal_sync_no_write_is_acknowledged_even_across_a_memtable_switch() {
    let opts = Options {
        sync: true,
        ..small_options(Family::Pgm, 16)
    };
    let mem = MemStorage::new();
    let db = Arc::new(
        Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone()).unwrap(),
    );
    // The 40th sync fails once; later syncs would succeed (a retried fsync may "succeed" after
    // the kernel dropped the data), so only the engine can keep writes stopped.
    mem.fail_after(40, Fault::SyncError);
    let start = Arc::new(Barrier::new(WRITERS as usize));
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (db, start) = (Arc::clone(&db), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut acked = Model::new();
                let mut failed = false;
                for i in 0..400u32 {
                    let (k, v) = (format!("f{t:02}-{i:04}").into_bytes(), vec![b'v'; 100]);
                    match db.put(&k, &v) {
                        Ok(()) => {
                            assert!(
                                !failed,
                                "thread {t}: write {i} acknowledged after a failure"
                            );
                            acked.insert(k, v);
                        }
                        Err(_) => failed = true,
                    }
                    if failed && i % 50 == 0 {
                        // A flush switches the memtable and its WAL: that must not revive writes.
                        let _ = db.flush();
                    }
                }
                assert!(failed, "thread {t}: the failed sync never surfaced");
                acked
            })
        })
        .collect();
    let mut acked = Model::new();
    for h in threads {
        acked.extend(h.join().unwrap());
    }
    assert!(
        db.put(b"late", b"v").is_err(),
        "a write after the failed sync was acknowledged"
    );
    drop(db);
    mem.clear_faults();
    mem.crash(7);
    let db = Db::open_with_storage(Arc::new(mem), Path::new("/db"), opts).unwrap();
    for (k, v) in &acked {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(v),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
}

/// `Db::try_write` writes only what needs no wait: it declines, writing nothing, when the
/// memtable is full (a switch would sync the WAL and create a file) or with `sync` on, and what
/// it wrote is read back and survives a reopen.
#[test]
fn try_write_declines_a_write_that_would_wait_and_writes_nothing_then() {
    // small_options: a 64 KiB memtable.
    let opts = small_options(Family::Pgm, 16);
    let mem = MemStorage::new();
    let db = Db::open_with_storage(Arc::new(mem.clone()), Path::new("/db"), opts.clone()).unwrap();
    let one = |k: &[u8], v: &[u8]| {
        let mut b = WriteBatch::new();
        b.put(k, v);
        b
    };
    assert!(db.try_write(&one(b"a", b"1")).unwrap());
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    // Fills the memtable past its 64 KiB: the next write must switch it first.
    assert!(db.try_write(&one(b"big", &[7u8; 70_000])).unwrap());
    assert!(!db.try_write(&one(b"a", b"2")).unwrap());
    assert_eq!(
        db.get(b"a").unwrap(),
        Some(b"1".to_vec()),
        "a declined write was applied"
    );
    // A write that may wait switches the memtable; then there is room again.
    db.write(one(b"b", b"1")).unwrap();
    assert!(db.try_write(&one(b"a", b"3")).unwrap());
    drop(db);
    let db = Db::open_with_storage(Arc::new(mem), Path::new("/db"), opts.clone()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(b"1".to_vec()));
    drop(db);

    let synced = Options { sync: true, ..opts };
    let db = Db::open_with_storage(Arc::new(MemStorage::new()), Path::new("/db"), synced).unwrap();
    assert!(!db.try_write(&one(b"a", b"1")).unwrap());
    assert_eq!(db.get(b"a").unwrap(), None);
}
