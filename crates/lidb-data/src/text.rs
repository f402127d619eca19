//! Text key files: one key per line, keys are raw bytes (not necessarily UTF-8), plain or
//! zstd-compressed (detected by the zstd magic bytes, see `fileio.rs`).
//!
//! Line rules, identical for reader and writer:
//! 1. Keys are separated by `\n`; the `\n` is not part of the key. A `\r` is kept as a key byte
//!    (files are read exactly as bytes).
//! 2. A final `\n` ends the last key and does not start an empty one; a file without a final
//!    `\n` ends its last key at end of file. The empty file holds no keys. An empty line in the
//!    middle is the empty key.
//! 3. The writer ends every key with `\n`, and refuses (`Format`) a key that contains `\n`,
//!    since it could not be read back as one key.
//!
//! [`read_keys`] requires byte-order non-decreasing keys and reports the first out-of-order
//! position as `Unsorted`; [`read_keys_any_order`] accepts any order.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result, format_error};
use crate::fileio::{Input, write_atomic};
use crate::info::first_unsorted;

/// Reads a text key file whose keys must be in non-decreasing byte order.
pub fn read_keys(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
    let path = path.as_ref();
    let keys = read_keys_any_order(path)?;
    match first_unsorted(&keys) {
        Some(position) => Err(Error::Unsorted {
            path: path.to_path_buf(),
            position,
        }),
        None => Ok(keys),
    }
}

/// Reads a text key file in whatever order its keys are.
pub fn read_keys_any_order(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
    let bytes = Input::open(path.as_ref())?.read_to_end()?;
    Ok(split_lines(&bytes))
}

/// Writes `keys`, one per line, atomically (zstd when `path` ends in `.zst`).
pub fn write_keys(path: impl AsRef<Path>, keys: &[Vec<u8>]) -> Result<()> {
    let path = path.as_ref();
    if let Some(position) = keys.iter().position(|k| k.contains(&b'\n')) {
        return Err(format_error(
            path,
            format!(
                "key at position {position} contains a newline byte and cannot be written as one line"
            ),
        ));
    }
    write_atomic(path, |out: &mut dyn Write| {
        for key in keys {
            out.write_all(key)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// Splits file bytes into keys by the line rules of the module doc.
fn split_lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    body.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{TempDir, TestResult};

    fn keys(list: &[&[u8]]) -> Vec<Vec<u8>> {
        list.iter().map(|k| k.to_vec()).collect()
    }

    #[test]
    fn line_rules() {
        assert_eq!(split_lines(b""), Vec::<Vec<u8>>::new());
        assert_eq!(split_lines(b"\n"), keys(&[b""]));
        assert_eq!(split_lines(b"a\nb"), keys(&[b"a", b"b"]));
        assert_eq!(split_lines(b"a\nb\n"), keys(&[b"a", b"b"]));
        assert_eq!(split_lines(b"a\n\nb\n"), keys(&[b"a", b"", b"b"]));
        assert_eq!(split_lines(b"a\r\nb\r\n"), keys(&[b"a\r", b"b\r"]));
    }

    #[test]
    fn round_trip_plain_and_zst() -> TestResult {
        let dir = TempDir::new("text_rt")?;
        let list = keys(&[b"", b"a", b"ab", b"ab", b"b\xff\x00", b"zebra"]);
        for name in ["w.txt", "w.txt.zst"] {
            let p = dir.path().join(name);
            write_keys(&p, &list)?;
            assert_eq!(read_keys(&p)?, list, "{name}");
            write_keys(&p, &[])?;
            assert_eq!(read_keys(&p)?, Vec::<Vec<u8>>::new(), "{name}");
        }
        Ok(())
    }

    #[test]
    fn unsorted_and_newline_errors() -> TestResult {
        let dir = TempDir::new("text_err")?;
        let p = dir.path().join("u.txt.zst");
        let list = keys(&[b"apple", b"banana", b"ban", b"cherry"]);
        write_keys(&p, &list)?;
        match read_keys(&p) {
            Err(Error::Unsorted { position, .. }) => assert_eq!(position, 2),
            other => panic!("expected Unsorted, got {other:?}"),
        }
        assert_eq!(read_keys_any_order(&p)?, list);
        let bad = keys(&[b"ok", b"two\nlines"]);
        match write_keys(dir.path().join("n.txt"), &bad) {
            Err(Error::Format { detail, .. }) => assert!(detail.contains("position 1"), "{detail}"),
            other => panic!("expected Format, got {other:?}"),
        }
        assert!(!dir.path().join("n.txt").exists());
        Ok(())
    }

    #[test]
    fn missing_and_corrupt() -> TestResult {
        let dir = TempDir::new("text_bad")?;
        let missing = dir.path().join("nope.txt");
        assert!(matches!(read_keys(&missing), Err(Error::Io { .. })));
        let p = dir.path().join("c.txt.zst");
        write_keys(&p, &keys(&[b"alpha", b"beta", b"gamma"]))?;
        let bytes = std::fs::read(&p)?;
        std::fs::write(&p, bytes.get(..bytes.len() - 2).unwrap_or_default())?;
        assert!(matches!(read_keys(&p), Err(Error::Format { .. })));
        Ok(())
    }
}
