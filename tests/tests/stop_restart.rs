//! `memd stop` and `memd restart` against the real daemon (issue 23, CLI): a graceful stop that
//! the health check then refuses, data intact after a restart, a new healthy pid on each
//! restart, "not running" (exit 0) when nothing runs, and a daemon that does not stop in time
//! reported, then killed with `--force`.

use proto::paths::DaemonInfo;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Output;
use tests::Daemon;

const FACT: &str = "The staging database of the billing service listens on port 5433";

/// `memd <args>` with the daemon's environment; `MEMD_PORT=0` so a daemon `memd restart` starts
/// takes a free port (and a stopped one is looked for nowhere but in `daemon.json`).
fn memd(d: &Daemon, args: &[&str]) -> Output {
    tests::project::memd_in(d, d.root())
        .env("MEMD_PORT", "0")
        .args(args)
        .output()
        .expect("run memd")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn announced(data_dir: &Path) -> Option<DaemonInfo> {
    let text = std::fs::read_to_string(data_dir.join(proto::paths::DAEMON_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The daemons `memd restart` starts are nobody's children here: SIGKILLed when a test ends
/// early, so none outlives it.
struct Detached(PathBuf);

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(info) = announced(&self.0) {
            // SAFETY: the pid this test's own data dir announced.
            unsafe { libc::kill(info.pid as i32, libc::SIGKILL) };
        }
    }
}

/// Points `d` at the daemon `memd restart` started (same data dir, hence the same token).
fn follow(d: &mut Daemon) -> DaemonInfo {
    let info = announced(&d.data_dir()).expect("the restarted daemon announced itself");
    d.port = info.port;
    info
}

fn fact_is_there(d: &Daemon) -> bool {
    let found: proto::SearchResponse = d.post(
        "/api/search",
        &json!({"query": "billing staging database port", "limit": 5}),
    );
    found.results.iter().any(|m| m.content == FACT)
}

#[test]
fn stop_is_graceful_restart_brings_the_data_back_and_nothing_running_is_fine() {
    let mut d = tests::start_daemon();
    let _cleanup = Detached(d.data_dir());
    let _: proto::MemoryBankResponse = d.post("/api/memory-bank/add", &json!({"content": FACT}));
    let first = d.pid().expect("running");

    let out = memd(&d, &["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("stopped memd (pid {first})")),
        "{}",
        text(&out)
    );
    // Gone when `memd stop` returns: the exit was clean (SIGTERM, flushed, snapshot saved), the
    // port refuses, and the announcement is withdrawn.
    let status = d.child.as_mut().unwrap().try_wait().unwrap();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    d.child = None;
    assert_eq!(d.get_raw("/api/health", false).0, 0, "health refused");
    assert!(announced(&d.data_dir()).is_none());
    assert!(d.log_text().lines().any(|l| l.ends_with(" stopped")));

    let out = memd(&d, &["stop"]);
    assert!(out.status.success(), "nothing to stop is not an error");
    assert!(text(&out).contains("memd is not running"), "{}", text(&out));

    // Restart from nothing: a new daemon on the same data.
    let out = memd(&d, &["restart"]);
    assert!(out.status.success(), "{}", text(&out));
    let second = follow(&mut d);
    assert_ne!(second.pid, first);
    assert!(
        text(&out).contains(&format!("memd running (pid {}", second.pid)),
        "{}",
        text(&out)
    );
    assert!(
        fact_is_there(&d),
        "the stored fact survived stop and restart"
    );

    // Restart of a running daemon: stopped, and a new one healthy with the same data.
    let out = memd(&d, &["restart"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("stopped memd (pid {})", second.pid)),
        "{}",
        text(&out)
    );
    let third = follow(&mut d);
    assert_ne!(third.pid, second.pid);
    let health: proto::HealthResponse = d.get("/api/health");
    assert_eq!(health.pid, third.pid);
    assert!(fact_is_there(&d));

    let out = memd(&d, &["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(d.get_raw("/api/health", false).0, 0);
    assert!(announced(&d.data_dir()).is_none());
}

#[test]
fn a_daemon_that_does_not_stop_in_time_is_reported_then_killed_with_force() {
    let mut d = tests::start_daemon();
    let _: proto::MemoryBankResponse = d.post("/api/memory-bank/add", &json!({"content": FACT}));
    let pid = d.pid().expect("running") as i32;
    // Frozen: it neither answers nor acts on SIGTERM until it is let go.
    // SAFETY: the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);

    let out = memd(&d, &["stop", "--timeout", "1"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("does not answer"), "{said}");
    assert!(said.contains("still shutting down after 1 s"), "{said}");
    assert!(said.contains("memd stop --force"), "{said}");
    assert!(
        d.child.as_mut().unwrap().try_wait().unwrap().is_none(),
        "still there"
    );

    let out = memd(&d, &["stop", "--timeout", "1", "--force"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "memd (pid {pid}) had not stopped within 1 s; killed it"
        )),
        "{}",
        text(&out)
    );
    let status = d.child.as_mut().unwrap().try_wait().unwrap();
    assert!(status.is_some_and(|s| !s.success()), "killed: {status:?}");
    d.child = None;
    assert!(
        announced(&d.data_dir()).is_none(),
        "the killed daemon's announcement is withdrawn"
    );
    // The acknowledged write survived the kill.
    d.spawn(&[]);
    assert!(fact_is_there(&d));
}

#[test]
fn bad_timeouts_are_refused_with_the_limit() {
    let d = tests::start_daemon();
    let out = memd(&d, &["stop", "--timeout", "3601"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--timeout"), "{}", text(&out));
    assert!(text(&out).contains("0..=3600"), "{}", text(&out));
    let health: proto::HealthResponse = d.get("/api/health");
    assert_eq!(Some(health.pid), d.pid(), "left running");
}
