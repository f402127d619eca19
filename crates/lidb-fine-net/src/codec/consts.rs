//! The constants of fine-wire (docs/format/fine-wire.md), shared by encoder and decoder.
//! DO NOT CHANGE THESE VALUES without a new protocol version: they are on the wire.

/// Bytes of the frame header: `len u32 | crc32c u32`.
pub const FRAME_HEADER_BYTES: usize = 8;
/// Smallest body: a request id and an op.
pub const MIN_FRAME_BODY: u32 = 9;
/// Largest body.
pub const MAX_FRAME_BODY: u32 = 4 << 20;

pub const OP_HELLO: u8 = 0x01;
pub const OP_LAYOUT: u8 = 0x02;
pub const OP_ACK: u8 = 0x03;
pub const OP_RETRAIN: u8 = 0x04;
pub const OP_LOCK: u8 = 0x05;
pub const OP_UNLOCK: u8 = 0x06;
pub const OP_READ: u8 = 0x10;
pub const OP_READ_MODEL: u8 = 0x11;
pub const OP_READ_BIN: u8 = 0x12;
pub const OP_SEARCH: u8 = 0x20;
pub const OP_INSERT: u8 = 0x21;
pub const OP_UPDATE: u8 = 0x22;
pub const OP_REMOVE: u8 = 0x23;
pub const OP_RANGE: u8 = 0x24;

pub const STATUS_OK: u8 = 0;
pub const STATUS_STALE: u8 = 1;
pub const STATUS_WRONG_SHARD: u8 = 2;
pub const STATUS_BAD_REQUEST: u8 = 3;
pub const STATUS_RETIRED: u8 = 4;

/// Most items in one READ.
pub const MAX_READ_ITEMS: u16 = 64;
/// Most records one READ item asks for.
pub const MAX_READ_RECORDS: u32 = 4096;
/// Most entries one RANGE returns.
pub const MAX_RANGE_LIMIT: u32 = 65_536;
/// READ_BIN's `child` for the root bin.
pub const BIN_ROOT: u32 = u32::MAX;
/// Most entries one bin copy holds (a bin has at most this many slots).
pub const MAX_BIN_ENTRIES: u32 = 65_536;
/// Longest BAD_REQUEST message.
pub const MAX_MESSAGE_BYTES: usize = 1024;
