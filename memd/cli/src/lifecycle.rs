//! `memd stop` and `memd restart`: ending this data dir's daemon gracefully, and starting it
//! again.
//!
//! Owns deciding which process is this data dir's daemon (the pid `/api/health` reports or,
//! when nothing answers, the pid `daemon.json` announced; either only when `daemon.json` names
//! it and, where the OS tells, the process is a `memd serve`), the graceful stop (SIGTERM: the
//! daemon finishes the requests in flight, flushes and saves its snapshot) under a deadline,
//! and SIGKILL only when asked (`--force`). `memd service` and `memd uninstall --purge` stop
//! the daemon through here too. Must never signal a process that is not this data dir's memd,
//! and never report a daemon stopped while its process still runs (it would still hold the
//! data-dir lock and the port, and a start would fail).

use crate::client::{self, Client};
use anyhow::{Result, bail};
use memd_engine::config::Config;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long a graceful stop may take unless told otherwise: the service unit's `TimeoutStopSec`
/// (the daemon waits for requests in flight, then up to 10 s for background work, then saves).
pub const STOP_WAIT: Duration = Duration::from_secs(30);
/// How long a killed daemon may take to disappear (the kernel usually needs milliseconds).
const KILL_WAIT: Duration = Duration::from_secs(10);
/// The longest `--timeout` accepted.
pub const TIMEOUT_MAX_SECS: u64 = 3600;

/// `memd stop` / `memd restart` options.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct StopArgs {
    /// Seconds to wait for the daemon to finish its requests and save (0-3600).
    #[arg(long, value_name = "SECS", default_value_t = STOP_WAIT.as_secs(),
        value_parser = clap::value_parser!(u64).range(0..=TIMEOUT_MAX_SECS))]
    pub timeout: u64,
    /// Kill it (SIGKILL) when it has not stopped within --timeout. What it acknowledged is in
    /// its write-ahead log and survives; the next start replays it.
    #[arg(long)]
    pub force: bool,
}

impl Default for StopArgs {
    fn default() -> StopArgs {
        StopArgs {
            timeout: STOP_WAIT.as_secs(),
            force: false,
        }
    }
}

/// What a stop came to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// No daemon of this data dir runs.
    NotRunning { port: u16 },
    /// It exited on SIGTERM within the wait.
    Stopped { pid: u32, after: Duration },
    /// It had not exited within the wait and was killed (`--force`).
    Killed { pid: u32 },
}

/// `memd stop`.
pub fn run_stop(args: StopArgs) -> Result<ExitCode> {
    let cfg = Config::load(None)?;
    let stopped = stop(&cfg, args)?;
    println!("{}", describe(&stopped, args));
    if !matches!(stopped, Outcome::NotRunning { .. }) {
        println!("The hooks start memd again on the next prompt; `memd restart` starts it now.");
    }
    Ok(ExitCode::SUCCESS)
}

/// `memd restart` when no service manager runs memd (that case is `service::restart_managed`):
/// a stop as `memd stop` does, then a detached start, waited for until it answers.
pub fn run_restart(cfg: &Config, args: StopArgs) -> Result<ExitCode> {
    let stopped = stop(cfg, args)?;
    println!("{}", describe(&stopped, args));
    let started = client::start(cfg)?;
    let h = started.health()?;
    println!("memd running (pid {}, 127.0.0.1:{})", h.pid, h.port);
    Ok(ExitCode::SUCCESS)
}

fn describe(stopped: &Outcome, args: StopArgs) -> String {
    match stopped {
        Outcome::NotRunning { port } => {
            format!("memd is not running (nothing answers on 127.0.0.1:{port})")
        }
        Outcome::Stopped { pid, after } => {
            format!("stopped memd (pid {pid}) in {:.1} s", after.as_secs_f64())
        }
        Outcome::Killed { pid } => format!(
            "memd (pid {pid}) had not stopped within {} s; killed it (--force). What it \
             acknowledged is in its write-ahead log; the next start replays it",
            args.timeout
        ),
    }
}

/// The old `stop the daemon if one runs` of `memd service install` and `memd uninstall
/// --purge`: graceful, [`STOP_WAIT`], never forced. Its pid when one was stopped.
pub fn stop_daemon(cfg: &Config) -> Result<Option<u32>> {
    Ok(match stop(cfg, StopArgs::default())? {
        Outcome::NotRunning { .. } => None,
        Outcome::Stopped { pid, .. } | Outcome::Killed { pid } => Some(pid),
    })
}

/// SIGTERM to this data dir's daemon and a wait until its process is gone; SIGKILL after
/// `args.timeout` with `args.force`, else an error that says what to do.
pub fn stop(cfg: &Config, args: StopArgs) -> Result<Outcome> {
    let client = Client::new(cfg);
    let Some(pid) = find(cfg, &client)? else {
        return Ok(Outcome::NotRunning { port: client.port });
    };
    let wait = Duration::from_secs(args.timeout);
    let started = Instant::now();
    signal(pid, Signal::Term)?;
    if wait_gone(pid, wait) {
        return Ok(Outcome::Stopped {
            pid,
            after: started.elapsed(),
        });
    }
    if !args.force {
        bail!(
            "memd (pid {pid}) is still shutting down after {} s (it finishes the requests in \
             flight and saves its snapshot first); wait and run `memd stop` again, or run \
             `memd stop --force` to kill it (what it acknowledged survives in its write-ahead log)",
            args.timeout
        );
    }
    signal(pid, Signal::Kill)?;
    if !wait_gone(pid, KILL_WAIT) {
        bail!(
            "memd (pid {pid}) is still there {} s after SIGKILL",
            KILL_WAIT.as_secs()
        );
    }
    // A killed daemon leaves its announcement behind, and clients would try its port first.
    if client::daemon_info(&cfg.data_dir).is_some_and(|i| i.pid == pid) {
        std::fs::remove_file(cfg.data_dir.join(proto::paths::DAEMON_FILE)).ok();
    }
    Ok(Outcome::Killed { pid })
}

/// The pid of this data dir's daemon: the one that answers, else (hung, or busy past the
/// health timeout) the one `daemon.json` announced if it still runs. `None`: nothing runs.
fn find(cfg: &Config, client: &Client) -> Result<Option<u32>> {
    if let Ok(health) = client.health() {
        check_pid_is_our_daemon(cfg, health.pid)?;
        return Ok(Some(health.pid));
    }
    let Some(info) = client::daemon_info(&cfg.data_dir) else {
        return Ok(None);
    };
    if !process_alive(info.pid) || !is_memd_serve(info.pid).unwrap_or(true) {
        // A crashed daemon's announcement (its pid gone or taken by another program).
        return Ok(None);
    }
    eprintln!(
        "memd: the daemon (pid {}) does not answer on 127.0.0.1:{}; stopping it anyway",
        info.pid, info.port
    );
    Ok(Some(info.pid))
}

/// Refuses to signal a pid unless the daemon that owns this data dir announced it in
/// `daemon.json` (written after it took the data-dir lock) and, where the OS tells, the process
/// is a `memd serve`: whatever answers on the port does not get to choose which process we stop.
fn check_pid_is_our_daemon(cfg: &Config, pid: u32) -> Result<()> {
    let announced = client::daemon_info(&cfg.data_dir).map(|i| i.pid);
    if announced != Some(pid) {
        bail!(
            "the daemon answering on port {} reports pid {pid}, but {} names {}; not signalling it",
            cfg.port,
            cfg.data_dir.join(proto::paths::DAEMON_FILE).display(),
            announced.map_or("no pid".to_string(), |p| format!("pid {p}"))
        );
    }
    if is_memd_serve(pid) == Some(false) {
        bail!("pid {pid} is not a `memd serve`; not signalling it");
    }
    Ok(())
}

/// Whether the process runs `memd serve` (its name is memd and its first argument `serve`), as
/// `/proc` tells; `None` where there is no `/proc` (macOS, Windows).
fn is_memd_serve(pid: u32) -> Option<bool> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let first_arg = cmdline.split(|&b| b == 0).nth(1).unwrap_or_default();
    Some(comm.trim().starts_with("memd") && first_arg == b"serve")
}

/// Polls until the process is gone, up to `limit`; true when it is.
fn wait_gone(pid: u32, limit: Duration) -> bool {
    let started = Instant::now();
    let mut delay = Duration::from_millis(5);
    loop {
        if !process_alive(pid) {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        // Another process's exit has no event to wait on here (it is not our child): poll, at
        // a growing interval, under the deadline.
        std::thread::sleep(delay.min(limit.saturating_sub(started.elapsed())));
        delay = (delay * 2).min(Duration::from_millis(100));
    }
}

/// True while a process with this pid exists and has not exited: a zombie (exited, not yet
/// reaped by its parent: a daemon started by a process that is still running) holds no lock
/// and no port, so it counts as gone, once all its threads have exited.
pub fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(raw) = i32::try_from(pid) else {
            return false;
        };
        // Reap it if it is our exited child.
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG on a pid only inspects process state.
        unsafe { libc::waitpid(raw, &mut status, libc::WNOHANG) };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the command name, which is in parentheses and may hold either.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            // The main thread turns zombie first; while another thread is still exiting, the
            // process keeps its files (the data-dir lock) and its port.
            return !state.starts_with(['Z', 'X']) || threads(pid) > 1;
        }
        // SAFETY: signal 0 performs only the existence and permission check.
        unsafe { libc::kill(raw, 0) == 0 }
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
        use windows_sys::Win32::System::Threading::{
            GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
        };
        // SAFETY: the handle OpenProcess returns is checked, used once and closed.
        unsafe {
            let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if handle.is_null() {
                return false;
            }
            let mut code = 0u32;
            let read = GetExitCodeProcess(handle, &mut code) != 0;
            CloseHandle(handle);
            read && code == STILL_ACTIVE as u32
        }
    }
}

/// The threads `/proc` lists for the process (a zombie main thread included); 0 when gone.
#[cfg(unix)]
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |dir| dir.count())
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    /// The daemon finishes its requests and saves its derived files.
    Term,
    Kill,
}

#[cfg(unix)]
fn signal(pid: u32, which: Signal) -> Result<()> {
    let Ok(raw) = i32::try_from(pid) else {
        bail!("implausible daemon pid {pid}")
    };
    let number = match which {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: a pid checked to be this data dir's daemon.
    if unsafe { libc::kill(raw, number) } != 0 {
        let error = std::io::Error::last_os_error();
        // Gone between the check and the signal: what was asked for.
        if error.raw_os_error() == Some(libc::ESRCH) {
            return Ok(());
        }
        bail!("cannot stop memd (pid {pid}): {error}");
    }
    Ok(())
}

/// A detached daemon has no console to send Ctrl-Break to, so Windows ends it outright. Nothing
/// acknowledged is lost (every write is on disk before it is acknowledged); what a graceful stop
/// would have saved (the late-interaction token states) is computed again at the next start.
#[cfg(windows)]
fn signal(pid: u32, _which: Signal) -> Result<()> {
    use windows_sys::Win32::Foundation::CloseHandle;
    use windows_sys::Win32::System::Threading::{OpenProcess, PROCESS_TERMINATE, TerminateProcess};
    // SAFETY: the handle OpenProcess returns is checked, used once and closed.
    let ended = unsafe {
        let handle = OpenProcess(PROCESS_TERMINATE, 0, pid);
        !handle.is_null() && {
            let ended = TerminateProcess(handle, 1) != 0;
            CloseHandle(handle);
            ended
        }
    };
    if !ended {
        bail!(
            "cannot stop memd (pid {pid}): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(dir: &std::path::Path) -> Config {
        Config::for_dir(dir, 47_999)
    }

    /// Issue 12 (seed 002 F5.2): a process answering on memd's port names a pid; only the pid
    /// the data dir's own daemon announced may be signalled.
    #[test]
    fn a_pid_the_data_dir_did_not_announce_is_not_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config_in(dir.path());
        let err = check_pid_is_our_daemon(&cfg, 4242).unwrap_err().to_string();
        assert!(err.contains("names no pid"), "{err}");
        std::fs::write(
            dir.path().join(proto::paths::DAEMON_FILE),
            r#"{"port": 47999, "pid": 4243, "version": "0"}"#,
        )
        .unwrap();
        let err = check_pid_is_our_daemon(&cfg, 4242).unwrap_err().to_string();
        assert!(err.contains("names pid 4243"), "{err}");
    }

    /// A pid announced by a crashed daemon and since taken by another program is not memd's.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_that_is_not_memd_serve_is_not_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config_in(dir.path());
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = other.id();
        std::fs::write(
            dir.path().join(proto::paths::DAEMON_FILE),
            format!(r#"{{"port": 47999, "pid": {pid}, "version": "0"}}"#),
        )
        .unwrap();
        let err = check_pid_is_our_daemon(&cfg, pid).unwrap_err().to_string();
        assert!(err.contains("not a `memd serve`"), "{err}");
        // Nothing answers on the port: the announcement is a crashed daemon's, not a target.
        let client = Client::new(&cfg);
        assert_eq!(find(&cfg, &client).unwrap(), None);
        assert!(process_alive(pid), "left alone");
        other.kill().unwrap();
        other.wait().unwrap();
    }

    /// An exited process its parent has not reaped yet (a child of a Python that never
    /// waits) holds no lock and no port: gone, although signal 0 still finds it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_zombie_counts_as_gone() {
        use std::io::BufRead;
        let script = "import os, time\n\
                      pid = os.fork()\n\
                      if pid == 0: os._exit(0)\n\
                      print(pid, flush=True)\n\
                      time.sleep(30)\n";
        let Ok(mut parent) = std::process::Command::new("python3")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            return eprintln!("SKIPPED: no python3 to make a zombie with");
        };
        let mut line = String::new();
        std::io::BufReader::new(parent.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid: u32 = line.trim().parse().unwrap();
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next()
        };
        let started = Instant::now();
        while state() != Some('Z') {
            assert!(started.elapsed() < Duration::from_secs(30), "never exited");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: signal 0 only checks existence: a zombie still exists.
        assert_eq!(unsafe { libc::kill(pid as i32, 0) }, 0);
        assert!(!process_alive(pid));
        parent.kill().unwrap();
        parent.wait().unwrap();
    }

    /// A process whose main thread has exited while another still runs is not gone: it keeps
    /// its files. (What a daemon looks like for a moment while it exits on a busy machine; here
    /// made to last with Python's `pthread_exit` on the main thread.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_zombie_main_thread_with_a_live_thread_is_still_alive() {
        let script = "import ctypes, threading, time\n\
                      threading.Thread(target=time.sleep, args=(30,)).start()\n\
                      ctypes.CDLL(None).pthread_exit(None)\n";
        let Ok(mut child) = std::process::Command::new("python3")
            .args(["-c", script])
            .spawn()
        else {
            return eprintln!("SKIPPED: no python3 to make a half-exited process with");
        };
        let pid = child.id();
        let leader_zombie = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        };
        let started = Instant::now();
        while !leader_zombie() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "main thread never exited"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(process_alive(pid), "a thread still runs");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
