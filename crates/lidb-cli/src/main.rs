//! The `lidb` binary: the command line of [`lidb_cli`] with no benchmark peer. `lidb serve`,
//! `lidb kv` and `lidb repair` run here; peer comparisons run in the `lidb-bench` binary
//! (package lidb-bench-bin), which `lidb` hands them to when it is built, so every engine of a
//! comparison runs under one allocator.
//!
//! The allocator is mimalloc, as Redis ships jemalloc and RocksDB's guides recommend jemalloc:
//! every write allocates its key, value and log record, and through `lidb serve` glibc's malloc
//! and free were some 13% of the server's samples under SETs. In one run of three rounds
//! (`scripts/serve-compare.sh`, redis-benchmark -c 8 -P 16) server CPU per 1,000 GETs fell from
//! 1.5-1.8 ms to 1.3-1.4 and per 1,000 SETs from 2.4-3.0 to 2.1-2.4 (docs/bench-log/10-many-cores.md).

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    lidb_cli::run_cli("lidb", &lidb_cli::Peers::none())
}
