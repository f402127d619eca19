//! `lidb bench report`: reads the JSON-lines files `scripts/report.sh` wrote into one directory
//! (one per experiment, and `machine.json`), rewrites the results table of the page between its
//! markers (`lidb_bench::report`) and writes the report's SVG plots. Runs on the calling thread;
//! the page is written whole (to a temporary file, then renamed) so a failed run leaves it as
//! it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use lidb_bench::report::{self, Machine, Run, svg, systems};

use crate::error::{CliError, io};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run's directory: FILE.jsonl per experiment (index, ycsb, finedex, learnedstore,
    /// serve, stress: the rows of `--json` runs, first line {"report_command": "..."}) and
    /// machine.json ({"host", "cores", "memory_gib", "date", "quick"}). A system whose file is
    /// absent keeps its old row, marked "(not rerun)".
    #[arg(long, value_name = "DIR")]
    input: PathBuf,
    /// The page to rewrite between its `<!-- report:begin -->` and `<!-- report:end -->`
    /// markers; every other byte is kept.
    #[arg(long, value_name = "FILE.md")]
    page: PathBuf,
    /// Write the plots (report-*.svg) into this directory and link them from the page (paths
    /// relative to the page's directory).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(io(path.display().to_string()))
}

pub fn run(a: ReportArgs) -> Result<(), CliError> {
    let machine_path = a.input.join("machine.json");
    let machine_json: serde_json::Value = serde_json::from_str(&read(&machine_path)?)
        .map_err(|e| CliError::Usage(format!("{}: not JSON ({e})", machine_path.display())))?;
    let machine = Machine::from_json(&machine_json);
    let mut runs: BTreeMap<String, Run> = BTreeMap::new();
    for spec in systems::SPECS {
        let path = a.input.join(format!("{}.jsonl", spec.file));
        if runs.contains_key(spec.file) || !path.exists() {
            continue;
        }
        let run = report::parse_run(&read(&path)?)
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
        runs.insert(spec.file.to_string(), run);
    }
    let mut links = Vec::new();
    if let Some(dir) = &a.plots {
        std::fs::create_dir_all(dir).map_err(io(format!("--plots {}", dir.display())))?;
        let base = a.page.parent().unwrap_or(Path::new(""));
        for (name, svg) in svg::report_plots(&runs) {
            let path = dir.join(&name);
            std::fs::write(&path, svg).map_err(io(path.display().to_string()))?;
            let rel = path.strip_prefix(base).unwrap_or(&path);
            links.push(rel.display().to_string());
            println!("# plot: {}", path.display());
        }
    }
    let page = read(&a.page)?;
    let out = report::render_page(&page, &runs, &machine, &links)
        .map_err(|e| CliError::Usage(format!("--page {}: {e}", a.page.display())))?;
    let tmp = a.page.with_extension("md.tmp");
    std::fs::write(&tmp, &out).map_err(io(tmp.display().to_string()))?;
    std::fs::rename(&tmp, &a.page).map_err(io(a.page.display().to_string()))?;
    for spec in systems::SPECS {
        let state = match runs.get(spec.file) {
            Some(r) if (spec.compute)(&r.rows).is_some() => "rerun",
            Some(_) => "no rows for its ratio: kept (not rerun)",
            None => "no file: kept (not rerun)",
        };
        println!("# {}: {state}", spec.system);
    }
    println!("# page: {}", a.page.display());
    Ok(())
}
