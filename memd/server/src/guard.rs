//! Who may talk to memd: the per-user token, Host and Origin checks.
//!
//! Owns the API token file (32 random bytes, hex, mode 0600 or on Windows an owner-only DACL,
//! created at first start) and the
//! checks every request passes before routing. Must never log or echo the token, and never
//! reveal why authentication failed beyond "unauthorized".

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

#[cfg(windows)]
#[path = "guard_windows.rs"]
mod windows_acl;

/// Loads the token, creating it (0600; on Windows an owner-only, non-inherited DACL) on first
/// start. On Windows a token written before memd set that DACL gets it now.
pub fn load_or_create_token(path: &Path) -> Result<String> {
    if let Ok(t) = std::fs::read_to_string(path) {
        let t = t.trim().to_string();
        if t.len() >= 32 {
            #[cfg(windows)]
            if !matches!(windows_acl::is_owner_only(path), Ok(true)) {
                windows_acl::restrict_to_owner(path)
                    .with_context(|| format!("cannot make {} private", path.display()))?;
            }
            return Ok(t);
        }
    }
    let bytes: [u8; 32] = rand::random();
    let token = hex::encode(bytes);
    let tmp = path.with_extension("tmp");
    let mut f = open_private(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    // The DACL is set before the secret is written; the rename keeps it.
    #[cfg(windows)]
    windows_acl::restrict_to_owner(&tmp)
        .with_context(|| format!("cannot make {} private", tmp.display()))?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

/// Whether only this user may read the token: on Windows its DACL is the owner-only one memd
/// sets, elsewhere its mode has no group or other bits. `None` when it cannot be read.
pub fn token_is_private(path: &Path) -> Option<bool> {
    #[cfg(windows)]
    return windows_acl::is_owner_only(path).ok();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        Some(mode & 0o077 == 0)
    }
    #[cfg(not(any(unix, windows)))]
    None
}

/// Constant-time comparison of the presented bearer token with ours.
pub fn token_ok(header: Option<&str>, token: &str) -> bool {
    let Some(presented) = header.and_then(|h| {
        h.strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
    }) else {
        return false;
    };
    same_secret(presented.trim(), token)
}

/// Constant-time equality of two secrets (their length is not secret).
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Host` must name the loopback interface or `own` (the dashboard's host name, which only this
/// user's programs know): the DNS-rebinding defence. A missing Host (HTTP/1.0 clients) is
/// accepted: the socket itself is loopback-only.
pub fn host_ok(host: Option<&str>, own: &str) -> bool {
    let Some(host) = host else { return true };
    loopback_authority(host) || host_name(host).eq_ignore_ascii_case(own)
}

/// `Origin`, when a browser sends one, must be a loopback page or `own` too (CSRF defence).
pub fn origin_ok(origin: Option<&str>, own: &str) -> bool {
    let Some(origin) = origin else { return true };
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    host_ok(Some(rest.trim_end_matches('/')), own)
}

fn loopback_authority(authority: &str) -> bool {
    matches!(
        host_name(authority).to_ascii_lowercase().as_str(),
        "127.0.0.1" | "localhost" | "::1"
    )
}

/// The host part of an authority (`name:port`, `[v6]:port` or a bare name).
pub fn host_name(authority: &str) -> &str {
    if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                authority
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_created_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        let t1 = load_or_create_token(&p).unwrap();
        let t2 = load_or_create_token(&p).unwrap();
        assert_eq!(t1, t2);
        assert_eq!(t1.len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
    }

    #[test]
    fn bearer_check() {
        assert!(token_ok(Some("Bearer abc"), "abc"));
        assert!(!token_ok(Some("Bearer abd"), "abc"));
        assert!(!token_ok(Some("abc"), "abc"));
        assert!(!token_ok(None, "abc"));
        assert!(!token_ok(Some("Bearer "), "abc"));
    }

    #[test]
    fn host_and_origin() {
        let own = "memd-0123.localhost";
        for ok in [
            "127.0.0.1:47111",
            "localhost",
            "LOCALHOST:1",
            "[::1]:47111",
            "memd-0123.localhost:47111",
        ] {
            assert!(host_ok(Some(ok), own), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:47111",
            "127.0.0.1.evil.com",
            "10.0.0.1:47111",
            "evil.localhost:47111",
            "memd-0123.localhost.evil.com",
        ] {
            assert!(!host_ok(Some(bad), own), "{bad}");
        }
        assert!(origin_ok(None, own));
        assert!(origin_ok(Some("http://localhost:3000"), own));
        assert!(origin_ok(Some("http://memd-0123.localhost:47111"), own));
        assert!(!origin_ok(Some("https://evil.com"), own));
        assert!(!origin_ok(Some("null"), own));
    }
}
