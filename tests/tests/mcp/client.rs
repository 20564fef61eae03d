//! The Python MCP client: a venv with the pinned SDK (cached under the target dir) and the
//! ways the tests run `tests/mcp_client/drive.py`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use tests::Daemon;

/// The SDK version the tests pin (bump deliberately: the client's behaviour is part of the test).
const MCP_SDK: &str = "mcp==2.3.0";
/// `target/py-mcp-venv/bin/python` with the pinned SDK installed; created once, then reused.
/// A file lock keeps parallel test processes from building it twice.
pub fn python() -> PathBuf {
    let target = tests::bin_dir().parent().expect("target dir").to_path_buf();
    let venv = target.join("py-mcp-venv");
    let py = venv.join("bin").join("python");
    let marker = venv.join(format!(".installed-{MCP_SDK}"));
    let _lock = FileLock::acquire(&target.join("py-mcp-venv.lock"));
    if marker.exists() && py.exists() {
        return py;
    }
    std::fs::remove_dir_all(&venv).ok();
    let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let check = Command::new(&base)
        .args([
            "-c",
            "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)",
        ])
        .status();
    assert!(
        check.is_ok_and(|s| s.success()),
        "the MCP tests need Python 3.10+ as `{base}` (or set PYTHON=/path/to/python3)"
    );
    run_or_fail(
        Command::new(&base).arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
    );
    run_or_fail(
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--disable-pip-version-check",
            "-q",
            MCP_SDK,
        ]),
        &format!("pip install {MCP_SDK} (the MCP tests need PyPI or a wheel cache)"),
    );
    std::fs::write(&marker, b"").expect("venv marker");
    py
}

pub fn run_or_fail(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

struct FileLock(std::fs::File);

impl FileLock {
    fn acquire(path: &Path) -> FileLock {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("lock file");
        // Blocks until the other test process finished building the venv.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {}", path.display());
        FileLock(f)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp_client")
        .join("drive.py")
}

/// Runs the driver and returns its report.
pub fn drive(args: &[&str], env: &[(String, String)]) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg(script()).args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run drive.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "drive.py {args:?} failed ({}):\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "drive.py printed no report ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A driver running the `restart` scenario, stopped after its first calls until [`resume`].
pub struct PausedDriver {
    child: std::process::Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

/// What drive.py prints on stderr when it waits for the test.
const PAUSE_MARKER: &str = "drive.py: paused, press enter";

impl PausedDriver {
    pub fn start(args: &[&str], env: &[(String, String)]) -> PausedDriver {
        use std::io::BufRead;
        let mut cmd = Command::new(python());
        cmd.arg(script())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("run drive.py");
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (paused_tx, paused_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line == PAUSE_MARKER {
                    let _ = paused_tx.send(());
                }
                sink.lock().expect("log").push_str(&format!("{line}\n"));
            }
        });
        let mut driver = PausedDriver {
            child,
            log,
            stderr_reader: Some(reader),
        };
        if paused_rx.recv_timeout(Duration::from_secs(120)).is_err() {
            driver.child.kill().ok();
            panic!("drive.py never paused:\n{}", driver.log());
        }
        driver
    }

    fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Lets the script finish; returns its report and everything it (and a stdio server it
    /// ran) wrote to stderr.
    pub fn resume(mut self) -> (Value, String) {
        use std::io::Write;
        if let Some(mut stdin) = self.child.stdin.take() {
            stdin.write_all(b"\n").expect("resume drive.py");
        }
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            use std::io::Read;
            out.read_to_string(&mut stdout).ok();
        }
        let status = self.child.wait().expect("drive.py exit");
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().ok();
        }
        assert!(
            status.success(),
            "drive.py failed after resuming ({status}):\n{}",
            self.log()
        );
        let report = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("no report ({e}): {stdout}\n{}", self.log()));
        (report, self.log())
    }
}

impl Drop for PausedDriver {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

pub fn drive_http(d: &Daemon, mode: &str, scenario: &str, tag: &str) -> Value {
    let url = d.url("/mcp");
    let args = [
        "--transport",
        "http",
        "--url",
        &url,
        "--token",
        &d.token,
        "--mode",
        mode,
        "--scenario",
        scenario,
        "--tag",
        tag,
    ];
    drive(&args, &[])
}

pub fn drive_stdio(env: &[(String, String)], mode: &str, scenario: &str, tag: &str) -> Value {
    let memd = tests::bin("memd").display().to_string();
    let args = [
        "--transport",
        "stdio",
        "--memd",
        &memd,
        "--mode",
        mode,
        "--scenario",
        scenario,
        "--tag",
        tag,
    ];
    drive(&args, env)
}
