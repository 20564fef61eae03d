//! Path reasoning for the rules: resolving a target the way the kernel will see it (`..`, `//`,
//! `~`, `$HOME`, a known working directory), and the fixed lists of places that matter:
//! top-level system directories, block devices, secret files.
//!
//! Must never touch the file system (no canonicalize, no globbing): everything here is string
//! arithmetic on what the command says, so a symlink or a variable it cannot see stays unknown.

/// Stands for the user's home directory: `~` resolves to `/home/<this>`, so that `~/..` is
/// `/home` and `~/../..` is `/`, as on a real system.
const HOME_USER: &str = "\u{1}you";

/// Top-level directories whose recursive removal wrecks the system (Linux and macOS).
const SYSTEM_DIRS: &[&str] = &[
    "usr",
    "etc",
    "bin",
    "boot",
    "home",
    "var",
    "lib",
    "opt",
    "root",
    "sys",
    "dev",
    "proc",
    "srv",
    "sbin",
    "lib64",
    "lib32",
    "libx32",
    "Users",
    "System",
    "Library",
    "Applications",
    "Volumes",
    "private",
];

/// Second-level directories whose recursive removal wrecks the system as surely as a top-level
/// one: the programs, libraries and package state (`/var/lib/apt/lists/*` is not among them).
const SYSTEM_TREES: &[(&str, &str)] = &[
    ("usr", "bin"),
    ("usr", "sbin"),
    ("usr", "lib"),
    ("usr", "lib32"),
    ("usr", "lib64"),
    ("usr", "libexec"),
    ("usr", "include"),
    ("usr", "share"),
    ("var", "lib"),
    ("var", "db"),
    ("boot", "efi"),
];

/// `target` as path components, or `None` when it is relative and the directory it is relative
/// to is unknown. `cwd` is what an earlier `cd` in the same command line established.
pub(crate) fn resolve(target: &str, cwd: Option<&[String]>) -> Option<Vec<String>> {
    let (mut comps, rest): (Vec<String>, &str) = if let Some(rest) = home_prefix(target) {
        (home(), rest)
    } else if let Some(after) = target.strip_prefix('~') {
        // `~alice/x`: another user's home.
        let (user, rest) = after.split_once('/').unwrap_or((after, ""));
        let base = if user == "root" {
            vec!["root".into()]
        } else {
            vec!["home".into(), user.into()]
        };
        (base, rest)
    } else if target.starts_with('/') {
        (Vec::new(), target)
    } else {
        (cwd?.to_vec(), target)
    };
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                comps.pop();
            }
            p => comps.push(p.to_string()),
        }
    }
    Some(comps)
}

fn home() -> Vec<String> {
    vec!["home".into(), HOME_USER.into()]
}

/// What follows a leading `~`, `$HOME` or `${HOME…}` (`"$HOME"/` arrives here as `$HOME/`).
fn home_prefix(t: &str) -> Option<&str> {
    if t == "~" {
        return Some("");
    }
    if let Some(rest) = t.strip_prefix("~/") {
        return Some(rest);
    }
    if let Some(rest) = t.strip_prefix("$HOME")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return Some(rest);
    }
    if let Some(rest) = t.strip_prefix("${HOME") {
        // `${HOME}`, `${HOME:-/x}`, `${HOME:?}`, `${HOME%/}`: all of them name the home.
        if matches!(
            rest.as_bytes().first(),
            Some(b'}' | b':' | b'%' | b'#' | b'-' | b'?' | b'=' | b'+')
        ) {
            let close = rest.find('}')?;
            return Some(&rest[close + 1..]);
        }
    }
    None
}

fn is_glob(c: &str) -> bool {
    c.contains(['*', '?', '['])
}

/// A glob component that matches (nearly) every entry: `*`, `.*`, `*.*`, `.[!.]*`.
fn matches_everything(c: &str) -> bool {
    is_glob(c) && !c.bytes().any(|b| b.is_ascii_alphanumeric())
}

fn describe_exact(comps: &[String]) -> Option<String> {
    match comps {
        [] => Some("the root directory".into()),
        [h, u] if h == "home" && u == HOME_USER => Some("the home directory".into()),
        [h, u] if (h == "home" || h == "Users") && !is_glob(u) => {
            Some(format!("the home directory /{h}/{u}"))
        }
        [d] if SYSTEM_DIRS.iter().any(|s| s.eq_ignore_ascii_case(d)) => {
            Some(format!("the system directory /{d}"))
        }
        [a, b] if SYSTEM_TREES.iter().any(|(x, y)| x == a && y == b) => {
            Some(format!("the system directory /{a}/{b}"))
        }
        _ => None,
    }
}

/// Why deleting everything under `comps` would be catastrophic, as a noun phrase ("the home
/// directory"), or `None` when it is an ordinary place.
pub(crate) fn catastrophic(comps: &[String]) -> Option<String> {
    if let Some(d) = describe_exact(comps) {
        return Some(d);
    }
    let first_glob = comps.iter().position(|c| is_glob(c))?;
    let (prefix, globs) = comps.split_at(first_glob);
    if globs.iter().all(|g| matches_everything(g)) {
        let place = describe_exact(prefix)?;
        return Some(format!("everything in {place}"));
    }
    // `/u*`, `/[eu]*c`: a glob at the top level that names a system directory.
    if prefix.is_empty() && globs.len() == 1 {
        let g = &globs[0];
        if SYSTEM_DIRS
            .iter()
            .any(|d| glob_match(g.as_bytes(), d.as_bytes()))
        {
            return Some(format!("the system directories matching /{g}"));
        }
    }
    None
}

/// Shell pattern matching (`*`, `?`, `[…]`, `[!…]`) in linear space and O(p·n) time.
pub(crate) fn glob_match(p: &[u8], n: &[u8]) -> bool {
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class_match(p, pi, n[ni]) {
                        if hit {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == b'[' {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi.min(p.len())..].iter().all(|&c| c == b'*')
}

/// Whether `c` is in the bracket class starting at `p[at]`, and where the class ends; `None`
/// when the bracket is not closed (then it is a literal `[`).
fn class_match(p: &[u8], at: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&e| e != b']') {
            hit |= p[i] <= c && c <= p[i + 2];
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    None
}

/// Whether `path` is a disk (or partition) device, whose overwriting destroys a file system.
/// Loop devices and `/dev/null`-like files are not disks.
pub(crate) fn block_device(path: &str) -> bool {
    let Some(comps) = (path.starts_with('/'))
        .then(|| resolve(path, None))
        .flatten()
    else {
        return false;
    };
    let [dev, name, rest @ ..] = comps.as_slice() else {
        return false;
    };
    if dev != "dev" {
        return false;
    }
    const DISKS: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "md", "dm-",
    ];
    DISKS.iter().any(|d| name.starts_with(d))
        || name == "root"
        || (name == "mapper" && !rest.is_empty() && rest[0] != "control")
}

/// A private key or secrets file, described ("an SSH private key"), by name alone.
pub(crate) fn secret_file(path: &str) -> Option<&'static str> {
    let p = path.trim().replace('\\', "/").to_ascii_lowercase();
    let p = p.trim_end_matches('/');
    let mut parts = p.rsplit('/');
    let base = parts.next().unwrap_or(p);
    let parent = parts.next().unwrap_or("");
    const ENV_EXAMPLES: &[&str] = &["example", "sample", "template"];
    const KEY_NAMES: &[&str] = &[
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "id_ecdsa_sk",
        "id_ed25519_sk",
    ];
    if base == ".env" {
        return Some("an environment secrets file");
    }
    if let Some(rest) = base.strip_prefix(".env.") {
        return (!ENV_EXAMPLES.contains(&rest)).then_some("an environment secrets file");
    }
    if base.starts_with("id_")
        && !base.ends_with(".pub")
        && (parent == ".ssh" || KEY_NAMES.contains(&base))
    {
        return Some("an SSH private key");
    }
    let ext = base.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "pem" => return Some("a PEM key file"),
        "key" => return Some("a private key file"),
        "p12" | "pfx" => return Some("a certificate key store"),
        "kdbx" => return Some("a KeePass password database"),
        _ => {}
    }
    match base {
        ".netrc" | "_netrc" => Some("a .netrc login file"),
        ".pgpass" => Some("a PostgreSQL password file"),
        ".git-credentials" => Some("stored git credentials"),
        "credentials" if parent == ".aws" => Some("AWS credentials"),
        "config.json" if parent == ".docker" => Some("Docker registry credentials"),
        _ => None,
    }
}

/// A directory of secrets, which `tar`, `scp -r` or `rsync` can send whole.
fn secret_dir(path: &str) -> Option<&'static str> {
    let p = path.trim_end_matches('/');
    let mut parts = p.rsplit('/');
    let base = parts.next().unwrap_or(p);
    let parent = parts.next().unwrap_or("");
    match base {
        ".ssh" => Some("the SSH key directory"),
        ".gnupg" => Some("the GnuPG key directory"),
        ".aws" => Some("the AWS credentials directory"),
        b if parent == ".ssh" && is_glob(b) => Some("the SSH key directory"),
        _ => None,
    }
}

/// `host:path`, `user@host:path`: a file on another machine (scp, rsync, rclone).
pub(crate) fn is_remote_spec(arg: &str) -> bool {
    if arg.starts_with("rsync://") {
        return true;
    }
    let Some((host, _)) = arg.split_once(':') else {
        return false;
    };
    host.len() > 1 && !host.contains(['/', '=', '@']) || host.contains('@') && !host.contains('/')
}

/// The secret a word names, if any: the word itself, or the file after `@` (`-d @.env`,
/// `-F f=@key.pem;type=…`) or after `=` (`--post-file=.env`). URLs and remote paths are not
/// local secrets.
pub(crate) fn secret_mention(word: &str) -> Option<(&'static str, String)> {
    // The file part first, so the reason names `.env` rather than `file=@.env`.
    let mut candidates = Vec::with_capacity(3);
    if let Some((_, after)) = word.rsplit_once('@') {
        candidates.push(after);
    }
    if let Some((_, after)) = word.split_once('=') {
        candidates.push(after);
    }
    candidates.push(word);
    for c in candidates {
        let c = c.split(';').next().unwrap_or(c).trim();
        if c.is_empty() || c.contains("://") || is_remote_spec(c) {
            continue;
        }
        if let Some(what) = secret_file(c).or_else(|| secret_dir(c)) {
            return Some((what, c.to_string()));
        }
    }
    None
}

/// Files whose loss or truncation leaves the system unable to boot or log anyone in.
const CRITICAL_ETC: &[&str] = &[
    "passwd",
    "shadow",
    "group",
    "gshadow",
    "sudoers",
    "fstab",
    "crypttab",
    "hosts",
    "hostname",
    "resolv.conf",
    "nsswitch.conf",
    "ld.so.conf",
    "ld.so.preload",
    "ld.so.cache",
    "inittab",
    "login.defs",
    "machine-id",
];

/// A system file that must not be moved, removed or overwritten, described; absolute paths
/// only (`./etc/passwd` in a project is not the system's).
pub(crate) fn system_file(path: &str) -> Option<String> {
    let comps = path
        .starts_with('/')
        .then(|| resolve(path, None))
        .flatten()?;
    let c: Vec<&str> = comps.iter().map(String::as_str).collect();
    let hit = match c.as_slice() {
        ["etc", f] => CRITICAL_ETC.contains(f),
        ["etc", "pam.d" | "sudoers.d", _] | ["etc", "ssh", "sshd_config"] => true,
        ["boot", _, ..] => true,
        ["bin" | "sbin" | "lib" | "lib64" | "lib32", f] => !is_glob(f),
        [
            "usr",
            "bin" | "sbin" | "lib" | "lib64" | "lib32" | "libexec",
            f,
        ] => !is_glob(f),
        _ => false,
    };
    hit.then(|| format!("the system file /{}", c.join("/")))
}

/// A file in a system tree (`/etc`, `/boot`, `/usr`, the top-level binaries and libraries,
/// `/var/lib`): truncating one destroys what the system keeps there.
pub(crate) fn in_system_tree(path: &str) -> bool {
    let Some(comps) = path.starts_with('/').then(|| resolve(path, None)).flatten() else {
        return false;
    };
    let c: Vec<&str> = comps.iter().map(String::as_str).collect();
    matches!(
        c.as_slice(),
        [
            "etc" | "boot" | "usr" | "bin" | "sbin" | "lib" | "lib64" | "lib32",
            _,
            ..
        ] | ["var", "lib", _, ..]
    )
}

/// `/` or the user's own home directory, the two places nothing may be emptied into.
pub(crate) fn is_root_or_home(comps: &[String]) -> bool {
    comps.is_empty() || (comps.len() == 2 && comps[0] == "home" && comps[1] == HOME_USER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what(target: &str) -> Option<String> {
        catastrophic(&resolve(target, None)?)
    }

    #[test]
    fn targets_resolve_like_the_kernel_sees_them() {
        for t in [
            "/",
            "//",
            "/./",
            "/tmp/../",
            "/usr/..",
            "~/../..",
            "/../../..",
        ] {
            assert_eq!(what(t).as_deref(), Some("the root directory"), "{t}");
        }
        for t in [
            "~",
            "~/",
            "$HOME",
            "${HOME}",
            "$HOME/",
            "${HOME:-/x}",
            "~/.",
            "~/x/..",
        ] {
            assert_eq!(what(t).as_deref(), Some("the home directory"), "{t}");
        }
        assert_eq!(what("~/..").as_deref(), Some("the system directory /home"));
        assert_eq!(what("/usr/").as_deref(), Some("the system directory /usr"));
        assert_eq!(
            what("/etc/*").as_deref(),
            Some("everything in the system directory /etc")
        );
        assert_eq!(
            what("~/.[!.]*").as_deref(),
            Some("everything in the home directory")
        );
        assert_eq!(
            what("/[ub]*").as_deref(),
            Some("the system directories matching /[ub]*")
        );
        for t in [
            "/tmp/x",
            "/tmp/*",
            "~/project",
            "$HOME/.cache",
            "/usr/local/lib",
            "/*.log",
            "/etc/*.bak",
        ] {
            assert_eq!(what(t), None, "{t}");
        }
        assert_eq!(resolve("target", None), None);
        let root: Vec<String> = Vec::new();
        assert_eq!(resolve("usr", Some(&root)), Some(vec!["usr".to_string()]));
    }

    #[test]
    fn globs_match_like_the_shell() {
        let m = |p: &str, n: &str| glob_match(p.as_bytes(), n.as_bytes());
        assert!(m("*", "usr") && m("u*", "usr") && m("?s?", "usr") && m("[a-v]sr", "usr"));
        assert!(m("[!x]*", "usr") && m("*r", "usr") && m("u*s*r", "usr") && m("[", "["));
        assert!(!m("x*", "usr") && !m("[!u]*", "usr") && !m("??", "usr") && !m("*.log", "usr"));
    }

    #[test]
    fn devices_and_secrets_by_name() {
        for d in [
            "/dev/sda",
            "/dev/nvme0n1p2",
            "/dev/mapper/vg-root",
            "/dev/disk2",
            "//dev/./sdb",
            "/dev/mmcblk0",
        ] {
            assert!(block_device(d), "{d}");
        }
        for d in [
            "/dev/null",
            "/dev/loop0",
            "/dev/stdout",
            "/dev/shm/x",
            "./dev/sda",
            "/dev/mapper/control",
        ] {
            assert!(!block_device(d), "{d}");
        }
        assert_eq!(secret_file("~/.ssh/id_ecdsa"), Some("an SSH private key"));
        assert_eq!(secret_file("~/.ssh/id_ecdsa.pub"), None);
        assert_eq!(secret_file(".env.example"), None);
        assert_eq!(
            secret_mention("file=@secrets/.env;type=text/plain").map(|m| m.1),
            Some("secrets/.env".into())
        );
        assert_eq!(secret_mention("host:.env"), None);
        assert_eq!(secret_mention("https://example.com/.env"), None);
    }
}
