//! The daemon's log: `tracing` with levels, to stderr and to `<data dir>/logs/daemon.log`.
//!
//! `MEMD_LOG` sets the filter (`info` by default; `debug` adds one line per request with its
//! status and latency; any `tracing` filter directive works). When stderr already is that log
//! file (a client that started the daemon points stderr there), only stderr is written, so no
//! line appears twice. Must never log request bodies, memory content or the token.

use anyhow::Result;
use std::fs::{File, OpenOptions};
use std::path::Path;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Environment variable holding the log filter.
pub const LOG_ENV: &str = "MEMD_LOG";
/// The log file is set aside (as `daemon.log.1`) at start when it grew past this.
const ROTATE_BYTES: u64 = 8 * 1024 * 1024;

/// Installs the process-wide subscriber. Later calls (tests starting a second daemon in one
/// process) keep the first one.
pub fn init(data_dir: &Path) -> Result<()> {
    let filter = EnvFilter::try_new(directives(std::env::var(LOG_ENV).ok().as_deref()))
        .unwrap_or_else(|_| EnvFilter::new(directives(None)));
    let path = data_dir.join("logs").join("daemon.log");
    let file = if stderr_is(&path) {
        None
    } else {
        open_log(&path)
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(false)
        .with_writer(std::io::stderr);
    let to_file = file.map(|f| {
        tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(f))
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(to_file)
        .try_init();
    Ok(())
}

/// The filter: `MEMD_LOG` (default `info`), with the MCP library held at `warn` unless the
/// user names it: at `info` it logs every session's client details and at `debug` the
/// messages themselves, which carry memory content.
fn directives(requested: Option<&str>) -> String {
    let base = requested
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or("info");
    if base.contains("rmcp") {
        base.to_string()
    } else {
        format!("{base},rmcp=warn")
    }
}

/// The log file for appending, after setting an oversized one aside; `None` if it cannot be
/// opened (the daemon still logs to stderr).
fn open_log(path: &Path) -> Option<File> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > ROTATE_BYTES) {
        std::fs::rename(path, path.with_extension("log.1")).ok();
    }
    OpenOptions::new().create(true).append(true).open(path).ok()
}

/// True when file descriptor 2 is `path` itself (same device and inode): a daemon started by
/// a hook or the CLI has its stderr there already.
fn stderr_is(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
            return false;
        };
        let (Ok(ours), Ok(theirs)) = (File::from(fd).metadata(), std::fs::metadata(path)) else {
            return false;
        };
        ours.dev() == theirs.dev() && ours.ino() == theirs.ino()
    }
    #[cfg(windows)]
    {
        use std::os::windows::io::{AsRawHandle, RawHandle};
        use windows_sys::Win32::Storage::FileSystem::{
            BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
        };
        // Volume serial number and file index: Windows' device and inode.
        fn identity(handle: RawHandle) -> Option<(u32, u32, u32)> {
            // SAFETY: plain data; all zeroes is a valid value.
            let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
            // SAFETY: a live handle and a pointer to a live struct of the right type.
            let ok = unsafe { GetFileInformationByHandle(handle, &mut info) } != 0;
            ok.then_some((
                info.dwVolumeSerialNumber,
                info.nFileIndexHigh,
                info.nFileIndexLow,
            ))
        }
        let Ok(file) = File::open(path) else {
            return false;
        };
        let ours = identity(std::io::stderr().as_raw_handle());
        ours.is_some() && ours == identity(file.as_raw_handle())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_library_stays_quiet_unless_named() {
        assert_eq!(directives(None), "info,rmcp=warn");
        assert_eq!(directives(Some(" debug ")), "debug,rmcp=warn");
        assert_eq!(directives(Some("debug,rmcp=debug")), "debug,rmcp=debug");
        assert!(EnvFilter::try_new(directives(Some("memd_server=trace"))).is_ok());
    }

    #[test]
    fn a_regular_file_is_not_taken_for_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        std::fs::write(&path, b"").unwrap();
        // The test harness's stderr is a pipe or a terminal, never this new file.
        assert!(!stderr_is(&path));
        assert!(!stderr_is(&dir.path().join("missing.log")));
    }

    #[test]
    fn an_oversized_log_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        std::fs::write(&path, vec![b'x'; ROTATE_BYTES as usize + 1]).unwrap();
        let f = open_log(&path).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 0);
        assert!(dir.path().join("daemon.log.1").exists());
    }
}
