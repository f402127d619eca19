//! KVSTATE: round trips, corruption, and crashes at every step of `write_state`.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use lidb_kv::Error;
use lidb_kv::manifest::{KvState, STATE_FILE, read_state, state_path, write_state};
use lidb_storage::Result;
use lidb_storage::mem::MemStorage;
use lidb_storage::{RandomAccessFile, ReadMode, Storage, WritableFile};

fn dir() -> PathBuf {
    PathBuf::from("/kv")
}

fn setup() -> MemStorage {
    let s = MemStorage::new();
    s.create_dir_all(&dir()).ok();
    s
}

fn states() -> Vec<KvState> {
    vec![
        KvState {
            engine: Some(1),
            ..KvState::default()
        },
        KvState {
            lsm_dirs: vec![7, 5],
            vlogs: vec![2, 3, 4],
            tier: Some(6),
            svlogs: vec![6, 1],
            next_number: 8,
            live_bytes: 123_456_789,
            engine: Some(0),
        },
        KvState {
            lsm_dirs: vec![u64::MAX],
            vlogs: (0..1000).collect(),
            tier: None,
            svlogs: vec![],
            next_number: u64::MAX,
            live_bytes: 0,
            engine: Some(2),
        },
    ]
}

#[test]
fn absent_is_none_and_states_round_trip() {
    let s = setup();
    assert_eq!(read_state(&s, &dir()).expect("read"), None);
    for st in states() {
        write_state(&s, &dir(), &st).expect("write");
        assert_eq!(read_state(&s, &dir()).expect("read"), Some(st));
    }
}

#[test]
fn every_bit_flip_and_truncation_is_corruption_naming_kvstate() {
    let s = setup();
    let st = states().get(1).cloned().expect("state");
    write_state(&s, &dir(), &st).expect("write");
    let path = state_path(&dir());
    let bytes = s.read_all(&path).expect("read");
    let check = |s: &MemStorage, what: &str| match read_state(s, &dir()) {
        Err(Error::Corruption { file, .. }) => assert!(file.ends_with(STATE_FILE), "{what}"),
        other => panic!("{what}: expected Corruption, got {other:?}"),
    };
    for i in 0..bytes.len() as u64 {
        for mask in [1u8, 0x80] {
            s.corrupt(&path, i, mask).expect("flip");
            check(&s, &format!("flip byte {i}"));
            s.corrupt(&path, i, mask).expect("unflip");
        }
    }
    for cut in 0..bytes.len() as u64 {
        let s2 = setup();
        write_state(&s2, &dir(), &st).expect("write");
        s2.truncate(&path, cut).expect("truncate");
        check(&s2, &format!("cut {cut}"));
    }
}

/// Storage that fails the `budget`-th mutating operation (create, append, sync, rename,
/// sync_dir) and every later one, to stop `write_state` at any step.
#[derive(Debug, Clone)]
struct Failing {
    inner: MemStorage,
    budget: Arc<AtomicI64>,
}

impl Failing {
    fn step(&self, path: &Path) -> Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(Error::Io {
                file: path.to_path_buf(),
                source: std::io::Error::other("injected"),
            });
        }
        Ok(())
    }
}

#[derive(Debug)]
struct FailingFile {
    inner: Box<dyn WritableFile>,
    owner: Failing,
    path: PathBuf,
}

impl WritableFile for FailingFile {
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

impl Storage for Failing {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.step(path)?;
        Ok(Box::new(FailingFile {
            inner: self.inner.create(path)?,
            owner: self.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }
    fn open(&self, path: &Path, mode: ReadMode) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, mode)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.step(to)?;
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.step(dir)?;
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn Send + Sync + std::fmt::Debug>> {
        self.inner.lock(path)
    }
}

#[test]
fn a_crash_at_any_step_of_write_state_leaves_the_old_or_the_new_state() {
    let all = states();
    let (old, new) = (
        all.get(1).cloned().expect("old"),
        all.get(2).cloned().expect("new"),
    );
    for fail_at in 0..8i64 {
        for seed in 0..10u64 {
            let mem = setup();
            write_state(&mem, &dir(), &old).expect("old");
            let f = Failing {
                inner: mem.clone(),
                budget: Arc::new(AtomicI64::new(fail_at)),
            };
            let ok = write_state(&f, &dir(), &new).is_ok();
            mem.crash(seed ^ (fail_at as u64) << 8);
            let got = read_state(&mem, &dir()).expect("readable after crash");
            if ok {
                assert_eq!(got.as_ref(), Some(&new), "fail_at {fail_at} seed {seed}");
            } else {
                assert!(
                    got.as_ref() == Some(&old) || got.as_ref() == Some(&new),
                    "fail_at {fail_at} seed {seed}: {got:?}"
                );
            }
            // The next write replaces a leftover KVSTATE.tmp.
            write_state(&mem, &dir(), &old).expect("rewrite");
            assert_eq!(read_state(&mem, &dir()).expect("read"), Some(old.clone()));
        }
    }
}

#[test]
fn a_crash_before_the_first_state_leaves_none() {
    for fail_at in 0..5i64 {
        let mem = setup();
        let f = Failing {
            inner: mem.clone(),
            budget: Arc::new(AtomicI64::new(fail_at)),
        };
        let st = states().get(1).cloned().expect("state");
        assert!(write_state(&f, &dir(), &st).is_err());
        mem.crash(fail_at as u64);
        assert_eq!(
            read_state(&mem, &dir()).expect("read"),
            None,
            "fail_at {fail_at}"
        );
    }
}

/// A version-1 state (no svlog list, written before conversion existed), built byte by byte as
/// docs/format/kv-manifest.md describes it: it still reads, its tier's own svlog retained.
#[test]
fn a_version_1_state_still_reads_with_its_tier_svlog_retained() {
    let mut v1 = Vec::new();
    v1.extend_from_slice(&0x4c49_4442_4b56_5354u64.to_le_bytes());
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&9u64.to_le_bytes());
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&10u64.to_le_bytes());
    v1.push(1);
    v1.extend_from_slice(&7u64.to_le_bytes());
    v1.extend_from_slice(&11u64.to_le_bytes());
    v1.extend_from_slice(&4096u64.to_le_bytes());
    let crc = crc32c::crc32c(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    let s = setup();
    let mut f = s.create(&state_path(&dir())).expect("create");
    f.append(&v1).expect("append");
    drop(f);
    let got = read_state(&s, &dir()).expect("read").expect("present");
    assert_eq!(
        got,
        KvState {
            lsm_dirs: vec![9],
            vlogs: vec![10],
            tier: Some(7),
            svlogs: vec![7],
            next_number: 11,
            live_bytes: 4096,
            engine: None,
        }
    );
}
