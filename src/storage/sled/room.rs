//! The free-space guard: a write is refused (503) while the disk has too
//! little room for it plus a reserve, before sled ever meets a full disk.
//!
//! Why not let sled hit `ENOSPC` and recover: an I/O error sets sled's
//! sticky global error, which only reopening clears (see `engine`), and
//! that works when the failing write was to the log. But a value too large
//! to sit in a log segment (over about 128 KiB in sled 0.34) goes to a blob
//! file first, and when that write fails, sled returns the error without
//! releasing the log reservation it had taken (`IoBufs::encapsulate` fails
//! after `Log::reserve_inner` counted a writer). That buffer is then never
//! written, and every later flush, the one in dropping the database
//! included, waits for it forever: the process can neither write nor
//! reopen. So the store keeps its distance: a reserve (the smaller of
//! `storage.min_free_mb` and a tenth of the filesystem) stays free, and a
//! write needs twice its size on top (log-structured storage rewrites).

use std::path::{Path, PathBuf};

use crate::storage::StoreError;

/// Room on the disk holding the database.
#[derive(Clone, Debug)]
pub struct Room {
    dir: PathBuf,
    min_free_bytes: u64,
}

impl Room {
    /// The guard for the disk holding `dir`.
    pub fn new(dir: &Path, min_free_mb: u64) -> Self {
        Room {
            dir: dir.to_owned(),
            min_free_bytes: min_free_mb.saturating_mul(1024 * 1024),
        }
    }

    /// Whether a write of about `bytes` fits, the reserve kept (always,
    /// when `storage.min_free_mb` is 0: the guard is off).
    pub fn check(&self, bytes: u64) -> Result<(), StoreError> {
        if self.min_free_bytes == 0 {
            return Ok(());
        }
        let stats = fs2::statvfs(&self.dir)?;
        let reserve = self.min_free_bytes.min(stats.total_space() / 10);
        let needed = reserve.saturating_add(bytes.saturating_mul(2));
        let available = stats.available_space();
        if available < needed {
            return Err(StoreError::DiskFull {
                available_kib: available / 1024,
                needed_kib: needed / 1024,
            });
        }
        Ok(())
    }
}
