//! Starting `memd serve` when nothing answers, and waiting until it does.
//!
//! The daemon is started detached: its own process group, stdin/stdout on /dev/null, stderr
//! appended to `<data dir>/logs/daemon.log` when that directory exists, cwd `/`. The only
//! directory a client creates is a hook's data dir for its start stamp, private (0700) as the
//! daemon would make it. memd's data-dir lock guarantees
//! one daemon whoever starts it. Must never wait past the caller's limit and never let the
//! daemon inherit the caller's stdio (it outlives the caller).

use crate::call::Client;
use crate::location::Location;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// File in the data dir whose mtime records the last start attempt by a hook.
pub const STAMP_FILE: &str = "spawn.stamp";
/// Hooks make no second start attempt within this window.
pub const SPAWN_COOLDOWN: Duration = Duration::from_secs(10);
/// After the started process exits (usually: it lost the lock race to another daemon that is
/// still starting), keep looking for whichever daemon answers this long before giving up.
const EXITED_GRACE: Duration = Duration::from_secs(3);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// `memd`, `memd.exe` on Windows.
const MEMD_EXE: &str = if cfg!(windows) { "memd.exe" } else { "memd" };

/// What an attempt to start memd did.
#[derive(Debug, PartialEq, Eq)]
pub enum SpawnOutcome {
    Started {
        pid: u32,
        exe: PathBuf,
    },
    /// A start happened less than [`SPAWN_COOLDOWN`] ago.
    RecentlyStarted,
    NotFound,
    Failed(String),
}

impl SpawnOutcome {
    /// A one-line description for a log.
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

/// Starts `memd serve` detached unless a start happened within the cooldown; never waits.
/// This is what a hook does: the current turn goes on without memd, the next one finds it.
pub fn start_unless_recent(location: &Location) -> SpawnOutcome {
    let stamp = location.data_dir.join(STAMP_FILE);
    if started_recently(&stamp, SystemTime::now()) {
        return SpawnOutcome::RecentlyStarted;
    }
    let Some(exe) = find_memd() else {
        return SpawnOutcome::NotFound;
    };
    // Stamp before spawning so concurrent hooks see it as early as possible.
    if let Err(e) = create_private_dir(&location.data_dir).and_then(|_| std::fs::write(&stamp, b""))
    {
        return SpawnOutcome::Failed(format!("cannot write {}: {e}", stamp.display()));
    }
    match spawn_detached(&exe, location) {
        // Dropping the Child neither waits nor kills: the caller exits soon and init adopts memd.
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

/// Creates `dir` (and missing parents) readable by this user only, as the daemon would: a
/// directory made with the umask's permissions could be group-writable, and memd refuses to
/// start in one. (Windows: see [`proto::paths::create_private_dir`].)
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    proto::paths::create_private_dir(dir)
}

/// The daemon's log grows while it runs (it writes there itself when started by a client);
/// past this size it is set aside as `daemon.log.1` before the next start.
const LOG_ROTATE_BYTES: u64 = 8 * 1024 * 1024;

/// Starts `exe serve` detached for `location` and returns the child (not waited for).
pub fn spawn_detached(exe: &Path, location: &Location) -> std::io::Result<Child> {
    let mut command = Command::new(exe);
    command
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .current_dir("/");
    // Only into an existing logs dir: creating the data dir here would bypass the daemon's own
    // private (0700) creation of it.
    let log = location.daemon_log();
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        std::fs::rename(&log, log.with_extension("log.1")).ok();
    }
    match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&log)
    {
        Ok(log) => command.stderr(log),
        Err(_) => command.stderr(Stdio::null()),
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a Ctrl-C or group kill aimed at the caller does not reach memd.
        command.process_group(0);
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        // The same on Windows: its own process group (no Ctrl-C from the caller's console) and
        // no console of its own. Not exercised yet: memd itself does not build for Windows.
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        const DETACHED_PROCESS: u32 = 0x0000_0008;
        command.creation_flags(CREATE_NEW_PROCESS_GROUP | DETACHED_PROCESS);
    }
    command.spawn()
}

/// Waits until a daemon for `client`'s location announces itself and answers `/api/health`.
/// Any daemon will do (a hook may have started one at the same moment).
pub fn wait_ready(client: &mut Client, child: &mut Child, limit: Duration) -> Result<(), String> {
    let started = Instant::now();
    let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
    let mut delay = Duration::from_millis(10);
    loop {
        client.refresh();
        if client.location.daemon_info().is_some() && client.health(HEALTH_TIMEOUT).is_ok() {
            return Ok(());
        }
        if exited.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            exited = Some((status, Instant::now()));
        }
        let log = client.location.daemon_log();
        if let Some((status, at)) = exited
            && at.elapsed() >= EXITED_GRACE
        {
            return Err(format!(
                "`memd serve` exited during start-up ({status}); see {} or run `memd serve` to see why",
                log.display()
            ));
        }
        if started.elapsed() >= limit {
            return Err(format!(
                "memd did not answer within {} s after starting (pid {}); see {}",
                limit.as_secs(),
                child.id(),
                log.display()
            ));
        }
        // Polling a condition with a bounded, growing interval: start-up takes 0.1-1 s.
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(100));
    }
}

/// `memd` next to the running executable (the hooks and memd are installed side by side; for
/// memd itself this is its own path), else the first executable `memd` on `PATH`.
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

    #[cfg(unix)]
    #[test]
    fn a_directory_made_for_the_stamp_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/memd");
        create_private_dir(&data).unwrap();
        let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

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
