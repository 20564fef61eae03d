//! Typed errors of the storage engine.
//!
//! Owns `StoreError` and the mapping from OS errors to the classes callers act on (storage full,
//! read-only, plain I/O). Must never hide the cause of a failure behind a generic message: every
//! variant carries enough text for a log line that an operator can act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::lock::LockError;

/// The raw OS error codes behind "storage full" and "read-only", per platform.
#[cfg(unix)]
pub(crate) mod os_code {
    pub(crate) const FULL: [i32; 2] = [libc::ENOSPC, libc::EDQUOT];
    pub(crate) const READ_ONLY: [i32; 1] = [libc::EROFS];
    #[cfg(test)]
    pub(crate) const IO: i32 = libc::EIO;
}

/// Windows error codes (winerror.h), as `io::Error::raw_os_error` reports them there.
#[cfg(windows)]
pub(crate) mod os_code {
    use windows_sys::Win32::Foundation as w;
    pub(crate) const FULL: [i32; 3] = [
        w::ERROR_DISK_FULL as i32,
        w::ERROR_HANDLE_DISK_FULL as i32,
        w::ERROR_DISK_QUOTA_EXCEEDED as i32,
    ];
    /// A write-protected medium: Windows' nearest to a read-only file system.
    pub(crate) const READ_ONLY: [i32; 1] = [w::ERROR_WRITE_PROTECT as i32];
    #[cfg(test)]
    pub(crate) const IO: i32 = w::ERROR_IO_DEVICE as i32;
}

/// Why a store operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// The disk or quota is full (ENOSPC, EDQUOT; on Windows ERROR_DISK_FULL,
    /// ERROR_HANDLE_DISK_FULL, ERROR_DISK_QUOTA_EXCEEDED). Nothing of the failed commit was applied;
    /// commits succeed again once space returns.
    StorageFull(String),
    /// The filesystem is read-only, or the WAL is in an unknown state after a failed write and
    /// the store refuses further writes until it is reopened.
    ReadOnly(String),
    /// Any other I/O failure.
    Io(io::Error),
    /// Stored data cannot be trusted or read; the message says which file and why.
    Corrupt(String),
    /// The store was closed (or its writer stopped) before the request could be served.
    Closed,
    /// An op or the state could not be encoded.
    Encode(String),
    /// Another process holds the data directory.
    Locked { pid: Option<u32>, dir: PathBuf },
}

impl StoreError {
    /// Out of disk space or quota (HTTP 507).
    pub fn is_storage_full(&self) -> bool {
        matches!(self, StoreError::StorageFull(_))
    }

    /// Writes are refused until the filesystem or the store is fixed (HTTP 503).
    pub fn is_read_only(&self) -> bool {
        matches!(self, StoreError::ReadOnly(_))
    }

    pub fn is_corrupt(&self) -> bool {
        matches!(self, StoreError::Corrupt(_))
    }

    pub fn is_closed(&self) -> bool {
        matches!(self, StoreError::Closed)
    }

    pub fn is_locked(&self) -> bool {
        matches!(self, StoreError::Locked { .. })
    }

    /// Classifies an OS error, prefixing what the store was doing when it happened.
    pub(crate) fn from_io(context: &str, err: io::Error) -> StoreError {
        let message = format!("{context}: {err}");
        match err.raw_os_error() {
            Some(code) if os_code::FULL.contains(&code) => StoreError::StorageFull(message),
            Some(code) if os_code::READ_ONLY.contains(&code) => StoreError::ReadOnly(message),
            _ => StoreError::Io(io::Error::new(err.kind(), message)),
        }
    }

    /// Classifies an error returned by a `Machine` hook: I/O causes keep their class.
    pub(crate) fn from_machine(context: &str, err: anyhow::Error) -> StoreError {
        match err.downcast::<io::Error>() {
            Ok(io_err) => StoreError::from_io(context, io_err),
            Err(other) => StoreError::Encode(format!("{context}: {other:#}")),
        }
    }

    /// An equivalent error, for answering every requester of a failed group commit.
    pub(crate) fn duplicate(&self) -> StoreError {
        match self {
            StoreError::StorageFull(m) => StoreError::StorageFull(m.clone()),
            StoreError::ReadOnly(m) => StoreError::ReadOnly(m.clone()),
            StoreError::Io(e) => StoreError::Io(io::Error::new(e.kind(), e.to_string())),
            StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
            StoreError::Closed => StoreError::Closed,
            StoreError::Encode(m) => StoreError::Encode(m.clone()),
            StoreError::Locked { pid, dir } => StoreError::Locked {
                pid: *pid,
                dir: dir.clone(),
            },
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::StorageFull(m) => write!(f, "storage full: {m}"),
            StoreError::ReadOnly(m) => write!(f, "storage is read-only: {m}"),
            StoreError::Io(e) => write!(f, "storage I/O error: {e}"),
            StoreError::Corrupt(m) => write!(f, "stored data is corrupt: {m}"),
            StoreError::Closed => write!(f, "the store is closed"),
            StoreError::Encode(m) => write!(f, "encoding failed: {m}"),
            StoreError::Locked { pid, dir } => {
                write!(f, "{}", LockError::held_message(*pid, dir))
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<LockError> for StoreError {
    fn from(err: LockError) -> StoreError {
        match err {
            LockError::Held { pid, dir } => StoreError::Locked { pid, dir },
            LockError::Io { path, source } => {
                StoreError::from_io(&format!("locking {}", path.display()), source)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn os_errors_are_classified() {
        let full = StoreError::from_io("w", io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(full.is_storage_full(), "{full}");
        let quota = StoreError::from_io("w", io::Error::from_raw_os_error(libc::EDQUOT));
        assert!(quota.is_storage_full(), "{quota}");
        let ro = StoreError::from_io("w", io::Error::from_raw_os_error(libc::EROFS));
        assert!(ro.is_read_only(), "{ro}");
        let eio = StoreError::from_io("w", io::Error::from_raw_os_error(libc::EIO));
        assert!(matches!(eio, StoreError::Io(_)), "{eio}");
        assert!(
            eio.to_string().starts_with("storage I/O error: w: "),
            "{eio}"
        );
    }

    #[cfg(windows)]
    #[test]
    fn windows_errors_are_classified() {
        for code in os_code::FULL {
            let full = StoreError::from_io("w", io::Error::from_raw_os_error(code));
            assert!(full.is_storage_full(), "{full}");
        }
        let ro = StoreError::from_io("w", io::Error::from_raw_os_error(os_code::READ_ONLY[0]));
        assert!(ro.is_read_only(), "{ro}");
        let eio = StoreError::from_io("w", io::Error::from_raw_os_error(os_code::IO));
        assert!(matches!(eio, StoreError::Io(_)), "{eio}");
    }

    #[test]
    fn machine_io_errors_keep_their_class() {
        let err = anyhow::Error::new(io::Error::from_raw_os_error(os_code::FULL[0]));
        assert!(StoreError::from_machine("side files", err).is_storage_full());
        let other = StoreError::from_machine("encode", anyhow::anyhow!("bad state"));
        assert!(matches!(other, StoreError::Encode(ref m) if m == "encode: bad state"));
    }
}
