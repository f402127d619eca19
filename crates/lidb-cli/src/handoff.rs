//! Handing a benchmark that asks for a peer from the lean `lidb` to `lidb-bench`.
//!
//! `lidb` links no third-party peer (lidb-peers: congee, scc-tree, skipmap, li+delta, redb, lmdb)
//! so that `lidb serve` carries none of them. When `lidb bench concurrent` or `lidb bench btree`
//! names one, [`to_bench`] replaces this process with the `lidb-bench` binary (package
//! lidb-bench-bin) and the same arguments, so scripts and documented commands keep working
//! after `cargo build --release` (which builds both). Without that binary the run stops with one
//! line naming the peer and how to build it.
//!
//! Where `lidb-bench` is looked for: the path in the environment variable [`ENV`]
//! (`LIDB_BENCH_BIN`) when set, else `lidb-bench` in the directory of the running executable.
//! Tests set `LIDB_BENCH_BIN` to an absent path (the one-line error) or to a stand-in script
//! (the arguments handed on). A handed-on process carries [`HANDED_ENV`], so a `LIDB_BENCH_BIN`
//! that points back at `lidb` stops with an error instead of exec-ing itself forever.
//!
//! Called from the main thread before a benchmark starts any thread.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::error::CliError;

/// The environment variable naming the `lidb-bench` binary to hand peer runs to.
pub const ENV: &str = "LIDB_BENCH_BIN";

/// Set in the environment of a handed-on process (its value: the `lidb` that handed it on).
pub const HANDED_ENV: &str = "LIDB_HANDED_ON_BY";

/// How to build the binary that has the peers.
pub const BUILD: &str = "cargo build --release -p lidb-bench-bin";

/// Where `lidb-bench` is looked for (see the module doc); `None` when neither the variable is
/// set nor the running executable's path is known.
pub fn bench_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ENV) {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join("lidb-bench"))
}

/// The `lidb-bench` binary to hand to, if one is there.
pub fn available() -> Option<PathBuf> {
    bench_path().filter(|p| p.is_file())
}

/// The one-line error of a run that asks for `what` (a peer, or "--index all") where no
/// `lidb-bench` is available.
pub fn missing(what: &str) -> CliError {
    CliError::Usage(format!(
        "{what}: the benchmark peers are linked into the lidb-bench binary, not lidb; build it \
         beside lidb with `{BUILD}` (lidb then hands such runs to it) or set {ENV} to its path"
    ))
}

/// Replaces this process with `lidb-bench` run with this process's arguments, when it is
/// available; returns the error that says why not otherwise (or why the exec failed).
pub fn to_bench(what: &str) -> CliError {
    let Some(bench) = available() else {
        return missing(what);
    };
    if std::env::var_os(HANDED_ENV).is_some() {
        return CliError::Usage(format!(
            "{what}: {} was handed this run by lidb and lacks the peer too ({ENV} points at a \
             binary without them)",
            bench.display()
        ));
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let me = std::env::current_exe().map_or_else(|_| OsString::from("lidb"), |p| p.into());
    let error = std::process::Command::new(&bench)
        .args(args)
        .env(HANDED_ENV, me)
        .exec();
    CliError::Usage(format!(
        "{what}: could not run {} ({error})",
        bench.display()
    ))
}
