//! One connection's state (protocol, name, whether it has authenticated) and the commands that
//! change it and touch no engine: AUTH, HELLO, CLIENT, QUIT, plus the gate that refuses every
//! other command with `-NOAUTH Authentication required.` until a server with a password has
//! been given it.
//!
//! Pure: no I/O, no engine, so it is fuzzed with the decoder (`fuzz/fuzz_targets/resp_request.rs`).
//! A session belongs to one connection; it moves with that connection's batch to a pool thread
//! and back, so one thread at a time uses it.
//!
//! Invariants:
//! 1. Without a password every session is authenticated from the start. With one, a session is
//!    authenticated only after an AUTH or HELLO ... AUTH that gave it (user `default`); until then
//!    [`connection_command`] answers every command but AUTH, HELLO and QUIT with NOAUTH, and
//!    nothing else is run for it.
//! 2. The password is compared in time that depends on the lengths only, never on where the
//!    bytes first differ. Every wrong password adds one to `auth_failures`; the connection counts
//!    it in INFO and waits [`crate::connection::AUTH_FAILURE_DELAY`] per failure before answering.
//! 3. The protocol changes only by a HELLO that succeeds; a failed HELLO changes nothing.

use bytes::Bytes;

use crate::reply::{Protocol, Reply};

/// The password of `--requirepass`: shown as `<redacted>` in debug output.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(Vec<u8>);

impl Password {
    /// `None` for an empty password (it could not be sent apart from none).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Option<Password> {
        let bytes = bytes.into();
        (!bytes.is_empty()).then_some(Password(bytes))
    }

    /// Whether `given` is the password, in time independent of their contents.
    pub fn matches(&self, given: &[u8]) -> bool {
        let want = &self.0;
        let mut diff = u64::from(want.len() != given.len());
        for (i, &g) in given.iter().enumerate() {
            let w = want.get(i % want.len().max(1)).copied().unwrap_or(0);
            diff |= u64::from(std::hint::black_box(w ^ g));
        }
        std::hint::black_box(diff) == 0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// One connection's state that commands read or change.
#[derive(Debug, Default)]
pub struct Session {
    pub id: u64,
    pub name: Option<Bytes>,
    pub protocol: Protocol,
    /// May run commands (always, on a server without a password).
    pub authenticated: bool,
    /// Wrong passwords not yet counted and waited for by the connection.
    pub auth_failures: u64,
    /// Set by QUIT: the connection closes after this reply.
    pub quit: bool,
}

impl Session {
    pub fn new(id: u64, password: Option<&Password>) -> Session {
        Session {
            id,
            authenticated: password.is_none(),
            ..Session::default()
        }
    }
}

/// What [`connection_command`] made of a request.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Not a connection command, and the session may run it: the command table's.
    Pass,
    /// Refused before it ran (NOAUTH): not counted as processed.
    Refused(Reply),
    /// Answered here.
    Answered(Reply),
}

pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
const NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the \
     default user. Are you sure your configuration is correct?";
const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, \
     otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client \
     and select the RESP protocol version at the same time";

fn error(msg: impl AsRef<str>) -> Reply {
    Reply::error(msg)
}

fn ok() -> Reply {
    Reply::Status(Bytes::from_static(b"OK"))
}

fn text(s: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(s.as_bytes()))
}

fn shown(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg.get(..128).unwrap_or(arg)).into_owned()
}

fn arity(cmd: &str) -> Reply {
    error(format!("ERR wrong number of arguments for '{cmd}' command"))
}

/// Runs `args` if it is AUTH, HELLO, CLIENT or QUIT, and refuses anything else for a session
/// that has not authenticated (invariant 1).
pub fn connection_command(
    session: &mut Session,
    password: Option<&Password>,
    args: &[Bytes],
) -> Outcome {
    let Some((name, rest)) = args.split_first() else {
        return Outcome::Pass;
    };
    let is = |cmd: &[u8]| name.eq_ignore_ascii_case(cmd);
    if is(b"auth") {
        return Outcome::Answered(auth(session, password, rest));
    }
    if is(b"hello") {
        return Outcome::Answered(hello(session, password, rest));
    }
    if is(b"quit") {
        session.quit = true;
        return Outcome::Answered(ok());
    }
    if !session.authenticated {
        return Outcome::Refused(error(NOAUTH));
    }
    if is(b"client") {
        return Outcome::Answered(match rest.split_first() {
            Some((sub, rest)) => client(session, sub, rest),
            None => arity("client"),
        });
    }
    Outcome::Pass
}

/// Checks `user`/`given` against the password: authenticates, or counts a failure.
fn check(session: &mut Session, password: &Password, user: &[u8], given: &[u8]) -> bool {
    // Both compared, whatever the user: the time does not say which of the two was wrong.
    let right_user = user == b"default";
    let right_password = password.matches(given);
    if right_user && right_password {
        session.authenticated = true;
        return true;
    }
    session.auth_failures += 1;
    false
}

/// AUTH [user] password.
fn auth(session: &mut Session, password: Option<&Password>, rest: &[Bytes]) -> Reply {
    let (user, given): (&[u8], &[u8]) = match rest {
        [given] => (b"default", given),
        [user, given] => (user, given),
        [] => return arity("auth"),
        _ => return error("ERR syntax error"),
    };
    let Some(password) = password else {
        return error(NO_PASSWORD);
    };
    if check(session, password, user, given) {
        ok()
    } else {
        error(WRONGPASS)
    }
}

/// Redis's rule for client and library names: printable ASCII without spaces.
fn printable(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// HELLO [protover [AUTH user password] [SETNAME name]].
fn hello(session: &mut Session, password: Option<&Password>, rest: &[Bytes]) -> Reply {
    let mut protocol = session.protocol;
    let mut options = rest;
    if let Some((version, more)) = rest.split_first() {
        protocol = match crate::commands::parse_u64(version) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return error("NOPROTO unsupported protocol version"),
            None => return error("ERR Protocol version is not an integer or out of range"),
        };
        options = more;
    }
    let mut credentials = None;
    let mut name = None;
    loop {
        match options {
            [] => break,
            [opt, user, given, more @ ..] if opt.eq_ignore_ascii_case(b"auth") => {
                credentials = Some((user, given));
                options = more;
            }
            [opt, new_name, more @ ..] if opt.eq_ignore_ascii_case(b"setname") => {
                name = Some(new_name);
                options = more;
            }
            [opt, ..] => {
                return error(format!("ERR Syntax error in HELLO option '{}'", shown(opt)));
            }
        }
    }
    if let Some((user, given)) = credentials {
        let Some(password) = password else {
            return error(NO_PASSWORD);
        };
        if !check(session, password, user, given) {
            return error(WRONGPASS);
        }
    }
    if !session.authenticated {
        return error(HELLO_NOAUTH);
    }
    if let Some(name) = name {
        if !printable(name) {
            return error(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            );
        }
        session.name = (!name.is_empty()).then(|| name.clone());
    }
    session.protocol = protocol;
    Reply::Map(vec![
        (text("server"), text("lidb")),
        (text("version"), text(env!("CARGO_PKG_VERSION"))),
        (text("proto"), Reply::Integer(protocol.version())),
        (
            text("id"),
            Reply::Integer(session.id.min(i64::MAX as u64) as i64),
        ),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
    ])
}

/// CLIENT SETNAME, GETNAME, ID, SETINFO (what client libraries send on connect).
fn client(session: &mut Session, sub: &[u8], rest: &[Bytes]) -> Reply {
    let sub = sub.to_ascii_lowercase();
    match (sub.as_slice(), rest) {
        (b"setinfo", [attr, value]) => {
            let attr = attr.to_ascii_lowercase();
            if attr != b"lib-name" && attr != b"lib-ver" {
                return error(format!("ERR Unrecognized option '{}'", shown(&attr)));
            }
            if !printable(value) {
                return error(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    shown(&attr)
                ));
            }
            ok()
        }
        (b"setname", [name]) => {
            if !printable(name) {
                return error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            session.name = (!name.is_empty()).then(|| name.clone());
            ok()
        }
        (b"getname", []) => session.name.clone().map_or(Reply::Null, Reply::Bulk),
        (b"id", []) => Reply::Integer(session.id.min(i64::MAX as u64) as i64),
        (b"setinfo" | b"setname" | b"getname" | b"id", _) => error(format!(
            "ERR wrong number of arguments for 'client|{}' command",
            shown(&sub)
        )),
        _ => error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            shown(&sub)
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn req(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn run(s: &mut Session, pw: Option<&Password>, words: &[&str]) -> Outcome {
        connection_command(s, pw, &req(words))
    }

    fn answered_error(outcome: Outcome) -> String {
        match outcome {
            Outcome::Answered(Reply::Error(e)) | Outcome::Refused(Reply::Error(e)) => {
                String::from_utf8(e.to_vec()).unwrap()
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn password_compare_is_exact() {
        let pw = Password::new("s3cret").unwrap();
        assert!(pw.matches(b"s3cret"));
        for wrong in ["", "s3cre", "s3cret!", "S3cret", "s3cres", "xxxxxx"] {
            assert!(!pw.matches(wrong.as_bytes()), "{wrong}");
        }
        assert!(Password::new("").is_none());
        assert_eq!(format!("{pw:?}"), "Password(<redacted>)");
    }

    #[test]
    fn commands_wait_for_the_password() {
        let pw = Password::new("pw").unwrap();
        let mut s = Session::new(1, Some(&pw));
        assert_eq!(
            answered_error(run(&mut s, Some(&pw), &["GET", "k"])),
            NOAUTH
        );
        assert_eq!(answered_error(run(&mut s, Some(&pw), &["nosuch"])), NOAUTH);
        assert_eq!(
            answered_error(run(&mut s, Some(&pw), &["CLIENT", "ID"])),
            NOAUTH
        );
        assert!(
            answered_error(run(&mut s, Some(&pw), &["HELLO", "3"])).starts_with("NOAUTH HELLO")
        );
        assert_eq!(s.protocol, Protocol::Resp2);
        assert_eq!(
            answered_error(run(&mut s, Some(&pw), &["AUTH", "nope"])),
            WRONGPASS
        );
        assert_eq!(
            answered_error(run(&mut s, Some(&pw), &["AUTH", "root", "pw"])),
            WRONGPASS
        );
        assert_eq!(
            answered_error(run(
                &mut s,
                Some(&pw),
                &["HELLO", "3", "AUTH", "default", "x"]
            )),
            WRONGPASS
        );
        assert_eq!(s.auth_failures, 3);
        assert_eq!(s.protocol, Protocol::Resp2);
        assert!(!s.authenticated);
        assert_eq!(
            run(&mut s, Some(&pw), &["AUTH", "default", "pw"]),
            Outcome::Answered(ok())
        );
        assert_eq!(run(&mut s, Some(&pw), &["GET", "k"]), Outcome::Pass);
    }

    #[test]
    fn hello_auth_authenticates_and_switches() {
        let pw = Password::new("pw").unwrap();
        let mut s = Session::new(7, Some(&pw));
        let out = run(
            &mut s,
            Some(&pw),
            &["hello", "3", "auth", "default", "pw", "setname", "me"],
        );
        let Outcome::Answered(Reply::Map(pairs)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(pairs[2], (text("proto"), Reply::Integer(3)));
        assert_eq!(pairs[3], (text("id"), Reply::Integer(7)));
        assert_eq!(s.protocol, Protocol::Resp3);
        assert_eq!(s.name.as_deref(), Some(&b"me"[..]));
        assert!(s.authenticated);
    }

    #[test]
    fn hello_refuses_what_redis_refuses() {
        let mut s = Session::new(1, None);
        assert_eq!(
            answered_error(run(&mut s, None, &["HELLO", "4"])),
            "NOPROTO unsupported protocol version"
        );
        assert!(answered_error(run(&mut s, None, &["HELLO", "x"])).contains("not an integer"));
        assert_eq!(
            answered_error(run(&mut s, None, &["HELLO", "3", "SETNAME"])),
            "ERR Syntax error in HELLO option 'SETNAME'"
        );
        assert_eq!(
            answered_error(run(&mut s, None, &["HELLO", "3", "AUTH", "default", "pw"])),
            NO_PASSWORD
        );
        assert_eq!(
            answered_error(run(&mut s, None, &["AUTH", "pw"])),
            NO_PASSWORD
        );
        assert!(
            answered_error(run(&mut s, None, &["HELLO", "3", "SETNAME", "a b"]))
                .contains("cannot contain spaces")
        );
        assert_eq!(s.protocol, Protocol::Resp2);
        assert_eq!(s.auth_failures, 0);
        assert!(matches!(
            run(&mut s, None, &["HELLO"]),
            Outcome::Answered(Reply::Map(_))
        ));
        assert_eq!(s.protocol, Protocol::Resp2);
        assert!(matches!(
            run(&mut s, None, &["HELLO", "2"]),
            Outcome::Answered(Reply::Map(_))
        ));
    }

    #[test]
    fn client_subcommands() {
        let mut s = Session::new(5, None);
        assert_eq!(
            run(&mut s, None, &["CLIENT", "GETNAME"]),
            Outcome::Answered(Reply::Null)
        );
        assert_eq!(
            run(&mut s, None, &["CLIENT", "SETNAME", "x"]),
            Outcome::Answered(ok())
        );
        assert_eq!(
            run(&mut s, None, &["client", "getname"]),
            Outcome::Answered(Reply::Bulk(Bytes::from_static(b"x")))
        );
        assert_eq!(
            run(&mut s, None, &["CLIENT", "ID"]),
            Outcome::Answered(Reply::Integer(5))
        );
        assert_eq!(
            run(&mut s, None, &["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]),
            Outcome::Answered(ok())
        );
        assert!(
            answered_error(run(&mut s, None, &["CLIENT", "SETINFO", "color", "x"]))
                .contains("Unrecognized option")
        );
        assert!(
            answered_error(run(&mut s, None, &["CLIENT", "SETINFO", "lib-ver", "1 2"]))
                .contains("cannot contain spaces")
        );
        assert!(answered_error(run(&mut s, None, &["CLIENT", "KILL"])).contains("CLIENT HELP"));
        // An argument quoted in an error keeps the reply one line (found by the fuzz target).
        assert_eq!(
            answered_error(run(&mut s, None, &["CLIENT", "a\r\nb"])),
            "ERR unknown subcommand 'a  b'. Try CLIENT HELP."
        );
        assert!(!answered_error(run(&mut s, None, &["HELLO", "3", "x\ny"])).contains('\n'));
    }
}
