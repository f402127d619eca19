//! One client connection: read, decode every complete request in the buffer, run them as one
//! batch, write all their replies with one write, read again. That is pipelining:
//! `redis-benchmark -P 16` gets its 16 replies in one write.
//!
//! A batch runs on the engine pool (`pool.rs`): engine calls may block on I/O, so they never run
//! on an async worker; the connection's task awaits the replies. Only its leading reads that the
//! engine answers from memory and SETs it writes with no wait are answered on the task itself
//! (`on_worker.rs`).
//!
//! Over TLS (`tls.rs`) the task first runs the handshake, then serves the TLS stream with the same
//! code: [`serve`] is generic over the stream, so the plain-TCP path is compiled for `TcpStream`
//! itself, with no indirection per read or write.
//!
//! Runs as one tokio task per connection. Invariants:
//! 1. Requests of one connection run in order, one batch at a time; replies go out in that order.
//! 2. The read buffer never holds more than one incomplete request within the codec's limits plus
//!    one socket read; a batch is at most [`MAX_BATCH`] requests.
//! 3. A protocol error (malformed or over a limit) is answered with its error reply, then the
//!    connection closes; other connections are not touched. A batch already decoded before the
//!    bad bytes is run and answered first.
//! 4. On shutdown a connection finishes the batch it is running, writes its replies, and closes;
//!    one idle in a read closes at once.
//! 5. Replies are written in the protocol the session had when each was answered (`reply.rs`);
//!    a session that has not authenticated (`session.rs`) runs no command and reads nothing from
//!    memory. A batch with wrong passwords waits [`AUTH_FAILURE_DELAY`] per wrong password before
//!    its replies are written (a stop cuts the wait short).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::codec::Decoder;

use crate::codec::{DecodeError, Limits, RequestCodec};
use crate::commands::{Reply, error, execute_batch};
use crate::on_worker::{self, Allowed};
use crate::pool::EnginePool;
use crate::session::Session;
use crate::state::Shared;
use crate::tls::Tls;

/// The most requests run as one batch before the next read.
pub const MAX_BATCH: usize = 1024;

/// How long a connection waits per wrong password before it answers (`session.rs`): a guesser
/// gets a few tries a second per connection, a client with a typo hardly notices.
pub const AUTH_FAILURE_DELAY: Duration = Duration::from_millis(200);

/// What a connection needs besides its socket.
#[derive(Debug, Clone)]
pub struct ConnectionContext {
    pub shared: Arc<Shared>,
    pub pool: Arc<EnginePool>,
    pub limits: Limits,
    pub idle_timeout: Option<Duration>,
    /// What of a batch's leading requests this task answers itself (`on_worker.rs`).
    pub on_worker: Allowed,
    pub shutdown: watch::Receiver<bool>,
    /// Run a TLS handshake before serving (`tls.rs`); `None`: plain TCP.
    pub tls: Option<Tls>,
}

/// Serves an accepted socket: over TLS after a successful handshake when the server speaks TLS,
/// else as it is.
pub async fn serve_tcp(stream: TcpStream, id: u64, mut ctx: ConnectionContext) {
    // Replies are small and pipelined batches are written whole: no Nagle delay.
    let _ = stream.set_nodelay(true);
    match ctx.tls.clone() {
        None => serve(stream, id, ctx).await,
        Some(tls) => {
            if let Some(stream) = tls.handshake(stream, &mut ctx.shutdown).await {
                serve(stream, id, ctx).await;
            }
        }
    }
}

/// Answers a connection over the cap with [`too_many_clients`] (after the handshake, over TLS)
/// and closes it.
pub async fn refuse(stream: TcpStream, tls: Option<Tls>, mut shutdown: watch::Receiver<bool>) {
    let mut out = BytesMut::new();
    too_many_clients().encode(crate::reply::Protocol::Resp2, &mut out);
    match tls {
        None => write_and_close(stream, &out).await,
        Some(tls) => {
            if let Some(stream) = tls.handshake(stream, &mut shutdown).await {
                write_and_close(stream, &out).await;
            }
        }
    }
}

async fn write_and_close<S: AsyncWrite + Unpin>(mut stream: S, bytes: &[u8]) {
    if stream.write_all(bytes).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

/// Serves `stream` until the client leaves, QUITs, sends bad bytes, idles out or the server stops.
pub async fn serve<S>(mut stream: S, id: u64, mut ctx: ConnectionContext)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut codec = RequestCodec::new(ctx.limits);
    let mut input = BytesMut::with_capacity(16 << 10);
    let mut output = BytesMut::with_capacity(16 << 10);
    let mut session = Session::new(id, ctx.shared.settings.password.as_ref());
    loop {
        let mut batch: Vec<Vec<Bytes>> = Vec::new();
        let mut fatal = None;
        while batch.len() < MAX_BATCH {
            match codec.decode(&mut input) {
                Ok(Some(request)) => batch.push(request),
                Ok(None) => break,
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        let full = batch.len() == MAX_BATCH;
        // A session that has not authenticated gets NOAUTH from `execute`, never a value.
        let allowed = ctx.on_worker;
        if (allowed.reads || allowed.writes) && session.authenticated && !batch.is_empty() {
            let answered = on_worker::answer_prefix(
                &ctx.shared,
                &batch,
                allowed,
                session.protocol,
                &mut output,
            );
            batch.drain(..answered);
        }
        if !batch.is_empty() {
            let shared = Arc::clone(&ctx.shared);
            let mut moved = std::mem::take(&mut session);
            let mut out = std::mem::take(&mut output);
            let ran = ctx.pool.run(move || {
                execute_batch(&shared, &mut moved, &batch, &mut out);
                (moved, out)
            });
            // A closed channel: the batch panicked (a bug) or the pool is gone; this connection
            // ends, the server goes on.
            let Ok((back, out)) = ran.await else {
                return;
            };
            session = back;
            output = out;
        }
        if let Some(DecodeError::Protocol(msg)) = &fatal {
            error(format!("ERR {msg}")).encode(session.protocol, &mut output);
        }
        if session.auth_failures > 0 {
            let failures = std::mem::take(&mut session.auth_failures);
            ctx.shared
                .counters
                .auth_failures
                .fetch_add(failures, std::sync::atomic::Ordering::Relaxed);
            let wait =
                AUTH_FAILURE_DELAY.saturating_mul(u32::try_from(failures).unwrap_or(u32::MAX));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = ctx.shutdown.changed() => {}
            }
        }
        if !output.is_empty() {
            // TLS may hold written records until flushed; for TCP the flush is a no-op.
            if stream.write_all(&output).await.is_err() || stream.flush().await.is_err() {
                return;
            }
            output.clear();
        }
        if fatal.is_some() || session.quit || *ctx.shutdown.borrow() {
            let _ = stream.shutdown().await;
            if fatal.is_some() {
                linger(&mut stream).await;
            }
            return;
        }
        if full {
            continue;
        }
        let read = async {
            match ctx.idle_timeout {
                Some(t) => tokio::time::timeout(t, stream.read_buf(&mut input))
                    .await
                    .unwrap_or(Ok(0)),
                None => stream.read_buf(&mut input).await,
            }
        };
        tokio::select! {
            got = read => match got {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = ctx.shutdown.changed() => return,
        }
    }
}

/// After an error reply and our FIN, reads and drops what the client still sends, briefly and
/// boundedly: closing with unread input would send a reset, which can destroy the error reply
/// before the client reads it.
async fn linger<S: AsyncRead + Unpin>(stream: &mut S) {
    let mut sink = vec![0u8; 16 << 10];
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        for _ in 0..16 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// The reply a connection over the cap gets before it is closed.
pub fn too_many_clients() -> Reply {
    error("ERR max number of clients reached")
}
