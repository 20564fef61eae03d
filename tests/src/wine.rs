//! The Windows builds (`x86_64-pc-windows-gnu`, from `install/build-windows.sh`) run under
//! Debian's Wine: a fresh 64-bit prefix per test, the `.exe` files in a directory whose name
//! has a space (as `C:\Program Files` does), and `memd.exe serve` as a long-running process the
//! Linux side talks to over loopback HTTP.
//!
//! Owns only starting and stopping Wine processes and reading what they write into the prefix;
//! must never start a Windows process without a deadline on it, and never leave a wineserver
//! behind (the prefix's is ended on drop).

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const TARGET: &str = "x86_64-pc-windows-gnu";
/// Wine starts slowly on a loaded machine (the first run also creates the prefix).
pub const WINE_LIMIT: Duration = Duration::from_secs(300);
/// The hooks' own deadline, raised: Wine's start-up is not what is tested here.
pub const HOOK_DEADLINE_MS: &str = "20000";

/// True when `MEMD_WINDOWS=1`; otherwise prints that the test was skipped.
pub fn enabled() -> bool {
    if std::env::var("MEMD_WINDOWS").is_ok_and(|v| v == "1") {
        return true;
    }
    println!(
        "SKIPPED: the Windows builds under Wine run with MEMD_WINDOWS=1 (see install/fetch-windows.sh)"
    );
    false
}

/// Where `install/build-windows.sh` puts the `.exe` files for this test build's profile:
/// `${MEMD_WINDOWS_TARGET_DIR:-<workspace>/target-win}/x86_64-pc-windows-gnu/<profile>`.
pub fn exe_dir() -> PathBuf {
    let bin = crate::bin_dir();
    let profile = bin.file_name().unwrap().to_owned();
    let target_dir = std::env::var_os("MEMD_WINDOWS_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin.parent().unwrap().parent().unwrap().join("target-win"));
    target_dir.join(TARGET).join(profile)
}

/// A Linux path as Wine's `Z:` drive (the whole Unix file system) names it.
pub fn z(path: &Path) -> String {
    format!("Z:{}", path.display().to_string().replace('/', "\\"))
}

/// A loopback port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One argument to wine: a fixed word, a computed one, or a path.
#[derive(Debug)]
pub enum Arg {
    S(&'static str),
    T(String),
    P(PathBuf),
}

/// A fresh 64-bit Wine prefix with the given Windows executables and the test-only
/// `bcryptprimitives.dll` shim beside them.
pub struct Wine {
    wine: PathBuf,
    root: tempfile::TempDir,
}

impl Wine {
    /// Sets up the prefix with `exes` (names in [`exe_dir`]); panics naming what is missing.
    pub fn new(exes: &[&str]) -> Wine {
        let wine = [std::env::var_os("MEMD_WINE").map(PathBuf::from)]
            .into_iter()
            .flatten()
            .chain([PathBuf::from("/usr/lib/wine/wine64")])
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("MEMD_WINDOWS=1 but wine64 is missing: run install/fetch-windows.sh (or set MEMD_WINE)"));
        let windows_cache = proto::paths::cache_dir().join("windows");
        let shim = windows_cache.join("bcryptprimitives.dll");
        assert!(
            shim.is_file(),
            "MEMD_WINDOWS=1 but {} is missing: run install/fetch-windows.sh",
            shim.display()
        );
        let root = tempfile::tempdir().unwrap();
        let w = Wine { wine, root };
        std::fs::create_dir_all(w.bin()).unwrap();
        for name in exes {
            let exe = exe_dir().join(name);
            assert!(
                exe.is_file(),
                "MEMD_WINDOWS=1 but {} is missing: run install/build-windows.sh",
                exe.display()
            );
            std::fs::copy(&exe, w.bin().join(name)).unwrap();
        }
        std::fs::copy(&shim, w.bin().join("bcryptprimitives.dll")).unwrap();
        let (code, _, err) = w.run(&[Arg::S("wineboot"), Arg::S("--init")], b"", &[]);
        assert_eq!(code, 0, "wineboot failed: {err}");
        w
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn prefix(&self) -> PathBuf {
        self.root.path().join("prefix")
    }

    /// The directory holding the `.exe` files (its name has a space).
    pub fn bin(&self) -> PathBuf {
        self.root.path().join("memd bin")
    }

    /// The Wine user's profile directory in the prefix (`C:\users\<name>`), once it exists.
    pub fn profile(&self) -> Option<PathBuf> {
        let users = std::fs::read_dir(self.prefix().join("drive_c/users")).ok()?;
        users
            .flatten()
            .map(|u| u.path())
            .find(|p| p.join("AppData/Local").is_dir())
    }

    /// `%LOCALAPPDATA%\memd` of the prefix's user, as a Linux path.
    pub fn local_memd(&self) -> PathBuf {
        self.profile()
            .expect("the prefix has a user profile")
            .join("AppData/Local/memd")
    }

    /// wine64 with a clean environment for this prefix.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.wine);
        for k in memd_testkit::SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        for k in [
            "LOCALAPPDATA",
            "APPDATA",
            "USERPROFILE",
            "DISPLAY",
            "WAYLAND_DISPLAY",
            "MEMD_RUNTIME_DIR",
        ] {
            cmd.env_remove(k);
        }
        cmd.env("WINEPREFIX", self.prefix())
            .env("WINEARCH", "win64")
            .env("WINEDEBUG", "-all")
            // No Mono/Gecko installers on prefix creation.
            .env("WINEDLLOVERRIDES", "mscoree=;mshtml=")
            .env("MEMD_HOOK_DEADLINE_MS", HOOK_DEADLINE_MS);
        cmd
    }

    /// Runs wine with `args`, `stdin` and `env`; (exit code, stdout, stderr), bounded by
    /// [`WINE_LIMIT`]. Output goes through files, not pipes: a process the `.exe` starts (a hook
    /// starting memd.exe) inherits Wine's Unix descriptors and would hold a pipe open.
    pub fn run(&self, args: &[Arg], stdin: &[u8], env: &[(&str, String)]) -> (i32, String, String) {
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let io = |what: &str| self.root().join(format!("run-{n}.{what}"));
        std::fs::write(io("in"), stdin).unwrap();
        let mut cmd = self.command();
        for a in args {
            match a {
                Arg::S(s) => cmd.arg(s),
                Arg::T(t) => cmd.arg(t),
                Arg::P(p) => cmd.arg(p),
            };
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::fs::File::open(io("in")).unwrap())
            .stdout(std::fs::File::create(io("out")).unwrap())
            .stderr(std::fs::File::create(io("err")).unwrap());
        let mut child = cmd.spawn().expect("spawn wine64");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > WINE_LIMIT {
                child.kill().ok();
                child.wait().ok();
                panic!("wine {args:?} still running after {WINE_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let read = |what: &str| {
            String::from_utf8_lossy(&std::fs::read(io(what)).unwrap_or_default()).into_owned()
        };
        (status.code().unwrap_or(-1), read("out"), read("err"))
    }

    /// Runs one of the `.exe` files in [`Wine::bin`].
    pub fn exe(&self, name: &str, stdin: &[u8], env: &[(&str, String)]) -> (i32, String, String) {
        self.run(&[Arg::P(self.bin().join(name))], stdin, env)
    }

    /// Runs `memd.exe` from [`Wine::bin`] with `args`; (exit code, stdout, stderr).
    pub fn memd(
        &self,
        args: &[&'static str],
        stdin: &[u8],
        env: &[(&str, String)],
    ) -> (i32, String, String) {
        let mut all = vec![Arg::P(self.bin().join("memd.exe"))];
        all.extend(args.iter().map(|a| Arg::S(a)));
        self.run(&all, stdin, env)
    }

    /// The embedding runtime for the Windows daemon: the Windows ONNX Runtime DLL that
    /// `install/fetch-windows.sh` took from PyPI's `win_amd64` wheel, beside links to the Linux
    /// cache's models (the same files on every OS).
    pub fn windows_runtime(&self) -> PathBuf {
        let dll = proto::paths::cache_dir().join("windows/onnxruntime.dll");
        assert!(
            dll.is_file(),
            "MEMD_WINDOWS=1 but {} is missing: run install/fetch-windows.sh",
            dll.display()
        );
        let linux = crate::runtime_dir();
        let dir = self.root().join("runtime");
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::copy(&dll, dir.join("lib/onnxruntime.dll")).unwrap();
        for sub in ["model", "reranker", "colbert"] {
            std::os::unix::fs::symlink(linux.join(sub), dir.join(sub)).unwrap();
        }
        dir
    }
}

impl Drop for Wine {
    fn drop(&mut self) {
        // Ends this prefix's wineserver (it lingers after the last process otherwise).
        let server = self.wine.with_file_name("wineserver");
        let _ = Command::new(server)
            .arg("-k")
            .env("WINEPREFIX", self.prefix())
            .status();
    }
}

/// `memd.exe serve` under Wine, with its data in the prefix's `%LOCALAPPDATA%\memd`.
pub struct WineDaemon {
    child: Option<Child>,
    pub port: u16,
    pub token: String,
    /// The Windows process id `memd.exe` wrote into `daemon.json`.
    pub pid: u32,
    /// Spawn → first `/api/health` 200, for the last start.
    pub healthy_after: Duration,
    data_dir: PathBuf,
    log: PathBuf,
    env: Vec<(String, String)>,
    agent: ureq::Agent,
}

impl WineDaemon {
    /// Starts `memd.exe serve` with `env` and waits (up to [`WINE_LIMIT`]) until it answers.
    pub fn start(wine: &Wine, env: &[(&str, String)]) -> WineDaemon {
        let mut d = WineDaemon {
            child: None,
            port: 0,
            token: String::new(),
            pid: 0,
            healthy_after: Duration::ZERO,
            data_dir: PathBuf::new(),
            log: wine.root().join("memd.stderr"),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .proxy(None)
                .timeout_global(Some(Duration::from_secs(120)))
                .build()
                .into(),
        };
        d.spawn(wine);
        d
    }

    /// Starts the process (again) and waits until `/api/health` answers.
    pub fn spawn(&mut self, wine: &Wine) {
        if let Some(profile) = wine.profile() {
            std::fs::remove_file(profile.join("AppData/Local/memd/daemon.json")).ok();
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = wine.command();
        cmd.arg(wine.bin().join("memd.exe"))
            .arg("serve")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let spawned = Instant::now();
        self.child = Some(cmd.spawn().expect("spawn wine64 memd.exe serve"));
        self.port = 0;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("memd.exe exited early ({status}): {}", self.log_tail());
            }
            if self.port == 0
                && let Some(profile) = wine.profile()
            {
                let dir = profile.join("AppData/Local/memd");
                if let Ok(text) = std::fs::read_to_string(dir.join(proto::paths::DAEMON_FILE))
                    && let Ok(info) = serde_json::from_str::<proto::paths::DaemonInfo>(&text)
                    && info.port != 0
                {
                    self.port = info.port;
                    self.pid = info.pid;
                    self.token = std::fs::read_to_string(dir.join(proto::paths::TOKEN_FILE))
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    self.data_dir = dir;
                }
            }
            if self.port != 0 && self.call("GET", "/api/health", None).0 == 200 {
                self.healthy_after = spawned.elapsed();
                return;
            }
            assert!(
                spawned.elapsed() < WINE_LIMIT,
                "memd.exe not answering after {WINE_LIMIT:?}: {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The data dir (`%LOCALAPPDATA%\memd`) as a Linux path.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// An authenticated request; (status, body), status 0 when nothing answered.
    pub fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> (u16, String) {
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(format!("http://127.0.0.1:{}{path}", self.port))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", self.token))
            .body(body.unwrap_or_default().to_vec())
            .unwrap();
        match self.agent.run(req) {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            ),
            Err(e) => (0, e.to_string()),
        }
    }

    /// GET expecting 200 and a typed answer.
    pub fn get<R: DeserializeOwned>(&self, path: &str) -> R {
        let (status, text) = self.call("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {text}; memd: {}", self.log_tail());
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
    }

    /// POST JSON expecting 200 and a typed answer.
    pub fn post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B) -> R {
        let bytes = serde_json::to_vec(body).unwrap();
        let (status, text) = self.call("POST", path, Some(&bytes));
        assert_eq!(
            status,
            200,
            "POST {path}: {text}; memd: {}",
            self.log_tail()
        );
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}"))
    }

    /// Waits until every stored memory is embedded.
    pub fn wait_embedded(&self, limit: Duration) {
        let started = Instant::now();
        loop {
            let stats: proto::StatsResponse = self.get("/api/stats");
            if stats.index.pending_embeddings == 0 {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{} memories still not embedded after {limit:?}: {}",
                stats.index.pending_embeddings,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL to the Windows process (under Wine it is a Linux process of its own) and every
    /// process it started: no shutdown, nothing flushed.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            memd_testkit::proc::kill_tree(&mut child).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// `TerminateProcess`, as Windows' Task Manager or `taskkill /F` ends a process: no
    /// shutdown, nothing flushed. Issued by Wine's `taskkill.exe` on the pid from
    /// `daemon.json`; returns once the process is gone.
    pub fn terminate(&mut self, wine: &Wine) {
        let pid = self.pid.to_string();
        let args = [
            Arg::S("taskkill"),
            Arg::S("/F"),
            Arg::S("/PID"),
            Arg::T(pid.clone()),
        ];
        let (code, out, err) = wine.run(&args, b"", &[]);
        assert_eq!(code, 0, "taskkill /F /PID {pid}: {out} {err}");
        let Some(mut child) = self.child.take() else {
            return;
        };
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > WINE_LIMIT {
                memd_testkit::proc::kill_tree(&mut child).ok();
                panic!("memd.exe still running {WINE_LIMIT:?} after taskkill /F");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last 30 lines of memd.exe's stderr (what it also logs to `logs\\daemon.log`).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for WineDaemon {
    fn drop(&mut self) {
        self.kill9();
    }
}
