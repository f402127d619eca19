//! The RESP face of a fine-wire shard: an [`Engine`] over a running [`Server`]'s index and
//! durable log, so `lidb serve --engine finedex --fine-listen ADDR` serves one shard over RESP
//! (lidb-server) and fine-wire at once, from the same data.
//!
//! Data model: fine-wire keys and values are u64, so here RESP keys and values are the
//! canonical decimal text of a u64 (`SET 42 7`, `GET 42` -> "7"): ASCII digits, no sign, no
//! leading zero (except "0" itself), at most 20 digits, at most u64::MAX. Anything else, and any
//! key outside the shard's range, is refused with an [`EngineError`] naming the bytes or the
//! range (lidb-server answers it as `-ERR engine: ...`); nothing here panics on any bytes.
//!
//! Order: keys are ordered as numbers, not as bytes. A scan bound is a key, or a key followed
//! by one 0 byte (lidb-server's "just after this key", which walks and SCAN cursors use); the
//! empty start is the shard's first key.
//!
//! Threads: any, as the [`Engine`] trait asks; every call goes to [`Server`]'s in-process API,
//! whose writes take the same stripe lock and log as fine-wire writes (`server/local.rs`).

use std::path::PathBuf;

use lidb_engines::{Engine, EngineError, EngineResult, MemorySplit, Probe, ReadSplit, Space};

use crate::error::WireError;
use crate::server::Server;

/// Digits of u64::MAX.
const MAX_DIGITS: usize = 20;

/// A fine-wire shard served over RESP.
#[derive(Debug)]
pub struct ShardEngine {
    server: Server,
    /// The store's directory (for `space()`), when the server is durable.
    dir: Option<PathBuf>,
}

impl ShardEngine {
    /// Serves `server`'s data over the engine trait; `dir` is its store's directory, if any.
    pub fn new(server: Server, dir: Option<PathBuf>) -> ShardEngine {
        ShardEngine { server, dir }
    }

    /// The fine-wire server underneath.
    pub fn server(&self) -> &Server {
        &self.server
    }
}

/// The u64 whose canonical decimal text is `bytes`, or None.
pub fn parse_decimal(bytes: &[u8]) -> Option<u64> {
    let canonical = !bytes.is_empty()
        && bytes.len() <= MAX_DIGITS
        && bytes.iter().all(u8::is_ascii_digit)
        && (bytes.len() == 1 || bytes.first() != Some(&b'0'));
    if !canonical {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Up to 40 bytes of `bytes` for an error message, non-printable bytes escaped.
fn shown(bytes: &[u8]) -> String {
    let cut = bytes.get(..40).unwrap_or(bytes);
    let mut s: String = cut.escape_ascii().to_string();
    if cut.len() < bytes.len() {
        s.push_str("...");
    }
    s
}

fn number(what: &str, bytes: &[u8]) -> EngineResult<u64> {
    parse_decimal(bytes).ok_or_else(|| {
        EngineError::InvalidOption(format!(
            "{what} \"{}\" is not a u64 in decimal: this server also serves fine-wire, so keys \
             and values are u64 written as decimal digits (0 to 18446744073709551615, no sign, \
             no leading zero)",
            shown(bytes)
        ))
    })
}

fn wire(e: WireError) -> EngineError {
    EngineError::Other(e.to_string())
}

/// A scan bound: a key, or a key and one 0 byte (the key's successor); `after` is that flag.
fn bound(bytes: &[u8]) -> EngineResult<(u64, bool)> {
    match bytes.split_last() {
        Some((0, key)) => Ok((number("scan bound", key)?, true)),
        _ => Ok((number("scan bound", bytes)?, false)),
    }
}

impl Engine for ShardEngine {
    fn name(&self) -> &'static str {
        "finedex"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let k = number("key", key)?;
        let v = number("value", value)?;
        self.server.insert(k, v).map(|_| ()).map_err(wire)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let k = number("key", key)?;
        let v = self.server.get(k).map_err(wire)?;
        Ok(v.map(|v| v.to_string().into_bytes()))
    }
    /// Every key and value is in memory.
    fn get_if_in_memory(&self, key: &[u8]) -> EngineResult<Option<Option<Vec<u8>>>> {
        self.get(key).map(Some)
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        let k = number("key", key)?;
        self.server.remove(k).map(|_| ()).map_err(wire)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        let lo = if start.is_empty() {
            Some(0)
        } else {
            let (k, after) = bound(start)?;
            if after { k.checked_add(1) } else { Some(k) }
        };
        let hi = match end {
            None => Some(u64::MAX),
            Some(e) => {
                let (k, after) = bound(e)?;
                // The end is exclusive: "k" ends before k, "k\0" just after it.
                if after { Some(k) } else { k.checked_sub(1) }
            }
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Ok(0);
        };
        let entries = self.server.range(lo, hi, limit);
        for (k, v) in &entries {
            each(k.to_string().as_bytes(), v.to_string().as_bytes());
        }
        Ok(entries.len())
    }
    /// A checkpoint of the log (nothing in memory changes).
    fn gc(&self) -> EngineResult<()> {
        self.server.checkpoint().map_err(wire)
    }
    fn flush(&self) -> EngineResult<()> {
        self.server.flush().map_err(wire)
    }
}

impl Probe for ShardEngine {
    fn space(&self) -> Space {
        Space {
            vlog_bytes: self.dir.as_deref().map_or(0, lidb_engines::dir_bytes),
            ..Space::default()
        }
    }
    fn memory(&self) -> MemorySplit {
        MemorySplit {
            index_bytes: self.server.index().stats().heap_bytes,
            ..MemorySplit::default()
        }
    }
    fn read_split(&self) -> ReadSplit {
        ReadSplit::default()
    }
    fn notes(&self) -> Vec<String> {
        let (lo, hi) = self.server.shard();
        vec![format!(
            "one shard ({lo}-{hi}) served over RESP and fine-wire ({}) from one index and one \
             log; keys and values are u64 in decimal, ordered as numbers; {}",
            self.server.addr(),
            if self.server.is_durable() {
                "writes are logged before they are applied"
            } else {
                "in memory only"
            }
        )]
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lidb_fine::{Config, FineIndex};

    use super::*;
    use crate::server::ServerConfig;

    fn engine(lo: u64, hi: u64) -> ShardEngine {
        let ix = FineIndex::bulk_load(&[(10, 1), (20, 2), (30, 3)], Config::default());
        let Ok(ix) = ix else {
            panic!("bulk load");
        };
        let cfg = ServerConfig {
            shard_lo: lo,
            shard_hi: hi,
            ..ServerConfig::default()
        };
        match Server::start(Arc::new(ix), "127.0.0.1:0", cfg) {
            Ok(s) => ShardEngine::new(s, None),
            Err(e) => panic!("start: {e}"),
        }
    }

    #[test]
    fn decimal_is_canonical() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"42"), Some(42));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"042",
            b"+1",
            b"-1",
            b"1 ",
            b"18446744073709551616",
            b"999999999999999999999",
            b"abc",
            b"\xff",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn resp_and_index_share_the_data() {
        let e = engine(0, 100);
        assert_eq!(e.get(b"20"), Ok(Some(b"2".to_vec())));
        assert_eq!(e.put(b"25", b"7"), Ok(()));
        assert_eq!(e.server().index().get(25), Some(7));
        assert_eq!(e.delete(b"10"), Ok(()));
        assert_eq!(e.get(b"10"), Ok(None));
        let mut seen = Vec::new();
        let n = e.scan(b"", None, 10, &mut |k, v| {
            seen.push((k.to_vec(), v.to_vec()))
        });
        assert_eq!(n, Ok(3));
        assert_eq!(seen.first().map(|p| p.0.as_slice()), Some(&b"20"[..]));
        // "20\0" starts after 20; "30" ends before 30.
        let n = e.scan(b"20\0", Some(b"30"), 10, &mut |_, _| {});
        assert_eq!(n, Ok(1));
    }

    #[test]
    fn bad_keys_and_other_shards_are_errors() {
        let e = engine(0, 100);
        let err = |r: EngineResult<()>| r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(e.put(b"abc", b"1")).contains("not a u64"));
        assert!(err(e.put(b"1", b"x")).contains("value \"x\""));
        assert!(err(e.put(b"200", b"1")).contains("range 0-100"));
        assert!(e.get(b"200").is_err());
        assert!(e.scan(b"zz", None, 1, &mut |_, _| {}).is_err());
    }
}
