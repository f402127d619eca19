//! A memory cgroup around this process while a peer that caches in the OS page cache (LMDB)
//! runs, so its cache is capped to the pool the other engines get (LMDB runs under a memory
//! cgroup of the pool's size where the machine allows it).
//!
//! [`MemoryCap::apply`] makes a child of the process's memory cgroup, sets its limit (cgroup v1
//! `memory.limit_in_bytes`, or v2 `memory.max`), and moves the whole process into it; dropping the
//! cap moves the process back and removes the child. The kernel charges a page to the cgroup of
//! the task that brought it in, so from the move on every page the peer faults in from its map,
//! and every new heap allocation, counts against the limit, and the kernel reclaims page cache
//! to stay under it; what the process held before the move stays charged where it was.
//!
//! Where the hierarchy is absent or not writable, `apply` returns why, and the caller says so in
//! its notes (the peer then runs uncapped).
//!
//! Threads: the harness is single-threaded while a cap is applied; the move takes every thread
//! of the process (`cgroup.procs`).

use std::path::{Path, PathBuf};

/// Which cgroup version a cap was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A capped child cgroup this process runs in until the cap is dropped.
#[derive(Debug)]
pub struct MemoryCap {
    version: Version,
    /// The child cgroup's directory.
    dir: PathBuf,
    /// The cgroup directory the process came from (it goes back there on drop).
    home: PathBuf,
    limit: u64,
}

/// The process's memory cgroup: (version, directory under /sys/fs/cgroup).
fn own_cgroup() -> Result<(Version, PathBuf), String> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    // cgroup v1: "N:memory:/path" (the memory controller's own hierarchy).
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        if let (Some(c), Some(p)) = (controllers, path)
            && c.split(',').any(|c| c == "memory")
        {
            return Ok((Version::V1, under(Path::new("/sys/fs/cgroup/memory"), p)));
        }
    }
    // cgroup v2: "0::/path" with the memory controller available.
    let v2_root = Path::new("/sys/fs/cgroup");
    let controllers =
        std::fs::read_to_string(v2_root.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "memory")
        && let Some(p) = text.lines().find_map(|l| l.strip_prefix("0::"))
    {
        return Ok((Version::V2, under(v2_root, p)));
    }
    Err("no memory cgroup controller is mounted (neither cgroup v1 memory nor v2)".into())
}

/// `root` joined with the cgroup path `p`, or `root` itself where that directory is not
/// visible (a cgroup namespace shows the process's cgroup as the root).
fn under(root: &Path, p: &str) -> PathBuf {
    let dir = root.join(p.trim_start_matches('/'));
    if dir.is_dir() {
        dir
    } else {
        root.to_path_buf()
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

impl MemoryCap {
    /// Moves this process into a new child cgroup named `lidb-bench-<pid>-<tag>` limited to
    /// `limit` bytes. Errors say why no cap could be set (nothing is left changed).
    pub fn apply(limit: u64, tag: &str) -> Result<MemoryCap, String> {
        let (version, home) = own_cgroup()?;
        let dir = home.join(format!("lidb-bench-{}-{tag}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cgroup {} not writable here ({e})", home.display()))?;
        let limit_file = match version {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        };
        let cap = MemoryCap {
            version,
            dir,
            home,
            limit,
        };
        // From here on, dropping `cap` undoes whatever was done.
        write(&cap.dir.join(limit_file), &limit.to_string())?;
        write(
            &cap.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )?;
        Ok(cap)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// What a row's note says of the cap.
    pub fn describe(&self) -> String {
        format!(
            "memory cgroup {} ({}) limited to {} bytes",
            self.dir.display(),
            match self.version {
                Version::V1 => "v1 memory.limit_in_bytes",
                Version::V2 => "v2 memory.max",
            },
            self.limit
        )
    }

    /// Whether this process is in the cap's cgroup now.
    pub fn holds_this_process(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.procs")).is_ok_and(|t| {
            t.lines()
                .any(|l| l.trim() == std::process::id().to_string())
        })
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        // Back home first: a cgroup with a process in it cannot be removed.
        let _ = write(
            &self.home.join("cgroup.procs"),
            &std::process::id().to_string(),
        );
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the machine allows it, a cap moves the process in, sets the limit and is undone
    /// on drop; elsewhere `apply` says why, in one line.
    #[test]
    fn a_cap_moves_the_process_in_and_out() {
        // A limit far above what the tests use, so tests running beside this one are not
        // squeezed while the process is inside.
        let limit = 64u64 << 30;
        match MemoryCap::apply(limit, "test") {
            Err(why) => {
                assert!(!why.contains('\n'), "{why}");
                eprintln!("skipped: no memory cgroup to test here: {why}");
            }
            Ok(cap) => {
                assert!(cap.holds_this_process(), "{}", cap.describe());
                let file = match cap.version {
                    Version::V1 => "memory.limit_in_bytes",
                    Version::V2 => "memory.max",
                };
                let set: u64 = std::fs::read_to_string(cap.dir.join(file))
                    .unwrap_or_default()
                    .trim()
                    .parse()
                    .unwrap_or(0);
                // v1 rounds the limit down to whole pages.
                assert_eq!(set, limit - limit % 4096, "{}", cap.describe());
                let dir = cap.dir.clone();
                drop(cap);
                assert!(!dir.exists(), "{} left behind", dir.display());
            }
        }
    }
}
