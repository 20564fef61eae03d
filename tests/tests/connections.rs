//! Connection floods: silent and half-sent connections must neither lock other callers out,
//! stay open past the idle timeout, nor fill the daemon's log (memd/server/src/http/listener.rs).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tests::{Daemon, Spec};

/// Idle timeout the daemons here run with (`MEMD_HTTP_IDLE_SECS`), short for test speed.
const IDLE_SECS: u64 = 2;
/// More than the daemon's connection cap (512).
const FLOOD: usize = 600;
/// How long a health check may take while the flood holds its connections.
const PROMPT: Duration = Duration::from_secs(3);

/// The test opens hundreds of sockets itself: lift its own soft limit to the hard one.
fn raise_own_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max.min(65_536);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
    }
    assert!(
        lim.rlim_cur as usize > FLOOD + 200,
        "the test needs more than {FLOOD} open files; the limit is {}",
        lim.rlim_cur
    );
}

fn daemon(memd: &Path) -> Daemon {
    let spec = Spec {
        env: vec![("MEMD_HTTP_IDLE_SECS".into(), IDLE_SECS.to_string())],
        ..Spec::with_memd(memd.to_path_buf())
    };
    Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"))
}

/// `count` connections that send nothing (even ones) or half a request header (odd ones).
fn flood(port: u16, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|i| {
            let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), PROMPT)
                .unwrap_or_else(|e| panic!("connection {i} of {count} not accepted: {e}"));
            if i % 2 == 1 {
                s.write_all(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                    .expect("half a header");
            }
            s
        })
        .collect()
}

/// A health check on a fresh connection with its own deadline; its latency.
fn health_within(port: u16, limit: Duration) -> Duration {
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), limit)
        .expect("connect for the health check");
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_write_timeout(Some(limit)).unwrap();
    write!(
        s,
        "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the health check");
    let mut answer = String::new();
    let read = s.read_to_string(&mut answer);
    let took = start.elapsed();
    assert!(
        read.is_ok() && answer.starts_with("HTTP/1.1 200"),
        "health check while flooded: {read:?} after {took:?}: {answer:.200}"
    );
    assert!(took < limit, "health check took {took:?}");
    took
}

/// True when the daemon closed `s` (EOF or reset) before `deadline`.
fn closed_by(s: &mut TcpStream, deadline: Instant) -> bool {
    let mut buf = [0u8; 512];
    loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            // A 408 or similar before the close is fine; keep reading to the end.
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

fn log_bytes(d: &Daemon) -> u64 {
    let file = d.data_dir().join("logs").join("daemon.log");
    [d.log.as_path(), file.as_path()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn silent_connections_neither_lock_callers_out_nor_stay_open() {
    raise_own_fd_limit();
    let d = daemon(&tests::bin("memd"));
    let started = Instant::now();
    let mut idle = flood(d.port, FLOOD);
    let took = health_within(d.port, PROMPT);
    eprintln!("{FLOOD} idle connections; health answered in {took:?}");
    // Each was silent from the start: closed once the idle timeout passed (evicted ones at once).
    let deadline = started + Duration::from_secs(IDLE_SECS + 5);
    let open = idle
        .iter_mut()
        .map(|s| closed_by(s, deadline))
        .filter(|closed| !closed)
        .count();
    eprintln!(
        "all closed after {:?} (idle timeout {IDLE_SECS} s)",
        started.elapsed()
    );
    assert_eq!(open, 0, "connections still open past the idle timeout");
    health_within(d.port, PROMPT);
}

/// The daemon under a flood larger than its open-file limit (here 256, forced by a wrapper):
/// it keeps answering, and does not write a log line per failed `accept`.
#[test]
fn a_flood_beyond_the_open_file_limit_is_survived_quietly() {
    raise_own_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("memd");
    let memd = tests::bin("memd");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nulimit -n 256\nexec '{}' \"$@\"\n",
            memd.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    let d = daemon(&wrapper);
    let before = log_bytes(&d);
    let _idle = flood(d.port, FLOOD);
    // Keep calling for a few seconds while the flood holds: every call must answer promptly.
    let until = Instant::now() + Duration::from_secs(3);
    let mut slowest = Duration::ZERO;
    while Instant::now() < until {
        slowest = slowest.max(health_within(d.port, PROMPT));
    }
    let grew = log_bytes(&d) - before;
    eprintln!("flood of {FLOOD} at 256 open files: slowest health {slowest:?}, log +{grew} B");
    assert!(
        grew < 16 * 1024,
        "the log grew {grew} bytes during the flood:\n{}",
        d.log_tail()
    );
}
