//! Option values every subcommand parses the same way: lists of index families, of position
//! boundaries and of thread counts, the one-line usage error that names the option, and which
//! options the user gave.

use clap::ArgMatches;
use clap::parser::ValueSource;
use lidb_index::Family;

use crate::error::CliError;

/// Maps a message about `option` to a usage error naming it.
pub fn usage(option: &str) -> impl FnOnce(String) -> CliError + '_ {
    move |msg| CliError::Usage(format!("{option}: {msg}"))
}

/// `all`, or comma-separated family names.
pub fn parse_families(list: &str) -> Result<Vec<Family>, CliError> {
    if list.trim() == "all" {
        return Ok(Family::ALL.to_vec());
    }
    Ok(list
        .split(',')
        .map(|s| Family::from_name(s.trim()))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Comma-separated position boundaries, each at least 2.
pub fn parse_boundaries(list: &str) -> Result<Vec<u64>, CliError> {
    list.split(',')
        .map(|s| {
            let s = s.trim();
            match s.parse::<u64>() {
                Ok(b) if b >= 2 => Ok(b),
                Ok(b) => Err(format!("boundary {b} is below the minimum 2")),
                Err(_) => Err(format!("\"{s}\" is not a whole number")),
            }
        })
        .collect::<Result<Vec<u64>, String>>()
        .map_err(usage("--boundary"))
}

/// The most threads one run of a benchmark may start.
pub const MAX_THREADS: usize = 1024;

/// `--threads` of every benchmark that runs at several thread counts (`lidb bench concurrent`,
/// `ycsb`, `btree`): comma-separated whole numbers from 1 to [`MAX_THREADS`], each once, run in
/// the order given ("8" is a list of one). Anything else is one usage line naming the option.
pub fn parse_threads(list: &str) -> Result<Vec<usize>, CliError> {
    let refuse = |why: String| {
        CliError::Usage(format!(
            "--threads: \"{list}\": {why}; want thread counts from 1 to {MAX_THREADS}, \
             comma-separated, each once (e.g. 1,2,4,8,16)"
        ))
    };
    let mut out: Vec<usize> = Vec::new();
    for item in list.split(',').map(str::trim) {
        let t = match item.parse::<usize>() {
            Ok(t) if (1..=MAX_THREADS).contains(&t) => t,
            Ok(t) => return Err(refuse(format!("{t} is out of range"))),
            Err(_) if item.is_empty() => return Err(refuse("an empty item".into())),
            Err(_) => return Err(refuse(format!("\"{item}\" is not a whole number"))),
        };
        if out.contains(&t) {
            return Err(refuse(format!("{t} twice")));
        }
        out.push(t);
    }
    Ok(out)
}

/// The options of the subcommand at `path` (`["kv"]`, `["fine", "serve"]`) the user gave on the
/// command line, as `--long-name` (an option left to its default is not among them), in the
/// order the subcommand defines them.
pub fn given_options(
    definition: &clap::Command,
    matches: &ArgMatches,
    path: &[&str],
) -> Vec<String> {
    let mut cmd = definition;
    let mut m = matches;
    for name in path {
        let (Some(c), Some(sub)) = (cmd.find_subcommand(name), m.subcommand_matches(name)) else {
            return Vec::new();
        };
        cmd = c;
        m = sub;
    }
    cmd.get_arguments()
        .filter(|a| m.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// A count of operations or records: `5000`, `200K`, `10M` (lidb-data's count syntax); errors
/// name `option`.
pub fn count(option: &str, text: &str) -> Result<u64, CliError> {
    lidb_data::synthetic::parse_count(text.trim()).map_err(|e| usage(option)(e.to_string()))
}

/// A duration: `500ms`, `30s`, `5m`, `1h`, or a bare number of seconds (`2.5`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("\"{text}\" is not a duration (examples: 500ms, 30s, 5m, 1h)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("\"{text}\" is not a duration of zero or more"));
    }
    std::time::Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("\"{text}\" is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(list: &str) -> String {
        match parse_threads(list) {
            Err(CliError::Usage(msg)) => msg,
            other => panic!("{list:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn thread_lists_keep_their_order_and_refuse_mistakes_in_one_line() {
        assert_eq!(parse_threads("8").ok(), Some(vec![8]));
        assert_eq!(parse_threads("1, 2,16,4").ok(), Some(vec![1, 2, 16, 4]));
        for (list, why) in [
            ("0", "0 is out of range"),
            ("1,2,1", "1 twice"),
            ("1,,2", "an empty item"),
            ("", "an empty item"),
            ("1,x", "\"x\" is not a whole number"),
            ("-1", "\"-1\" is not a whole number"),
            ("2048", "2048 is out of range"),
        ] {
            let msg = refused(list);
            assert!(
                msg.starts_with("--threads: ") && msg.contains(why),
                "{list:?}: {msg}"
            );
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn durations_parse_with_units_and_refuse_nonsense() {
        use std::time::Duration;
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["", "s", "-1s", "ten", "1e400s", "NaN"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
