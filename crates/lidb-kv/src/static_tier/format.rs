//! The static tier's on-disk layouts (docs/format/static-tier.md, the only specification): the
//! key list header page, data pages and entries, and the model file. Pure functions shared by
//! the builder and the reader; decoders take untrusted bytes, never panic, and return a detail
//! string the caller wraps into `Corruption` with the file name.
//!
//! DO NOT CHANGE THE CONSTANTS OR LAYOUTS BELOW: they are on disk.

use lidb_lsm::keys::KeyMap;
use lidb_storage::bytes::ByteReader;

use super::page_model::SvlogModel;
use crate::vlog::{RECORD_HEADER_BYTES, VLOG_HEADER_BYTES};

/// Bytes of a key list page (header page and data pages).
pub const PAGE_BYTES: u64 = 4096;
/// Bytes of a data page that hold entries and padding; the page CRC follows.
pub const PAGE_PAYLOAD_BYTES: u64 = PAGE_BYTES - 4;
/// Bytes of an entry besides its key: key_len u16, file_idx u16, offset u64, len u32.
pub const ENTRY_FIXED_BYTES: u64 = 16;
/// The longest key a static tier holds (an entry must fit a page).
pub const MAX_TIER_KEY_BYTES: u64 = PAGE_PAYLOAD_BYTES - ENTRY_FIXED_BYTES;
/// "LIDBKEYS" read big-endian, stored little-endian.
pub const KEYS_MAGIC: u64 = 0x4c49_4442_4b45_5953;
/// "LIDBTMDL" read big-endian, stored little-endian.
pub const MODEL_MAGIC: u64 = 0x4c49_4442_544d_444c;
/// Format version of the key list (2: the key list's file table).
pub const TIER_FORMAT_VERSION: u32 = 2;
/// Format version of the model file this build writes (3: the svlog page model).
pub const MODEL_FORMAT_VERSION: u32 = 3;
/// The model version before the svlog page model; still read (its tier reads twice per get).
pub const MODEL_FORMAT_VERSION_V2: u32 = 2;
/// Bytes of the header page before the file table (through `file_count`).
const HEADER_FIXED_BYTES: usize = 56;
/// Bytes of one file-table row: kind u8, number u64, bytes u64.
const FILE_ROW_BYTES: usize = 17;
/// The most files a key list may name: the fixed header, the rows and the CRC fit one page.
pub const MAX_TIER_FILES: u32 =
    ((PAGE_BYTES as usize - HEADER_FIXED_BYTES - 4) / FILE_ROW_BYTES) as u32;

/// What a file of the file table is. DO NOT CHANGE THESE VALUES.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TierFileKind {
    /// `{n:06}.vlog`: a value log (header kind 1) a frozen LSM pointed into.
    Vlog = 1,
    /// `{n:06}.svlog`: a static value log (header kind 2), the tier's own or an older tier's.
    Svlog = 2,
}

/// One row of the key list's file table: a file entries point into, and its size when the tier
/// was built (the file must still have exactly this size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierFile {
    pub kind: TierFileKind,
    pub number: u64,
    pub bytes: u64,
}

/// Where an entry's record is: row `file_idx` of the file table, byte `offset`, `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef {
    pub file_idx: u16,
    pub offset: u64,
    pub len: u32,
}

/// Where entries sit in the key list, given the generation's key width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub key_width: u32,
    pub entry_width: u32,
    pub entries_per_page: u32,
}

impl Layout {
    /// None when a key of `key_width` bytes cannot fit a page.
    pub fn new(key_width: u32) -> Option<Layout> {
        if u64::from(key_width) > MAX_TIER_KEY_BYTES {
            return None;
        }
        let entry_width = key_width + ENTRY_FIXED_BYTES as u32;
        Some(Layout {
            key_width,
            entry_width,
            entries_per_page: (PAGE_PAYLOAD_BYTES / u64::from(entry_width)) as u32,
        })
    }

    /// Pages that `entries` entries fill.
    pub fn pages_for(&self, entries: u64) -> u64 {
        entries.div_ceil(u64::from(self.entries_per_page))
    }
}

/// The key list's header page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyListHeader {
    pub generation: u64,
    pub entries: u64,
    pub pages: u64,
    pub layout: Layout,
    /// The files entries point into, at most `MAX_TIER_FILES`, numbers distinct.
    pub files: Vec<TierFile>,
}

impl KeyListHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PAGE_BYTES as usize);
        out.extend_from_slice(&KEYS_MAGIC.to_le_bytes());
        out.extend_from_slice(&TIER_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&self.pages.to_le_bytes());
        out.extend_from_slice(&self.layout.key_width.to_le_bytes());
        out.extend_from_slice(&self.layout.entry_width.to_le_bytes());
        out.extend_from_slice(&self.layout.entries_per_page.to_le_bytes());
        out.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        for f in &self.files {
            out.push(f.kind as u8);
            out.extend_from_slice(&f.number.to_le_bytes());
            out.extend_from_slice(&f.bytes.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(PAGE_BYTES as usize, 0);
        out
    }

    /// Decodes the header page and checks its own equations.
    pub fn decode(page: &[u8]) -> Result<KeyListHeader, String> {
        if page.len() as u64 != PAGE_BYTES {
            return Err(format!(
                "header page is {} bytes, expected 4096",
                page.len()
            ));
        }
        let mut r = ByteReader::new(page);
        let magic = r.u64()?;
        if magic != KEYS_MAGIC {
            return Err(format!("bad magic {magic:#018x}: not a key list"));
        }
        let version = r.u32()?;
        if version != TIER_FORMAT_VERSION {
            return Err(format!(
                "format version {version} is not supported (this build reads {TIER_FORMAT_VERSION})"
            ));
        }
        let reserved = r.u32()?;
        let (generation, entries, pages) = (r.u64()?, r.u64()?, r.u64()?);
        let (key_width, entry_width, per_page) = (r.u32()?, r.u32()?, r.u32()?);
        let file_count = r.u32()?;
        if file_count > MAX_TIER_FILES {
            return Err(format!(
                "file table of {file_count} files is above the limit {MAX_TIER_FILES}"
            ));
        }
        let mut rows = Vec::with_capacity(file_count as usize);
        for _ in 0..file_count {
            rows.push((r.u8()?, r.u64()?, r.u64()?));
        }
        let crc_at = HEADER_FIXED_BYTES + FILE_ROW_BYTES * file_count as usize;
        debug_assert_eq!(crc_at, r.position(), "the checksum follows the file table");
        let crc = r.u32()?;
        // The reader read past `crc_at`, so these bytes are there.
        let covered = page
            .get(..crc_at)
            .ok_or("header page ends inside its file table")?;
        if crc32c::crc32c(covered) != crc {
            return Err("header page checksum mismatch".into());
        }
        if reserved != 0 || page.iter().skip(crc_at + 4).any(|&b| b != 0) {
            return Err("header page has non-zero reserved bytes".into());
        }
        let mut files: Vec<TierFile> = Vec::with_capacity(rows.len());
        for (i, (kind, number, bytes)) in rows.into_iter().enumerate() {
            let kind = match kind {
                1 => TierFileKind::Vlog,
                2 => TierFileKind::Svlog,
                k => return Err(format!("file table row {i}: kind {k} is neither 1 nor 2")),
            };
            if bytes < VLOG_HEADER_BYTES || files.iter().any(|f| f.number == number) {
                return Err(format!(
                    "file table row {i}: file {number} of {bytes} bytes is repeated or too short"
                ));
            }
            files.push(TierFile {
                kind,
                number,
                bytes,
            });
        }
        let layout = Layout::new(key_width)
            .ok_or_else(|| format!("key width {key_width} exceeds {MAX_TIER_KEY_BYTES}"))?;
        if layout.entry_width != entry_width || layout.entries_per_page != per_page {
            return Err(format!(
                "entry width {entry_width} and {per_page} entries per page do not follow from \
                 key width {key_width}"
            ));
        }
        if layout.pages_for(entries) != pages {
            return Err(format!(
                "{pages} pages cannot hold exactly {entries} entries"
            ));
        }
        Ok(KeyListHeader {
            generation,
            entries,
            pages,
            layout,
            files,
        })
    }

    /// Whether every entry is in the tier's own svlog, in entry order (a GC-built tier): the
    /// file table is that one svlog. Scans then read it sequentially in large chunks.
    pub fn packed(&self) -> bool {
        matches!(self.files.as_slice(), [f] if f.kind == TierFileKind::Svlog && f.number == self.generation)
    }

    /// Entries of data page `page`.
    pub fn entries_in_page(&self, page: u64) -> u64 {
        let per = u64::from(self.layout.entries_per_page);
        self.entries
            .saturating_sub(page.saturating_mul(per))
            .min(per)
    }

    /// Size the key list file must have.
    pub fn file_bytes(&self) -> u64 {
        (1 + self.pages) * PAGE_BYTES
    }
}

/// Writes entry `(key, p)` at the start of `out` (at least `entry_width` bytes, zeroed).
pub fn encode_entry(out: &mut [u8], layout: &Layout, key: &[u8], p: EntryRef) {
    let k = layout.key_width as usize;
    let mut bytes = Vec::with_capacity(layout.entry_width as usize);
    bytes.extend_from_slice(&(key.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&p.file_idx.to_le_bytes());
    bytes.extend_from_slice(key);
    bytes.resize(4 + k, 0);
    bytes.extend_from_slice(&p.offset.to_le_bytes());
    bytes.extend_from_slice(&p.len.to_le_bytes());
    for (d, s) in out.iter_mut().zip(bytes.iter()) {
        *d = *s;
    }
}

/// Decodes one entry (`entry_width` bytes) and checks its pointer against the size of the file
/// table's row it names.
pub fn decode_entry<'a>(
    bytes: &'a [u8],
    layout: &Layout,
    files: &[TierFile],
) -> Result<(&'a [u8], EntryRef), String> {
    let mut r = ByteReader::new(bytes);
    let u16_at = |b: &[u8]| {
        u16::from_le_bytes([
            b.first().copied().unwrap_or(0),
            b.get(1).copied().unwrap_or(0),
        ])
    };
    let key_len = u64::from(u16_at(r.bytes(2)?));
    let file_idx = u16_at(r.bytes(2)?);
    let padded = r.bytes(u64::from(layout.key_width))?;
    let key = padded.get(..key_len as usize).ok_or_else(|| {
        format!(
            "key length {key_len} exceeds the key width {}",
            layout.key_width
        )
    })?;
    let offset = r.u64()?;
    let len = r.u32()?;
    r.finish("entry")?;
    let file = files.get(usize::from(file_idx)).ok_or_else(|| {
        format!(
            "file index {file_idx} is past the file table of {}",
            files.len()
        )
    })?;
    let ok = offset >= VLOG_HEADER_BYTES
        && u64::from(len) >= RECORD_HEADER_BYTES + key_len
        && offset
            .checked_add(u64::from(len))
            .is_some_and(|e| e <= file.bytes);
    if !ok {
        return Err(format!(
            "pointer (offset {offset}, {len} bytes) is not inside file {} of {} bytes",
            file.number, file.bytes
        ));
    }
    Ok((
        key,
        EntryRef {
            file_idx,
            offset,
            len,
        },
    ))
}

/// The CRC of data page `page_no`.
fn page_crc(page_no: u64, payload: &[u8]) -> u32 {
    let c = crc32c::crc32c(&page_no.to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

/// Writes the CRC at the end of data page `page_no` (4096 bytes).
pub fn seal_page(page: &mut [u8], page_no: u64) {
    let (payload, trailer) = page.split_at_mut(PAGE_PAYLOAD_BYTES as usize);
    let crc = page_crc(page_no, payload);
    for (d, s) in trailer.iter_mut().zip(crc.to_le_bytes()) {
        *d = s;
    }
}

/// Checks the CRC of data page `page_no`.
pub fn check_page(page: &[u8], page_no: u64) -> Result<(), String> {
    if page.len() as u64 != PAGE_BYTES {
        return Err(format!("page {page_no} is {} bytes", page.len()));
    }
    let (payload, trailer) = page.split_at(PAGE_PAYLOAD_BYTES as usize);
    let mut c = [0u8; 4];
    c.copy_from_slice(trailer);
    if page_crc(page_no, payload) != u32::from_le_bytes(c) {
        return Err(format!("page {page_no} checksum mismatch"));
    }
    Ok(())
}

/// The model file's contents.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile {
    pub generation: u64,
    pub entries: u64,
    pub pages: u64,
    pub key_width: u32,
    /// lidb-index family tag, 0 when the tier is empty.
    pub family_tag: u8,
    pub page_boundary: u64,
    pub max_image_run: u64,
    pub keymap: KeyMap,
    pub train_nanos: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// The lidb-index encoding; empty when the tier is empty.
    pub index: Vec<u8>,
    /// The svlog page model (one-read lookups): a packed generation with entries, version 3.
    pub svlog: Option<SvlogModel>,
}

impl ModelFile {
    /// The version-3 encoding.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(MODEL_FORMAT_VERSION)
    }

    /// The version-2 encoding (no svlog page model), for old-format fixtures.
    pub fn encode_v2(&self) -> Vec<u8> {
        self.encode_as(MODEL_FORMAT_VERSION_V2)
    }

    fn encode_as(&self, version: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.index.len());
        out.extend_from_slice(&MODEL_MAGIC.to_le_bytes());
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&self.pages.to_le_bytes());
        out.extend_from_slice(&self.key_width.to_le_bytes());
        out.push(self.family_tag);
        out.extend_from_slice(&self.page_boundary.to_le_bytes());
        out.extend_from_slice(&self.max_image_run.to_le_bytes());
        out.extend_from_slice(&self.keymap.encode());
        out.extend_from_slice(&self.train_nanos.to_le_bytes());
        for key in [&self.smallest, &self.largest] {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
        }
        out.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.index);
        if version >= MODEL_FORMAT_VERSION {
            match &self.svlog {
                Some(m) => {
                    out.push(1);
                    m.encode_into(&mut out);
                }
                None => out.push(0),
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a model file and checks its own invariants.
    pub fn decode(bytes: &[u8]) -> Result<ModelFile, String> {
        let split = bytes
            .len()
            .checked_sub(4)
            .ok_or_else(|| format!("{} bytes is too short for a model file", bytes.len()))?;
        let (body, crc) = bytes.split_at(split);
        let mut r = ByteReader::new(body);
        let magic = r.u64()?;
        if magic != MODEL_MAGIC {
            return Err(format!("bad magic {magic:#018x}: not a static tier model"));
        }
        let version = r.u32()?;
        if version != MODEL_FORMAT_VERSION && version != MODEL_FORMAT_VERSION_V2 {
            return Err(format!(
                "format version {version} is not supported (this build reads \
                 {MODEL_FORMAT_VERSION_V2} and {MODEL_FORMAT_VERSION})"
            ));
        }
        let mut c = [0u8; 4];
        c.copy_from_slice(crc);
        if crc32c::crc32c(body) != u32::from_le_bytes(c) {
            return Err("checksum mismatch".into());
        }
        if r.u32()? != 0 {
            return Err("reserved field is not 0".into());
        }
        let (generation, entries, pages) = (r.u64()?, r.u64()?, r.u64()?);
        let key_width = r.u32()?;
        let family_tag = r.u8()?;
        let (page_boundary, max_image_run) = (r.u64()?, r.u64()?);
        let keymap = KeyMap::decode(r.bytes(KeyMap::ENCODED_LEN as u64)?)?;
        let train_nanos = r.u64()?;
        let mut keys = [Vec::new(), Vec::new()];
        for key in keys.iter_mut() {
            let n = r.u32()?;
            *key = r.bytes(u64::from(n))?.to_vec();
        }
        let index_len = r.u64()?;
        let index = r.bytes(index_len)?.to_vec();
        let svlog = if version == MODEL_FORMAT_VERSION {
            match r.u8()? {
                0 => None,
                1 => Some(SvlogModel::decode_from(&mut r)?),
                f => return Err(format!("svlog_model flag {f} is neither 0 nor 1")),
            }
        } else {
            None
        };
        r.finish("model")?;
        let [smallest, largest] = keys;
        let empty = entries == 0;
        let consistent = if empty {
            pages == 0 && index.is_empty() && family_tag == 0 && svlog.is_none()
        } else {
            pages >= 1
                && !index.is_empty()
                && smallest <= largest
                && max_image_run >= 1
                && max_image_run <= pages
                && keymap.prefix_len() as usize <= smallest.len()
                && smallest.len().max(largest.len()) as u64 <= u64::from(key_width)
        };
        if !consistent {
            return Err(format!(
                "inconsistent model: {entries} entries, {pages} pages, index of {index_len} bytes, \
                 image run {max_image_run}, key width {key_width}"
            ));
        }
        Ok(ModelFile {
            generation,
            entries,
            pages,
            key_width,
            family_tag,
            page_boundary,
            max_image_run,
            keymap,
            train_nanos,
            smallest,
            largest,
            index,
            svlog,
        })
    }
}
