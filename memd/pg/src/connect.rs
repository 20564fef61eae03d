//! Reaching the shared store: the URL, the password, TLS.
//!
//! Owns turning `[store]` settings into a connection. The password comes from
//! `store.password_file` or the standard password file (`PGPASSFILE`, else `~/.pgpass`), never
//! from the URL, argv or the environment, and is never logged: `Target::describe` prints the
//! URL without it. TLS (rustls, the Mozilla roots plus `store.ca_file`) is used when the URL's
//! `sslmode` asks for it (`prefer` tries it, `require` insists). Must never block without a
//! deadline: every connect is bounded by `store.timeout_ms`.

use anyhow::{Context, Result, bail};
use memd_engine::config::StoreConfig;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, Config, NoTls};

/// A shared store to connect to.
#[derive(Clone)]
pub struct Target {
    config: Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    describe: String,
    timeout: Duration,
}

impl Target {
    pub fn new(store: &StoreConfig) -> Result<Target> {
        let url = store
            .url
            .as_deref()
            .context("no shared store configured (store.url or MEMD_STORE_URL)")?;
        Target::from_url(url, store)
    }

    /// `url` with the other settings of `store` (password file, CA file, timeout).
    pub fn from_url(url: &str, store: &StoreConfig) -> Result<Target> {
        memd_engine::config::check_store_url(url)?;
        let mut config = Config::from_str(url).context("store.url is not a PostgreSQL URL")?;
        if config.get_password().is_some() {
            // Also a percent-encoded `password` parameter, which the text check cannot see.
            bail!("store.url must not contain a password: use store.password_file");
        }
        if !url.contains("sslmode=") && !on_loopback(&config) {
            // `prefer` would let anyone in the path turn encryption off.
            config.ssl_mode(SslMode::Require);
        }
        let timeout = Duration::from_millis(store.timeout_ms);
        config.connect_timeout(timeout);
        config.application_name("memd");
        let describe = describe(&config);
        if let Some(pw) = password(&config, store.password_file.as_deref())? {
            config.password(pw);
        }
        let tls = match config.get_ssl_mode() {
            SslMode::Disable => None,
            _ => Some(rustls_connector(store.ca_file.as_deref())?),
        };
        Ok(Target {
            config,
            tls,
            describe,
            timeout,
        })
    }

    /// The URL without any secret, for logs and status.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Connects within the timeout; the connection's I/O runs on its own task.
    pub async fn connect(&self) -> Result<Client> {
        let attempt = async {
            match &self.tls {
                Some(tls) => {
                    let (client, conn) = self.config.connect(tls.clone()).await?;
                    tokio::spawn(drive(conn));
                    Ok::<_, tokio_postgres::Error>(client)
                }
                None => {
                    let (client, conn) = self.config.connect(NoTls).await?;
                    tokio::spawn(drive(conn));
                    Ok(client)
                }
            }
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(anyhow::anyhow!(
                "cannot connect to {}: {}",
                self.describe,
                error_text(&e)
            )),
            Err(_) => bail!(
                "cannot connect to {}: no answer within {} ms",
                self.describe,
                self.timeout.as_millis()
            ),
        }
    }
}

async fn drive<F>(conn: F)
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    if let Err(e) = conn.await {
        tracing::debug!("shared store connection ended: {e}");
    }
}

/// The server's message when there is one, else the error and its causes (`Error`'s Display
/// alone says only "db error" or "error performing TLS handshake").
pub fn error_text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn on_loopback(c: &Config) -> bool {
    c.get_hosts().iter().all(|h| match h {
        Host::Tcp(name) => matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1"),
        #[cfg(unix)]
        Host::Unix(_) => true,
    })
}

fn describe(c: &Config) -> String {
    let host = match c.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        c.get_user().unwrap_or("?"),
        c.get_dbname().or(c.get_user()).unwrap_or("?")
    )
}

/// The password for `config`: the first line of `file`, else the password file's matching
/// line, else none.
fn password(config: &Config, file: Option<&Path>) -> Result<Option<Vec<u8>>> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read store.password_file {}", path.display()))?;
        let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
        if line.is_empty() {
            bail!("store.password_file {} is empty", path.display());
        }
        return Ok(Some(line.as_bytes().to_vec()));
    }
    let Some(path) = pgpass_path() else {
        return Ok(None);
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    if !private_file(&path) {
        tracing::warn!(
            "ignoring {}: it is readable by others (chmod 600 it)",
            path.display()
        );
        return Ok(None);
    }
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        _ => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    Ok(pgpass_lookup(&text, [&host, &port, db, user]).map(String::into_bytes))
}

fn pgpass_path() -> Option<PathBuf> {
    match std::env::var_os("PGPASSFILE").filter(|v| !v.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")),
    }
}

#[cfg(unix)]
fn private_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
}

#[cfg(not(unix))]
fn private_file(_: &Path) -> bool {
    true
}

/// The password of the first `host:port:database:user:password` line matching `want` (`*`
/// matches anything; `\:` and `\\` escape), as libpq reads the file.
pub fn pgpass_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_pgpass(line);
        if fields.len() != 5 {
            continue;
        }
        let matches = fields[..4]
            .iter()
            .zip(want)
            .all(|(f, w)| f == "*" || f == w);
        if matches {
            return Some(fields[4].clone());
        }
    }
    None
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.extend(chars.next()),
            // The password (fifth field) may hold unescaped colons.
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

fn rustls_connector(ca_file: Option<&Path>) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read store.ca_file {}", path.display()))?;
        let mut added = 0;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.with_context(|| format!("store.ca_file {}", path.display()))?;
            roots
                .add(cert)
                .with_context(|| format!("store.ca_file {}", path.display()))?;
            added += 1;
        }
        if added == 0 {
            bail!("store.ca_file {} holds no certificate", path.display());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS setup")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_lines_match_like_libpq() {
        let text = "# comment\n\
                    db.example:5432:memd:alice:first\n\
                    *:*:*:bob:pa\\:ss\\\\word\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, ["db.example", "5432", "memd", "alice"]).as_deref(),
            Some("first")
        );
        assert_eq!(
            pgpass_lookup(text, ["other", "5433", "x", "bob"]).as_deref(),
            Some("pa:ss\\word")
        );
        assert_eq!(
            pgpass_lookup(text, ["db.example", "5432", "memd", "carol"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("a:b:c\n", ["a", "b", "c", "d"]), None);
    }

    #[test]
    fn a_described_target_never_shows_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret-value\n").unwrap();
        let store = StoreConfig {
            password_file: Some(pw),
            ..StoreConfig::default()
        };
        let t = Target::from_url("postgres://alice@db.example:6543/team", &store).unwrap();
        assert_eq!(t.describe(), "postgres://alice@db.example:6543/team");
        assert!(t.tls.is_some());
        assert_eq!(
            t.config.get_ssl_mode(),
            SslMode::Require,
            "a remote host gets TLS required unless the URL says otherwise"
        );
        let local = Target::from_url("postgres://alice@127.0.0.1/team", &store).unwrap();
        assert_eq!(local.config.get_ssl_mode(), SslMode::Prefer);
        let sneaky = Target::from_url("postgres://alice@db.example/team?pass%77ord=pw", &store);
        assert!(
            sneaky.is_err(),
            "an encoded password parameter is refused too"
        );
        let plain =
            Target::from_url("postgres://alice@db.example/team?sslmode=disable", &store).unwrap();
        assert!(plain.tls.is_none());
        let err = Target::from_url("postgres://alice:pw@db.example/team", &store)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("must not contain a password"), "{err}");
        assert!(!err.contains("pw@"), "{err}");
    }
}
