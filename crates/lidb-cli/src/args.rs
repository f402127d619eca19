//! Option values every subcommand parses the same way: lists of index families and of position
//! boundaries, the one-line usage error that names the option, and which options the user gave.

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

/// The options of subcommand `name` the user gave on the command line, as `--long-name` (an
/// option left to its default is not among them), in the order the subcommand defines them.
pub fn given_options(definition: &clap::Command, matches: &ArgMatches, name: &str) -> Vec<String> {
    let (Some(cmd), Some(m)) = (
        definition.find_subcommand(name),
        matches.subcommand_matches(name),
    ) else {
        return Vec::new();
    };
    cmd.get_arguments()
        .filter(|a| m.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}
