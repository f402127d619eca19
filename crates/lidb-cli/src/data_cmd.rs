//! `lidb data ...`: generate synthetic key sets as SOSD files and describe key files.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use crate::error::{CliError, io};

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Generate a seeded synthetic key set and write it as a SOSD u64 file.
    Gen {
        /// synthetic:NAME:N with NAME one of uniform_dense, uniform_sparse, normal, lognormal,
        /// piecewise_linear, clustered, or the LearnedStore paper's Table II sets (strictly
        /// increasing): lineargen (one line start + i*stride, start < 2^32, stride 1..=1024),
        /// piecewise (4-16 exact lines of seeded lengths, strides 2^0..2^20 and gaps up to 2^32),
        /// randomgen (uniform u64, sorted, duplicates redrawn); N a count (K and M suffixes).
        spec: String,
        /// Output path; zstd-compressed when it ends in .zst.
        #[arg(long)]
        out: PathBuf,
        /// Seed; the same seed gives the same keys on every machine.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Print count, min, max, distinct keys, longest duplicate run and whether a SOSD u64 file
    /// (plain or .zst) is sorted.
    Info {
        /// The file to describe.
        path: PathBuf,
    },
}

pub fn run(cmd: DataCommand) -> Result<(), CliError> {
    match cmd {
        DataCommand::Gen { spec, out, seed } => {
            let (dist, n) = lidb_data::synthetic::parse_spec(&spec)?;
            let keys = lidb_data::synthetic::generate(dist, n, seed);
            lidb_data::sosd::write_u64(&out, &keys)?;
            eprintln!(
                "wrote {} keys ({}, seed {seed}) to {}",
                keys.len(),
                dist.name(),
                out.display()
            );
            Ok(())
        }
        DataCommand::Info { path } => {
            let keys = lidb_data::sosd::read_u64_any_order(&path)?;
            let i = lidb_data::info::info(&keys);
            let mut out = std::io::stdout().lock();
            let fmt_opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            let text = format!(
                "file: {}\ncount: {}\nmin: {}\nmax: {}\ndistinct: {}\nlongest_duplicate_run: {}\nsorted: {}{}\n",
                path.display(),
                i.count,
                fmt_opt(i.min),
                fmt_opt(i.max),
                i.distinct,
                i.longest_run,
                if i.sorted { "yes" } else { "no" },
                i.first_unsorted
                    .map(|p| format!(" (first out of order at position {p})"))
                    .unwrap_or_default()
            );
            out.write_all(text.as_bytes()).map_err(io("stdout"))
        }
    }
}
