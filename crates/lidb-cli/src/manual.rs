//! `lidb manual`: the whole command manual as Markdown, generated from the same clap definition
//! that parses the arguments, so it cannot drift from `--help`. docs/cli.md is its output; a
//! test (tests/manual.rs) fails when docs/cli.md is not what this prints.
//!
//! Layout: one section per command, deepest last (`lidb`, `lidb index`, `lidb index bench`, ...),
//! each with its description, its usage line and one list item per option or argument: the
//! spelling, the value it takes, its default and possible values, and its help.

use std::fmt::Write;

use clap::{Arg, Command};

/// The manual of `cmd` (the top-level command) as Markdown.
pub fn render(cmd: &Command) -> String {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = String::new();
    out.push_str(
        "# The lidb command manual\n\n\
         Generated from the command line's own definition by `lidb manual > docs/cli.md`; \
         `cargo test -p lidb-cli --test manual` fails when this file is out of date. \
         `lidb COMMAND --help` prints the same text for one command.\n",
    );
    section(&mut out, &cmd, cmd.get_name());
    out
}

fn section(out: &mut String, cmd: &Command, path: &str) {
    let level = "#".repeat((path.split(' ').count() + 1).min(6));
    let _ = write!(out, "\n{level} `{path}`\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim());
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage: ");
    let _ = writeln!(out, "Usage: `{usage}`\n");
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        for arg in args {
            let _ = writeln!(out, "- {}", describe(arg));
        }
        out.push('\n');
    }
    let subs: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        let _ = writeln!(out, "Commands:\n");
        for sub in &subs {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let first = about
                .split(". ")
                .next()
                .unwrap_or_default()
                .trim_end_matches('.');
            let _ = writeln!(out, "- `{path} {}`: {first}", sub.get_name());
        }
        for sub in subs {
            section(out, sub, &format!("{path} {}", sub.get_name()));
        }
    }
}

/// One option or argument: `--name <VALUE>` (default, possible values): help.
fn describe(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .and_then(|v| v.first())
        .map(|v| v.to_string())
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let mut spelled = match (arg.get_long(), arg.get_short()) {
        (Some(long), _) if takes_value => format!("`--{long} <{value}>`"),
        (Some(long), _) => format!("`--{long}`"),
        (None, Some(short)) => format!("`-{short}`"),
        (None, None) => format!("`<{value}>`"),
    };
    let mut notes = Vec::new();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if takes_value && !defaults.is_empty() {
        notes.push(format!("default `{}`", defaults.join(",")));
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| p.get_name().to_string())
        .collect();
    if !possible.is_empty() && takes_value {
        notes.push(format!("one of {}", possible.join(", ")));
    }
    if arg.is_required_set() {
        notes.push("required".into());
    }
    if let Some(aliases) = arg.get_visible_aliases() {
        let names: Vec<String> = aliases.iter().map(|a| format!("`--{a}`")).collect();
        notes.push(format!("also {}", names.join(", ")));
    }
    if !notes.is_empty() {
        let _ = write!(spelled, " ({})", notes.join("; "));
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    // A help of several paragraphs stays one list item: its later paragraphs are indented.
    let help = help.trim().replace("\n\n", "\n\n  ");
    if help.is_empty() {
        spelled
    } else {
        format!("{spelled}: {help}")
    }
}
