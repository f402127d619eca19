//! Reading the write-ahead logs of a directory at recovery: the ids of the logs, and each log's
//! intact records decoded, with their offsets, and its bad tail as lidb-lsm's classifier found
//! it (`lidb_storage::tail`).
//!
//! Called by the store's open, single-threaded, before any writer exists. Reads only.

use std::path::{Path, PathBuf};

use lidb_storage::Storage;
use lidb_storage::log::{LOG_HEADER_BYTES, RECORD_HEADER_BYTES, read_log};
use lidb_storage::tail::BadTail;

use crate::error::{Error, Result};
use crate::wal::files::{log_name, parse_log_name};
use crate::wal::record::{self, WalOp};

/// One log, read.
#[derive(Debug)]
pub struct ReadLog {
    pub id: u64,
    pub path: PathBuf,
    /// The intact records, in file order, each with the offset of its record header.
    pub ops: Vec<(u64, WalOp)>,
    /// Bytes through the last intact record (or the header; 0 when the header is torn).
    pub valid_len: u64,
    /// What follows `valid_len`, if anything: a torn tail or damage.
    pub bad_tail: Option<BadTail>,
}

impl ReadLog {
    /// Whether the log holds an intact record.
    pub fn has_records(&self) -> bool {
        !self.ops.is_empty()
    }
}

/// The ids of the logs in `dir`, ascending.
pub fn list_logs(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>> {
    let mut ids: Vec<u64> = storage
        .list(dir)?
        .iter()
        .filter_map(|name| parse_log_name(name))
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Reads log `id` of `dir`. Errors: `Io`; `Corruption` naming the file (and the offset of the
/// record) when its header is not a record log's, or an intact record does not decode.
pub fn read(storage: &dyn Storage, dir: &Path, id: u64) -> Result<ReadLog> {
    let path = dir.join(log_name(id));
    let contents = read_log(storage, &path).map_err(crate::wal::from_log_error)?;
    let mut ops = Vec::with_capacity(contents.records.len());
    let mut offset = LOG_HEADER_BYTES;
    for payload in &contents.records {
        let op = record::decode(payload).map_err(|detail| Error::Corruption {
            file: path.clone(),
            detail: format!("the record at offset {offset} does not decode: {detail}"),
        })?;
        ops.push((offset, op));
        offset += RECORD_HEADER_BYTES + payload.len() as u64;
    }
    Ok(ReadLog {
        id,
        path,
        ops,
        valid_len: contents.valid_len,
        bad_tail: contents.bad_tail,
    })
}
