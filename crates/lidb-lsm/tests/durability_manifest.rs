//! The manifest: edit encoding, create/log_edit/recover, crashes at every step of the CURRENT
//! switch, and injected faults.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lidb_lsm::TableMeta;
use lidb_lsm::manifest::{CURRENT, Manifest, VersionEdit, manifest_path};
use lidb_storage::mem::{Fault, MemStorage};
use lidb_storage::{Error, Result};
use lidb_storage::{RandomAccessFile, ReadMode, Storage, WritableFile};
use proptest::prelude::*;

fn ok<T>(r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn table(number: u64) -> TableMeta {
    TableMeta {
        number,
        file_size: number * 1000,
        entries: number * 10,
        smallest: format!("key{number:04}").into_bytes(),
        largest: format!("key{:04}", number + 1).into_bytes(),
    }
}

fn snapshot(tag: u64) -> VersionEdit {
    VersionEdit {
        log_number: Some(tag),
        next_file_number: Some(tag + 100),
        last_sequence: Some(tag * 1000),
        added: vec![(0, table(tag)), (1, table(tag + 1))],
        removed: Vec::new(),
        level_index: vec![(1, Some(tag + 50))],
    }
}

fn delta(i: u64) -> VersionEdit {
    VersionEdit {
        last_sequence: Some(5000 + i),
        added: vec![(2, table(300 + i))],
        removed: vec![(0, i)],
        level_index: vec![(2, None)],
        ..VersionEdit::default()
    }
}

fn setup() -> MemStorage {
    let s = MemStorage::new();
    ok(s.create_dir_all(&dir()));
    s
}

fn edit_strategy() -> impl Strategy<Value = VersionEdit> {
    let meta = (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..20),
        proptest::collection::vec(any::<u8>(), 0..20),
    )
        .prop_map(
            |(number, file_size, entries, smallest, largest)| TableMeta {
                number,
                file_size,
                entries,
                smallest,
                largest,
            },
        );
    (
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::collection::vec((any::<u32>(), meta), 0..5),
        proptest::collection::vec((any::<u32>(), any::<u64>()), 0..5),
        proptest::collection::vec((any::<u32>(), proptest::option::of(any::<u64>())), 0..3),
    )
        .prop_map(
            |(log_number, next_file_number, last_sequence, added, removed, level_index)| {
                VersionEdit {
                    log_number,
                    next_file_number,
                    last_sequence,
                    added,
                    removed,
                    level_index,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(11),
        ..ProptestConfig::default()
    })]

    #[test]
    fn edit_round_trip(edit in edit_strategy()) {
        let bytes = edit.encode();
        prop_assert_eq!(VersionEdit::decode(&bytes), Ok(edit));
    }

    #[test]
    fn edit_truncations_and_flips_never_panic(edit in edit_strategy(),
                                              flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..4)) {
        let bytes = edit.encode();
        for cut in 0..bytes.len() {
            let _ = VersionEdit::decode(bytes.get(..cut).unwrap_or_default());
        }
        let mut b = bytes.clone();
        for (at, mask) in flips {
            let at = at % b.len();
            if let Some(x) = b.get_mut(at) { *x ^= mask; }
        }
        let _ = VersionEdit::decode(&b);
    }

    #[test]
    fn edit_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = VersionEdit::decode(&bytes);
    }
}

#[test]
fn edit_versions_and_tags() {
    let mut bytes = delta(1).encode();
    // An optional field (tag >= 128) is skipped.
    bytes.extend_from_slice(&[200, 3, 0, 0, 0, 1, 2, 3]);
    assert_eq!(VersionEdit::decode(&bytes), Ok(delta(1)));
    // An unknown required field is an error.
    let mut bad = delta(1).encode();
    bad.extend_from_slice(&[77, 0, 0, 0, 0]);
    assert!(VersionEdit::decode(&bad).is_err_and(|e| e.contains("unknown required field tag 77")));
    // Another format version.
    let mut v2 = delta(1).encode();
    if let Some(v) = v2.first_mut() {
        *v = 2;
    }
    assert!(VersionEdit::decode(&v2).is_err_and(|e| e.contains("format 2")));
    // A repeated single field.
    let mut twice = VersionEdit {
        log_number: Some(1),
        ..VersionEdit::default()
    }
    .encode();
    twice.extend_from_slice(&[1, 8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
    assert!(VersionEdit::decode(&twice).is_err_and(|e| e.contains("twice")));
    assert!(VersionEdit::decode(&[]).is_err());
    assert_eq!(VersionEdit::decode(&[1]), Ok(VersionEdit::default()));
}

#[test]
fn create_log_recover_round_trip() {
    let s = setup();
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    assert_eq!(ok(Manifest::recover(&s, &dir())), None);
    let mut m = ok(Manifest::create(
        Arc::clone(&storage),
        &dir(),
        1,
        &snapshot(1),
    ));
    let first = m.size_bytes();
    for i in 0..5 {
        ok(m.log_edit(&delta(i)));
    }
    assert!(m.size_bytes() > first);
    assert_eq!(m.number(), 1);
    let want: Vec<VersionEdit> = std::iter::once(snapshot(1))
        .chain((0..5).map(delta))
        .collect();
    let got = ok(Manifest::recover(&s, &dir())).unwrap_or_else(|| panic!("no manifest"));
    assert_eq!((got.number, &got.edits, &got.bad_tail), (1, &want, &None));

    // Every acknowledged edit survives a crash.
    s.crash(1);
    let got = ok(Manifest::recover(&s, &dir())).unwrap_or_else(|| panic!("no manifest"));
    assert_eq!(got.edits, want);

    // Rolling to a new manifest removes the old one.
    let m2 = ok(Manifest::create(
        Arc::clone(&storage),
        &dir(),
        7,
        &snapshot(7),
    ));
    assert_eq!(m2.path(), manifest_path(&dir(), 7));
    assert!(!s.exists(&manifest_path(&dir(), 1)));
    assert_eq!(ok(s.read_all(&dir().join(CURRENT))), b"MANIFEST-000007\n");
    let got = ok(Manifest::recover(&s, &dir())).unwrap_or_else(|| panic!("no manifest"));
    assert_eq!((got.number, got.edits), (7, vec![snapshot(7)]));
    // Reusing the current number is refused.
    assert!(matches!(
        Manifest::create(Arc::clone(&storage), &dir(), 7, &snapshot(8)),
        Err(Error::InvalidOption(_))
    ));
}

#[test]
fn unsynced_tail_after_crash_is_reported() {
    for seed in 0..50u64 {
        let s = setup();
        let storage: Arc<dyn Storage> = Arc::new(s.clone());
        let mut m = ok(Manifest::create(
            Arc::clone(&storage),
            &dir(),
            3,
            &snapshot(3),
        ));
        ok(m.log_edit(&delta(0)));
        // An edit whose sync fails is not acknowledged; its bytes may be torn by a crash.
        s.fail_after(0, Fault::SyncError);
        assert!(m.log_edit(&delta(1)).is_err(), "seed {seed}");
        assert!(
            m.log_edit(&delta(2)).is_err(),
            "seed {seed}: poisoned manifest wrote"
        );
        s.crash(seed);
        let got = ok(Manifest::recover(&s, &dir())).unwrap_or_else(|| panic!("seed {seed}"));
        assert!(
            got.edits == vec![snapshot(3), delta(0)]
                || got.edits == vec![snapshot(3), delta(0), delta(1)],
            "seed {seed}: {:?}",
            got.edits
        );
        // Without the torn edit the file ends after delta(0), or the tail is reported.
        let intact_end =
            8 + 8 + snapshot(3).encode().len() as u64 + 8 + delta(0).encode().len() as u64;
        let size = ok(s.file_size(&manifest_path(&dir(), 3)));
        if got.edits.len() == 2 {
            assert_eq!(
                got.bad_tail.is_some(),
                size > intact_end,
                "seed {seed}: size {size}, tail {:?}",
                got.bad_tail
            );
        } else {
            assert_eq!(got.bad_tail, None, "seed {seed}");
        }
    }
}

#[test]
fn recover_errors_name_the_file() {
    let s = setup();
    let current = dir().join(CURRENT);
    let mut f = ok(s.create(&current));
    ok(f.append(b"MANIFEST-000042\n"));
    match Manifest::recover(&s, &dir()) {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, current);
            assert!(detail.contains("MANIFEST-000042"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    for garbage in [
        &b"MANIFEST-\n"[..],
        b"MANIFEST-12",
        b"hello\n",
        b"",
        b"\xff\xfe",
    ] {
        let mut f = ok(s.create(&current));
        ok(f.append(garbage));
        match Manifest::recover(&s, &dir()) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, current),
            other => panic!("{garbage:?}: {other:?}"),
        }
    }
    // An empty manifest.
    let mut f = ok(s.create(&current));
    ok(f.append(b"MANIFEST-000042\n"));
    let _m = ok(s.create(&manifest_path(&dir(), 42)));
    match Manifest::recover(&s, &dir()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, manifest_path(&dir(), 42)),
        other => panic!("{other:?}"),
    }
    // An intact record that is not an edit.
    let mut w = lidb_storage::log::LogWriter::new(
        ok(s.create(&manifest_path(&dir(), 42))),
        manifest_path(&dir(), 42),
    );
    ok(w.add_record(&[9, 9, 9]));
    match Manifest::recover(&s, &dir()) {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, manifest_path(&dir(), 42));
            assert!(detail.contains("edit 0"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

/// Storage that performs `budget` operations (storage calls, appends, syncs), then crashes the
/// machine and fails every later operation: a power cut at an exact step.
#[derive(Clone)]
struct CrashAt {
    mem: MemStorage,
    left: Arc<AtomicU64>,
    seed: u64,
    crashed: Arc<Mutex<bool>>,
}

impl fmt::Debug for CrashAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CrashAt({})", self.left.load(Ordering::SeqCst))
    }
}

impl CrashAt {
    fn step(&self, path: &Path) -> Result<()> {
        let mut crashed = self.crashed.lock().unwrap_or_else(|e| e.into_inner());
        if !*crashed {
            if self.left.load(Ordering::SeqCst) > 0 {
                self.left.fetch_sub(1, Ordering::SeqCst);
                return Ok(());
            }
            self.mem.crash(self.seed);
            *crashed = true;
        }
        Err(Error::Io {
            file: path.to_path_buf(),
            source: std::io::Error::other("power cut"),
        })
    }
}

#[derive(Debug)]
struct CrashFile {
    inner: Box<dyn WritableFile>,
    owner: CrashAt,
    path: PathBuf,
}

impl WritableFile for CrashFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.owner.step(&self.path)?;
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<()> {
        self.owner.step(&self.path)?;
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Storage for CrashAt {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.step(path)?;
        Ok(Box::new(CrashFile {
            inner: self.mem.create(path)?,
            owner: self.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.step(path)?;
        Ok(Box::new(CrashFile {
            inner: self.mem.open_append(path)?,
            owner: self.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        self.step(path)?;
        self.mem.open(path, mode)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.step(path)?;
        self.mem.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.step(from)?;
        self.mem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.step(path)?;
        self.mem.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.step(path)?;
        self.mem.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.step(dir)?;
        self.mem.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.step(dir)?;
        self.mem.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.step(dir)?;
        self.mem.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.mem.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.step(path)?;
        self.mem.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + fmt::Debug>> {
        self.step(path)?;
        self.mem.lock(path)
    }
}

/// Crashes at every step of creating manifest 2 over manifest 1 (with seeds that tear the
/// unsynced bytes differently): recovery always finds the old or the new manifest, whole.
#[test]
fn crash_at_every_step_of_the_switch_recovers_old_or_new() {
    let old_edits = vec![snapshot(1), delta(0), delta(1)];
    let mut steps_seen = 0;
    for step in 0..100u64 {
        let mut completed = false;
        for seed in 0..8u64 {
            let s = setup();
            let storage: Arc<dyn Storage> = Arc::new(s.clone());
            let mut m = ok(Manifest::create(storage, &dir(), 1, &snapshot(1)));
            ok(m.log_edit(&delta(0)));
            ok(m.log_edit(&delta(1)));
            let crash = CrashAt {
                mem: s.clone(),
                left: Arc::new(AtomicU64::new(step)),
                seed,
                crashed: Arc::new(Mutex::new(false)),
            };
            let created = Manifest::create(Arc::new(crash.clone()), &dir(), 2, &snapshot(2));
            if created.is_ok() {
                completed = true;
                s.crash(seed);
            }
            let ctx = format!("crash at step {step}, seed {seed}");
            let got = Manifest::recover(&s, &dir())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"))
                .unwrap_or_else(|| panic!("{ctx}: no manifest"));
            match got.number {
                1 => {
                    assert!(
                        !completed,
                        "{ctx}: create returned Ok but recovery found the old"
                    );
                    assert_eq!(got.edits, old_edits, "{ctx}");
                }
                2 => assert_eq!(got.edits, vec![snapshot(2)], "{ctx}"),
                n => panic!("{ctx}: recovered manifest {n}"),
            }
        }
        steps_seen += 1;
        if completed {
            break;
        }
    }
    // read CURRENT, create, append, sync, create tmp, append, sync, rename, sync_dir, remove.
    assert!(steps_seen >= 9, "the switch took only {steps_seen} steps");
}

/// The first manifest of a new database: a crash leaves no database or the new one.
#[test]
fn crash_while_creating_the_first_manifest() {
    for step in 0..100u64 {
        let s = setup();
        let crash = CrashAt {
            mem: s.clone(),
            left: Arc::new(AtomicU64::new(step)),
            seed: step,
            crashed: Arc::new(Mutex::new(false)),
        };
        let created = Manifest::create(Arc::new(crash), &dir(), 1, &snapshot(1)).is_ok();
        s.crash(step);
        let got = Manifest::recover(&s, &dir()).unwrap_or_else(|e| panic!("step {step}: {e}"));
        match got {
            None => assert!(!created, "step {step}: created manifest lost"),
            Some(r) => assert_eq!((r.number, r.edits), (1, vec![snapshot(1)]), "step {step}"),
        }
        if created {
            return;
        }
    }
    panic!("create never completed");
}

#[test]
fn faults_during_create_leave_the_old_manifest() {
    for fault in [Fault::WriteError, Fault::ShortWrite, Fault::SyncError] {
        for after in 0..4u64 {
            let s = setup();
            let storage: Arc<dyn Storage> = Arc::new(s.clone());
            let mut m = ok(Manifest::create(
                Arc::clone(&storage),
                &dir(),
                1,
                &snapshot(1),
            ));
            ok(m.log_edit(&delta(0)));
            s.fail_after(after, fault);
            let r = Manifest::create(Arc::clone(&storage), &dir(), 2, &snapshot(2));
            s.clear_faults();
            let ctx = format!("{fault:?} after {after}");
            let got = ok(Manifest::recover(&s, &dir())).unwrap_or_else(|| panic!("{ctx}"));
            match r {
                Ok(_) => assert_eq!((got.number, got.edits), (2, vec![snapshot(2)]), "{ctx}"),
                Err(e) => {
                    assert!(matches!(e, Error::Io { .. }), "{ctx}: {e}");
                    assert_eq!(
                        (got.number, got.edits),
                        (1, vec![snapshot(1), delta(0)]),
                        "{ctx}"
                    );
                }
            }
        }
    }
}
