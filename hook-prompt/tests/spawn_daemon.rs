//! hook-prompt starting memd when nothing listens: detached, not waited for, not repeated.
#![cfg(target_os = "linux")]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::hook::{Sandbox, event_fixture};
use support::server::closed_port;

/// A stand-in `memd`: records its arguments, pid and process group, then stays alive holding
/// whatever stdout/stderr it inherited (a hook that kept them would hang the test's read).
const FAKE_MEMD: &str = r#"#!/bin/sh
PATH=/usr/bin:/bin
read -r _ _ _ _ pgid _ < /proc/$$/stat
echo "$* pid=$$ pgid=$pgid" >> "$MEMD_DATA_DIR/fake-memd.log"
exec sleep 30
"#;

/// Held by each test for its whole run: copying an executable while another thread forks can
/// leave the copy's write descriptor open in the child, and exec then fails with ETXTBSY.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A copy of the hook binary in a temp dir, optionally with the fake memd next to it.
fn hook_copy(with_memd: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook-prompt");
    std::fs::copy(env!("CARGO_BIN_EXE_hook-prompt"), &hook).unwrap();
    if with_memd {
        let memd = dir.path().join("memd");
        std::fs::write(&memd, FAKE_MEMD).unwrap();
        std::fs::set_permissions(&memd, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, hook)
}

/// Waits (bounded) for the fake memd to record its start; `None` if it never does.
fn wait_for_start(data: &Path, within: Duration) -> Option<String> {
    let log = data.join("fake-memd.log");
    let start = Instant::now();
    while start.elapsed() < within {
        if let Ok(text) = std::fs::read_to_string(&log)
            && text.ends_with('\n')
        {
            return Some(text);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

#[test]
fn starts_memd_detached_once_per_cooldown() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_bin_dir, hook) = hook_copy(true);
    let mut sandbox = Sandbox::new(None);
    sandbox.set("MEMD_PORT", &closed_port().to_string());
    // An empty PATH dir: only the memd next to the hook can be found.
    let empty = tempfile::tempdir().unwrap();
    sandbox.set("PATH", &empty.path().display().to_string());

    let first = sandbox.run(&hook, &[], &event_fixture("claude_user_prompt_submit.json"));
    first.assert_silent();
    // The fake memd sleeps 30 s holding its stdio: the hook returned without waiting for it.
    assert!(
        first.elapsed < Duration::from_secs(5),
        "{:?}",
        first.elapsed
    );

    let started = wait_for_start(sandbox.dir(), Duration::from_secs(10)).expect("memd was started");
    let pid: i32 = field(&started, "pid").unwrap().parse().unwrap();
    let pgid: i32 = field(&started, "pgid").unwrap().parse().unwrap();
    assert!(started.starts_with("serve "), "{started}");
    assert_eq!(pgid, pid, "memd runs in its own process group");

    let second = sandbox.run(&hook, &[], &event_fixture("claude_user_prompt_submit.json"));
    second.assert_silent();

    // SAFETY: plain kill(2) of the process this test started, by its pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };

    let lines = sandbox.log_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["kind"], "unreachable");
    assert!(
        lines[0]["message"].as_str().unwrap().contains("started"),
        "{lines:?}"
    );
    assert!(
        lines[1]["message"].as_str().unwrap().contains("skipped"),
        "{lines:?}"
    );
    assert!(sandbox.dir().join("spawn.stamp").exists());
}

#[test]
fn missing_memd_is_logged() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_bin_dir, hook) = hook_copy(false);
    let mut sandbox = Sandbox::new(None);
    sandbox.set("MEMD_PORT", &closed_port().to_string());
    let empty = tempfile::tempdir().unwrap();
    sandbox.set("PATH", &empty.path().display().to_string());
    sandbox
        .run(&hook, &[], &event_fixture("claude_user_prompt_submit.json"))
        .assert_silent();
    let lines = sandbox.log_lines();
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0]["message"].as_str().unwrap().contains("no memd"),
        "{lines:?}"
    );
}

#[test]
fn a_hook_run_before_memd_creates_the_data_dir_private() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_bin_dir, hook) = hook_copy(false);
    let mut sandbox = Sandbox::new(None);
    sandbox.set("MEMD_PORT", &closed_port().to_string());
    let empty = tempfile::tempdir().unwrap();
    sandbox.set("PATH", &empty.path().display().to_string());
    let data = sandbox.dir().join("share/memd");
    sandbox.set("MEMD_DATA_DIR", &data.display().to_string());
    sandbox
        .run(&hook, &[], &event_fixture("claude_user_prompt_submit.json"))
        .assert_silent();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in [sandbox.dir().join("share"), data.clone(), data.join("logs")] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode(&data.join("logs/hooks.log")), 0o600);
}
