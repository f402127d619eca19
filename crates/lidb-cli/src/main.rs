//! The `lidb` binary: the command line of [`lidb_cli`] with no benchmark peer and the system
//! allocator. `lidb serve`, `lidb kv` and `lidb repair` run here; peer comparisons run in the
//! `lidb-bench` binary (package lidb-bench-bin), which `lidb` hands them to when it is built.

use std::process::ExitCode;

fn main() -> ExitCode {
    lidb_cli::run_cli("lidb", &lidb_cli::Peers::none())
}
