//! The hooks' structured failure log: one JSON line per failure in `<data dir>/logs/hooks.log`.
//!
//! Fields: `ts`, `hook`, `event`, `kind`, `message`. The file is rotated to `hooks.log.1` once it
//! reaches 1 MiB. A hook may run before memd ever did, so the data dir and `logs/` it creates
//! are 0700 and the log 0600, as the daemon makes them (Windows: no mode bits; they inherit the
//! data dir's ACL, see `proto::paths::create_private_dir`). This module must never record prompt or
//! response text (callers pass only error descriptions), and a failure to log is itself
//! ignored: logging never fails a hook.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Size at which `hooks.log` is moved to `hooks.log.1`.
pub const ROTATE_BYTES: u64 = 1024 * 1024;
/// Log file name inside the log directory.
pub const LOG_FILE: &str = "hooks.log";
/// Messages are cut to this many characters; they describe errors, not content.
const MAX_MESSAGE_CHARS: usize = 500;

static HOOK: OnceLock<&'static str> = OnceLock::new();
static EVENT: Mutex<String> = Mutex::new(String::new());

/// Names the hook binary for every later log line (first call wins).
pub fn init(hook: &'static str) {
    let _ = HOOK.set(hook);
}

/// Records which client event this run is handling (`UserPromptSubmit`, `beforeSubmitPrompt`, ...).
pub fn set_event(event: &str) {
    let mut current = EVENT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    current.clear();
    current.push_str(truncate_chars(event, 64));
}

/// Appends one failure line to the hook log, if a data directory is known.
pub fn failure(kind: &str, message: &str) {
    if let Some(dir) = proto::paths::log_dir() {
        let _ = append_line(&dir, &failure_line(kind, message));
    }
}

/// The JSON line for one failure, without the trailing newline.
pub fn failure_line(kind: &str, message: &str) -> String {
    let event = EVENT
        .lock()
        .map(|e| e.clone())
        .unwrap_or_else(|poisoned| poisoned.into_inner().clone());
    let line = serde_json::json!({
        "ts": crate::clock::now_rfc3339(),
        "hook": HOOK.get().copied().unwrap_or("hook"),
        "event": if event.is_empty() { "unknown".to_string() } else { event },
        "kind": kind,
        "message": truncate_chars(message, MAX_MESSAGE_CHARS),
    });
    line.to_string()
}

/// Writes `line` to `<dir>/hooks.log`, rotating first when the file is full.
pub fn append_line(dir: &Path, line: &str) -> std::io::Result<()> {
    proto::paths::create_private_dir(dir)?;
    let path = dir.join(LOG_FILE);
    rotate_if_full(&path)?;
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&path)?;
    // One write call per line so concurrent hooks appending with O_APPEND do not interleave.
    file.write_all(format!("{line}\n").as_bytes())
}

fn rotate_if_full(path: &Path) -> std::io::Result<()> {
    match fs::metadata(path) {
        Ok(meta) if meta.len() >= ROTATE_BYTES => fs::rename(path, rotated_path(path)),
        _ => Ok(()),
    }
}

fn rotated_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// The longest prefix of `text` with at most `max` characters.
pub fn truncate_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((byte, _)) => &text[..byte],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_the_five_fields() {
        init("hook-test");
        set_event("UserPromptSubmit");
        let line: serde_json::Value =
            serde_json::from_str(&failure_line("timeout", "memd did not answer")).unwrap();
        assert_eq!(line["hook"], "hook-test");
        assert_eq!(line["event"], "UserPromptSubmit");
        assert_eq!(line["kind"], "timeout");
        assert_eq!(line["message"], "memd did not answer");
        assert!(line["ts"].as_str().unwrap().ends_with('Z'));
        assert_eq!(line.as_object().unwrap().len(), 5);
    }

    #[test]
    fn rotates_at_one_mebibyte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        fs::write(&path, vec![b'x'; ROTATE_BYTES as usize]).unwrap();
        append_line(dir.path(), "{\"kind\":\"new\"}").unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "{\"kind\":\"new\"}\n",
            "a full log starts over"
        );
        let old = fs::metadata(dir.path().join("hooks.log.1")).unwrap();
        assert_eq!(old.len(), ROTATE_BYTES);
    }

    #[test]
    fn small_log_is_appended_not_rotated() {
        let dir = tempfile::tempdir().unwrap();
        append_line(dir.path(), "a").unwrap();
        append_line(dir.path(), "b").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(LOG_FILE)).unwrap(),
            "a\nb\n"
        );
        assert!(!dir.path().join("hooks.log.1").exists());
    }

    #[test]
    fn truncates_on_char_boundary() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("hi", 10), "hi");
    }
}
