//! A nutcracker (twemproxy) child process in front of K RESP servers: hash sharding of point
//! operations (`hash: fnv1a_64`, `distribution: ketama`), the way a Redis user shards first.
//!
//! [`Nutcracker::start`] writes the config (see [`config_text`]) into a fresh temporary
//! directory, starts `nutcracker -c CONF -s STATS_PORT -o LOG` listening on 127.0.0.1, and waits
//! (bounded) until its port accepts. Dropping it kills and reaps the child and removes the
//! directory.
//!
//! Threads: the owner's only; the child is a separate process.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::WireError;

/// How long nutcracker may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the binary is looked for besides `$PATH` (Debian installs it in /usr/sbin).
const SBIN_DIRS: [&str; 2] = ["/usr/sbin", "/usr/local/sbin"];

/// A running nutcracker.
#[derive(Debug)]
pub struct Nutcracker {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

/// The nutcracker binary: `$PATH`, then /usr/sbin and /usr/local/sbin; None when absent.
pub fn find_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join("nutcracker"))
        .find(|p| p.is_file())
}

/// The config of one pool named `lidb`: listen on `listen`, hash sharding over `servers`.
pub fn config_text(listen: SocketAddr, servers: &[SocketAddr]) -> String {
    let mut s = format!(
        "lidb:\n  listen: {listen}\n  hash: fnv1a_64\n  distribution: ketama\n  redis: true\n  \
         auto_eject_hosts: false\n  preconnect: true\n  server_connections: 1\n  timeout: 5000\n  \
         servers:\n"
    );
    for (i, a) in servers.iter().enumerate() {
        s.push_str(&format!("    - {a}:1 shard{i}\n"));
    }
    s
}

/// A port free on 127.0.0.1 now (bound and released; another process could take it first).
fn free_port() -> Result<u16, WireError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn temp_dir() -> Result<PathBuf, WireError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "lidb-twemproxy-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

impl Nutcracker {
    /// Starts nutcracker over the RESP servers `servers`.
    pub fn start(servers: &[SocketAddr]) -> Result<Nutcracker, WireError> {
        let bin = find_binary().ok_or_else(|| {
            WireError::malformed(
                "nutcracker (twemproxy) is not installed: apt-get install -y nutcracker \
                 (Debian's package), or put a nutcracker binary on PATH",
            )
        })?;
        let dir = temp_dir()?;
        let listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let conf = dir.join("nutcracker.yml");
        std::fs::write(&conf, config_text(listen, servers))?;
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&conf)
            .arg("-s")
            .arg(free_port()?.to_string())
            .arg("-a")
            .arg("127.0.0.1")
            .arg("-o")
            .arg(dir.join("nutcracker.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut n = Nutcracker {
            child,
            addr: listen,
            dir,
        };
        n.wait_ready()?;
        Ok(n)
    }

    fn wait_ready(&mut self) -> Result<(), WireError> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if let Some(status) = self.child.try_wait()? {
                return Err(WireError::malformed(format!(
                    "nutcracker exited ({status}) at start; its log: {}",
                    log_tail(&self.dir.join("nutcracker.log"))
                )));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(WireError::malformed(format!(
            "nutcracker did not accept on {} within {START_TIMEOUT:?}",
            self.addr
        )))
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The last lines of nutcracker's log, for an error message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .get(lines.len().saturating_sub(3)..)
        .unwrap_or_default()
        .join(" | ")
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_every_server() {
        let s = |p| SocketAddr::from(([127, 0, 0, 1], p));
        let text = config_text(s(9000), &[s(7001), s(7002)]);
        assert!(text.contains("listen: 127.0.0.1:9000"));
        assert!(text.contains("redis: true"));
        assert!(text.contains("- 127.0.0.1:7001:1 shard0"));
        assert!(text.contains("- 127.0.0.1:7002:1 shard1"));
    }
}
