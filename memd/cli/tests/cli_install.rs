//! `install/install.sh` end to end: release build, install into a temporary prefix, `memd
//! init` against a temporary home, then a real prompt hook from the installed binaries starts
//! the installed daemon. Expensive (release and static hook builds): runs only with
//! `MEMD_TEST_INSTALL=1`.

mod cli_support;

use cli_support::*;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn run_hook(user: &User, exe: &std::path::Path, port: u16, input: &str) -> std::process::Output {
    let mut cmd = Command::new(exe);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    user.apply(&mut cmd);
    cmd.env("MEMD_PORT", port.to_string());
    let mut child = cmd.spawn().expect("spawn hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("hook output")
}

/// `install.sh --prefix PREFIX --yes --no-service --no-runtime` as the temporary user, with the
/// real toolchain (PATH, CARGO_HOME, RUSTUP_HOME) so the build works; memd's files stay inside
/// the temporary user.
fn install_command(user: &User, prefix: &std::path::Path, repo: &std::path::Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("install/install.sh"))
        .args([
            "--prefix",
            prefix.to_str().unwrap(),
            "--yes",
            "--no-service",
            "--no-runtime",
        ])
        .stdin(Stdio::null());
    user.apply(&mut cmd);
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    if let Some(home) = std::env::var_os("HOME") {
        let home = std::path::PathBuf::from(home);
        cmd.env(
            "CARGO_HOME",
            std::env::var_os("CARGO_HOME").map_or_else(|| home.join(".cargo"), Into::into),
        );
        cmd.env(
            "RUSTUP_HOME",
            std::env::var_os("RUSTUP_HOME").map_or_else(|| home.join(".rustup"), Into::into),
        );
    }
    cmd
}

#[test]
fn install_script_installs_configures_and_the_hook_starts_the_daemon() {
    if std::env::var("MEMD_TEST_INSTALL").ok().as_deref() != Some("1") {
        eprintln!(
            "skipped: set MEMD_TEST_INSTALL=1 to run the install test (release build, minutes)"
        );
        return;
    }
    let user = User::new();
    std::fs::create_dir_all(user.home().join(".claude")).unwrap();
    let prefix = user.root.path().join("prefix");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let started = Instant::now();
    let mut cmd = install_command(&user, &prefix, &repo);
    let out = cmd.output().expect("run install.sh");
    eprintln!("install.sh took {:.0} s", started.elapsed().as_secs_f64());
    assert!(
        out.status.success(),
        "install.sh failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("To undo:") && stdout.contains("memd uninstall"),
        "{stdout}"
    );

    let bin = prefix.join("bin");
    for exe in ["memd", "hook-prompt", "hook-stop"] {
        assert!(bin.join(exe).exists(), "{exe} not installed");
        assert_eq!(mode(&bin.join(exe)), 0o755);
    }
    let settings = read_json(&user.home().join(".claude/settings.json"));
    let cmd = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(cmd, bin.join("hook-prompt").display().to_string());

    // First prompt: nothing runs yet, so the hook starts the installed memd and stays silent.
    let port = free_port();
    let _stop = Detached(user.data_dir());
    let prompt = r#"{"session_id":"s1","transcript_path":"/nonexistent","cwd":"/tmp","hook_event_name":"UserPromptSubmit","prompt":"how do I run the tests?"}"#;
    let first = run_hook(&user, &bin.join("hook-prompt"), port, prompt);
    assert!(
        first.status.success(),
        "hook failed: {}",
        text(&first.stderr)
    );
    let (announced, _) = wait_for_daemon(&user.data_dir(), Duration::from_secs(20), || true);
    assert_eq!(announced, port);

    // Second prompt reaches the daemon, which records the hook call.
    let timed = Instant::now();
    let second = run_hook(&user, &bin.join("hook-prompt"), port, prompt);
    eprintln!(
        "second hook run: {:.1} ms",
        timed.elapsed().as_secs_f64() * 1000.0
    );
    assert!(second.status.success());
    let token = user.token();
    let mut r = agent()
        .get(&format!("http://127.0.0.1:{port}/api/stats"))
        .header("authorization", &format!("Bearer {token}"))
        .call()
        .expect("stats");
    let stats: serde_json::Value = r.body_mut().read_json().expect("stats json");
    let endpoints: Vec<&str> = stats["recent_hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["endpoint"].as_str())
        .collect();
    assert!(endpoints.contains(&"/api/hooks/get-context"), "{stats}");

    // Re-running the installer is safe and init reports nothing to change.
    let mut again = install_command(&user, &prefix, &repo);
    let out = again.output().expect("re-run install.sh");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Nothing to change"),
        "{}",
        text(&out.stdout)
    );
}
