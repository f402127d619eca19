//! `lidb index ...`: benchmark, query and inspect learned indexes over a key set.
//!
//! Every name is either a lidb-index family (a model over the sorted keys, answering a range of
//! at most B positions) or an unclustered index of lidb-updatable (`alex`, `lipp`, `dili`,
//! `lits`), bulk-loaded from the sorted keys as (key, position of its first occurrence) pairs
//! and answering the exact position as `[q, q + 1)`, or `[n, n]` past the end (see
//! `lidb_bench::unclustered`). Both answer under the same contract, so the same checks apply.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use lidb_bench::index_bench::{self, Row};
use lidb_bench::unclustered::{IndexName, UnclusteredIndex};
use lidb_index::{Bound, LearnedIndex, Params, RmiRoot, StatValue, build};
use serde_json::{Map, Value, json};

use crate::args::parse_boundaries;
use crate::error::{CliError, io};

#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Build every (index, boundary) over a key set and measure size, build speed and lookups.
    ///
    /// One row per configuration: keys, segments (models), size_bytes, bits_per_key,
    /// build_ns_per_key, lookup_ns_mean and lookup_ns_p99 (prediction plus last-mile binary search
    /// in memory, on existing keys, one thread), get_ns_mean and bound_width_mean. Every answer
    /// is checked. The unclustered indexes (alex, lipp, dili, lits) give one row each, boundary
    /// 1; their lookup is the lower bound (the first entry of range_from), their get the point
    /// lookup (exact match, no iterator). For a family, get is its lookup timed again.
    Bench(BenchArgs),
    /// Answer a file of queries with one index: for each query in order, write lo and hi as two
    /// little-endian u64 (16 bytes per query).
    Query(QueryArgs),
    /// Print the structure of one index (segments per level, leaves, size) as JSON; for an
    /// unclustered index its node, model and depth counts and its heap bytes.
    Stats(StatsArgs),
}

/// Family-specific parameters; each applies only to its family.
#[derive(Debug, Clone, Args)]
pub struct FamilyArgs {
    /// pgm: error of the internal levels, in positions of the level below.
    #[arg(long, default_value_t = 4)]
    pgm_epsilon_recursive: u64,
    /// rs: bits of the radix table over the key prefix (0 to 30).
    #[arg(long, default_value_t = lidb_index::rs::DEFAULT_RADIX_BITS)]
    rs_radix_bits: u32,
    /// rmi: the root model.
    #[arg(long, value_enum, default_value_t = RootArg::Linear)]
    rmi_root: RootArg,
    /// lpa: largest model error tolerated [default: the largest the boundary allows, (B-2)/2].
    #[arg(long)]
    lpa_threshold: Option<u64>,
    /// lpa: points the probe adds per forward step.
    #[arg(long, default_value_t = 32)]
    lpa_learning_step: u64,
    /// lpa: how fast backward steps shrink, in (0, 1).
    #[arg(long, default_value_t = 0.5)]
    lpa_learning_rate: f64,
    /// fiting: keys per B+-tree node.
    #[arg(long, default_value_t = 16)]
    fiting_fanout: u32,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RootArg {
    Linear,
    Cubic,
}

impl FamilyArgs {
    /// The parameters as `name=value` pairs, for the configuration line of a report.
    fn describe(&self) -> String {
        format!(
            "pgm_epsilon_recursive={} rs_radix_bits={} rmi_root={:?} lpa_threshold={} \
             lpa_learning_step={} lpa_learning_rate={} fiting_fanout={}",
            self.pgm_epsilon_recursive,
            self.rs_radix_bits,
            self.rmi_root,
            self.lpa_threshold
                .map_or("auto".to_string(), |t| t.to_string()),
            self.lpa_learning_step,
            self.lpa_learning_rate,
            self.fiting_fanout
        )
    }

    fn params(&self, boundary: u64) -> Params {
        Params {
            boundary,
            pgm_epsilon_recursive: self.pgm_epsilon_recursive,
            rs_radix_bits: self.rs_radix_bits,
            rmi_root: match self.rmi_root {
                RootArg::Linear => RmiRoot::Linear,
                RootArg::Cubic => RmiRoot::Cubic,
            },
            lpa_threshold: self.lpa_threshold,
            lpa_learning_step: self.lpa_learning_step,
            lpa_learning_rate: self.lpa_learning_rate,
            fiting_fanout: self.fiting_fanout,
        }
    }
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Keys: a SOSD u64 file (plain or .zst), or synthetic:NAME:N (uniform_dense, uniform_sparse,
    /// normal, lognormal, piecewise_linear, clustered, lineargen, piecewise, randomgen; N accepts
    /// K and M suffixes; `lidb data gen --help` says how each is generated), or text:PATH: byte-
    /// string keys, one a line (plain or .zst, any order; sorted and deduplicated first), over
    /// which the indexes are binary (search over the sorted strings) and lits, one row each.
    #[arg(long, default_value = "synthetic:lognormal:1M")]
    data: String,
    /// Indexes, comma-separated, or "all": the families fp, binary, plr, fiting, pgm, rs, rmi,
    /// lpa, plex (one row per boundary) and the unclustered alex, lipp, dili, lits (lidb-updatable;
    /// one row each with boundary 1: bulk-loaded from (key, first position) pairs, a run of
    /// duplicate keys kept once at its first position; a lookup is the first entry of
    /// range_from(q), the exact position; size_bytes holds their keys and positions; lits gets
    /// each key's 8-byte big-endian image). Compare with binary search in one run:
    /// --index binary,alex,lipp,dili,lits.
    #[arg(long, default_value = "all")]
    index: String,
    /// Position boundaries B (at least 2), comma-separated.
    #[arg(long, default_value = "8,16,32,64,128,256")]
    boundary: String,
    /// Lookups of existing keys per configuration.
    #[arg(long, default_value_t = 200_000)]
    queries: usize,
    /// Seed of synthetic data and of the query sample.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Timing rounds: lookup passes run round-robin this many times over one index's boundaries
    /// (over every configuration with --interleave), and each row reports its median, so noise
    /// on a shared machine hits the rows of a group alike.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Interleave the rounds of every index and boundary, not one index at a time: the closest
    /// comparison of two indexes' times, but the table prints only at the end (by default each
    /// index's rows print as it finishes).
    #[arg(long)]
    interleave: bool,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    family: FamilyArgs,
}

/// The one index `query` and `stats` build.
#[derive(Debug, Args)]
pub struct OneIndexArgs {
    /// Sorted keys: a SOSD u64 file (plain or .zst) or synthetic:NAME:N.
    #[arg(long)]
    data: String,
    /// The index: a family (fp, binary, plr, fiting, pgm, rs, rmi, lpa) or an unclustered
    /// index (alex, lipp, dili, lits; see `lidb index bench --help`).
    #[arg(long)]
    index: String,
    /// Position boundary B (at least 2). Required for a family; an unclustered index accepts
    /// and ignores it (its answers are at most one position wide, within any B).
    #[arg(long)]
    boundary: Option<u64>,
    /// Seed for synthetic data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    family: FamilyArgs,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    #[command(flatten)]
    one: OneIndexArgs,
    /// Queries: a SOSD u64 file in any order.
    #[arg(long)]
    queries: PathBuf,
    /// Output file: 16 bytes per query (lo, hi as little-endian u64).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    one: OneIndexArgs,
    /// Print one JSON object (the default output is the same object, pretty-printed).
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: IndexCommand) -> Result<(), CliError> {
    match cmd {
        IndexCommand::Bench(a) => bench(a),
        IndexCommand::Query(a) => query(a),
        IndexCommand::Stats(a) => stats(a),
    }
}

fn bench(a: BenchArgs) -> Result<(), CliError> {
    if let Some(path) = a.data.strip_prefix("text:") {
        return bench_strings(&a, path);
    }
    let indexes = IndexName::parse_list(&a.index).map_err(crate::args::usage("--index"))?;
    let boundaries = parse_boundaries(&a.boundary)?;
    for &b in &boundaries {
        a.family.params(b).validate()?;
    }
    if a.queries == 0 {
        return Err(CliError::Usage("--queries must be at least 1".into()));
    }
    let keys = lidb_data::synthetic::load(&a.data, a.seed)?;
    if keys.is_empty() {
        return Err(CliError::Usage(format!("{}: no keys to look up", a.data)));
    }
    let queries = lidb_data::queries::existing(&keys, a.queries, a.seed);
    let unclustered = indexes
        .iter()
        .any(|i| matches!(i, IndexName::Unclustered(_)));
    let config_line = format!(
        "# lidb index bench: data={} keys={} queries={} seed={} rounds={} {}{}",
        a.data,
        keys.len(),
        queries.len(),
        a.seed,
        a.rounds,
        a.family.describe(),
        if unclustered {
            " unclustered=(key, first position) pairs, lookup=range_from(q) first entry, get=point lookup, \
             size_bytes with keys and positions, lits over 8-byte big-endian keys"
        } else {
            ""
        }
    );
    if a.json {
        eprintln!("{config_line}");
    } else {
        println!("{config_line}");
    }
    let cfg = index_bench::Config {
        indexes,
        boundaries,
        params: a.family.params(2),
        queries: queries.len(),
        seed: a.seed,
        rounds: a.rounds,
        progress: true,
        interleave_all: a.interleave,
    };
    let mut out = std::io::stdout();
    if !a.json {
        writeln!(out, "{}", render_line(&HEADER.map(String::from))).map_err(io("stdout"))?;
    }
    let mut failed: Option<CliError> = None;
    let ran = index_bench::run_each(&keys, &queries, &cfg, &mut |rows| {
        let mut text = String::new();
        for row in rows {
            if a.json {
                match serde_json::to_string(row) {
                    Ok(line) => text.push_str(&line),
                    Err(e) => failed = Some(CliError::Usage(e.to_string())),
                }
            } else {
                text.push_str(&render_line(&cells_of(row)));
            }
            text.push('\n');
        }
        // Written and flushed per group, so a long run shows its rows as they come.
        if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            failed = Some(io("stdout")(e));
        }
        Ok(())
    });
    ran?;
    failed.map_or(Ok(()), Err)
}

/// `lidb index bench --data text:PATH`: binary search and LITS over byte-string keys.
fn bench_strings(a: &BenchArgs, path: &str) -> Result<(), CliError> {
    use lidb_bench::string_index_bench::{self as strings, StringIndex};
    let indexes =
        StringIndex::parse_list(&a.index).map_err(|e| CliError::Usage(format!("--index: {e}")))?;
    if a.queries == 0 {
        return Err(CliError::Usage("--queries must be at least 1".into()));
    }
    let keys = strings::prepare(lidb_data::text::read_keys_any_order(path)?);
    if keys.is_empty() {
        return Err(CliError::Usage(format!("{}: no keys to look up", a.data)));
    }
    let queries = strings::draw_queries(&keys, a.queries, a.seed);
    let config_line = format!(
        "# lidb index bench: data={} keys={} (distinct, sorted) queries={} seed={} rounds={} \
         lookup=lower bound (lits: range_from(q) first entry), get=point lookup, \
         size_bytes with keys and positions (binary: the array of strings)",
        a.data,
        keys.len(),
        queries.len(),
        a.seed,
        a.rounds
    );
    if a.json {
        eprintln!("{config_line}");
    } else {
        println!("{config_line}");
    }
    let rows = strings::run(&keys, &queries, &indexes, a.rounds)
        .map_err(|e| CliError::Check(format!("wrong answer: {e}")))?;
    let mut text = String::new();
    if !a.json {
        text.push_str(&render_line(&HEADER.map(String::from)));
        text.push('\n');
    }
    for row in &rows {
        if a.json {
            text.push_str(&serde_json::to_string(row).map_err(|e| CliError::Usage(e.to_string()))?);
        } else {
            text.push_str(&render_line(&cells_of(row)));
        }
        text.push('\n');
    }
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(io("stdout"))
}

/// The table's columns.
const HEADER: [&str; 11] = [
    "index",
    "boundary",
    "keys",
    "segments",
    "size_bytes",
    "bits_per_key",
    "build_ns_per_key",
    "lookup_ns_mean",
    "lookup_ns_p99",
    "get_ns_mean",
    "bound_width_mean",
];
/// Least width of each column: its header's, and 8 for the index names, so rows printed group
/// by group stay aligned (a wider cell widens only its own line).
const WIDTHS: [usize; 11] = [8, 8, 8, 8, 10, 12, 16, 14, 13, 11, 16];

/// One line of the table, right-aligned to [`WIDTHS`].
fn render_line(cells: &[String; 11]) -> String {
    cells
        .iter()
        .zip(WIDTHS)
        .map(|(c, w)| format!("{c:>w$}"))
        .collect::<Vec<_>>()
        .join("  ")
}

fn cells_of(r: &Row) -> [String; 11] {
    [
        r.index.clone(),
        r.boundary.to_string(),
        r.keys.to_string(),
        r.segments.to_string(),
        r.size_bytes.to_string(),
        format!("{:.3}", r.bits_per_key),
        format!("{:.1}", r.build_ns_per_key),
        format!("{:.1}", r.lookup_ns_mean),
        format!("{:.1}", r.lookup_ns_p99),
        format!("{:.1}", r.get_ns_mean),
        format!("{:.2}", r.bound_width_mean),
    ]
}

/// The one index `query` and `stats` build.
enum OneIndex {
    Family(Box<dyn LearnedIndex>),
    Unclustered(UnclusteredIndex),
}

impl OneIndex {
    fn search(&self, q: u64) -> Bound {
        match self {
            OneIndex::Family(index) => index.search(q),
            OneIndex::Unclustered(index) => index.search(q),
        }
    }
}

fn build_one(a: &OneIndexArgs) -> Result<(Vec<u64>, OneIndex), CliError> {
    let name = IndexName::from_name(a.index.trim()).map_err(crate::args::usage("--index"))?;
    match name {
        IndexName::Family(family) => {
            let boundary = a.boundary.ok_or_else(|| {
                CliError::Usage(format!("--boundary is required for index {family}"))
            })?;
            let params = a.family.params(boundary);
            params.validate()?;
            let keys = lidb_data::synthetic::load(&a.data, a.seed)?;
            let index = build(family, &keys, &params)?;
            Ok((keys, OneIndex::Family(index)))
        }
        IndexName::Unclustered(kind) => {
            if let Some(b) = a.boundary.filter(|&b| b < lidb_index::bound::MIN_BOUNDARY) {
                return Err(CliError::Usage(format!(
                    "--boundary: boundary {b} is below the minimum {}",
                    lidb_index::bound::MIN_BOUNDARY
                )));
            }
            let keys = lidb_data::synthetic::load(&a.data, a.seed)?;
            let index = UnclusteredIndex::build(kind, &keys)
                .map_err(|e| CliError::Check(format!("{name}: {e}")))?;
            Ok((keys, OneIndex::Unclustered(index)))
        }
    }
}

fn query(a: QueryArgs) -> Result<(), CliError> {
    let (_keys, idx) = build_one(&a.one)?;
    let queries = lidb_data::sosd::read_u64_any_order(&a.queries)?;
    let mut bytes = Vec::with_capacity(queries.len() * 16);
    for &q in &queries {
        let b = idx.search(q);
        bytes.extend_from_slice(&b.lo.to_le_bytes());
        bytes.extend_from_slice(&b.hi.to_le_bytes());
    }
    write_atomically(&a.out, &bytes)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), CliError> {
    let name = path.display().to_string();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(io(tmp.display().to_string()))?;
    std::fs::rename(&tmp, path).map_err(io(name))
}

fn stats(a: StatsArgs) -> Result<(), CliError> {
    let (keys, idx) = build_one(&a.one)?;
    let mut obj = Map::new();
    match &idx {
        OneIndex::Family(idx) => {
            let s = idx.stats();
            obj.insert("index".into(), json!(idx.family().name()));
            obj.insert("boundary".into(), json!(a.one.boundary));
            obj.insert("keys".into(), json!(keys.len()));
            obj.insert("size_bytes".into(), json!(idx.size_bytes()));
            obj.insert("models".into(), json!(s.models));
            for (name, value) in s.details {
                let v = match value {
                    StatValue::U64(v) => json!(v),
                    StatValue::F64(v) => json!(v),
                    StatValue::List(v) => json!(v),
                };
                obj.insert(name.into(), v);
            }
        }
        OneIndex::Unclustered(idx) => {
            let s = idx.stats();
            obj.insert("index".into(), json!(idx.kind().name()));
            obj.insert(
                "boundary".into(),
                json!(lidb_bench::index_bench::UNCLUSTERED_BOUNDARY),
            );
            obj.insert("keys".into(), json!(keys.len()));
            obj.insert("size_bytes".into(), json!(idx.size_bytes()));
            obj.insert("models".into(), json!(s.models));
            obj.insert("distinct_keys".into(), json!(idx.len()));
            obj.insert("nodes".into(), json!(s.nodes));
            obj.insert("inner_nodes".into(), json!(s.inner_nodes));
            obj.insert("leaf_nodes".into(), json!(s.leaf_nodes));
            obj.insert("depth_max".into(), json!(s.depth_max));
            obj.insert("depth_avg".into(), json!(s.depth_avg));
        }
    }
    let value = Value::Object(obj);
    let text = if a.json {
        value.to_string()
    } else {
        serde_json::to_string_pretty(&value).map_err(|e| CliError::Usage(e.to_string()))?
    };
    writeln!(std::io::stdout().lock(), "{text}").map_err(io("stdout"))
}
