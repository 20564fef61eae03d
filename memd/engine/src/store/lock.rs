//! Exclusive ownership of a data directory by one process.
//!
//! Owns `<dir>/lock`: an advisory `flock(LOCK_EX | LOCK_NB)` held for the life of `DirLock`, with
//! the holder's pid written inside so a second process can say who is in the way. The kernel
//! drops the lock when the holder exits, however it dies, so a stale file never blocks a start.
//! Must never wait for the lock (a second daemon has to fail fast) and never clear the pid of a
//! live holder.
//!
//! On Windows std's lock is `LockFileEx` over the whole file, which Windows enforces on reads
//! too: a second process cannot read the holder's pid, so its message names none.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
#[cfg(unix)]
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "lock";

/// Held while a process owns the directory; released on drop or process death.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Why the directory could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock; `pid` is what that process wrote, when readable.
    Held {
        pid: Option<u32>,
        dir: PathBuf,
    },
    Io {
        path: PathBuf,
        source: io::Error,
    },
}

impl DirLock {
    /// Takes the lock without waiting and records this process's pid in the lock file.
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io_err = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        // Not truncated on open: the current holder's pid must stay readable if we lose.
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        options.mode(0o600);
        let mut file = options.open(&path).map_err(io_err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    pid: read_pid(&mut file),
                    dir: dir.to_path_buf(),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io_err(source)),
        }
        write_pid(&mut file, std::process::id()).map_err(io_err)?;
        Ok(DirLock { _file: file })
    }
}

impl LockError {
    pub(crate) fn held_message(pid: Option<u32>, dir: &Path) -> String {
        match pid {
            Some(pid) => format!(
                "another memd (pid {pid}) is already using {}",
                dir.display()
            ),
            None => format!("another memd is already using {}", dir.display()),
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Held { pid, dir } => write!(f, "{}", LockError::held_message(*pid, dir)),
            LockError::Io { path, source } => write!(f, "cannot lock {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Io { source, .. } => Some(source),
            LockError::Held { .. } => None,
        }
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

fn write_pid(file: &mut File, pid: u32) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{pid}")?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_reports_the_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        let err = DirLock::acquire(dir.path()).unwrap_err();
        let me = std::process::id();
        match &err {
            LockError::Held { pid, dir: held } => {
                assert_eq!(*pid, Some(me));
                assert_eq!(held, dir.path());
            }
            other => panic!("expected Held, got {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&format!("pid {me}")), "{text}");
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        drop(first);
        DirLock::acquire(dir.path()).expect("lock is free again after drop");
    }

    #[cfg(unix)]
    #[test]
    fn lock_file_is_private_and_holds_the_pid() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let _lock = DirLock::acquire(dir.path()).unwrap();
        let path = dir.path().join(LOCK_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }
}
