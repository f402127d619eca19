//! Shared file plumbing for the key-file formats: reading plain or zstd-compressed input, and
//! writing a file atomically.
//!
//! Invariants:
//! 1. Compression is detected by the zstd frame magic `28 B5 2F FD` at the start of the file,
//!    never by the file name. A file shorter than 4 bytes is plain.
//! 2. zstd input is decoded as a stream (concatenated frames included): the compressed bytes are
//!    never held in memory as a whole.
//! 3. A failure of the underlying file is reported as `Io`; a failure of the zstd decoder on
//!    readable bytes (corrupt or truncated stream) as `Format`.
//! 4. [`write_atomic`] writes to a temporary file in the destination directory, syncs it and
//!    renames it over the destination: a crash leaves either the old file or the complete new
//!    one under the name, never a partial one.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Result, format_error, io_error};

/// The four magic bytes that open every zstd frame (little-endian 0xFD2FB528).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// zstd compression level used for `.zst` outputs.
const ZSTD_LEVEL: i32 = 3;

/// A file reader that remembers whether the file itself failed, so decoder errors can be told
/// apart from I/O errors.
struct Tracked {
    file: File,
    failed: Rc<Cell<bool>>,
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let result = self.file.read(buf);
        if result.is_err() {
            self.failed.set(true);
        }
        result
    }
}

/// An opened key file: plain bytes or the decoded zstd stream, read front to back.
pub(crate) struct Input {
    path: PathBuf,
    reader: Box<dyn Read>,
    compressed: bool,
    file_failed: Rc<Cell<bool>>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("path", &self.path)
            .field("compressed", &self.compressed)
            .finish()
    }
}

impl Input {
    /// Opens `path`, detecting zstd by its magic bytes.
    pub(crate) fn open(path: &Path) -> Result<Input> {
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let failed = Rc::new(Cell::new(false));
        let mut tracked = Tracked {
            file,
            failed: Rc::clone(&failed),
        };
        let mut magic = [0u8; 4];
        let got = read_full(&mut tracked, &mut magic).map_err(|e| io_error(path, e))?;
        let head: Vec<u8> = magic.iter().take(got).copied().collect();
        let compressed = head == ZSTD_MAGIC;
        let rest = io::Cursor::new(head).chain(tracked);
        let reader: Box<dyn Read> = if compressed {
            let decoder = zstd::stream::read::Decoder::new(rest).map_err(|e| io_error(path, e))?;
            Box::new(decoder)
        } else {
            Box::new(BufReader::with_capacity(1 << 16, rest))
        };
        Ok(Input {
            path: path.to_path_buf(),
            reader,
            compressed,
            file_failed: failed,
        })
    }

    /// Whether the file is zstd-compressed.
    #[cfg_attr(not(test), expect(dead_code, reason = "used by tests and debugging"))]
    pub(crate) fn compressed(&self) -> bool {
        self.compressed
    }

    /// The path the input was opened from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads until `buf` is full or the input ends; returns how many bytes were read.
    pub(crate) fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        read_full(&mut self.reader, buf).map_err(|e| self.classify(e))
    }

    /// Reads the rest of the input into memory.
    pub(crate) fn read_to_end(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match self.reader.read_to_end(&mut out) {
            Ok(_) => Ok(out),
            Err(e) => Err(self.classify(e)),
        }
    }

    fn classify(&self, e: io::Error) -> crate::Error {
        if self.compressed && !self.file_failed.get() {
            format_error(&self.path, format!("corrupt or truncated zstd stream: {e}"))
        } else {
            io_error(&self.path, e)
        }
    }
}

/// Reads until `buf` is full or `reader` ends, retrying interrupted reads.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..) {
        if rest.is_empty() {
            break;
        }
        match reader.read(rest) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Whether outputs to `path` are zstd-compressed: the name ends in `.zst`.
pub(crate) fn wants_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "zst")
}

/// Writes a file atomically: `body` writes the (uncompressed) contents into the given writer,
/// which compresses with zstd when `path` ends in `.zst`. The file appears under `path` only
/// once complete and synced.
pub(crate) fn write_atomic(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_then_rename(path, &tmp, body);
    if result.is_err() {
        // Best effort: the temporary file may not even exist.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_then_rename(
    path: &Path,
    tmp: &Path,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let file = File::create(tmp).map_err(|e| io_error(tmp, e))?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    if wants_zstd(path) {
        let mut encoder = zstd::stream::write::Encoder::new(&mut out, ZSTD_LEVEL)
            .map_err(|e| io_error(tmp, e))?;
        body(&mut encoder).map_err(|e| io_error(tmp, e))?;
        encoder.finish().map_err(|e| io_error(tmp, e))?;
    } else {
        body(&mut out).map_err(|e| io_error(tmp, e))?;
    }
    let file = out
        .into_inner()
        .map_err(|e| io_error(tmp, e.into_error()))?;
    file.sync_all().map_err(|e| io_error(tmp, e))?;
    drop(file);
    std::fs::rename(tmp, path).map_err(|e| io_error(path, e))?;
    sync_parent(path)
}

/// Syncs the directory holding `path` so the rename itself is durable. A failure is the
/// write's failure: the file is in place but may not survive a crash, and the caller must know.
fn sync_parent(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

/// A fresh temporary name next to `path`: `.<name>.tmp.<pid>.<counter>`.
fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".to_string());
    path.with_file_name(format!(".{name}.tmp.{}.{n}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{TempDir, TestResult};

    #[test]
    fn detects_zstd_by_magic_not_name() -> TestResult {
        let dir = TempDir::new("fileio_magic")?;
        let plain = dir.path().join("looks.zst.not");
        std::fs::write(&plain, b"hello")?;
        let mut input = Input::open(&plain)?;
        assert!(!input.compressed());
        assert_eq!(input.read_to_end()?, b"hello".to_vec());

        // A compressed file under a name without .zst is still decoded.
        let packed = zstd::encode_all(&b"hello world"[..], 3)?;
        let hidden = dir.path().join("plain_name.bin");
        std::fs::write(&hidden, packed)?;
        let mut input = Input::open(&hidden)?;
        assert!(input.compressed());
        assert_eq!(input.read_to_end()?, b"hello world".to_vec());
        Ok(())
    }

    #[test]
    fn short_files_are_plain() -> TestResult {
        let dir = TempDir::new("fileio_short")?;
        for len in 0..4usize {
            let p = dir.path().join(format!("short{len}"));
            let bytes = ZSTD_MAGIC.get(..len).unwrap_or_default();
            std::fs::write(&p, bytes)?;
            let mut input = Input::open(&p)?;
            assert!(!input.compressed());
            assert_eq!(input.read_to_end()?, bytes.to_vec());
        }
        Ok(())
    }

    #[test]
    fn atomic_write_leaves_no_temp_files() -> TestResult {
        let dir = TempDir::new("fileio_atomic")?;
        let p = dir.path().join("out.bin");
        write_atomic(&p, |w| w.write_all(b"abc"))?;
        write_atomic(&p, |w| w.write_all(b"defg"))?;
        assert_eq!(std::fs::read(&p)?, b"defg".to_vec());
        let failed = write_atomic(&p, |_| Err(io::Error::other("boom")));
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&p)?, b"defg".to_vec(), "old file kept");
        let names: Vec<_> = std::fs::read_dir(dir.path())?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "only the output remains: {names:?}");
        Ok(())
    }
}
