//! Dropping a file's clean pages from the OS page cache (`posix_fadvise(DONTNEED)`), so a store
//! that reads through the page cache starts cold: the learnedstore engine when it cannot use
//! `O_DIRECT`, and the lmdb peer (lidb-peers) on every cold reopen.
//!
//! Any thread; it only advises the kernel about a file the caller owns.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::store::StoreError;

/// Drops the clean pages of file `path` from the OS page cache.
#[expect(
    unsafe_code,
    reason = "posix_fadvise is a libc call; it only advises the kernel about a file we own"
)]
pub fn drop_os_cache(path: &Path) -> Result<(), StoreError> {
    let file = File::open(path)?;
    // SAFETY: a valid open descriptor; DONTNEED only drops clean cached pages.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(StoreError::Io(std::io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}
