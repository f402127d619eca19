//! The fine-wire codec (docs/format/fine-wire.md): pure, fuzzed (`fuzz/fuzz_targets/fine_wire.rs`).
//!
//! - `consts.rs`: every constant on the wire;
//! - `frame.rs`: frames and the checked reader;
//! - `msg.rs`: requests, replies, the layout.

pub mod consts;
pub mod frame;
pub mod msg;

pub use frame::{encode_frame, read_frame, split_frame};
pub use msg::{
    BinAddr, BinCopy, BinResult, Payload, ReadItem, ReadResult, Reply, Request, WireLayout,
    WireRegion, decode_reply, decode_request, encode_reply, encode_request,
};

#[cfg(test)]
mod tests;
