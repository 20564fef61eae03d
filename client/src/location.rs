//! Where this user's daemon is: data dir, port, token, and the `MEMD_URL` override.
//!
//! Owns reading `daemon.json` and the token file. The resolution order itself (env, then
//! config.toml, then XDG) lives in `proto::paths`, shared with the daemon. Must never write
//! anything or start anything.

use proto::paths::{self, DaemonInfo};
use std::path::{Path, PathBuf};

/// Environment variable that replaces the whole base URL (tests, unusual setups). A client
/// never starts a daemon for an endpoint chosen this way: someone else runs it.
pub const URL_ENV: &str = "MEMD_URL";

/// The located daemon of this user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub data_dir: PathBuf,
    /// The configured port; [`Location::port`] prefers the one a running daemon announced.
    pub configured_port: u16,
    /// `MEMD_URL`, trimmed, without a trailing slash.
    pub url_override: Option<String>,
}

impl Location {
    /// Resolves from the environment and config.toml.
    pub fn resolve() -> Result<Location, String> {
        let resolved = paths::resolve()?;
        Ok(Location::new(resolved.data_dir, resolved.port))
    }

    /// A location with these values (`MEMD_URL` still applies).
    pub fn new(data_dir: PathBuf, configured_port: u16) -> Location {
        let url_override = std::env::var(URL_ENV)
            .ok()
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty());
        Location {
            data_dir,
            configured_port,
            url_override,
        }
    }

    /// True when this client may start the daemon itself (the endpoint is the conventional one).
    pub fn managed(&self) -> bool {
        self.url_override.is_none()
    }

    /// What the running daemon wrote to `daemon.json`, if anything.
    pub fn daemon_info(&self) -> Option<DaemonInfo> {
        read_daemon_info(&self.data_dir)
    }

    /// The port the daemon announced (a nonzero one), else the configured port.
    pub fn port(&self) -> u16 {
        self.daemon_info()
            .map(|i| i.port)
            .filter(|p| *p != 0)
            .unwrap_or(self.configured_port)
    }

    /// Base URL for calls: `MEMD_URL`, else loopback on [`Location::port`].
    pub fn base_url(&self) -> String {
        match &self.url_override {
            Some(url) => url.clone(),
            None => format!("http://127.0.0.1:{}", self.port()),
        }
    }

    pub fn token_path(&self) -> PathBuf {
        self.data_dir.join(paths::TOKEN_FILE)
    }

    /// The bearer token, when the daemon has written one.
    pub fn token(&self) -> Option<String> {
        read_token(&self.token_path())
    }

    /// The daemon's log when started by a client: `<data dir>/logs/daemon.log`.
    pub fn daemon_log(&self) -> PathBuf {
        self.data_dir.join("logs").join("daemon.log")
    }
}

/// `<data dir>/daemon.json`, if a daemon wrote one that parses.
pub fn read_daemon_info(data_dir: &Path) -> Option<DaemonInfo> {
    let bytes = std::fs::read(data_dir.join(paths::DAEMON_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The token file's first line, trimmed, if the file exists and the line is not empty.
pub fn read_token(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let token = text.lines().next()?.trim();
    (!token.is_empty()).then(|| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_the_trimmed_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        assert_eq!(read_token(&path), None);
        std::fs::write(&path, "  s3cret \nignored\n").unwrap();
        assert_eq!(read_token(&path).as_deref(), Some("s3cret"));
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(read_token(&path), None);
    }

    #[test]
    fn announced_port_wins_over_the_configured_one() {
        let dir = tempfile::tempdir().unwrap();
        let location = Location {
            data_dir: dir.path().to_path_buf(),
            configured_port: 47111,
            url_override: None,
        };
        assert_eq!(location.port(), 47111);
        std::fs::write(
            dir.path().join(paths::DAEMON_FILE),
            r#"{"port":40001,"pid":1,"version":"x"}"#,
        )
        .unwrap();
        assert_eq!(location.port(), 40001);
        assert_eq!(location.base_url(), "http://127.0.0.1:40001");
    }
}
