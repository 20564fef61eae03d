//! Starting memd when a hook finds nothing listening.
//!
//! `memd serve` is looked up next to the hook binary first, then on `PATH`, and started detached:
//! its own process group, stdin/stdout/stderr on /dev/null, cwd `/`. The hook never waits for it
//! (memd is ready by the next turn) and keeps no handle, so once the hook exits the orphan is
//! reaped by init. memd's lock file guarantees a single daemon; `<data dir>/spawn.stamp` keeps
//! hooks from starting it more than once per 10 s. This module must never block on the child.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// File in the data dir whose mtime records the last start attempt.
pub const STAMP_FILE: &str = "spawn.stamp";
/// No second start attempt within this window.
pub const SPAWN_COOLDOWN: Duration = Duration::from_secs(10);
/// Name of the daemon executable.
const MEMD_EXE: &str = "memd";

/// What an attempt to start memd did.
#[derive(Debug, PartialEq, Eq)]
pub enum SpawnOutcome {
    Started {
        pid: u32,
        exe: PathBuf,
    },
    /// Another hook started it less than [`SPAWN_COOLDOWN`] ago.
    RecentlyStarted,
    NotFound,
    Failed(String),
}

impl SpawnOutcome {
    /// A one-line description for the hook log.
    pub fn describe(&self) -> String {
        match self {
            SpawnOutcome::Started { pid, exe } => {
                format!("started `{} serve` (pid {pid})", exe.display())
            }
            SpawnOutcome::RecentlyStarted => "start skipped: started less than 10 s ago".into(),
            SpawnOutcome::NotFound => "start failed: no memd next to the hook or on PATH".into(),
            SpawnOutcome::Failed(e) => format!("start failed: {e}"),
        }
    }
}

/// Starts `memd serve` detached unless a start happened within the cooldown.
pub fn start_memd_detached(data_dir: &Path) -> SpawnOutcome {
    let stamp = data_dir.join(STAMP_FILE);
    if started_recently(&stamp, SystemTime::now()) {
        return SpawnOutcome::RecentlyStarted;
    }
    let Some(exe) = find_memd() else {
        return SpawnOutcome::NotFound;
    };
    // Stamp before spawning so concurrent hooks see it as early as possible.
    if let Err(e) = std::fs::create_dir_all(data_dir).and_then(|_| std::fs::write(&stamp, b"")) {
        return SpawnOutcome::Failed(format!("cannot write {}: {e}", stamp.display()));
    }
    match detached_command(&exe).spawn() {
        // Dropping the Child neither waits nor kills: the hook exits soon and init adopts memd.
        Ok(child) => SpawnOutcome::Started {
            pid: child.id(),
            exe,
        },
        Err(e) => SpawnOutcome::Failed(format!("{}: {e}", exe.display())),
    }
}

/// True when `stamp` was touched less than [`SPAWN_COOLDOWN`] before `now`.
pub fn started_recently(stamp: &Path, now: SystemTime) -> bool {
    let Ok(modified) = std::fs::metadata(stamp).and_then(|m| m.modified()) else {
        return false;
    };
    match now.duration_since(modified) {
        Ok(age) => age < SPAWN_COOLDOWN,
        // A stamp from the future (clock change) must not block starts forever.
        Err(_) => false,
    }
}

fn detached_command(exe: &Path) -> Command {
    let mut command = Command::new(exe);
    command
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .current_dir("/");
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a Ctrl-C or group kill aimed at the client does not reach memd.
        command.process_group(0);
    }
    command
}

/// `memd` next to the running hook binary, else the first executable `memd` on `PATH`.
pub fn find_memd() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(MEMD_EXE)));
    if let Some(path) = beside.filter(|p| is_executable(p)) {
        return Some(path);
    }
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(MEMD_EXE))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_age_decides_the_cooldown() {
        let dir = tempfile::tempdir().unwrap();
        let stamp = dir.path().join(STAMP_FILE);
        assert!(!started_recently(&stamp, SystemTime::now()), "no stamp yet");
        std::fs::write(&stamp, b"").unwrap();
        let touched = std::fs::metadata(&stamp).unwrap().modified().unwrap();
        assert!(started_recently(&stamp, touched + Duration::from_secs(9)));
        assert!(!started_recently(&stamp, touched + Duration::from_secs(11)));
        assert!(!started_recently(&stamp, touched - Duration::from_secs(60)));
    }
}
