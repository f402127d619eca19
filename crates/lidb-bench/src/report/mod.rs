//! The results page (`lidb bench report`, fed by `scripts/report.sh`): from the JSON lines of one
//! run per experiment, each system's figure and its ratio to the peer, rendered as the rows of
//! BENCHMARKS.md's results table between the markers [`BEGIN`] and [`END`], plus SVG plots.
//! Pure: functions from parsed rows to markdown and SVG strings; the caller reads and writes the
//! files. Any thread.
//!
//! Input: one [`Run`] per experiment file (`index`, `ycsb`, `finedex`, `learnedstore`, `serve`,
//! `stress`; see [`systems::SPECS`]), each the rows of one run of one command, and the
//! [`Machine`] the run was on. The first line of a file may be `{"report_command": "..."}`: the
//! command that produced it, written by the script.
//!
//! Invariants:
//! 1. Every ratio is computed from rows of one file (one run), never across files.
//! 2. A row whose file is absent is kept as it was, its last cell starting with [`NOT_RERUN`]
//!    (added once: rendering is idempotent, `render(render(p)) == render(p)` byte for byte).
//! 3. Text outside the markers is never changed; a page without markers is an error.

pub mod svg;
pub mod systems;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// The marker before the table the renderer owns.
pub const BEGIN: &str = "<!-- report:begin -->";
/// The marker after it.
pub const END: &str = "<!-- report:end -->";
/// How a kept row whose experiment was not rerun is marked.
pub const NOT_RERUN: &str = "(not rerun)";
/// The table's header, eight columns.
pub const HEADER: &str = "| system | claim (paper) | lidb's figure | peer | ratio | met? | where | run |\n|---|---|---|---|---|---|---|---|";

/// Where and when a run was made (the script's `machine.json`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Machine {
    /// `uname -n`.
    pub host: String,
    /// `nproc`.
    pub cores: u64,
    /// Total memory in GiB.
    pub memory_gib: u64,
    /// The run's date, YYYY-MM-DD.
    pub date: String,
    /// A `--quick` run (small sizes): its rows say so.
    pub quick: bool,
}

impl Machine {
    /// Reads `machine.json`'s object; missing fields stay empty.
    pub fn from_json(v: &Value) -> Machine {
        let s = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or("?").to_string();
        let n = |f: &str| v.get(f).and_then(Value::as_u64).unwrap_or(0);
        Machine {
            host: s("host"),
            cores: n("cores"),
            memory_gib: n("memory_gib"),
            date: s("date"),
            quick: v.get("quick").and_then(Value::as_bool).unwrap_or(false),
        }
    }
}

/// The rows of one experiment file and the command that produced them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    pub command: String,
    pub rows: Vec<Value>,
}

/// Why a page could not be rendered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A line of an input file is not JSON.
    NotJson { line: usize, detail: String },
    /// The page lacks `BEGIN` or `END` (in that order).
    NoMarkers,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotJson { line, detail } => write!(f, "line {line}: not JSON ({detail})"),
            Error::NoMarkers => write!(f, "the page has no {BEGIN} ... {END} block"),
        }
    }
}

impl std::error::Error for Error {}

/// Parses JSON lines (blank lines and lines not starting with `{` skipped: the binaries' notes)
/// into a [`Run`]; a `report_command` object gives the command.
pub fn parse_run(text: &str) -> Result<Run, Error> {
    let mut run = Run::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| Error::NotJson {
            line: i + 1,
            detail: e.to_string(),
        })?;
        match v.get("report_command").and_then(Value::as_str) {
            Some(c) => run.command = c.to_string(),
            None => run.rows.push(v),
        }
    }
    Ok(run)
}

/// One rendered row's cells (without the system, which keys it).
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub figure: String,
    pub peer: String,
    pub ratio: String,
    pub met: String,
}

/// A ratio as the page writes it: two decimals and an x.
pub fn ratio_text(r: f64) -> String {
    format!("{r:.2}x")
}

/// The "run" cell of a rerun row: the command, the date and the machine.
pub fn run_cell(command: &str, m: &Machine) -> String {
    let quick = if m.quick { ", quick run" } else { "" };
    format!(
        "`{}` on {}, {} ({} cores, {} GiB{quick})",
        command.replace('|', "\\|").replace('`', "'"),
        m.date,
        m.host,
        m.cores,
        m.memory_gib
    )
}

/// The cells of a markdown table row (`| a | b |`), trimmed; escaped pipes stay in their cell.
pub fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev = '\0';
    for c in inner.chars() {
        if c == '|' && prev != '\\' {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
        prev = c;
    }
    out.push(cur.trim().to_string());
    out
}

fn row_line(cells: &[String]) -> String {
    format!("| {} |", cells.join(" | "))
}

/// An old row kept because its experiment was not rerun: eight cells, the last marked once.
fn keep_row(mut old: Vec<String>) -> String {
    old.resize(8, String::new());
    if let Some(last) = old.last_mut()
        && !last.starts_with(NOT_RERUN)
    {
        let was = if last.is_empty() {
            "compiled by hand from the dated log".to_string()
        } else {
            last.clone()
        };
        *last = format!("{NOT_RERUN} {was}");
    }
    row_line(&old)
}

/// Renders the page: the block between the markers rebuilt from `runs` (keyed by file stem),
/// every other byte kept. `plots` are the plot files (paths relative to the page) written this
/// time; with those already linked in the block they make its plots line.
pub fn render_page(
    page: &str,
    runs: &BTreeMap<String, Run>,
    machine: &Machine,
    plots: &[String],
) -> Result<String, Error> {
    let start = page.find(BEGIN).ok_or(Error::NoMarkers)?;
    let after_begin = start + BEGIN.len();
    let end = page
        .get(after_begin..)
        .and_then(|rest| rest.find(END))
        .map(|i| i + after_begin)
        .ok_or(Error::NoMarkers)?;
    let old = page.get(after_begin..end).unwrap_or_default();
    let block = render_block(old, runs, machine, plots);
    Ok(format!(
        "{}{BEGIN}\n{block}{END}{}",
        page.get(..start).unwrap_or_default(),
        page.get(end + END.len()..).unwrap_or_default()
    ))
}

/// The block's text: header, one row per system (old order, new systems after), plots line.
fn render_block(
    old: &str,
    runs: &BTreeMap<String, Run>,
    machine: &Machine,
    plots: &[String],
) -> String {
    let old_rows: Vec<Vec<String>> = old
        .lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .map(cells)
        .filter(|c| {
            let first = c.first().map(String::as_str).unwrap_or_default();
            first != "system" && !first.starts_with("---")
        })
        .collect();
    let mut keys: Vec<String> = old_rows.iter().filter_map(|c| c.first().cloned()).collect();
    for spec in systems::SPECS {
        if !keys.iter().any(|k| k == spec.system) {
            keys.push(spec.system.to_string());
        }
    }
    let mut out = format!("{HEADER}\n");
    for key in &keys {
        let spec = systems::SPECS.iter().find(|s| s.system == key);
        let fresh = spec.and_then(|s| {
            let run = runs.get(s.file)?;
            let fig = (s.compute)(&run.rows)?;
            Some((s, run, fig))
        });
        let old = old_rows.iter().find(|c| c.first() == Some(key));
        let line = match (fresh, old) {
            (Some((s, run, f)), _) => row_line(&[
                s.system.to_string(),
                s.claim.to_string(),
                f.figure,
                f.peer,
                f.ratio,
                f.met,
                s.link.to_string(),
                run_cell(&run.command, machine),
            ]),
            (None, Some(old)) => keep_row(old.clone()),
            (None, None) => continue,
        };
        out.push_str(&line);
        out.push('\n');
    }
    let mut links: Vec<String> = plots.to_vec();
    for line in old.lines().filter(|l| l.starts_with("Plots: ")) {
        for part in line.split("](").skip(1) {
            if let Some((path, _)) = part.split_once(')') {
                links.push(path.to_string());
            }
        }
    }
    links.sort();
    links.dedup();
    if !links.is_empty() {
        let list: Vec<String> = links
            .iter()
            .map(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                let name = name.trim_start_matches("report-").trim_end_matches(".svg");
                format!("[{name}]({p})")
            })
            .collect();
        out.push_str(&format!("\nPlots: {}.\n", list.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests;
