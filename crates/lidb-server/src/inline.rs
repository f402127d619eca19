//! Inline commands: one line of space-separated arguments ending in `\n` (a `\r` before it is
//! dropped), as nc, telnet and redis-benchmark's PING_INLINE send them. Arguments may be quoted as
//! Redis's `sdssplitargs` allows: `"..."` with `\n \r \t \b \a \\ \" \xHH` escapes, or `'...'`
//! with `\'`; a closing quote must be followed by a space or the end of the line.
//!
//! Pure; called by the codec only. Never reads past the first newline, and refuses a line longer
//! than the cap whether or not its newline has arrived.

use bytes::{Bytes, BytesMut};

use crate::codec::DecodeError;

/// The next inline command of `buf` (consumed with its newline); `None` until its newline has
/// arrived; an empty list for a blank line.
pub fn decode(buf: &mut BytesMut, max_line_bytes: u64) -> Result<Option<Vec<Bytes>>, DecodeError> {
    let too_big = || DecodeError::Protocol("Protocol error: too big inline request".into());
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() as u64 > max_line_bytes {
            return Err(too_big());
        }
        return Ok(None);
    };
    if nl as u64 > max_line_bytes {
        return Err(too_big());
    }
    let line = buf.split_to(nl + 1);
    let line = line.get(..nl).unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    split_args(line)
        .map(Some)
        .ok_or_else(|| DecodeError::Protocol("Protocol error: unbalanced quotes in request".into()))
}

fn hex(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

/// Splits a line into arguments; `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut args = Vec::new();
    let mut i = 0;
    let at = |i: usize| line.get(i).copied();
    loop {
        while at(i).is_some_and(|b| b.is_ascii_whitespace()) {
            i += 1;
        }
        let Some(first) = at(i) else {
            return Some(args);
        };
        let mut arg = Vec::new();
        match first {
            b'"' => {
                i += 1;
                loop {
                    match (at(i)?, at(i + 1)) {
                        (b'\\', Some(b'x'))
                            if at(i + 2).and_then(hex).is_some()
                                && at(i + 3).and_then(hex).is_some() =>
                        {
                            let hi = at(i + 2).and_then(hex)?;
                            let lo = at(i + 3).and_then(hex)?;
                            arg.push(hi * 16 + lo);
                            i += 4;
                        }
                        (b'\\', Some(c)) => {
                            arg.push(match c {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 8,
                                b'a' => 7,
                                other => other,
                            });
                            i += 2;
                        }
                        (b'"', next) => {
                            if next.is_some_and(|b| !b.is_ascii_whitespace()) {
                                return None;
                            }
                            i += 1;
                            break;
                        }
                        (b, _) => {
                            arg.push(b);
                            i += 1;
                        }
                    }
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    match (at(i)?, at(i + 1)) {
                        (b'\\', Some(b'\'')) => {
                            arg.push(b'\'');
                            i += 2;
                        }
                        (b'\'', next) => {
                            if next.is_some_and(|b| !b.is_ascii_whitespace()) {
                                return None;
                            }
                            i += 1;
                            break;
                        }
                        (b, _) => {
                            arg.push(b);
                            i += 1;
                        }
                    }
                }
            }
            _ => {
                while let Some(b) = at(i).filter(|b| !b.is_ascii_whitespace()) {
                    arg.push(b);
                    i += 1;
                }
            }
        }
        args.push(Bytes::from(arg));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s.as_bytes()).map(|v| {
            v.iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect()
        })
    }

    #[test]
    fn splits_like_redis() {
        assert_eq!(
            split("  set a  b "),
            Some(vec!["set".into(), "a".into(), "b".into()])
        );
        assert_eq!(split(r#"set "a b" 'c d'"#).unwrap()[1..], ["a b", "c d"]);
        assert_eq!(split(r#"echo "\x41\n""#).unwrap()[1], "A\n");
        assert_eq!(split(r#"echo 'it\'s'"#).unwrap()[1], "it's");
        assert_eq!(split(r#"echo "open"#), None);
        assert_eq!(split(r#"echo "a"b"#), None);
        assert_eq!(split(""), Some(vec![]));
    }

    #[test]
    fn waits_for_the_newline_and_caps_the_line() {
        let mut buf = BytesMut::from(&b"PING"[..]);
        assert!(decode(&mut buf, 16).unwrap().is_none());
        buf.extend_from_slice(b"\r\nECHO x\n");
        assert_eq!(
            decode(&mut buf, 16).unwrap().unwrap(),
            vec![Bytes::from("PING")]
        );
        assert_eq!(decode(&mut buf, 16).unwrap().unwrap().len(), 2);
        let mut long = BytesMut::from(&[b'a'; 17][..]);
        assert!(decode(&mut long, 16).is_err());
    }
}
