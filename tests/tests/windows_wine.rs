//! The Windows hooks (`x86_64-pc-windows-gnu` builds) under Wine: they read Claude Code's hook
//! JSON, fail open with memd down (logging under the Windows `%LOCALAPPDATA%\memd`), and, against
//! a real Linux memd on loopback, inject KNOWN CONTEXT and store the exchange (the Windows
//! build's HTTP client and identity proof against the real daemon).
//!
//! Runs only with `MEMD_WINDOWS=1`, after `install/fetch-windows.sh` and
//! `cargo build --target x86_64-pc-windows-gnu -p hook-prompt -p hook-stop`; then anything
//! missing fails the test. Without the variable it prints that it was skipped.

use proto::{MemoryBankResponse, StatsResponse};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The project directory Claude Code on Windows reports.
const WIN_CWD: &str = r"C:\Users\dev\shop";
const TARGET: &str = "x86_64-pc-windows-gnu";
/// Wine starts slowly on a loaded machine (the first run also creates the prefix).
const WINE_LIMIT: Duration = Duration::from_secs(300);
/// The hooks' own deadline, raised: Wine's start-up is not what is tested here.
const HOOK_DEADLINE_MS: &str = "20000";

/// A fresh 64-bit Wine prefix with the Windows hooks and the test-only shim in a directory
/// whose name has a space (as `C:\Program Files` does).
struct Wine {
    wine: PathBuf,
    root: tempfile::TempDir,
}

impl Wine {
    fn prefix(&self) -> PathBuf {
        self.root.path().join("prefix")
    }

    fn bin(&self) -> PathBuf {
        self.root.path().join("memd hooks")
    }

    /// Sets up the prefix; panics naming what is missing.
    fn new() -> Wine {
        let wine = [std::env::var_os("MEMD_WINE").map(PathBuf::from)]
            .into_iter()
            .flatten()
            .chain([PathBuf::from("/usr/lib/wine/wine64")])
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("MEMD_WINDOWS=1 but wine64 is missing: run install/fetch-windows.sh (or set MEMD_WINE)"));
        let shim = proto::paths::cache_dir()
            .join("windows")
            .join("bcryptprimitives.dll");
        assert!(
            shim.is_file(),
            "MEMD_WINDOWS=1 but {} is missing: run install/fetch-windows.sh",
            shim.display()
        );
        let exe_dir = windows_exe_dir();
        let root = tempfile::tempdir().unwrap();
        let w = Wine { wine, root };
        std::fs::create_dir_all(w.bin()).unwrap();
        for name in ["hook-prompt.exe", "hook-stop.exe"] {
            let exe = exe_dir.join(name);
            assert!(
                exe.is_file(),
                "MEMD_WINDOWS=1 but {} is missing: run `cargo build --target {TARGET} -p hook-prompt -p hook-stop`",
                exe.display()
            );
            std::fs::copy(&exe, w.bin().join(name)).unwrap();
        }
        std::fs::copy(&shim, w.bin().join("bcryptprimitives.dll")).unwrap();
        let (code, _, err) = w.run(&[OsArg::S("wineboot"), OsArg::S("--init")], b"", &[]);
        assert_eq!(code, 0, "wineboot failed: {err}");
        w
    }

    fn command(&self) -> Command {
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
    /// [`WINE_LIMIT`].
    fn run(&self, args: &[OsArg], stdin: &[u8], env: &[(&str, String)]) -> (i32, String, String) {
        let mut cmd = self.command();
        for a in args {
            match a {
                OsArg::S(s) => cmd.arg(s),
                OsArg::P(p) => cmd.arg(p),
            };
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn wine64");
        let mut sin = child.stdin.take().unwrap();
        sin.write_all(stdin).ok();
        drop(sin);
        let drain = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = Vec::new();
                r.read_to_end(&mut s).ok();
                String::from_utf8_lossy(&s).into_owned()
            })
        };
        let out = drain(Box::new(child.stdout.take().unwrap()));
        let err = drain(Box::new(child.stderr.take().unwrap()));
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
            std::thread::sleep(Duration::from_millis(50));
        };
        let (out, err) = (out.join().unwrap(), err.join().unwrap());
        (status.code().unwrap_or(-1), out, err)
    }

    fn hook(&self, name: &str, stdin: &[u8], env: &[(&str, String)]) -> (i32, String, String) {
        self.run(&[OsArg::P(self.bin().join(name))], stdin, env)
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

#[derive(Debug)]
enum OsArg {
    S(&'static str),
    P(PathBuf),
}

/// `target/x86_64-pc-windows-gnu/<profile>`, beside this test's `target/<profile>`.
fn windows_exe_dir() -> PathBuf {
    let bin = tests::bin_dir();
    let profile = bin.file_name().unwrap().to_owned();
    bin.parent().unwrap().join(TARGET).join(profile)
}

/// A Linux path as Wine's `Z:` drive (the whole Unix file system) names it.
fn z(path: &Path) -> String {
    format!("Z:{}", path.display().to_string().replace('/', "\\"))
}

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn claude_prompt(session: &str, prompt: &str, transcript: &str, cwd: &str) -> Vec<u8> {
    json!({
        "session_id": session, "transcript_path": transcript, "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt
    })
    .to_string()
    .into_bytes()
}

fn claude_stop(session: &str, answer: &str, transcript: &str, cwd: &str) -> Vec<u8> {
    json!({
        "session_id": session, "transcript_path": transcript, "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": answer
    })
    .to_string()
    .into_bytes()
}

fn enabled() -> bool {
    if std::env::var("MEMD_WINDOWS").is_ok_and(|v| v == "1") {
        return true;
    }
    println!(
        "SKIPPED: the Windows hooks under Wine run with MEMD_WINDOWS=1 (see install/fetch-windows.sh)"
    );
    false
}

/// The hooks' failure log in the prefix's `%LOCALAPPDATA%\memd\logs` (any Wine user name).
fn local_appdata_log(prefix: &Path) -> Option<PathBuf> {
    let users = std::fs::read_dir(prefix.join("drive_c/users")).ok()?;
    users
        .flatten()
        .map(|u| u.path().join("AppData/Local/memd/logs/hooks.log"))
        .find(|p| p.is_file())
}

#[test]
fn windows_hooks_under_wine_fail_open_then_inject_known_context() {
    if !enabled() {
        return;
    }
    let wine = Wine::new();

    // memd down: no data dir or config named, so the Windows defaults apply.
    let down = [("MEMD_PORT", free_port().to_string())];
    let t = r"C:\Users\dev\t.jsonl";
    let (code, out, err) = wine.hook(
        "hook-prompt.exe",
        &claude_prompt("w-down", "hi", t, WIN_CWD),
        &down,
    );
    assert_eq!((code, out.as_str()), (0, ""), "stderr: {err}");
    let (code, out, err) = wine.hook(
        "hook-stop.exe",
        &claude_stop("w-down", "ok", t, WIN_CWD),
        &down,
    );
    assert_eq!((code, out.as_str()), (0, ""), "stderr: {err}");
    let log = local_appdata_log(&wine.prefix())
        .expect("the failure is logged under %LOCALAPPDATA%\\memd\\logs");
    let log = std::fs::read_to_string(log).unwrap();
    assert!(
        log.contains("hook-prompt") && log.contains("hook-stop"),
        "{log}"
    );

    // A real Linux memd on loopback; the Windows hooks find it through its data dir.
    let d = tests::start_daemon();
    let fact = "The staging database for the billing service listens on port 5433, not 5432";
    let id = d
        .post::<_, MemoryBankResponse>("/api/memory-bank/add", &json!({"content": fact}))
        .doc_id;
    d.wait_embedded(Duration::from_secs(120));
    let up = [
        ("MEMD_DATA_DIR", z(&d.data_dir())),
        ("MEMD_CONFIG_DIR", z(&d.config_dir())),
    ];
    let transcript = d.data_dir().join("w-up.jsonl");
    // The daemon resolves the project directory on its own OS and refuses one that is not
    // absolute there: for this Linux daemon `C:\...` is not, so the client reports a Linux one
    // (the hook passes it through untouched).
    let cwd = d.root().display().to_string();
    std::fs::write(&transcript, "").unwrap();
    let t = z(&transcript);
    let prompt = "which port does the billing staging database use?";
    let (code, out, err) = wine.hook(
        "hook-prompt.exe",
        &claude_prompt("w-up", prompt, &t, &cwd),
        &up,
    );
    assert_eq!(code, 0, "stderr: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(d.data_dir().join("logs/hooks.log"));
        panic!(
            "not JSON {out:?}: {e}; stderr {err}; hooks.log: {log:?}; memd: {}",
            d.log_tail()
        )
    });
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        ctx.contains("KNOWN CONTEXT") && ctx.contains(&format!("[id:{id}]")),
        "{ctx}"
    );
    let turn = [
        json!({"type": "user", "message": {"role": "user", "content": prompt}, "uuid": "u", "isSidechain": false}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "5433."}]}, "uuid": "a"}),
    ];
    let lines: Vec<String> = turn.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&transcript, lines.concat()).unwrap();
    let (code, out, err) = wine.hook(
        "hook-stop.exe",
        &claude_stop("w-up", "5433.", &t, &cwd),
        &up,
    );
    assert_eq!((code, out.as_str()), (0, ""), "stderr: {err}");
    let s: StatsResponse = d.get("/api/stats");
    assert_eq!(
        s.collections["working"].count, 1,
        "the Windows stop hook stored the exchange"
    );
}
