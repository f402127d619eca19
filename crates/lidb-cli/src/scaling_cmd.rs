//! `lidb bench plot-scaling`: reads the JSON lines of the scaling benchmarks (what
//! `scripts/scale.sh` gathers: `lidb bench concurrent`, `ycsb`, `btree --json`, and its
//! `lidb serve` against redis-server rows), draws throughput against threads per workload as one
//! SVG file (`lidb_bench::plot::scaling`) and prints the same figures as tables. Runs on the
//! calling thread.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use lidb_bench::plot::scaling;
use serde_json::Value;

use crate::error::{CliError, io};

#[derive(Debug, Args)]
pub struct PlotScalingArgs {
    /// JSON lines (one object per line; blank lines skipped): rows of `lidb bench concurrent
    /// --json` (op "all"), `lidb bench ycsb --json` (op "all" of the last phase), `lidb bench
    /// btree --json` (op "read"), or any object with bench, workload, engine, threads and
    /// kops_per_s. Other objects are skipped.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// The SVG file to write: one panel per workload, kops/s against threads (log scale), one
    /// line per engine or index.
    #[arg(long, value_name = "FILE.svg")]
    output: PathBuf,
    /// Title of the figure.
    #[arg(long, default_value = "throughput against threads")]
    title: String,
}

pub fn run(a: PlotScalingArgs) -> Result<(), CliError> {
    let text =
        std::fs::read_to_string(&a.input).map_err(io(format!("--input {}", a.input.display())))?;
    let rows = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<Value>(l).map_err(|e| {
                CliError::Usage(format!(
                    "--input {} line {}: not JSON ({e})",
                    a.input.display(),
                    i + 1
                ))
            })
        })
        .collect::<Result<Vec<Value>, CliError>>()?;
    let panels = scaling::panels(&rows);
    if panels.is_empty() {
        return Err(CliError::Usage(format!(
            "--input {}: no row with threads and kops_per_s of a known kind",
            a.input.display()
        )));
    }
    let svg = scaling::scaling_svg(&a.title, &panels);
    std::fs::write(&a.output, svg).map_err(io(format!("--output {}", a.output.display())))?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", scaling::summary(&panels)).map_err(io("stdout"))?;
    writeln!(out, "# plot: {}", a.output.display()).map_err(io("stdout"))
}
