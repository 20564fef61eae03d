//! The daemon's log: levels from `MEMD_LOG`, the file in the data dir, no secrets.

use tests::{Daemon, Spec};

fn daemon_with_log(filter: &str) -> Daemon {
    let spec = Spec {
        env: vec![("MEMD_LOG".into(), filter.into())],
        ..Spec::new()
    };
    Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn debug_logs_one_line_per_request_without_the_token() {
    let d = daemon_with_log("debug");
    let _: proto::StatsResponse = d.get("/api/stats");
    let (status, _) = d.get_raw("/api/nothing-here", true);
    assert_eq!(status, 404);
    let log = d.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("finished processing request") && l.contains("status=404")),
        "no request line at debug:\n{log}"
    );
    assert!(!log.contains(&d.token), "the token reached the log");
}

#[test]
fn info_is_the_default_and_quiet_about_requests() {
    let d = daemon_with_log("");
    let _: proto::StatsResponse = d.get("/api/stats");
    let log = d.log_text();
    assert!(log.contains("INFO"), "{log}");
    assert!(log.contains("listening on 127.0.0.1"), "{log}");
    assert!(!log.contains("finished processing request"), "{log}");
}

#[test]
fn the_daemon_writes_its_own_log_file_when_stderr_is_elsewhere() {
    let d = daemon_with_log("info");
    let file = d.data_dir().join("logs/daemon.log");
    // The daemon writes its start-up lines before it announces itself; the kit waited for that.
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        text.contains("listening on 127.0.0.1"),
        "{} holds: {text}",
        file.display()
    );
    // The kit's stderr file has the same lines: one copy each, not two in one file.
    assert_eq!(text.matches("listening on").count(), 1, "{text}");
}
