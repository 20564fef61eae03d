//! Killing a server the kit started together with every process it forked, and waiting until
//! none of them is left.
//!
//! Owns the one SIGKILL that tests use to crash a server (PostgreSQL, memd). Why more than
//! `Child::kill`: PostgreSQL's backends call `setsid()`, so neither the postmaster's pid nor
//! its process group reaches them, and a backend that outlives its killed postmaster still
//! holds the cluster's shared memory: a restart on a busy machine then refuses to start
//! ("pre-existing shared memory block … is still in use"). Must never signal a process that is
//! not a descendant of the child it is given, and never return while one of those still runs.
//! Linux only (reads `/proc`).

use std::collections::BTreeSet;
use std::process::Child;
use std::time::{Duration, Instant};

/// How long the processes may take to die after SIGKILL; the kernel usually needs
/// milliseconds, a machine under heavy load seconds.
const GONE_LIMIT: Duration = Duration::from_secs(30);

/// Freezes `child` (SIGSTOP: it can fork no more), SIGKILLs it and every descendant, reaps it,
/// and waits until none of them is alive (gone or a zombie: a zombie holds no memory, files or
/// locks). Errors when one outlives [`GONE_LIMIT`].
pub fn kill_tree(child: &mut Child) -> Result<(), String> {
    let root = child.id() as libc::pid_t;
    // SAFETY: signalling a child this process spawned and has not reaped, so the pid is ours.
    unsafe { libc::kill(root, libc::SIGSTOP) };
    let mut tree = descendants(root);
    for &pid in &tree {
        // Freeze the rest too, so none forks between the scan and the kill.
        // SAFETY: pids found as descendants of our own child just now.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
    }
    // Anything forked before the freezes took effect is found by a second scan.
    tree.extend(descendants(root));
    for &pid in &tree {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    child.kill().ok();
    child.wait().ok();
    let started = Instant::now();
    loop {
        let alive: Vec<libc::pid_t> = tree.iter().copied().filter(|&p| is_alive(p)).collect();
        if alive.is_empty() {
            return Ok(());
        }
        if started.elapsed() > GONE_LIMIT {
            return Err(format!(
                "processes {alive:?} outlived SIGKILL by {GONE_LIMIT:?}"
            ));
        }
        // Another process's exit (not our child's) has nothing to wait on: poll.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every live process below `root`, found through the parent pid in `/proc/<pid>/stat`.
fn descendants(root: libc::pid_t) -> BTreeSet<libc::pid_t> {
    let parents: Vec<(libc::pid_t, libc::pid_t)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?.1)))
        .collect();
    let mut found = BTreeSet::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &parents {
            if ppid == parent && found.insert(pid) {
                frontier.push(pid);
            }
        }
    }
    found
}

/// (state, parent pid) of a process, from `/proc/<pid>/stat` (the command name in parentheses
/// may itself hold spaces or parentheses: fields are read after the last `)`).
fn stat(pid: libc::pid_t) -> Option<(char, libc::pid_t)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Alive: it exists and is neither a zombie (`Z`) nor dead (`X`), or its main thread is a
/// zombie while another thread is still exiting (the process keeps its files and shared memory
/// until the last one has).
fn is_alive(pid: libc::pid_t) -> bool {
    stat(pid).is_some_and(|(state, _)| {
        !matches!(state, 'Z' | 'X')
            || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) > 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A grandchild in a session of its own (as PostgreSQL's backends are) dies with the tree.
    #[test]
    fn a_grandchild_in_its_own_session_dies_with_its_parent() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let script = format!(
            "setsid sleep 300 & echo $! > {}.tmp && mv {0}.tmp {0}; wait",
            pid_file.display()
        );
        let mut child = Command::new("sh").arg("-c").arg(&script).spawn().unwrap();
        let started = Instant::now();
        let grandchild: libc::pid_t = loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file) {
                break text.trim().parse().unwrap();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no grandchild");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(is_alive(grandchild));
        kill_tree(&mut child).unwrap();
        assert!(!is_alive(grandchild), "the grandchild survived");
    }
}
