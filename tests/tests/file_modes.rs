//! What the daemon does with a data dir and token others can read, left by a hook that ran
//! before memd ever did or by an older memd: it narrows them (0700 / 0600), keeps the token,
//! and says so in its log.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tests::{Daemon, Spec};

fn set_mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

#[test]
fn daemon_narrows_an_open_data_dir_and_token_and_says_so() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    set_mode(&data, 0o755);
    let token = "ab".repeat(32);
    std::fs::write(data.join("token"), &token).expect("token");
    set_mode(&data.join("token"), 0o644);

    let spec = Spec {
        root: Some(root.path().to_path_buf()),
        ..Spec::new()
    };
    let d = Daemon::start(spec).unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(mode(&data), 0o700, "the data dir is narrowed");
    assert_eq!(mode(&data.join("token")), 0o600, "the token is narrowed");
    assert_eq!(d.token, token, "the existing token is kept");
    let log = d.log_text();
    let warned = |what: &str, to: &str| {
        log.lines()
            .any(|l| l.contains("WARN") && l.contains(what) && l.contains(to))
    };
    assert!(warned("data dir", "changed it to 700"), "{log}");
    assert!(warned("token file", "changed it to 600"), "{log}");
}
