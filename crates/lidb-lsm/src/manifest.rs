//! The manifest: the log of version edits that says which tables make up the database, and the
//! `CURRENT` file that names the live manifest (format: docs/format/manifest.md).
//!
//! ```text
//! MANIFEST-000123: a log (log.rs) whose records are encoded VersionEdits; the first record is a
//!                  snapshot of the whole version, later ones are deltas
//! CURRENT:         "MANIFEST-000123\n", replaced atomically (write CURRENT.tmp, sync, rename,
//!                  sync the directory)
//! edit:            [format version u8 = 1] field*
//! field:           [tag u8][body_len u32 LE][body]
//! ```
//!
//! Callers: the DB creates a manifest at open and whenever the current one grows too large
//! (`Manifest::create`, with a snapshot of the version), and appends one edit per flush or
//! compaction (`log_edit`) while holding its version lock, so edits are appended by one thread
//! at a time (`&mut self`). `recover` runs once at open, before anything else.
//!
//! Invariants:
//! - `CURRENT` names a manifest only after that manifest's snapshot record is synced, and the
//!   switch is one rename, so after a crash at any instant `CURRENT` names either the old or the
//!   new manifest, and the manifest it names holds at least its snapshot.
//! - An edit is durable when `log_edit` returns Ok. After an error the manifest refuses further
//!   edits (the log writer is poisoned); the DB must stop writing.
//! - A recovered manifest is never appended to: the DB replays it and then creates a new one, so a
//!   torn tail never sits in front of new edits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::types::TableMeta;
use lidb_storage::error::{Error, Result, corruption};
use lidb_storage::log::{LogWriter, read_log};
use lidb_storage::tail::BadTail;
use lidb_storage::{Storage, join};

/// Format version of an encoded edit, its first byte. DO NOT CHANGE the tags below: on disk.
pub const EDIT_FORMAT_VERSION: u8 = 1;
const TAG_LOG_NUMBER: u8 = 1;
const TAG_NEXT_FILE_NUMBER: u8 = 2;
const TAG_LAST_SEQUENCE: u8 = 3;
const TAG_ADDED: u8 = 4;
const TAG_REMOVED: u8 = 5;
const TAG_LEVEL_INDEX: u8 = 6;
/// Tags at or above this are optional: a reader that does not know one skips it. Tags below are
/// required to understand: an unknown one is an error.
pub const FIRST_OPTIONAL_TAG: u8 = 128;

pub const CURRENT: &str = "CURRENT";
pub const CURRENT_TMP: &str = "CURRENT.tmp";

/// Name of manifest `number`: `MANIFEST-000123`.
pub fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// The number of a manifest file name, if `name` is one.
pub fn parse_manifest_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("MANIFEST-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One change to the set of tables (or, as the first record of a manifest, the whole set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// WAL files numbered below this are no longer needed.
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<u64>,
    /// (level, table) added.
    pub added: Vec<(u32, TableMeta)>,
    /// (level, file number) removed.
    pub removed: Vec<(u32, u64)>,
    /// (level, file number of the level-model index file, or None to clear it).
    pub level_index: Vec<(u32, Option<u64>)>,
}

fn field(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl VersionEdit {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![EDIT_FORMAT_VERSION];
        let singles = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ];
        for (tag, v) in singles {
            if let Some(v) = v {
                field(&mut out, tag, &v.to_le_bytes());
            }
        }
        for (level, t) in &self.added {
            let mut b = Vec::with_capacity(36 + t.smallest.len() + t.largest.len());
            b.extend_from_slice(&level.to_le_bytes());
            b.extend_from_slice(&t.number.to_le_bytes());
            b.extend_from_slice(&t.file_size.to_le_bytes());
            b.extend_from_slice(&t.entries.to_le_bytes());
            put_bytes(&mut b, &t.smallest);
            put_bytes(&mut b, &t.largest);
            field(&mut out, TAG_ADDED, &b);
        }
        for (level, number) in &self.removed {
            let mut b = level.to_le_bytes().to_vec();
            b.extend_from_slice(&number.to_le_bytes());
            field(&mut out, TAG_REMOVED, &b);
        }
        for (level, index) in &self.level_index {
            let mut b = level.to_le_bytes().to_vec();
            match index {
                None => b.push(0),
                Some(n) => {
                    b.push(1);
                    b.extend_from_slice(&n.to_le_bytes());
                }
            }
            field(&mut out, TAG_LEVEL_INDEX, &b);
        }
        out
    }

    /// Decodes an edit. Never panics; the error describes the first violation (the caller names
    /// the manifest file).
    pub fn decode(bytes: &[u8]) -> std::result::Result<VersionEdit, String> {
        let (&version, mut rest) = bytes.split_first().ok_or("empty version edit")?;
        if version != EDIT_FORMAT_VERSION {
            return Err(format!(
                "version edit format {version} is not supported (this build reads \
                 {EDIT_FORMAT_VERSION})"
            ));
        }
        let mut edit = VersionEdit::default();
        while let Some((&tag, after)) = rest.split_first() {
            let mut f = Fields { bytes: after, tag };
            let len = f.u32("length")? as usize;
            let body = f.take(len, "body")?;
            rest = f.bytes;
            let mut b = Fields { bytes: body, tag };
            match tag {
                TAG_LOG_NUMBER | TAG_NEXT_FILE_NUMBER | TAG_LAST_SEQUENCE => {
                    let slot = match tag {
                        TAG_LOG_NUMBER => &mut edit.log_number,
                        TAG_NEXT_FILE_NUMBER => &mut edit.next_file_number,
                        _ => &mut edit.last_sequence,
                    };
                    if slot.is_some() {
                        return Err(format!("field {tag} appears twice"));
                    }
                    *slot = Some(b.u64("value")?);
                }
                TAG_ADDED => {
                    let level = b.u32("level")?;
                    let number = b.u64("file number")?;
                    let file_size = b.u64("file size")?;
                    let entries = b.u64("entry count")?;
                    let len = b.u32("smallest key length")? as usize;
                    let smallest = b.take(len, "smallest key")?.to_vec();
                    let len = b.u32("largest key length")? as usize;
                    let largest = b.take(len, "largest key")?.to_vec();
                    let meta = TableMeta {
                        number,
                        file_size,
                        entries,
                        smallest,
                        largest,
                    };
                    edit.added.push((level, meta));
                }
                TAG_REMOVED => {
                    let level = b.u32("level")?;
                    edit.removed.push((level, b.u64("file number")?));
                }
                TAG_LEVEL_INDEX => {
                    let level = b.u32("level")?;
                    let index = match b.take(1, "presence byte")? {
                        [0] => None,
                        [1] => Some(b.u64("file number")?),
                        other => {
                            return Err(format!(
                                "field {tag}: presence byte {other:?} is not 0 or 1"
                            ));
                        }
                    };
                    edit.level_index.push((level, index));
                }
                t if t >= FIRST_OPTIONAL_TAG => continue,
                t => {
                    return Err(format!(
                        "unknown required field tag {t} (written by a newer lidb?)"
                    ));
                }
            }
            if !b.bytes.is_empty() {
                return Err(format!(
                    "field {tag}: {} bytes follow its contents",
                    b.bytes.len()
                ));
            }
        }
        Ok(edit)
    }
}

/// Reads the body of one field, naming the field in errors.
struct Fields<'a> {
    bytes: &'a [u8],
    tag: u8,
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err(format!(
                "field {}: {what} needs {n} bytes, {} left",
                self.tag,
                self.bytes.len()
            ));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes(b.try_into().map_err(|_| "width")?))
    }

    fn u64(&mut self, what: &str) -> std::result::Result<u64, String> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| "width")?))
    }
}

/// The open manifest log of a database.
#[derive(Debug)]
pub struct Manifest {
    number: u64,
    writer: LogWriter,
}

/// What recovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredManifest {
    pub number: u64,
    /// The snapshot edit, then every intact delta, in order.
    pub edits: Vec<VersionEdit>,
    /// Bytes after the last intact edit: a torn tail (an edit whose `log_edit` never returned
    /// Ok) or damage. The caller decides by its recovery mode whether to go on.
    pub bad_tail: Option<BadTail>,
}

/// The manifest `CURRENT` names, if it exists and parses.
fn read_current(storage: &dyn Storage, dir: &Path) -> Result<Option<u64>> {
    let path = join(dir, CURRENT);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let bytes = storage.read_all(&path)?;
    let name = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .and_then(parse_manifest_name)
        .ok_or_else(|| {
            let shown = String::from_utf8_lossy(bytes.get(..64).unwrap_or(&bytes)).into_owned();
            corruption(
                &path,
                format!("expected \"MANIFEST-<digits>\\n\", found {shown:?}"),
            )
        })?;
    Ok(Some(name))
}

impl Manifest {
    /// Writes manifest `number` holding `snapshot`, makes it durable, points `CURRENT` at it, and
    /// removes the manifest `CURRENT` named before (a failed removal leaves an obsolete file, not
    /// an error). Errors leave `CURRENT` naming the old or the new manifest.
    pub fn create(
        storage: Arc<dyn Storage>,
        dir: &Path,
        number: u64,
        snapshot: &VersionEdit,
    ) -> Result<Manifest> {
        let previous = read_current(storage.as_ref(), dir).unwrap_or(None);
        if previous == Some(number) {
            return Err(Error::InvalidOption(format!(
                "manifest {} is the current manifest of {}; a new manifest needs a new number",
                manifest_name(number),
                dir.display()
            )));
        }
        let name = manifest_name(number);
        let path = join(dir, &name);
        let mut writer = LogWriter::new(storage.create(&path)?, path);
        writer.add_record(&snapshot.encode())?;
        writer.sync()?;

        let tmp = join(dir, CURRENT_TMP);
        let mut file = storage.create(&tmp)?;
        file.append(format!("{name}\n").as_bytes())?;
        file.sync()?;
        drop(file);
        storage.rename(&tmp, &join(dir, CURRENT))?;
        storage.sync_dir(dir)?;

        if let Some(old) = previous {
            let _ = storage.remove(&join(dir, &manifest_name(old)));
        }
        Ok(Manifest { number, writer })
    }

    /// Appends `edit` and syncs it: the edit is durable when this returns Ok.
    pub fn log_edit(&mut self, edit: &VersionEdit) -> Result<()> {
        self.writer.add_record(&edit.encode())?;
        self.writer.sync()
    }

    /// Bytes of the manifest file, so the DB can roll to a new one when it grows.
    pub fn size_bytes(&self) -> u64 {
        self.writer.len()
    }

    pub fn number(&self) -> u64 {
        self.number
    }

    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// Reads the manifest `CURRENT` names. `None` when there is no `CURRENT` (a new database).
    ///
    /// Errors: `Corruption` naming `CURRENT` when it is malformed or names a missing manifest;
    /// `Corruption` naming the manifest when it holds no intact edit or an intact record that is
    /// not a valid edit.
    pub fn recover(storage: &dyn Storage, dir: &Path) -> Result<Option<RecoveredManifest>> {
        let Some(number) = read_current(storage, dir)? else {
            return Ok(None);
        };
        let path = join(dir, &manifest_name(number));
        if !storage.exists(&path) {
            return Err(corruption(
                join(dir, CURRENT),
                format!("names {}, which does not exist", manifest_name(number)),
            ));
        }
        let log = read_log(storage, &path)?;
        if log.records.is_empty() {
            let why = log.bad_tail.map(|t| t.detail).unwrap_or_default();
            return Err(corruption(
                &path,
                format!(
                    "the manifest holds no intact edit, although its snapshot is synced \
                     before CURRENT names it: {why}"
                ),
            ));
        }
        let mut edits = Vec::with_capacity(log.records.len());
        for (i, record) in log.records.iter().enumerate() {
            let edit = VersionEdit::decode(record)
                .map_err(|d| corruption(&path, format!("edit {i}: {d}")))?;
            edits.push(edit);
        }
        Ok(Some(RecoveredManifest {
            number,
            edits,
            bad_tail: log.bad_tail,
        }))
    }
}

/// Path of manifest `number` in `dir`.
pub fn manifest_path(dir: &Path, number: u64) -> PathBuf {
    join(dir, &manifest_name(number))
}
