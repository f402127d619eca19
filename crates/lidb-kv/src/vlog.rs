//! Value logs: `{number:06}.vlog` files of checksummed key-value records (docs/format/vlog.md,
//! the only specification; the constants below are shared by reader and writer, DO NOT CHANGE).
//!
//! - [`VlogWriter`] appends records to one log; used by one thread at a time (`&mut self`).
//!   `reopen` recovers a log after a crash: it cuts a torn tail (damage only where the recovery
//!   mode allows) and appends after it.
//! - [`VlogReader`] reads records by [`Pointer`] from any thread (`&self`), caching one open
//!   handle per file behind a mutex; `forget` drops a handle before its file is deleted.
//! - [`VlogScan`] reads one log sequentially in large chunks (GC, recovery).
//!
//! Invariants: a pointer is handed out only for a record whose append returned Ok; a writer whose
//! append or sync failed is poisoned and refuses further appends; decoders never panic and every
//! error names the file and, for records, the offset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;

use lidb_storage::error::corruption;
use lidb_storage::report::{CutKind, LogCut, refused, save_lost};
use lidb_storage::tail::{BadTail, Framing, RecoveryMode, TailKind, classify};
use lidb_storage::{RandomAccessFile, ReadMode, Storage, WritableFile};

use crate::{Error, Pointer, Result};

/// "LIDBVLOG" read big-endian, stored little-endian.
pub const VLOG_MAGIC: u64 = 0x4c49_4442_564c_4f47;
/// The only format version this build writes and reads.
pub const VLOG_FORMAT_VERSION: u32 = 1;
/// Bytes of the file header; the first record starts here.
pub const VLOG_HEADER_BYTES: u64 = 32;
/// Bytes of a record before the key: crc u32, key_len u32, value_len u32.
pub const RECORD_HEADER_BYTES: u64 = 12;
/// The longest key a record may hold.
pub const MAX_KEY_BYTES: u64 = 65_535;
/// The longest value a record may hold.
pub const MAX_VALUE_BYTES: u64 = 1 << 30;
/// Bytes read per chunk by [`VlogScan`].
const SCAN_CHUNK_BYTES: u64 = 1 << 20;

/// What a log file holds; stored in its header. DO NOT CHANGE THESE VALUES.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlogKind {
    /// `{number:06}.vlog`: records in arrival order.
    Log = 1,
    /// `{generation:06}.svlog`: the static tier's records in key order.
    Static = 2,
}

/// `dir/{number:06}.vlog`.
pub fn vlog_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.vlog"))
}

/// The 32-byte file header.
pub fn encode_header(kind: VlogKind, number: u64) -> [u8; VLOG_HEADER_BYTES as usize] {
    let mut h = [0u8; VLOG_HEADER_BYTES as usize];
    let mut bytes = Vec::with_capacity(VLOG_HEADER_BYTES as usize);
    bytes.extend_from_slice(&VLOG_MAGIC.to_le_bytes());
    bytes.extend_from_slice(&VLOG_FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(kind as u32).to_le_bytes());
    bytes.extend_from_slice(&number.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    for (d, s) in h.iter_mut().zip(bytes.iter()) {
        *d = *s;
    }
    h
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    for (d, s) in a.iter_mut().zip(b.iter().skip(at)) {
        *d = *s;
    }
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(b.iter().skip(at)) {
        *d = *s;
    }
    u64::from_le_bytes(a)
}

/// Checks a header against the expected kind and number; the error says what is wrong.
pub fn check_header(bytes: &[u8], kind: VlogKind, number: u64) -> std::result::Result<(), String> {
    if bytes.len() != VLOG_HEADER_BYTES as usize {
        return Err(format!("header is {} bytes, expected 32", bytes.len()));
    }
    let magic = le_u64(bytes, 0);
    if magic != VLOG_MAGIC {
        return Err(format!("bad magic {magic:#018x}: not a value log"));
    }
    let version = le_u32(bytes, 8);
    if version != VLOG_FORMAT_VERSION {
        return Err(format!(
            "format version {version} is not supported (this build reads {VLOG_FORMAT_VERSION})"
        ));
    }
    // The length is checked above: the 28 bytes before the checksum are there.
    if bytes.get(..28).map(crc32c::crc32c) != Some(le_u32(bytes, 28)) {
        return Err("header checksum mismatch".into());
    }
    let (got_kind, got_number, reserved) =
        (le_u32(bytes, 12), le_u64(bytes, 16), le_u32(bytes, 24));
    if got_kind != kind as u32 {
        return Err(format!("file kind {got_kind}, expected {}", kind as u32));
    }
    if got_number != number {
        return Err(format!(
            "header says file number {got_number}, expected {number}"
        ));
    }
    if reserved != 0 {
        return Err(format!("reserved header field is {reserved}, expected 0"));
    }
    Ok(())
}

/// The encoded record of `key` and `value`.
pub fn encode_record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut rec = Vec::with_capacity(RECORD_HEADER_BYTES as usize + key.len() + value.len());
    rec.extend_from_slice(&[0; 4]);
    rec.extend_from_slice(&(key.len() as u32).to_le_bytes());
    rec.extend_from_slice(&(value.len() as u32).to_le_bytes());
    rec.extend_from_slice(key);
    rec.extend_from_slice(value);
    // The record holds its 12-byte header: the checksum covers all but its own 4 bytes.
    if let Some(crc) = rec.get(4..).map(crc32c::crc32c) {
        for (d, s) in rec.iter_mut().zip(crc.to_le_bytes()) {
            *d = s;
        }
    }
    rec
}

/// The whole length a record with these lengths has, if they are within the limits.
fn record_len(key_len: u32, value_len: u32) -> Option<u64> {
    (u64::from(key_len) <= MAX_KEY_BYTES && u64::from(value_len) <= MAX_VALUE_BYTES)
        .then(|| RECORD_HEADER_BYTES + u64::from(key_len) + u64::from(value_len))
}

/// Why the bytes at the start of `buf` are not a whole record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// `buf` ends before the record does (`need` bytes in all).
    Truncated { need: u64 },
    /// The record is malformed; the detail says how.
    Bad(String),
}

/// Decodes the record at the start of `buf` (which may hold more bytes after it): its key, value
/// and whole length.
pub fn decode_record(buf: &[u8]) -> std::result::Result<(&[u8], &[u8], u64), RecordError> {
    if (buf.len() as u64) < RECORD_HEADER_BYTES {
        return Err(RecordError::Truncated {
            need: RECORD_HEADER_BYTES,
        });
    }
    let (key_len, value_len) = (le_u32(buf, 4), le_u32(buf, 8));
    let len = record_len(key_len, value_len).ok_or_else(|| {
        RecordError::Bad(format!(
            "lengths out of range (key {key_len}, value {value_len})"
        ))
    })?;
    let body = buf
        .get(4..len as usize)
        .ok_or(RecordError::Truncated { need: len })?;
    if crc32c::crc32c(body) != le_u32(buf, 0) {
        return Err(RecordError::Bad("checksum mismatch".into()));
    }
    // `body` is the record after its checksum and `len` is 12 + key + value bytes, so the
    // lengths' 8 bytes, the key and the value are all in it: this split cannot fail.
    let (key, value) = body
        .get(8..)
        .and_then(|kv| kv.split_at_checked(key_len as usize))
        .ok_or(RecordError::Truncated { need: len })?;
    Ok((key, value, len))
}

/// Decodes exactly one record read through pointer `p` (one read of `p.len` bytes).
pub fn decode_pointed(buf: &[u8], p: Pointer) -> std::result::Result<(&[u8], &[u8]), String> {
    let at = p.offset;
    if at < VLOG_HEADER_BYTES {
        return Err(format!("record at offset {at}: inside the file header"));
    }
    match decode_record(buf) {
        Ok((k, v, len)) if len == u64::from(p.len) => Ok((k, v)),
        Ok((_, _, len)) => Err(format!(
            "record at offset {at}: record is {len} bytes, pointer says {}",
            p.len
        )),
        Err(RecordError::Truncated { need }) => Err(format!(
            "record at offset {at}: lengths say {need} bytes, pointer says {}",
            p.len
        )),
        Err(RecordError::Bad(d)) => Err(format!("record at offset {at}: {d}")),
    }
}

/// The record framing, for `lidb_storage::tail::classify`.
struct VlogFraming;

impl Framing for VlogFraming {
    fn claimed_len(&self, rest: &[u8]) -> Option<u64> {
        if (rest.len() as u64) < RECORD_HEADER_BYTES {
            return None;
        }
        record_len(le_u32(rest, 4), le_u32(rest, 8))
    }

    fn intact(&self, rest: &[u8], len: u64) -> bool {
        rest.get(4..len as usize)
            .is_some_and(|body| crc32c::crc32c(body) == le_u32(rest, 0))
    }

    fn max_len(&self) -> u64 {
        RECORD_HEADER_BYTES + MAX_KEY_BYTES + MAX_VALUE_BYTES
    }
}

/// Bytes after a bad record that recovery reads to classify it; a longer tail is damage when
/// nothing in this window settles it (a torn tail is shorter than one record).
const CLASSIFY_WINDOW_BYTES: u64 = 256 << 20;

/// Classifies the bad record at `offset` of the log at `path` (`detail` says why it is bad).
fn classify_tail(
    storage: &dyn Storage,
    path: &Path,
    offset: u64,
    size: u64,
    detail: &str,
) -> Result<BadTail> {
    let file = storage.open(path, ReadMode::Buffered)?;
    let mut tail = vec![0u8; (size - offset).min(CLASSIFY_WINDOW_BYTES) as usize];
    file.read_at(offset, &mut tail)?;
    Ok(classify(&VlogFraming, &tail, offset, size, detail))
}

/// Appends records to one value log.
#[derive(Debug)]
pub struct VlogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    number: u64,
    /// Why the writer refuses appends and syncs: an earlier append or sync failed.
    poisoned: Option<String>,
    /// Bytes known durable; `sync` is a no-op when nothing was appended after them.
    synced_len: u64,
}

impl VlogWriter {
    /// Creates `{number:06}.vlog` in `dir` with its header, durably (file and directory synced).
    pub fn create(storage: &dyn Storage, dir: &Path, number: u64) -> Result<VlogWriter> {
        Self::create_at(storage, &vlog_path(dir, number), VlogKind::Log, number)
    }

    /// Creates a log of `kind` at `path` (the static tier names its own `.svlog`).
    pub fn create_at(
        storage: &dyn Storage,
        path: &Path,
        kind: VlogKind,
        number: u64,
    ) -> Result<VlogWriter> {
        let mut file = storage.create(path)?;
        file.append(&encode_header(kind, number))?;
        file.sync()?;
        if let Some(dir) = path.parent() {
            storage.sync_dir(dir)?;
        }
        let synced_len = file.len();
        Ok(VlogWriter {
            file,
            path: path.to_path_buf(),
            number,
            poisoned: None,
            synced_len,
        })
    }

    /// Recovers `{number:06}.vlog` after a crash: [`VlogWriter::check_tail`], then
    /// [`VlogWriter::reopen_cut`]. Returns what was cut, if anything.
    pub fn reopen(
        storage: &dyn Storage,
        dir: &Path,
        number: u64,
        mode: RecoveryMode,
    ) -> Result<(VlogWriter, Option<LogCut>)> {
        let cut = Self::check_tail(storage, dir, number, mode)?;
        let w = Self::reopen_cut(storage, dir, number, cut.as_ref())?;
        Ok((w, cut))
    }

    /// Scans `{number:06}.vlog` and classifies a bad record (`lidb_storage::tail`); writes nothing.
    /// Returns the cut `mode` allows, if the log has a bad tail.
    ///
    /// Errors: `Corruption` naming the file and offset when `mode` does not allow the cut (in the
    /// default mode: damage, an intact record after a bad one or a whole record that fails its
    /// checksum); `Corruption` when the header is not this log's.
    pub fn check_tail(
        storage: &dyn Storage,
        dir: &Path,
        number: u64,
        mode: RecoveryMode,
    ) -> Result<Option<LogCut>> {
        let path = vlog_path(dir, number);
        let size = storage.file_size(&path)?;
        let bad = if size < VLOG_HEADER_BYTES {
            // The header is synced when the log is created: a shorter file is a torn creation.
            let detail = format!("file of {size} bytes is shorter than its header");
            (size > 0).then_some(BadTail {
                kind: TailKind::Torn,
                offset: 0,
                bytes: size,
                records_after: 0,
                detail,
            })
        } else {
            let file = storage.open(&path, ReadMode::Buffered)?;
            let mut scan = VlogScan::start(file, VlogKind::Log, number)?;
            let mut stop = None;
            for item in scan.by_ref() {
                match item {
                    Ok(_) => {}
                    Err(Error::Corruption { detail, .. }) => {
                        stop = Some(detail);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            let valid = scan.offset;
            match stop {
                Some(d) if valid < size => Some(classify_tail(storage, &path, valid, size, &d)?),
                _ => None,
            }
        };
        match &bad {
            None => Ok(None),
            Some(t) if mode.allows(t.kind) => Ok(Some(LogCut::of_tail(path, t))),
            Some(t) => Err(refused(&path, t, mode)),
        }
    }

    /// Carries out `cut` (from [`VlogWriter::check_tail`]) durably, saving the bytes of a damage
    /// cut under `lost/` first, and opens the log to append after its last intact record.
    pub fn reopen_cut(
        storage: &dyn Storage,
        dir: &Path,
        number: u64,
        cut: Option<&LogCut>,
    ) -> Result<VlogWriter> {
        let path = vlog_path(dir, number);
        if let Some(c) = cut {
            if c.kind == CutKind::Damage {
                save_lost(storage, dir, &path, c.offset)?;
            }
            storage.truncate(&path, c.offset)?;
        }
        let mut file = storage.open_append(&path)?;
        // What survived may sit only in the OS cache (a process crash): the first `sync` syncs.
        let mut synced_len = 0;
        if file.is_empty() {
            file.append(&encode_header(VlogKind::Log, number))?;
            file.sync()?;
            synced_len = file.len();
        }
        Ok(VlogWriter {
            file,
            path,
            number,
            poisoned: None,
            synced_len,
        })
    }

    /// Appends one record; the pointer is valid at once and durable after `sync`.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<Pointer> {
        self.check_usable()?;
        if key.len() as u64 > MAX_KEY_BYTES || value.len() as u64 > MAX_VALUE_BYTES {
            return Err(Error::InvalidOption(format!(
                "record of key {} bytes and value {} bytes exceeds the value log limits \
                 ({MAX_KEY_BYTES}, {MAX_VALUE_BYTES})",
                key.len(),
                value.len()
            )));
        }
        let rec = encode_record(key, value);
        let offset = self.file.len();
        if let Err(e) = self.file.append(&rec) {
            self.poisoned = Some(e.to_string());
            return Err(e);
        }
        Ok(Pointer {
            file: self.number,
            offset,
            len: rec.len() as u32,
        })
    }

    /// Makes every appended record durable (nothing to do if none was appended since the last
    /// sync).
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        let len = self.file.len();
        if len == self.synced_len {
            return Ok(());
        }
        self.file
            .sync()
            .inspect_err(|e| self.poisoned = Some(e.to_string()))?;
        self.synced_len = len;
        Ok(())
    }

    /// `Closed` naming the earlier failure if an append or sync of this writer failed: its
    /// records since the last good sync may be lost, and a retried sync could report them
    /// durable, so nothing written after them may be acknowledged.
    pub fn check_usable(&self) -> Result<()> {
        match &self.poisoned {
            None => Ok(()),
            Some(why) => Err(Error::Closed(format!(
                "{}: an earlier append or sync failed: {why}",
                self.path.display()
            ))),
        }
    }

    /// Bytes in the file, header included.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.file.len() <= VLOG_HEADER_BYTES
    }

    pub fn number(&self) -> u64 {
        self.number
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The open handles of a reader, by log number.
type Handles = HashMap<u64, Arc<dyn RandomAccessFile>>;

/// Reads records of the value logs of one directory by pointer, from any thread.
///
/// The handle map is published through an `ArcSwap` and replaced whole (copy on write) when a
/// log is opened or forgotten, which is rare: a read loads it into a guard of its own thread and
/// reads through the handle it finds there, so reads take no lock and write no reference count
/// that other readers write.
#[derive(Debug)]
pub struct VlogReader {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    mode: ReadMode,
    files: ArcSwap<Handles>,
}

impl VlogReader {
    pub fn new(storage: Arc<dyn Storage>, dir: PathBuf, mode: ReadMode) -> VlogReader {
        VlogReader {
            storage,
            dir,
            mode,
            files: ArcSwap::from_pointee(HashMap::new()),
        }
    }

    /// Runs `read` on the handle of log `number`: the cached one, or one opened now (its header
    /// checked) when none is cached or the cached one is shorter than `need` bytes (the log grew
    /// since it was opened).
    fn with_handle<R>(
        &self,
        number: u64,
        need: u64,
        read: impl FnOnce(&dyn RandomAccessFile) -> Result<R>,
    ) -> Result<R> {
        {
            let files = self.files.load();
            if let Some(f) = files.get(&number)
                && f.len() >= need
            {
                return read(f.as_ref());
            }
        }
        let f = self.open_handle(number)?;
        read(f.as_ref())
    }

    /// Opens log `number`, checks its header and caches the handle.
    fn open_handle(&self, number: u64) -> Result<Arc<dyn RandomAccessFile>> {
        let path = vlog_path(&self.dir, number);
        let f = self.storage.open(&path, self.mode)?;
        let mut h = [0u8; VLOG_HEADER_BYTES as usize];
        if f.len() < VLOG_HEADER_BYTES {
            return Err(corruption(
                &path,
                format!("file of {} bytes has no header", f.len()),
            ));
        }
        f.read_at(0, &mut h)?;
        check_header(&h, VlogKind::Log, number).map_err(|d| corruption(&path, d))?;
        self.files.rcu(|m| {
            let mut m = Handles::clone(m);
            m.insert(number, Arc::clone(&f));
            m
        });
        Ok(f)
    }

    /// The key and value of the record `p` points to: ONE read of `p.len` bytes.
    pub fn read(&self, p: Pointer) -> Result<(Vec<u8>, Vec<u8>)> {
        let end = p.offset.saturating_add(u64::from(p.len));
        self.with_handle(p.file, end, |f| self.read_in(f, p, end))
    }

    /// `read` through handle `f` of log `p.file`; `end` is the record's end.
    fn read_in(
        &self,
        f: &dyn RandomAccessFile,
        p: Pointer,
        end: u64,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let path = vlog_path(&self.dir, p.file);
        if end > f.len() {
            return Err(corruption(
                &path,
                format!(
                    "record at offset {}: {} bytes reach past the end of the file ({} bytes)",
                    p.offset,
                    p.len,
                    f.len()
                ),
            ));
        }
        if p.offset < VLOG_HEADER_BYTES || u64::from(p.len) < RECORD_HEADER_BYTES {
            return Err(corruption(
                &path,
                format!(
                    "record at offset {}: not a record ({} bytes)",
                    p.offset, p.len
                ),
            ));
        }
        let mut buf = vec![0u8; p.len as usize];
        f.read_at(p.offset, &mut buf)?;
        let (k, v) = decode_pointed(&buf, p).map_err(|d| corruption(&path, d))?;
        Ok((k.to_vec(), v.to_vec()))
    }

    /// ONE read of bytes `[offset, offset + len)` of log `number`, past its header: the span of
    /// several nearby records a scan fetches at once (`store::scan_batch`), each then decoded
    /// with [`decode_pointed`] from its slice.
    pub fn read_span(&self, number: u64, offset: u64, len: u64) -> Result<Vec<u8>> {
        let end = offset.saturating_add(len);
        self.with_handle(number, end, |f| {
            if offset < VLOG_HEADER_BYTES || end > f.len() {
                return Err(corruption(
                    vlog_path(&self.dir, number),
                    format!(
                        "span [{offset}, {end}) is not within the records (file of {} bytes)",
                        f.len()
                    ),
                ));
            }
            let mut buf = vec![0u8; len as usize];
            f.read_at(offset, &mut buf)?;
            Ok(buf)
        })
    }

    /// Drops the cached handle of log `number` (before the file is deleted).
    pub fn forget(&self, number: u64) {
        self.files.rcu(|m| {
            let mut m = Handles::clone(m);
            m.remove(&number);
            m
        });
    }

    /// Reads log `number` sequentially from its first record (a fresh handle, not cached).
    pub fn scan(&self, number: u64) -> Result<VlogScan> {
        let f = self
            .storage
            .open(&vlog_path(&self.dir, number), self.mode)?;
        VlogScan::start(f, VlogKind::Log, number)
    }
}

/// A record found by a scan: its pointer, key and value.
pub type ScanItem = (Pointer, Vec<u8>, Vec<u8>);

/// Reads a log's records in order, in chunks of 1 MiB. Yields `(pointer, key, value)`; stops
/// after the first error (a bad or truncated record, as `Corruption` naming its offset).
#[derive(Debug)]
pub struct VlogScan {
    file: Arc<dyn RandomAccessFile>,
    number: u64,
    /// File offset of the next record.
    offset: u64,
    /// Bytes of the file from `buf_start`.
    buf: Vec<u8>,
    buf_start: u64,
    done: bool,
}

impl VlogScan {
    /// Checks the header of `file` and positions the scan at its first record.
    pub fn start(file: Arc<dyn RandomAccessFile>, kind: VlogKind, number: u64) -> Result<VlogScan> {
        let path = file.path().to_path_buf();
        if file.len() < VLOG_HEADER_BYTES {
            return Err(corruption(
                &path,
                format!("file of {} bytes has no header", file.len()),
            ));
        }
        let mut h = [0u8; VLOG_HEADER_BYTES as usize];
        file.read_at(0, &mut h)?;
        check_header(&h, kind, number).map_err(|d| corruption(&path, d))?;
        Ok(VlogScan {
            file,
            number,
            offset: VLOG_HEADER_BYTES,
            buf: Vec::new(),
            buf_start: VLOG_HEADER_BYTES,
            done: false,
        })
    }

    /// Offset of the next record: after the scan ends cleanly, the end of the last record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads from `self.offset` at least `need` bytes (or to the end of the file).
    fn refill(&mut self, need: u64) -> Result<()> {
        let len = need
            .max(SCAN_CHUNK_BYTES)
            .min(self.file.len() - self.offset);
        let mut buf = vec![0u8; len as usize];
        self.file.read_at(self.offset, &mut buf)?;
        self.buf = buf;
        self.buf_start = self.offset;
        Ok(())
    }

    fn next_record(&mut self) -> Result<Option<ScanItem>> {
        let path = self.file.path().to_path_buf();
        if self.offset >= self.file.len() {
            return Ok(None);
        }
        loop {
            // The scan consumes only records whole in `buf`, and a refill restarts `buf` at
            // `offset`: the next record starts inside `buf` or at its end.
            let at = (self.offset - self.buf_start) as usize;
            debug_assert!(
                at <= self.buf.len(),
                "the scan's place is inside its buffer"
            );
            let avail = self
                .buf
                .get(at..)
                .ok_or_else(|| corruption(&path, "scan lost its place in its buffer"))?;
            match decode_record(avail) {
                Ok((k, v, len)) => {
                    let p = Pointer {
                        file: self.number,
                        offset: self.offset,
                        len: len as u32,
                    };
                    let out = (p, k.to_vec(), v.to_vec());
                    self.offset += len;
                    return Ok(Some(out));
                }
                Err(RecordError::Truncated { need: n }) => {
                    if self.offset + n > self.file.len() {
                        return Err(corruption(
                            &path,
                            format!(
                                "record at offset {}: truncated ({} of {n} bytes present)",
                                self.offset,
                                self.file.len() - self.offset
                            ),
                        ));
                    }
                    // decode_record reports truncation only when `avail` is short, and a
                    // refill reads at least `n` bytes: at most two refills per record.
                    debug_assert!((avail.len() as u64) < n);
                    if avail.len() as u64 >= n {
                        return Err(corruption(&path, "scan stalled"));
                    }
                    self.refill(n)?;
                }
                Err(RecordError::Bad(d)) => {
                    return Err(corruption(
                        &path,
                        format!("record at offset {}: {d}", self.offset),
                    ));
                }
            }
        }
    }
}

/// One step of an iterator that stops for good after its end or its first error: `step`'s
/// outcome as an `Iterator::next` item, setting `done` when there is nothing more to give.
pub(crate) fn fused<T>(done: &mut bool, step: Result<Option<T>>) -> Option<Result<T>> {
    let item = step.transpose();
    *done = !matches!(item, Some(Ok(_)));
    item
}

impl Iterator for VlogScan {
    type Item = Result<ScanItem>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.next_record();
        fused(&mut self.done, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_not_a_record() {
        assert!(matches!(
            decode_record(&[0u8; 64]),
            Err(RecordError::Bad(_))
        ));
    }

    #[test]
    fn record_round_trip_and_every_truncation() {
        let rec = encode_record(b"key", b"value");
        assert_eq!(
            decode_record(&rec),
            Ok((&b"key"[..], &b"value"[..], rec.len() as u64))
        );
        for cut in 0..rec.len() {
            assert!(matches!(
                decode_record(rec.get(..cut).unwrap_or_default()),
                Err(RecordError::Truncated { .. })
            ));
        }
    }

    #[test]
    fn header_checks() {
        let h = encode_header(VlogKind::Log, 7);
        assert_eq!(check_header(&h, VlogKind::Log, 7), Ok(()));
        assert!(check_header(&h, VlogKind::Static, 7).is_err());
        assert!(check_header(&h, VlogKind::Log, 8).is_err());
        for i in 0..h.len() {
            let mut bad = h;
            if let Some(b) = bad.get_mut(i) {
                *b ^= 0x10;
            }
            assert!(check_header(&bad, VlogKind::Log, 7).is_err());
        }
    }
}
