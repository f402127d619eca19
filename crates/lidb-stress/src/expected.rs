//! The expected state: what every key may hold, kept outside the engine (RocksDB's db_stress
//! keeps the same beside its database).
//!
//! Per key: the last version handed out (every write of a key gets the next one, so versions
//! order the key's writes), the version of its last delete, and `allowed`: the states the key
//! may be in now. One state (absent, or the value of put version v) after a write the engine
//! acknowledged; more after a write that failed or was in flight at a kill, because the engine
//! may or may not have applied it. A successful write collapses the set again; so does a read
//! after a reopen (what recovery found is what the key holds from then on).
//!
//! Threads: each key is behind its own mutex. A worker holds a key's guard across the whole
//! engine call, so the writes of one key never overlap, their versions follow their order, and a
//! read under the guard sees no write in flight. Several keys are locked in ascending index
//! order. Callers take the engine before any key guard (see `run.rs`).
//!
//! Files (docs/format/stress-state.md): [`Expected::save`] writes the whole state atomically
//! (temporary file, fsync, rename); during a run under kills each worker appends 12-byte records
//! to its own [`OpLog`] before and after every engine write, and [`Expected::replay`] folds the
//! logs a killed child left into the state.

use lidb_storage::bytes::ByteReader;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// One state a key can be in, as stored: 0 is absent, v > 0 the value of put version v.
pub type Held = u32;
/// The key is absent.
pub const ABSENT: Held = 0;

/// What one key may hold (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// The last version handed out (0: never written).
    pub last_version: u32,
    /// Version of the last delete handed out (0: none).
    pub last_delete: u32,
    /// The states the key may be in now; never empty.
    pub allowed: Vec<Held>,
}

impl Default for KeyState {
    fn default() -> Self {
        KeyState {
            last_version: 0,
            last_delete: 0,
            allowed: vec![ABSENT],
        }
    }
}

impl KeyState {
    /// Hands out the version of the next write (a delete when `delete`).
    pub fn begin(&mut self, delete: bool) -> u32 {
        self.last_version = self.last_version.saturating_add(1);
        if delete {
            self.last_delete = self.last_version;
        }
        self.last_version
    }

    /// Records the end of the write that now holds `result`: acknowledged (`ok`), the key holds
    /// it; failed, the key holds it or any state it could hold before.
    pub fn finish(&mut self, result: Held, ok: bool) {
        if ok {
            self.allowed.clear();
        }
        if !self.allowed.contains(&result) {
            self.allowed.push(result);
        }
    }

    pub fn allows(&self, held: Held) -> bool {
        self.allowed.contains(&held)
    }

    /// Whether a read that overlapped the writes after `before` (a copy taken before the read
    /// began, `self` taken after it ended) may have seen `held`.
    pub fn allows_during(&self, before: &KeyState, held: Held) -> bool {
        if before.allows(held) || self.allows(held) {
            return true;
        }
        let written_during = |v: u32| v > before.last_version && v <= self.last_version;
        if held == ABSENT {
            written_during(self.last_delete)
        } else {
            // A value names its put, and every version in the window was a put or a delete:
            // a delete's version never appears in a value.
            written_during(held)
        }
    }
}

/// Names a state for messages.
pub fn describe(held: Held) -> String {
    if held == ABSENT {
        "absent".into()
    } else {
        format!("version {held}")
    }
}

/// Describes a set of states for messages.
pub fn describe_all(allowed: &[Held]) -> String {
    let parts: Vec<String> = allowed.iter().map(|&h| describe(h)).collect();
    parts.join(" or ")
}

/// The expected state of keys `0..len` (see the module docs).
#[derive(Debug)]
pub struct Expected {
    keys: Vec<Mutex<KeyState>>,
}

const MAGIC: &[u8; 8] = b"LIDBSTRS";
const FORMAT: u32 = 1;

fn locked(m: &Mutex<KeyState>) -> MutexGuard<'_, KeyState> {
    // A worker that panicked is already a failed run; its key's state is still whole (every
    // update is one assignment after the engine call).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Expected {
    /// Every key absent and never written.
    pub fn new(len: u32) -> Expected {
        Expected {
            keys: (0..len).map(|_| Mutex::new(KeyState::default())).collect(),
        }
    }

    pub fn len(&self) -> u32 {
        self.keys.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The guard of key `i`; None past the end.
    pub fn lock(&self, i: u32) -> Option<MutexGuard<'_, KeyState>> {
        self.keys.get(i as usize).map(locked)
    }

    /// A copy of key `i`'s state (default past the end).
    pub fn copy(&self, i: u32) -> KeyState {
        self.lock(i).map(|g| g.clone()).unwrap_or_default()
    }

    /// The whole state as bytes (docs/format/stress-state.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.keys.len() * 13);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&self.len().to_le_bytes());
        for m in &self.keys {
            let k = locked(m);
            out.extend_from_slice(&k.last_version.to_le_bytes());
            out.extend_from_slice(&k.last_delete.to_le_bytes());
            out.push(k.allowed.len().min(255) as u8);
            for h in k.allowed.iter().take(255) {
                out.extend_from_slice(&h.to_le_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a state [`Expected::encode`] wrote; errors say what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Expected, String> {
        let (body, crc) = bytes
            .split_last_chunk::<4>()
            .ok_or("expected-state file is shorter than its checksum")?;
        if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
            return Err("expected-state file fails its checksum".into());
        }
        let mut r = ByteReader::new(body);
        if r.take(8)? != MAGIC {
            return Err("not an expected-state file (bad magic)".into());
        }
        let format = r.u32()?;
        if format != FORMAT {
            return Err(format!(
                "expected-state format {format}, this build reads {FORMAT}"
            ));
        }
        let len = r.u32()?;
        let mut keys = Vec::with_capacity(len as usize);
        for _ in 0..len {
            let last_version = r.u32()?;
            let last_delete = r.u32()?;
            let n = r.u8()?;
            let allowed = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
            if allowed.is_empty() {
                return Err("expected-state file has a key with no allowed state".into());
            }
            keys.push(Mutex::new(KeyState {
                last_version,
                last_delete,
                allowed,
            }));
        }
        if r.remaining() != 0 {
            return Err("expected-state file has bytes after its last key".into());
        }
        Ok(Expected { keys })
    }

    /// Writes the state to `path` atomically: a temporary file, fsync, rename.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("tmp");
        let io = |e: std::io::Error| format!("{}: {e}", tmp.display());
        let mut f = File::create(&tmp).map_err(io)?;
        f.write_all(&self.encode()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn load(path: &Path) -> Result<Expected, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Expected::decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Folds the records of the op logs at `paths` into the state: per key, in version order, an
    /// acknowledged write sets the key; a failed write, or one with no outcome (in flight when
    /// the process died), adds its result to what the key may hold. Returns how many writes
    /// were acknowledged, failed and in flight.
    pub fn replay(&self, paths: &[PathBuf]) -> Result<Replayed, String> {
        let mut records = Vec::new();
        for p in paths {
            let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            for chunk in bytes.chunks_exact(RECORD) {
                if let Some(r) = Record::decode(chunk) {
                    records.push(r);
                } else {
                    return Err(format!("{}: a record is not an op-log record", p.display()));
                }
            }
        }
        // (key, version) -> (is delete, outcome)
        let mut writes: std::collections::BTreeMap<(u32, u32), (bool, Option<bool>)> =
            std::collections::BTreeMap::new();
        let mut out = Replayed::default();
        for r in records {
            match r.kind {
                Kind::Intent(delete) => {
                    writes.entry((r.key, r.version)).or_insert((delete, None)).0 = delete;
                }
                Kind::Ack | Kind::Fail => {
                    let ok = r.kind == Kind::Ack;
                    writes.entry((r.key, r.version)).or_insert((false, None)).1 = Some(ok);
                }
                Kind::Progress => out.operations += u64::from(r.key),
            }
        }
        for ((key, version), (delete, outcome)) in writes {
            let mut k = self
                .lock(key)
                .ok_or_else(|| format!("op log names key {key}, past the run's keys"))?;
            if version <= k.last_version {
                return Err(format!(
                    "op log names version {version} of key {key}, already at {}",
                    k.last_version
                ));
            }
            k.last_version = version;
            if delete {
                k.last_delete = version;
            }
            let result = if delete { ABSENT } else { version };
            match outcome {
                Some(true) => out.acknowledged += 1,
                Some(false) => out.failed += 1,
                None => out.in_flight += 1,
            }
            k.finish(result, outcome == Some(true));
        }
        Ok(out)
    }
}

/// What [`Expected::replay`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    pub acknowledged: u64,
    pub failed: u64,
    pub in_flight: u64,
    /// Operations (reads included) the progress records counted.
    pub operations: u64,
}

/// Bytes of one op-log record.
pub const RECORD: usize = 12;

/// What an op-log record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A write is about to reach the engine (a delete when true).
    Intent(bool),
    /// The engine acknowledged it.
    Ack,
    /// The engine returned an error.
    Fail,
    /// `key` more operations (reads included) completed.
    Progress,
}

/// One op-log record: a tag byte, a kind byte, two zero bytes, key and version (u32 LE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub key: u32,
    pub version: u32,
}

const TAG: u8 = 0xA7;

impl Record {
    pub fn encode(&self) -> [u8; RECORD] {
        let kind = match self.kind {
            Kind::Intent(false) => 1,
            Kind::Intent(true) => 2,
            Kind::Ack => 3,
            Kind::Fail => 4,
            Kind::Progress => 5,
        };
        let mut b = [0u8; RECORD];
        let (head, rest) = b.split_at_mut(4);
        head.copy_from_slice(&[TAG, kind, 0, 0]);
        let (k, v) = rest.split_at_mut(4);
        k.copy_from_slice(&self.key.to_le_bytes());
        v.copy_from_slice(&self.version.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<Record> {
        let b: &[u8; RECORD] = b.try_into().ok()?;
        let [tag, kind, 0, 0, k0, k1, k2, k3, v0, v1, v2, v3] = *b else {
            return None;
        };
        if tag != TAG {
            return None;
        }
        let kind = match kind {
            1 => Kind::Intent(false),
            2 => Kind::Intent(true),
            3 => Kind::Ack,
            4 => Kind::Fail,
            5 => Kind::Progress,
            _ => return None,
        };
        Some(Record {
            kind,
            key: u32::from_le_bytes([k0, k1, k2, k3]),
            version: u32::from_le_bytes([v0, v1, v2, v3]),
        })
    }
}

/// One worker's op log: each record is one `write` system call, so it reaches the kernel (and
/// survives a SIGKILL of this process) before the engine call it announces begins.
#[derive(Debug)]
pub struct OpLog {
    file: File,
    path: PathBuf,
}

impl OpLog {
    pub fn create(path: &Path) -> Result<OpLog, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(OpLog {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn append(&mut self, record: Record) -> Result<(), String> {
        self.file
            .write_all(&record.encode())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_writes_widen_and_acknowledged_ones_collapse() {
        let mut k = KeyState::default();
        let v1 = k.begin(false);
        k.finish(v1, true);
        assert_eq!(k.allowed, vec![v1]);
        let v2 = k.begin(true);
        k.finish(ABSENT, false);
        assert!(k.allows(v1) && k.allows(ABSENT) && !k.allows(v2));
        let v3 = k.begin(false);
        k.finish(v3, true);
        assert_eq!(k.allowed, vec![v3]);
        assert_eq!(k.last_delete, v2);
    }

    #[test]
    fn a_read_overlapping_writes_may_see_any_of_them() {
        let mut k = KeyState::default();
        let v0 = k.begin(false);
        k.finish(v0, true);
        let v1 = k.begin(false);
        k.finish(v1, true);
        let before = k.clone();
        let v2 = k.begin(false);
        k.finish(v2, true);
        let v3 = k.begin(true);
        k.finish(ABSENT, true);
        let v4 = k.begin(false);
        k.finish(v4, true);
        for seen in [v1, v2, ABSENT, v4] {
            assert!(k.allows_during(&before, seen), "{seen}");
        }
        let _ = v3;
        assert!(
            !k.allows_during(&before, v0),
            "overwritten before the read began"
        );
        assert!(!k.allows_during(&before, v4 + 1));
        // Without the delete in the window, absent is not allowed.
        let quiet = k.clone();
        assert!(!quiet.allows_during(&quiet, ABSENT));
    }

    #[test]
    fn state_round_trips_and_damage_is_refused() {
        let e = Expected::new(5);
        if let Some(mut k) = e.lock(3) {
            let v = k.begin(false);
            k.finish(v, false);
        }
        let bytes = e.encode();
        let back = Expected::decode(&bytes).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(back.copy(3), e.copy(3));
        assert_eq!(back.len(), 5);
        for at in [0, 9, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            if let Some(b) = bad.get_mut(at) {
                *b ^= 1;
            }
            assert!(Expected::decode(&bad).is_err(), "flip at {at}");
        }
        assert!(Expected::decode(bytes.get(..bytes.len() - 6).unwrap_or_default()).is_err());
    }

    #[test]
    fn replay_applies_outcomes_in_version_order() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let e = Expected::new(3);
        let a = dir.path().join("a.log");
        let b = dir.path().join("b.log");
        let rec = |kind, key, version| Record { kind, key, version };
        let mut la = OpLog::create(&a).unwrap_or_else(|e| panic!("{e}"));
        let mut lb = OpLog::create(&b).unwrap_or_else(|e| panic!("{e}"));
        for r in [
            rec(Kind::Intent(false), 1, 1),
            rec(Kind::Ack, 1, 1),
            rec(Kind::Intent(false), 1, 3), // in flight at the kill
            rec(Kind::Intent(false), 2, 1),
            rec(Kind::Fail, 2, 1),
            rec(Kind::Progress, 7, 0),
        ] {
            la.append(r).unwrap_or_else(|e| panic!("{e}"));
        }
        for r in [rec(Kind::Intent(true), 1, 2), rec(Kind::Ack, 1, 2)] {
            lb.append(r).unwrap_or_else(|e| panic!("{e}"));
        }
        let got = e.replay(&[a, b]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got,
            Replayed {
                acknowledged: 2,
                failed: 1,
                in_flight: 1,
                operations: 7
            }
        );
        let k1 = e.copy(1);
        assert_eq!((k1.last_version, k1.last_delete), (3, 2));
        assert!(k1.allows(ABSENT) && k1.allows(3) && !k1.allows(1));
        assert!(e.copy(2).allows(ABSENT) && e.copy(2).allows(1));
        assert_eq!(e.copy(0), KeyState::default());
    }

    #[test]
    fn records_round_trip_and_garbage_is_not_a_record() {
        for kind in [
            Kind::Intent(false),
            Kind::Intent(true),
            Kind::Ack,
            Kind::Fail,
            Kind::Progress,
        ] {
            let r = Record {
                kind,
                key: 77,
                version: 123_456,
            };
            assert_eq!(Record::decode(&r.encode()), Some(r));
        }
        assert_eq!(Record::decode(&[0u8; RECORD]), None);
        assert_eq!(
            Record::decode(&[TAG, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None
        );
    }
}
