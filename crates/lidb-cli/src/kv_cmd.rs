//! `lidb kv`: a line protocol over stdin/stdout for a database, one command per line. Every
//! answer ends with a line of its own and stdout is flushed before the next command is read, so a
//! driver can talk to it interactively. Errors are `ERR <message>` lines; the process keeps
//! serving. Keys and values are tokens without spaces; `\xNN` escapes any byte, and output escapes
//! spaces, backslashes and non-printable bytes the same way.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use lidb_engines::{Engine, EngineKind, Shape};

use crate::engine_args::{CommandUse, EngineArgs, open_error};
use crate::error::{CliError, io};

#[derive(Debug, Args)]
pub struct KvArgs {
    /// Database directory (created if missing).
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
}

pub fn run(a: KvArgs, given: &[String]) -> Result<(), CliError> {
    a.engine.refuse_ignored(CommandUse::Serve, given)?;
    let kind = a.engine.engine;
    let db = lidb_engines::open_kind(kind, &a.engine.config(a.db.clone())?)
        .map_err(|e| open_error(kind, &a.db, e))?;
    eprint!("{}", db.recovery());
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(io("stdin"))?;
        let answer = match execute(db.as_ref(), kind, &line) {
            Ok(text) => text,
            Err(msg) => format!("ERR {}\n", msg.replace('\n', " ")),
        };
        out.write_all(answer.as_bytes()).map_err(io("stdout"))?;
        out.flush().map_err(io("stdout"))?;
    }
    Ok(db.close()?)
}

/// Refuses command `cmd` of the line protocol unless `ok`, naming the engines that have it.
fn only(ok: bool, what: &str) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what.to_string()) }
}

/// Runs one command line; the answer includes its final newline.
fn execute(db: &dyn Engine, kind: EngineKind, line: &str) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let e = |err: lidb_engines::EngineError| err.to_string();
    let shape = kind.shape();
    match words.as_slice() {
        [] => Err("empty command".into()),
        ["put", k, v] => {
            db.put(&unescape(k)?, &unescape(v)?).map_err(e)?;
            Ok("OK\n".into())
        }
        ["get", k] => match db.get(&unescape(k)?).map_err(e)? {
            Some(v) => Ok(format!("{}\n", escape(&v))),
            None => Ok("(nil)\n".into()),
        },
        ["del", k] => {
            db.delete(&unescape(k)?).map_err(e)?;
            Ok("OK\n".into())
        }
        ["scan", start, end, rest @ ..] => {
            let limit = match rest {
                [] => usize::MAX,
                [l] => l
                    .parse::<usize>()
                    .map_err(|_| format!("bad LIMIT \"{l}\""))?,
                _ => return Err("usage: scan START END [LIMIT]".into()),
            };
            let (start, end) = (unescape(start)?, unescape(end)?);
            let mut text = String::new();
            db.scan(&start, Some(&end), limit, &mut |k, v| {
                text.push_str(&format!("{} {}\n", escape(k), escape(v)));
            })
            .map_err(e)?;
            text.push_str("(end)\n");
            Ok(text)
        }
        ["flush"] => {
            db.flush().map_err(e)?;
            Ok("OK\n".into())
        }
        ["compact"] => {
            only(
                shape == Shape::Lsm || kind == EngineKind::RocksDb,
                "compact is a command of the LSM engines; finedex, learnedstore and btree have \
                 checkpoint",
            )?;
            db.compact().map_err(e)?;
            Ok("OK\n".into())
        }
        ["gc"] => {
            only(
                shape == Shape::Lsm && kind != EngineKind::Lsm,
                "gc is a command of the tiered engines (learnedkv, lsm+, lsm+tier)",
            )?;
            db.gc().map_err(e)?;
            Ok("OK\n".into())
        }
        ["convert"] => {
            only(
                kind == EngineKind::LearnedKv,
                "convert is a command of learnedkv",
            )?;
            db.convert().map_err(e)?;
            Ok("OK\n".into())
        }
        ["checkpoint"] => {
            only(
                matches!(shape, Shape::InMemory | Shape::Tree),
                "checkpoint is a command of finedex, learnedstore and btree",
            )?;
            db.checkpoint().map_err(e)?;
            Ok("OK\n".into())
        }
        ["stats"] => Ok(format!("{}\n", db.stats())),
        [cmd, ..] => Err(format!(
            "unknown command or wrong arguments: \"{cmd}\" (commands: put K V, get K, del K, scan START END [LIMIT], flush, compact, gc, convert, checkpoint, stats)"
        )),
    }
}

/// Decodes `\xNN` escapes.
pub fn unescape(token: &str) -> Result<Vec<u8>, String> {
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' {
            let hex = bytes
                .get(i + 1..i + 4)
                .filter(|h| h.first() == Some(&b'x'))
                .and_then(|h| std::str::from_utf8(h.get(1..)?).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad escape in \"{token}\" (use \\xNN)"))?;
            out.push(hex);
            i += 4;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// Printable ASCII except space and backslash as is; everything else as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&escape(&all)), Ok(all));
        assert_eq!(escape(b"a b\\"), "a\\x20b\\x5c");
        assert!(unescape("\\x4").is_err());
        assert!(unescape("\\q41").is_err());
    }
    /// `--checkpoint-log-bytes` defaults to FineStore's own default.
    #[test]
    fn checkpoint_log_bytes_defaults_to_finestores() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            kv: KvArgs,
        }
        let parsed = <Cli as clap::Parser>::try_parse_from(["lidb", "--db", "d"]);
        let Ok(cli) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(
            cli.kv.engine.checkpoint.checkpoint_log_bytes,
            lidb_fine::FineStoreOptions::DEFAULT_CHECKPOINT_LOG_BYTES
        );
    }
}
