//! The `lidb` command line as a library: [`run_cli`] parses the arguments and runs a subcommand.
//! Every subcommand returns `Result<(), CliError>`; `run_cli` prints an error as one line on
//! stderr and returns a non-zero exit code. A panic would be a bug: the hook below still keeps it
//! to one line without a backtrace.
//!
//! Two binaries call it: `lidb` (this package: the server, kv and repair commands and lidb's own
//! benchmarks, with no benchmark peer and the system allocator) and `lidb-bench` (package
//! lidb-bench-bin: the same commands with lidb-peers' peers and a counting allocator). What a
//! binary links beyond lidb comes in as one [`Peers`] value; `lidb` hands a run that asks for a
//! peer to `lidb-bench` ([`handoff`]).
//!
//! Called once, from the main thread of the binary.

mod args;
mod bench_cmd;
mod btree_cmd;
mod concurrent_cmd;
mod data_cmd;
mod engine_args;
mod error;
mod fine_cmd;
pub mod handoff;
mod index_cmd;
mod kv_cmd;
mod kvbench_cmd;
mod manual;
mod repair_cmd;
mod report_cmd;
mod scaling_cmd;
mod serve_cmd;
mod stress_cmd;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
pub use lidb_bench::peers::Peers;

/// lidb: a key-value storage engine whose indexes are learned, and the benchmarks that show when
/// that pays off.
#[derive(Debug, Parser)]
#[command(name = "lidb", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Learned indexes over sorted u64 keys: benchmark, query, inspect.
    #[command(subcommand)]
    Index(index_cmd::IndexCommand),
    /// Key sets: generate synthetic SOSD files, describe a file.
    #[command(subcommand)]
    Data(data_cmd::DataCommand),
    /// Serve a database over stdin/stdout, one command per line: put K V, get K, del K,
    /// scan START END [LIMIT], flush, compact (LSM engines), gc (tiered engines), convert
    /// (learnedkv), checkpoint (finedex, learnedstore, btree), stats.
    Kv(kv_cmd::KvArgs),
    /// Rebuild a store that does not open (RocksDB's RepairDB is the model): keep every table,
    /// log record and value that reads cleanly, move or copy what does not to DIR/lost/, write a
    /// new manifest (and KVSTATE), or for finedex a new checkpoint, log and FINESTATE, and print
    /// what was kept and what was set aside. New tables are written with --index, --boundary and
    /// --sst-size (as `lidb kv`; finedex has no tables). Run it with no other process using the
    /// store.
    Repair(repair_cmd::RepairArgs),
    /// Serve a database over the Redis protocol (RESP2 and inline commands) for redis-cli,
    /// redis-benchmark and client libraries: PING, ECHO, GET, SET, SETNX, GETSET, DEL, EXISTS,
    /// MGET, MSET, DBSIZE, FLUSHDB, INFO, SCAN, LIDB.RANGE. Prints `listening on ADDRESS` first;
    /// SIGINT or SIGTERM stops it (requests running finish, the engine is flushed, exit 0).
    Serve(serve_cmd::ServeArgs),
    /// Experiments on whole engines and concurrent indexes: `lsm` (the LSM papers'), `ycsb` and
    /// `scan` (the LearnedKV paper's phases and scans over every engine, RocksDB included in a
    /// build with it), `concurrent` (the FINEdex paper's concurrent indexes), `btree` (the
    /// LearnedStore paper's), `plot-scaling` (throughput against threads from their JSON).
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// FineStore across machines (docs/format/fine-wire.md): `lidb fine serve` serves a FINEdex
    /// shard whose trained data clients read remotely; `lidb fine bench` drives YCSB through
    /// the client library per mode (pipeline, on-server, on-client, locks, and the twemproxy
    /// baseline).
    #[command(subcommand)]
    Fine(fine_cmd::FineCommand),
    /// Many threads of random writes, reads, batches and scans against one engine, with its
    /// background jobs forced often, I/O faults injected (--faults) and the process killed at
    /// random (--kill-every); every read and, after every kill or reopen, every key is checked
    /// against an expected state kept outside the engine. Prints one summary line; exits 1 on
    /// any mismatch, naming the seed, the operation and the key.
    Stress(stress_cmd::StressArgs),
    /// Print this command line's whole manual as Markdown (docs/cli.md is its output): every
    /// command, option, default and help text, from the same definition `--help` prints.
    Manual,
}

/// The top-level command definition, as `lidb` (the manual and tests read it).
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs the command line of the process as binary `name` ("lidb" or "lidb-bench") with what the
/// binary links beyond lidb (`peers`); the process's exit code.
pub fn run_cli(name: &'static str, peers: &Peers) -> ExitCode {
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("{name}: internal error (a bug, please report it): {info}");
    }));
    let definition = Cli::command().name(name);
    let matches = definition.clone().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let given = |path: &[&str]| args::given_options(&definition, &matches, path);
    let result = match cli.command {
        Command::Index(cmd) => index_cmd::run(cmd),
        Command::Data(cmd) => data_cmd::run(cmd),
        Command::Kv(args) => kv_cmd::run(args, &given(&["kv"])),
        Command::Bench(cmd) => bench_cmd::run(cmd, peers),
        Command::Repair(args) => repair_cmd::run(args, &given(&["repair"])),
        Command::Serve(args) => serve_cmd::run(args, &given(&["serve"])),
        Command::Fine(cmd) => fine_cmd::run(cmd, &given(&["fine", "serve"])),
        Command::Stress(args) => stress_cmd::run(args),
        Command::Manual => {
            use std::io::Write;
            let text = manual::render(&Cli::command());
            std::io::stdout()
                .write_all(text.as_bytes())
                .map_err(error::io("stdout"))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
