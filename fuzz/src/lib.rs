//! Helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! Every lidb file carries CRC-32C checksums, so fuzzed bytes would almost always stop at the
//! first checksum. [`prepare`] therefore seals half of the inputs (those whose first byte is
//! odd): it recomputes the checksums the format docs define over the fuzzed payload, so the
//! fuzzer reaches the decoding logic behind them. The other half is fed as it is, which keeps
//! the checksum and torn-tail paths covered.

/// The payload of a fuzz input, sealed with `seal` when the first byte is odd.
pub fn prepare(data: &[u8], seal: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let Some((&first, rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut bytes = rest.to_vec();
    if first & 1 == 1 {
        seal(&mut bytes);
    }
    bytes
}

/// Whether the input asks for sealing (used by targets that seal in stages).
pub fn wants_seal(data: &[u8]) -> bool {
    data.first().is_some_and(|b| b & 1 == 1)
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(d) = b.get_mut(at..at + 4) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes `crc32c(b[from..to])` at `to`, when it fits.
fn crc_at(b: &mut [u8], from: usize, to: usize) {
    if let Some(body) = b.get(from..to) {
        let crc = crc32c::crc32c(body);
        put_u32(b, to, crc);
    }
}

/// `payload || crc32c(payload)` (KVSTATE, level index, static tier model, table blocks).
pub fn seal_trailer(b: &mut [u8]) {
    if let Some(n) = b.len().checked_sub(4) {
        seal_index_frames(&mut b[..n]);
        crc_at(b, 0, n);
    }
}

/// Reseals every lidb-index frame ("LIDX", docs/format/index.md) found inside `b`.
pub fn seal_index_frames(b: &mut [u8]) {
    let mut i = 0;
    while let Some(at) = b
        .get(i..)
        .and_then(|s| s.windows(4).position(|w| w == b"LIDX"))
    {
        let start = i + at;
        let end = le_u64(b, start + 24)
            .and_then(|p| usize::try_from(p).ok())
            .and_then(|p| (start + 32).checked_add(p));
        if let Some(end) = end.filter(|&end| end.saturating_add(4) <= b.len()) {
            crc_at(b, start, end);
        }
        i = start + 1;
    }
}

/// A record log (docs/format/wal.md): a valid header, then every record that fits its file
/// gets its CRC (of the length bytes and the payload).
pub fn seal_log(b: &mut [u8]) {
    seal_framed_log(b, b"LIDBLOG\x01");
}

/// A FineStore log (docs/format/finestore-log.md): the same record framing as [`seal_log`]
/// behind a "FINELOG" version 1 header.
pub fn seal_fine_log(b: &mut [u8]) {
    seal_framed_log(b, b"FINELOG\x01");
}

/// A FineStore checkpoint (docs/format/finestore-checkpoint.md): one CRC of every byte before
/// the last four.
pub fn seal_fine_checkpoint(b: &mut [u8]) {
    if let Some(n) = b.len().checked_sub(4) {
        crc_at(b, 0, n);
    }
}

/// FineStore's `FINESTATE` (docs/format/finestore-log.md): the CRC of every byte before the
/// last four (bytes [0, 32) at 32 for version 2, [0, 24) at 24 for version 1).
pub fn seal_fine_state(b: &mut [u8]) {
    if let Some(n) = b.len().checked_sub(4) {
        crc_at(b, 0, n);
    }
}

/// `header` (8 bytes), then the CRC of each record that fits (crc u32, len u32, payload).
fn seal_framed_log(b: &mut [u8], header: &[u8; 8]) {
    if let Some(h) = b.get_mut(..8) {
        h.copy_from_slice(header);
    }
    let mut pos = 8usize;
    while let Some(len) = le_u32(b, pos + 4) {
        let end = pos + 8 + len as usize;
        if end > b.len() {
            break;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), &b[pos + 8..end]);
        put_u32(b, pos, crc);
        pos = end;
    }
}

/// A value log (docs/format/vlog.md): header CRC over bytes [0, 28), then each record's CRC over
/// [4, 12 + key_len + value_len).
pub fn seal_vlog(b: &mut [u8]) {
    crc_at(b, 0, 28);
    let mut pos = 32usize;
    while let (Some(k), Some(v)) = (le_u32(b, pos + 4), le_u32(b, pos + 8)) {
        let end = pos + 12 + k as usize + v as usize;
        if end > b.len() {
            break;
        }
        let crc = crc32c::crc32c(&b[pos + 4..end]);
        put_u32(b, pos, crc);
        pos = end;
    }
}

/// An SSTable's footer and blocks (docs/format/sstable.md); slots need the slot width, which
/// [`seal_table_slots`] takes from an opened table.
pub fn seal_table(b: &mut [u8]) {
    let Some(f) = b.len().checked_sub(64) else {
        return;
    };
    for k in 0..3 {
        let (Some(off), Some(len)) = (le_u64(b, f + 16 * k), le_u64(b, f + 16 * k + 8)) else {
            continue;
        };
        let (Ok(off), Ok(len)) = (usize::try_from(off), usize::try_from(len)) else {
            continue;
        };
        if len >= 4 && off.checked_add(len).is_some_and(|end| end <= f) {
            seal_trailer(&mut b[off..off + len]);
        }
    }
    // Format version 2: the index region is the index block, then the mapped-keys block, whose
    // framed length ends the meta payload (just before the meta CRC); seal the index block too.
    if let (Some(ioff), Some(ilen), Some(moff), Some(mlen)) = (
        le_u64(b, f + 16),
        le_u64(b, f + 24),
        le_u64(b, f + 32),
        le_u64(b, f + 40),
    ) {
        let keys_len = usize::try_from(moff.saturating_add(mlen))
            .ok()
            .and_then(|meta_end| meta_end.checked_sub(12))
            .and_then(|at| le_u64(b, at));
        if let (Ok(ioff), Ok(ilen), Some(Ok(klen))) = (
            usize::try_from(ioff),
            usize::try_from(ilen),
            keys_len.map(usize::try_from),
        ) {
            let model_len = ilen.saturating_sub(klen);
            if klen >= 4 && model_len >= 4 && ioff.checked_add(model_len).is_some_and(|e| e <= f) {
                seal_trailer(&mut b[ioff..ioff + model_len]);
            }
        }
        // The meta block was sealed above; its bytes are unchanged by this.
    }
    crc_at(b, f, f + 52);
}

/// Each slot's CRC: `crc32c(slot index u64 LE || slot bytes [4, 21 + K + V))`.
pub fn seal_table_slots(b: &mut [u8], entries: u64, width: u64) {
    let width = width as usize;
    for i in 0..entries as usize {
        let at = i * width;
        let (Some(k), Some(v)) = (le_u32(b, at + 4), le_u32(b, at + 8)) else {
            return;
        };
        let end = (at + 21)
            .saturating_add(k as usize)
            .saturating_add(v as usize);
        if end > at + width || end > b.len() {
            continue;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&(i as u64).to_le_bytes()), &b[at + 4..end]);
        put_u32(b, at, crc);
    }
}

/// A static tier key list (docs/format/static-tier.md): the header page's CRC after its file
/// table, and each data page's CRC (mixed with the page number).
pub fn seal_keys(b: &mut [u8]) {
    let files = le_u32(b, 52).unwrap_or(0).min(237) as usize;
    if b.len() >= 4096 {
        crc_at(b, 0, 56 + 17 * files);
    }
    for (p, page) in b.chunks_exact_mut(4096).skip(1).enumerate() {
        let c = crc32c::crc32c_append(crc32c::crc32c(&(p as u64).to_le_bytes()), &page[..4092]);
        put_u32(page, 4092, c);
    }
}

/// LearnedStore pages (docs/format/btree-pagefile.md, "Page header"): each `page_size` chunk
/// gets the CRC of its bytes [4, page_size) at 0 (a short last chunk is left as it is).
pub fn seal_btree_pages(b: &mut [u8], page_size: usize) {
    for page in b.chunks_exact_mut(page_size) {
        crc_at_front(page);
    }
}

/// Writes `crc32c(b[4..])` at 0.
fn crc_at_front(b: &mut [u8]) {
    if let Some(body) = b.get(4..) {
        let crc = crc32c::crc32c(body);
        put_u32(b, 0, crc);
    }
}

/// LearnedStore's `WALSTATE` (docs/format/btree-wal.md): the CRC of every byte before the last
/// four.
pub fn seal_btree_wal_state(b: &mut [u8]) {
    if let Some(n) = b.len().checked_sub(4) {
        crc_at(b, 0, n);
    }
}
