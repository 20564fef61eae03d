//! Shared by the `cli_*` tests: an isolated user (home, XDG dirs, memd data and config dirs in
//! a temp dir), the real `memd` binary run inside it, and a real daemon started as a child.
//!
//! Readiness is the daemon announcing itself in `daemon.json` and answering `/api/health`;
//! nothing waits on a fixed delay.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const MEMD: &str = env!("CARGO_BIN_EXE_memd");

/// One fake user.
pub struct User {
    pub root: tempfile::TempDir,
    /// Directory on PATH for this user (empty unless a test puts something there).
    pub path_dir: PathBuf,
}

impl User {
    pub fn new() -> User {
        let root = tempfile::Builder::new()
            .prefix("memd-cli")
            .tempdir()
            .expect("tempdir");
        let path_dir = root.path().join("path");
        for d in [
            "home",
            "path",
            "xdg-config",
            "xdg-data",
            "xdg-cache",
            "xdg-state",
        ] {
            std::fs::create_dir_all(root.path().join(d)).expect("mkdir");
        }
        User { root, path_dir }
    }

    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.root.path().join("config")
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data_dir().join("token"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// A directory with executable stand-ins for hook-prompt and hook-stop.
    pub fn fake_bin_dir(&self) -> PathBuf {
        let dir = self.root.path().join("bin");
        std::fs::create_dir_all(&dir).expect("mkdir bin");
        for name in ["hook-prompt", "hook-stop"] {
            let p = dir.join(name);
            std::fs::write(&p, "#!/bin/sh\nexit 0\n").expect("write hook");
            set_mode(&p, 0o755);
        }
        dir
    }

    /// This user's environment.
    pub fn env(&self) -> Vec<(String, String)> {
        let s = |p: PathBuf| p.display().to_string();
        let root = self.root.path();
        vec![
            ("HOME".into(), s(self.home())),
            ("XDG_CONFIG_HOME".into(), s(root.join("xdg-config"))),
            ("XDG_DATA_HOME".into(), s(root.join("xdg-data"))),
            ("XDG_CACHE_HOME".into(), s(root.join("xdg-cache"))),
            ("XDG_STATE_HOME".into(), s(root.join("xdg-state"))),
            ("MEMD_DATA_DIR".into(), s(self.data_dir())),
            ("MEMD_CONFIG_DIR".into(), s(self.config_dir())),
            ("PATH".into(), s(self.path_dir.clone())),
        ]
    }

    /// Applies this user's environment to a command.
    pub fn apply(&self, cmd: &mut Command) {
        // The developer's own memd settings must not leak into a test user; this user's own
        // (data dir, config dir, XDG) are set below.
        for k in memd_testkit::SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        cmd.env_remove("MEMD_RUNTIME_DIR")
            .env_remove("CURSOR_VERSION");
        cmd.envs(self.env());
    }

    /// `memd <args>` as this user, stdin closed.
    pub fn memd(&self, args: &[&str]) -> Output {
        self.memd_env(args, &[])
    }

    pub fn memd_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(MEMD);
        cmd.args(args).stdin(Stdio::null());
        self.apply(&mut cmd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run memd")
    }

    /// `memd <args>` that must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.memd(args);
        assert!(
            out.status.success(),
            "memd {args:?} failed ({}):\n{}\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

pub fn read_json(p: &Path) -> serde_json::Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("parse {}: {e}\n{t}", p.display()))
}

/// Files in `dir` whose name contains `memd-backup`.
pub fn backups(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains("memd-backup"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Reads `<data dir>/daemon.json` → (port, pid) once it names a daemon that answers health.
pub fn wait_for_daemon(
    data_dir: &Path,
    limit: Duration,
    mut alive: impl FnMut() -> bool,
) -> (u16, u32) {
    let started = Instant::now();
    loop {
        assert!(alive(), "memd exited during start-up");
        if let Ok(t) = std::fs::read_to_string(data_dir.join("daemon.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && let (Some(port), Some(pid)) = (v["port"].as_u64(), v["pid"].as_u64())
            && health(port as u16).is_some()
        {
            return (port as u16, pid as u32);
        }
        assert!(started.elapsed() < limit, "memd not ready after {limit:?}");
        // Bounded polling of a file the daemon writes once it listens; the condition decides.
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

pub fn health(port: u16) -> Option<serde_json::Value> {
    let mut r = agent()
        .get(&format!("http://127.0.0.1:{port}/api/health"))
        .call()
        .ok()?;
    (r.status().as_u16() == 200).then(|| r.body_mut().read_json().ok())?
}

/// A daemon (`memd serve`, port 0) of this user, started through `memd-testkit` (the one helper
/// that starts daemons); killed on drop.
pub struct Daemon {
    inner: memd_testkit::Daemon,
    pub port: u16,
    pub token: String,
}

impl Daemon {
    pub fn start(user: &User) -> Daemon {
        let spec = memd_testkit::Spec {
            root: Some(user.root.path().to_path_buf()),
            // The user's own (empty) cache: these tests run without the embedding model.
            runtime_dir: Some(user.root.path().join("xdg-cache/memd/runtime")),
            env: user.env(),
            start_limit: Duration::from_secs(60),
            ..memd_testkit::Spec::with_memd(PathBuf::from(MEMD))
        };
        let inner = memd_testkit::Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"));
        Daemon {
            port: inner.port,
            token: inner.token.clone(),
            inner,
        }
    }

    pub fn post(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        self.inner.post(path, &body)
    }

    pub fn get(&self, path: &str) -> serde_json::Value {
        self.inner.get(path)
    }
}

pub fn terminate(pid: u32) {
    // SAFETY: SIGTERM to a daemon this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}

/// Stops a daemon that something else (a hook, the CLI) started in this user's data dir.
pub struct Detached(pub PathBuf);

impl Drop for Detached {
    fn drop(&mut self) {
        if let Ok(t) = std::fs::read_to_string(self.0.join("daemon.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && let Some(pid) = v["pid"].as_u64()
        {
            terminate(pid as u32);
            let started = Instant::now();
            // SAFETY: signal 0 only checks that the process still exists.
            while unsafe { libc::kill(pid as i32, 0) } == 0
                && started.elapsed() < Duration::from_secs(10)
            {
                // Bounded wait for the daemon's orderly exit (it flushes the store first).
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
