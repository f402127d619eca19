//! TLS on the RESP listener (`lidb serve --tls-cert --tls-key [--tls-ca-cert]`): the PEM files
//! loaded once into a rustls server configuration, and the handshake a connection runs before
//! its first request.
//!
//! Who calls what: [`Tls::load`] on the caller's thread before the server binds (so a bad file is
//! an error at start that names the file, before an engine is opened); [`Tls::handshake`] on a
//! connection's own task (`connection.rs`), never on the accept loop.
//!
//! Invariants:
//! 1. A listener with TLS speaks only TLS (Redis opens a separate `tls-port` beside the plain
//!    one; here one listener is one or the other). A client that sends anything but a TLS
//!    handshake is closed with a TLS alert at most: no request of it is decoded, no reply sent.
//! 2. With a client CA ([`TlsFiles::client_ca`]), a connection serves no request until its
//!    client presented a certificate chain that verifies against that CA (Redis's
//!    `tls-auth-clients yes`).
//! 3. A handshake is bounded by [`HANDSHAKE_TIMEOUT`] and cut short by a stop, so a client that
//!    connects and sends nothing holds its connection slot for that long at most.
//! 4. TLS decides nothing else about who may connect: protected mode and `requirepass` apply as
//!    without it (a verified client certificate is not a password).
//!
//! rustls runs on its ring provider, passed explicitly rather than installed as the process's
//! default, so nothing depends on which providers other crates in the build enable; ring builds
//! with a C compiler alone (aws-lc-rs, rustls's default, also needs cmake).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::server::ServerError;

/// The longest a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The PEM files of a TLS listener.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server's certificate, then any intermediates (PEM `CERTIFICATE` blocks).
    pub cert_chain: PathBuf,
    /// The private key of the chain's first certificate: one unencrypted PEM block, PKCS#8
    /// (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`).
    pub private_key: PathBuf,
    /// When given, clients must present a certificate chain that one of these CA certificates
    /// (PEM `CERTIFICATE` blocks) signed.
    pub client_ca: Option<PathBuf>,
}

/// A loaded TLS configuration, ready to accept connections; cloning shares it.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    verifies_clients: bool,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("verifies_clients", &self.verifies_clients)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads and checks the files: the chain and the key parse, the key is the chain's first
    /// certificate's, the client CAs are usable trust anchors. Errors name the file.
    pub fn load(files: &TlsFiles) -> Result<Tls, ServerError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certificates(&files.cert_chain, "the TLS certificate chain")?;
        let key = read_private_key(&files.private_key)?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| ServerError::Io {
                what: "TLS setup".into(),
                source: std::io::Error::other(e),
            })?;
        let builder = match &files.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| chain_or_key_error(files, e))?;
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            verifies_clients: files.client_ca.is_some(),
        })
    }

    /// Whether clients must present a certificate signed by the client CA.
    pub fn verifies_clients(&self) -> bool {
        self.verifies_clients
    }

    /// Runs the server side of the handshake on `stream`; `None` when it fails (the client
    /// got rustls's alert), times out, or the server stops first.
    pub(crate) async fn handshake(
        &self,
        stream: TcpStream,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<TlsStream<TcpStream>> {
        tokio::select! {
            done = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream)) => {
                done.ok()?.ok()
            }
            _ = shutdown.changed() => None,
        }
    }
}

fn tls_file_error(file: &Path, detail: impl Into<String>) -> ServerError {
    ServerError::TlsFile {
        file: file.to_path_buf(),
        detail: detail.into(),
    }
}

fn read_pem(file: &Path, role: &str) -> Result<Vec<u8>, ServerError> {
    std::fs::read(file).map_err(|source| ServerError::Io {
        what: format!("cannot read {role} {}", file.display()),
        source,
    })
}

/// What is wrong with a PEM file's syntax, in words (pki-types prints some as byte lists).
fn pem_error(file: &Path, e: &pem::Error) -> ServerError {
    let detail = match e {
        pem::Error::MissingSectionEnd { .. } => "not PEM: a block has no `-----END` line".into(),
        pem::Error::IllegalSectionStart { .. } => "not PEM: a malformed `-----BEGIN` line".into(),
        pem::Error::Base64Decode(why) => format!("not PEM: a block is not base64 ({why})"),
        other => format!("not PEM: {other}"),
    };
    tls_file_error(file, detail)
}

fn read_certificates(file: &Path, role: &str) -> Result<Vec<CertificateDer<'static>>, ServerError> {
    let bytes = read_pem(file, role)?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(file, &e))?;
    if certificates.is_empty() {
        return Err(tls_file_error(
            file,
            format!("no certificate in it ({role} is PEM `-----BEGIN CERTIFICATE-----` blocks)"),
        ));
    }
    Ok(certificates)
}

fn read_private_key(file: &Path) -> Result<PrivateKeyDer<'static>, ServerError> {
    let bytes = read_pem(file, "the TLS private key")?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => tls_file_error(
            file,
            "no private key in it (the TLS private key is one unencrypted PEM block: \
             `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY`)",
        ),
        other => pem_error(file, &other),
    })
}

fn client_verifier(
    file: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, ServerError> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in read_certificates(file, "the client CA file")? {
        roots.add(certificate).map_err(|e| {
            tls_file_error(file, format!("a certificate in it is not a usable CA: {e}"))
        })?;
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| tls_file_error(file, format!("not usable as the client CA: {e}")))
}

/// Which file a failure to pair the chain with the key is about.
fn chain_or_key_error(files: &TlsFiles, e: rustls::Error) -> ServerError {
    match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => tls_file_error(
            &files.private_key,
            format!(
                "the TLS private key is not the key of the first certificate in {}",
                files.cert_chain.display()
            ),
        ),
        rustls::Error::InvalidCertificate(why) => tls_file_error(
            &files.cert_chain,
            format!("the first certificate is not usable: {why}"),
        ),
        other => tls_file_error(
            &files.private_key,
            format!("the TLS private key is not usable: {other}"),
        ),
    }
}
