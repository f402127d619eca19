//! The `lidb-bench` binary: the `lidb` command line with the benchmark peers linked in (lidb-peers:
//! congee, scc, crossbeam-skiplist, li+delta, redb, LMDB) and a counting global allocator that
//! measures an index's bulk load in `bench concurrent`. Every subcommand is the same as `lidb`'s;
//! the lean `lidb` hands peer runs to this binary when it sits beside it.

mod alloc_count;

use std::process::ExitCode;

use lidb_bench::concurrent::AllocCounter;

/// Counts the bytes an index's bulk load allocates (`bench concurrent`); off otherwise.
#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

fn main() -> ExitCode {
    let mut peers = lidb_peers::peers();
    peers.alloc_counter = Some(AllocCounter {
        start: alloc_count::start,
        stop: alloc_count::stop,
    });
    lidb_cli::run_cli("lidb-bench", &peers)
}
