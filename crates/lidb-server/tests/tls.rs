//! TLS on the RESP listener: certificates made at test time (rcgen) in a temporary directory, a
//! server on 127.0.0.1:0 speaking only TLS, and rustls clients (plus redis-cli where it was built
//! with TLS) that trust its CA or not, with a client certificate or without.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lidb_server::{ServerConfig, ServerError, Tls, TlsFiles};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::{TestServer, start_with};

/// A CA, a server certificate for localhost and 127.0.0.1 and a client certificate that it
/// signed, and a second CA that signed nothing of the server's; all as PEM files in `dir`.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = make_ca(dir.path(), "ca");
        make_ca(dir.path(), "other-ca");
        make_leaf(
            dir.path(),
            "server",
            &ca,
            vec!["localhost".into(), "127.0.0.1".into()],
        );
        make_leaf(dir.path(), "client", &ca, vec!["client.test".into()]);
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn server_files(&self) -> TlsFiles {
        TlsFiles {
            cert_chain: self.path("server.pem"),
            private_key: self.path("server.key"),
            client_ca: None,
        }
    }

    /// A server over lsm speaking TLS with `files`.
    fn start(&self, files: &TlsFiles, config: ServerConfig) -> TestServer {
        let tls = Tls::load(files).unwrap();
        start_with(
            "lsm",
            ServerConfig {
                tls: Some(tls),
                ..config
            },
        )
    }

    /// A rustls client that trusts the CA in `ca` and, if given, presents the certificate
    /// `client` (`client.pem` and `client.key`).
    fn client(&self, ca: &str, client: Option<&str>) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(self.path(&format!("{ca}.pem"))).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some(name) => {
                let chain = CertificateDer::pem_file_iter(self.path(&format!("{name}.pem")))
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_file(self.path(&format!("{name}.key"))).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
        };
        Arc::new(config)
    }
}

fn make_ca(dir: &Path, name: &str) -> Issuer<'static, KeyPair> {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("lidb test {name}"));
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
    Issuer::new(params, key)
}

fn make_leaf(dir: &Path, name: &str, ca: &Issuer<'static, KeyPair>, names: Vec<String>) {
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(names).unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
}

type TlsClient = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Connects and completes the handshake (as far as the client can tell: with TLS 1.3 a refused
/// client certificate shows on the first read).
fn connect(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> std::io::Result<TlsClient> {
    let sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(conn, sock);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stream.conn.is_handshaking() && Instant::now() < deadline {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// Sends `request` and reads until `want.len()` bytes came back, the server closed, or a read
/// failed; what came back, as text.
fn roundtrip(stream: &mut TlsClient, request: &[u8], want: &str) -> std::io::Result<String> {
    stream.write_all(request)?;
    stream.flush()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while got.len() < want.len() {
        match stream.read(&mut buf)? {
            0 => break,
            n => got.extend_from_slice(buf.get(..n).unwrap()),
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

/// PING over a fresh connection with `config`: `Ok(reply)` or the failure.
fn ping(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> std::io::Result<String> {
    let mut stream = connect(addr, config)?;
    roundtrip(&mut stream, &support::resp(&[b"PING"]), "+PONG\r\n")
}

#[test]
fn a_client_that_trusts_the_ca_gets_answers() {
    // The work-stealing runtime, and --thread-per-core (the handshake on the worker's runtime).
    for thread_per_core in [false, true] {
        let config = ServerConfig {
            thread_per_core,
            threads: 2,
            ..ServerConfig::default()
        };
        trusted_client_gets_answers(config);
    }
}

fn trusted_client_gets_answers(config: ServerConfig) {
    let pki = Pki::new();
    let server = pki.start(&pki.server_files(), config);
    let mut stream = connect(server.addr(), pki.client("ca", None)).unwrap();
    let reply = |s: &mut TlsClient, args: &[&[u8]], want: &str| {
        assert_eq!(roundtrip(s, &support::resp(args), want).unwrap(), want);
    };
    reply(&mut stream, &[b"PING"], "+PONG\r\n");
    reply(
        &mut stream,
        &[b"SET", b"tls:key", b"secret value"],
        "+OK\r\n",
    );
    reply(
        &mut stream,
        &[b"GET", b"tls:key"],
        "$12\r\nsecret value\r\n",
    );
    // A pipeline of two comes back whole.
    let mut two = support::resp(&[b"SET", b"tls:2", b"x"]);
    two.extend(support::resp(&[b"GET", b"tls:2"]));
    assert_eq!(
        roundtrip(&mut stream, &two, "+OK\r\n$1\r\nx\r\n").unwrap(),
        "+OK\r\n$1\r\nx\r\n"
    );
    drop(stream);
    server.stop();
}

#[test]
fn a_client_that_does_not_trust_the_ca_fails_and_the_next_is_served() {
    let pki = Pki::new();
    let server = pki.start(&pki.server_files(), ServerConfig::default());
    let refused = connect(server.addr(), pki.client("other-ca", None));
    let err = refused.expect_err("a client trusting another CA must fail the handshake");
    assert!(
        err.to_string().contains("certificate"),
        "the failure is about the certificate: {err}"
    );
    assert_eq!(
        ping(server.addr(), pki.client("ca", None)).unwrap(),
        "+PONG\r\n"
    );
    server.stop();
}

#[test]
fn plain_tcp_on_the_tls_port_gets_no_reply_and_the_server_stays_up() {
    let pki = Pki::new();
    let server = pki.start(&pki.server_files(), ServerConfig::default());
    for plain in [&b"PING\r\n"[..], &support::resp(&[b"PING"])] {
        let (got, closed) = support::exchange(server.addr(), plain, Duration::from_secs(2));
        let text = String::from_utf8_lossy(&got);
        assert!(!text.contains("PONG"), "a plain client got {text:?}");
        assert!(closed, "the server closes a connection that is not TLS");
    }
    assert_eq!(
        ping(server.addr(), pki.client("ca", None)).unwrap(),
        "+PONG\r\n"
    );
    server.stop();
}

#[test]
fn with_a_client_ca_only_clients_with_a_signed_certificate_are_served() {
    let pki = Pki::new();
    let files = TlsFiles {
        client_ca: Some(pki.path("ca.pem")),
        ..pki.server_files()
    };
    assert!(Tls::load(&files).unwrap().verifies_clients());
    assert!(!Tls::load(&pki.server_files()).unwrap().verifies_clients());
    let server = pki.start(&files, ServerConfig::default());
    match ping(server.addr(), pki.client("ca", None)) {
        Ok(reply) => assert!(
            !reply.contains("PONG"),
            "a client without a certificate got {reply:?}"
        ),
        Err(e) => assert!(e.to_string().contains("Certificate"), "refused: {e}"),
    }
    assert_eq!(
        ping(server.addr(), pki.client("ca", Some("client"))).unwrap(),
        "+PONG\r\n"
    );
    server.stop();
}

#[test]
fn a_client_over_the_cap_gets_the_error_over_tls() {
    let pki = Pki::new();
    let config = ServerConfig {
        max_connections: 1,
        ..ServerConfig::default()
    };
    let server = pki.start(&pki.server_files(), config);
    let mut first = connect(server.addr(), pki.client("ca", None)).unwrap();
    assert_eq!(
        roundtrip(&mut first, &support::resp(&[b"PING"]), "+PONG\r\n").unwrap(),
        "+PONG\r\n"
    );
    let want = "-ERR max number of clients reached\r\n";
    let mut second = connect(server.addr(), pki.client("ca", None)).unwrap();
    assert_eq!(
        roundtrip(&mut second, &support::resp(&[b"PING"]), want).unwrap(),
        want
    );
    drop(first);
    drop(second);
    server.stop();
}

#[test]
fn a_stop_does_not_wait_for_a_client_that_never_shakes_hands() {
    let pki = Pki::new();
    let server = pki.start(&pki.server_files(), ServerConfig::default());
    // Connected, silent: its task waits in the handshake (for up to HANDSHAKE_TIMEOUT).
    let silent = TcpStream::connect(server.addr()).unwrap();
    assert_eq!(
        ping(server.addr(), pki.client("ca", None)).unwrap(),
        "+PONG\r\n"
    );
    let started = Instant::now();
    server.stop();
    // The drain would wait its 10 s (the handshake's own limit too) if the stop did not cut it.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the stop took {:?}",
        started.elapsed()
    );
    drop(silent);
}

/// `Tls::load`'s error for `files`, as text, which must name `file`.
fn load_error(files: &TlsFiles, file: &Path) -> String {
    let err = Tls::load(files).expect_err("the files are bad");
    let text = err.to_string();
    assert!(
        text.contains(&file.display().to_string()),
        "the error names {}: {text}",
        file.display()
    );
    assert!(!text.contains('\n'), "one line: {text}");
    text
}

#[test]
fn bad_tls_files_are_refused_with_the_file_named() {
    let pki = Pki::new();
    let good = pki.server_files();
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, b"\x00\x01 this is not PEM at all \xff\n").unwrap();
    let truncated = pki.path("truncated.pem");
    let server_pem = std::fs::read_to_string(pki.path("server.pem")).unwrap();
    std::fs::write(
        &truncated,
        server_pem.lines().take(3).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let missing = pki.path("missing.pem");

    let with = |cert: &Path, key: &Path, ca: Option<&Path>| TlsFiles {
        cert_chain: cert.to_path_buf(),
        private_key: key.to_path_buf(),
        client_ca: ca.map(Path::to_path_buf),
    };
    let key = &good.private_key;
    let cert = &good.cert_chain;

    let text = load_error(&with(&missing, key, None), &missing);
    assert!(
        text.starts_with("cannot read the TLS certificate chain"),
        "{text}"
    );
    assert!(matches!(
        Tls::load(&with(&missing, key, None)),
        Err(ServerError::Io { .. })
    ));
    let text = load_error(&with(cert, &missing, None), &missing);
    assert!(
        text.starts_with("cannot read the TLS private key"),
        "{text}"
    );
    let text = load_error(&with(&garbage, key, None), &garbage);
    assert!(text.contains("no certificate in it"), "{text}");
    let text = load_error(&with(&truncated, key, None), &truncated);
    assert!(text.contains("not PEM"), "{text}");
    // A key where the chain should be: a key without a certificate.
    let text = load_error(&with(key, key, None), key);
    assert!(text.contains("no certificate in it"), "{text}");
    // A certificate where the key should be.
    let text = load_error(&with(cert, cert, None), cert);
    assert!(text.contains("no private key in it"), "{text}");
    // The client's key with the server's certificate.
    let client_key = pki.path("client.key");
    let text = load_error(&with(cert, &client_key, None), &client_key);
    assert!(
        text.contains("is not the key of the first certificate"),
        "{text}"
    );
    let text = load_error(&with(cert, key, Some(&garbage)), &garbage);
    assert!(text.contains("no certificate in it"), "{text}");
    let text = load_error(&with(cert, key, Some(&missing)), &missing);
    assert!(text.starts_with("cannot read the client CA file"), "{text}");
}

/// Runs redis-cli with `args` (after `--tls -h 127.0.0.1 -p PORT`) for at most 10 seconds;
/// its stdout, or `None` when this redis-cli has no TLS.
fn redis_cli_tls(port: u16, args: &[&std::ffi::OsStr]) -> Option<String> {
    let help = std::process::Command::new("redis-cli")
        .arg("--help")
        .output();
    let has_tls = help.is_ok_and(|out| {
        String::from_utf8_lossy(&out.stdout).contains("--tls")
            || String::from_utf8_lossy(&out.stderr).contains("--tls")
    });
    if !has_tls {
        return None;
    }
    let mut child = std::process::Command::new("redis-cli")
        .args(["--tls", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("redis-cli --tls did not finish in 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn redis_cli_with_tls_gets_pong() {
    let pki = Pki::new();
    let files = TlsFiles {
        client_ca: Some(pki.path("ca.pem")),
        ..pki.server_files()
    };
    let server = pki.start(&files, ServerConfig::default());
    let port = server.addr().port();
    let (ca, cert, key) = (
        pki.path("ca.pem"),
        pki.path("client.pem"),
        pki.path("client.key"),
    );
    let signed = [
        "--cacert".as_ref(),
        ca.as_os_str(),
        "--cert".as_ref(),
        cert.as_os_str(),
        "--key".as_ref(),
        key.as_os_str(),
        "PING".as_ref(),
    ];
    let Some(reply) = redis_cli_tls(port, &signed) else {
        eprintln!("skipped: this redis-cli was built without TLS (no --tls in its --help)");
        server.stop();
        return;
    };
    assert_eq!(reply, "PONG");
    // Without the client certificate the same server refuses it.
    let unsigned = ["--cacert".as_ref(), ca.as_os_str(), "PING".as_ref()];
    let reply = redis_cli_tls(port, &unsigned).unwrap();
    assert_ne!(reply, "PONG");
    server.stop();
}
