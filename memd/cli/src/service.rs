//! `memd service install|uninstall|status`: keep the daemon running per user.
//!
//! Owns the systemd user unit (Linux, `~/.config/systemd/user/memd.service`) and the launchd
//! agent (macOS, `~/Library/LaunchAgents/dev.memd.plist`), rendered from the templates in
//! `install/`. Where no user service manager is reachable (containers, SSH sessions without
//! a user bus) it says so and succeeds: the hooks start memd on demand. A daemon started by
//! hand is stopped as `memd stop` does (`lifecycle`) before the service takes over, and `memd
//! restart` goes through the manager when it runs memd. Must never write a secret into a unit
//! file (only MEMD_* paths, port and mode are carried over).

use super::client::{self, Client};
use super::files;
use anyhow::{Context, Result, bail};
use memd_engine::config::Config;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const UNIT_TEMPLATE: &str = include_str!("../../../install/memd.service.in");
const PLIST_TEMPLATE: &str = include_str!("../../../install/dev.memd.plist.in");
const UNIT_NAME: &str = "memd.service";
const AGENT_LABEL: &str = "dev.memd";

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    Install,
    Uninstall,
    Status,
}

pub fn run(action: Action, dry_run: bool, json: bool) -> Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the memd executable")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    if cfg!(target_os = "macos") {
        launchd(action, &exe, dry_run, json)
    } else if cfg!(target_os = "linux") {
        systemd(action, &exe, dry_run, json)
    } else if cfg!(windows) {
        // No Task Scheduler entry: the hooks start `memd serve` when they find it down.
        bail!(
            "memd service has no Windows form: hook-prompt starts `memd serve` when it finds memd down; to start it yourself, run `memd serve`"
        )
    } else {
        bail!(
            "memd service supports Linux (systemd) and macOS (launchd); elsewhere run `memd serve` yourself"
        )
    }
}

/// MEMD_* settings worth carrying into the service: paths, port, dev mode. Never keys.
pub fn service_env() -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, v)| {
            let carried = k == "MEMD_PORT"
                || k == "MEMD_DEV"
                || ["_DIR", "_LIB", "_FILE", "_PATH"]
                    .iter()
                    .any(|s| k.ends_with(s));
            k.starts_with("MEMD_") && carried && !v.trim().is_empty()
        })
        .collect();
    vars.sort();
    vars
}

// ---- systemd ----

fn systemd_escape(s: &str) -> String {
    s.replace('%', "%%")
}

fn systemd_quote(s: &str) -> String {
    let s = systemd_escape(s).replace('$', "$$");
    if s.chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s
    }
}

/// The unit file for `exe` with `env` carried over.
pub fn render_unit(exe: &Path, env: &[(String, String)]) -> String {
    let env_lines: Vec<String> = env
        .iter()
        .map(|(k, v)| {
            format!(
                "Environment=\"{}={}\"",
                k,
                systemd_escape(v).replace('\\', "\\\\").replace('"', "\\\"")
            )
        })
        .collect();
    UNIT_TEMPLATE
        .replace("@EXEC@", &systemd_quote(&exe.to_string_lossy()))
        .replace("@ENVIRONMENT@", &env_lines.join("\n"))
}

fn unit_path() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => home()?.join(".config"),
    };
    Ok(base.join("systemd/user").join(UNIT_NAME))
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")
}

/// Runs a command, returning (success, stdout + stderr trimmed). A missing program is an Err.
fn run_cmd(program: &str, args: &[&str]) -> std::io::Result<(bool, String)> {
    let out = Command::new(program).args(args).output()?;
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !err.is_empty() {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(&err);
    }
    Ok((out.status.success(), text))
}

fn systemctl(args: &[&str]) -> Result<(bool, String)> {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    run_cmd("systemctl", &all).context("cannot run systemctl")
}

/// Why `systemctl --user` cannot be used here, or `None` when it can.
fn systemd_unavailable() -> Option<String> {
    match run_cmd("systemctl", &["--user", "show-environment"]) {
        Err(_) => Some("systemctl is not installed".into()),
        Ok((true, _)) => None,
        Ok((false, why)) => Some(if why.is_empty() {
            "no systemd user session".into()
        } else {
            why
        }),
    }
}

fn print_on_demand_note(why: &str) {
    println!("systemd user services are not available here ({why}).");
    println!("Nothing was installed. memd works without a service: the hooks start it on demand,");
    println!("or run `memd serve` yourself (e.g. from your shell profile).");
}

fn systemd(action: Action, exe: &Path, dry_run: bool, json: bool) -> Result<ExitCode> {
    let path = unit_path()?;
    match action {
        Action::Install => {
            let unit = render_unit(exe, &service_env());
            if dry_run {
                println!("# would write {}:\n{unit}", path.display());
                println!(
                    "# then: systemctl --user daemon-reload && systemctl --user enable memd.service && systemctl --user restart memd.service"
                );
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(why) = systemd_unavailable() {
                print_on_demand_note(&why);
                return Ok(ExitCode::SUCCESS);
            }
            files::write_atomic(&path, unit.as_bytes(), 0o644)?;
            println!("wrote {}", path.display());
            check(systemctl(&["daemon-reload"])?, "daemon-reload")?;
            let (active, _) = systemctl(&["is-active", "--quiet", UNIT_NAME])?;
            let cfg = Config::load(None)?;
            if !active && let Some(pid) = super::lifecycle::stop_daemon(&cfg)? {
                println!(
                    "stopped the memd started outside the service (pid {pid}) so the service can own it"
                );
            }
            check(systemctl(&["enable", UNIT_NAME])?, "enable")?;
            check(systemctl(&["restart", UNIT_NAME])?, "restart")?;
            wait_for_service(&cfg, "journalctl --user -u memd")
        }
        Action::Uninstall => {
            if dry_run {
                println!("would run: systemctl --user disable --now memd.service");
                println!(
                    "would remove {} (if present) and run systemctl --user daemon-reload",
                    path.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let available = systemd_unavailable().is_none();
            if available {
                // Fails harmlessly when the unit was never loaded.
                let _ = systemctl(&["disable", "--now", UNIT_NAME])?;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => println!("removed {}", path.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    println!("no memd unit installed ({})", path.display())
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot remove {}", path.display()));
                }
            }
            if available {
                let _ = systemctl(&["daemon-reload"])?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Status => {
            let installed = path.exists();
            let why = systemd_unavailable();
            let (enabled, active) = match &why {
                None => (
                    systemctl(&["is-enabled", UNIT_NAME])
                        .map(|r| r.1)
                        .unwrap_or_default(),
                    systemctl(&["is-active", UNIT_NAME])
                        .map(|r| r.1)
                        .unwrap_or_default(),
                ),
                Some(_) => (String::new(), String::new()),
            };
            if json {
                let v = serde_json::json!({
                    "manager": "systemd", "unit": path, "installed": installed,
                    "available": why.is_none(), "unavailable_reason": why,
                    "enabled": enabled, "active": active,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "unit:     {} ({})",
                    path.display(),
                    if installed {
                        "installed"
                    } else {
                        "not installed"
                    }
                );
                match &why {
                    None => println!("systemd:  enabled: {enabled}, active: {active}"),
                    Some(w) => println!(
                        "systemd:  not available here ({w}); the hooks start memd on demand"
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn check((ok, out): (bool, String), what: &str) -> Result<()> {
    if !ok {
        bail!("`systemctl --user {what}` failed: {out}");
    }
    Ok(())
}

fn wait_for_service(cfg: &Config, logs_hint: &str) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    let mut delay = std::time::Duration::from_millis(20);
    loop {
        if let Ok(h) = Client::new(cfg).health() {
            println!("memd service running (pid {}, 127.0.0.1:{})", h.pid, h.port);
            return Ok(ExitCode::SUCCESS);
        }
        if started.elapsed() > client::START_WAIT {
            bail!("the service did not answer within 10 s; see `{logs_hint}`");
        }
        // Bounded polling of the health endpoint while the service manager starts memd.
        std::thread::sleep(delay);
        delay = (delay * 2).min(std::time::Duration::from_millis(250));
    }
}

/// `memd restart` when a service manager runs memd (the unit active, the agent loaded): the
/// manager restarts it, so the new daemon stays in its care. `None` when none does.
pub fn restart_managed(cfg: &Config) -> Result<Option<ExitCode>> {
    if !is_installed() {
        return Ok(None);
    }
    if cfg!(target_os = "macos") {
        let Some(target) = launchctl_target() else {
            return Ok(None);
        };
        if !run_cmd("launchctl", &["print", &target]).is_ok_and(|r| r.0) {
            return Ok(None);
        }
        // -k: the running instance gets SIGTERM first, as `memd stop` sends it.
        let (ok, out) =
            run_cmd("launchctl", &["kickstart", "-k", &target]).context("cannot run launchctl")?;
        if !ok {
            bail!("`launchctl kickstart -k {target}` failed: {out}");
        }
        return wait_for_service(cfg, "tail ~/Library/Logs/memd.log").map(Some);
    }
    if systemd_unavailable().is_some() || !systemctl(&["is-active", "--quiet", UNIT_NAME])?.0 {
        return Ok(None);
    }
    println!("restarting the memd service (systemctl --user restart {UNIT_NAME})");
    check(systemctl(&["restart", UNIT_NAME])?, "restart")?;
    wait_for_service(cfg, "journalctl --user -u memd").map(Some)
}

/// One line for `memd status`.
pub fn state_word() -> String {
    if cfg!(target_os = "macos") {
        let Ok(plist) = plist_path() else {
            return "unknown".into();
        };
        if !plist.exists() {
            return "not installed (the hooks start memd on demand)".into();
        }
        let loaded = launchctl_target()
            .and_then(|t| run_cmd("launchctl", &["print", &t]).ok())
            .is_some_and(|r| r.0);
        return format!(
            "launchd agent installed, {}",
            if loaded { "loaded" } else { "not loaded" }
        );
    }
    let Ok(path) = unit_path() else {
        return "unknown".into();
    };
    if !path.exists() {
        return "not installed (the hooks start memd on demand)".into();
    }
    match systemctl(&["is-active", UNIT_NAME]) {
        Ok((_, state)) if !state.is_empty() => format!("systemd user unit installed, {state}"),
        _ => "systemd user unit installed (systemd not reachable)".into(),
    }
}

// ---- launchd ----

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn render_plist(exe: &Path, env: &[(String, String)], log: &Path) -> String {
    let env_lines: Vec<String> = env
        .iter()
        .map(|(k, v)| {
            format!(
                "    <key>{}</key>\n    <string>{}</string>",
                xml_escape(k),
                xml_escape(v)
            )
        })
        .collect();
    PLIST_TEMPLATE
        .replace("@EXEC@", &xml_escape(&exe.to_string_lossy()))
        .replace("@LOG@", &xml_escape(&log.to_string_lossy()))
        .replace(
            "@ENVIRONMENT@\n",
            &env_lines
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>(),
        )
}

fn plist_path() -> Result<PathBuf> {
    Ok(home()?
        .join("Library/LaunchAgents")
        .join(format!("{AGENT_LABEL}.plist")))
}

fn gui_domain() -> Option<String> {
    #[cfg(unix)]
    {
        // SAFETY: getuid has no preconditions and cannot fail.
        Some(format!("gui/{}", unsafe { libc::getuid() }))
    }
    #[cfg(not(unix))]
    None
}

fn launchctl_target() -> Option<String> {
    gui_domain().map(|d| format!("{d}/{AGENT_LABEL}"))
}

fn launchd(action: Action, exe: &Path, dry_run: bool, json: bool) -> Result<ExitCode> {
    let plist = plist_path()?;
    let domain = gui_domain().context("no user id")?;
    let target = format!("{domain}/{AGENT_LABEL}");
    match action {
        Action::Install => {
            let log = home()?.join("Library/Logs/memd.log");
            let text = render_plist(exe, &service_env(), &log);
            if dry_run {
                println!("# would write {}:\n{text}", plist.display());
                println!(
                    "# then: launchctl bootout {target}; launchctl bootstrap {domain} {}",
                    plist.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            files::write_atomic(&plist, text.as_bytes(), 0o644)?;
            println!("wrote {}", plist.display());
            // Not loaded yet is fine: bootout only makes a re-install pick up the new file.
            let _ = run_cmd("launchctl", &["bootout", &target]);
            let cfg = Config::load(None)?;
            if let Some(pid) = super::lifecycle::stop_daemon(&cfg)? {
                println!(
                    "stopped the memd started outside launchd (pid {pid}) so the agent can own it"
                );
            }
            let (ok, out) = run_cmd(
                "launchctl",
                &["bootstrap", &domain, &plist.to_string_lossy()],
            )
            .context("cannot run launchctl")?;
            if !ok {
                bail!(
                    "`launchctl bootstrap {domain} {}` failed: {out}",
                    plist.display()
                );
            }
            wait_for_service(&cfg, &format!("tail {}", log.display()))
        }
        Action::Uninstall => {
            if dry_run {
                println!(
                    "would run: launchctl bootout {target}; rm {}",
                    plist.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let _ = run_cmd("launchctl", &["bootout", &target]);
            match std::fs::remove_file(&plist) {
                Ok(()) => println!("removed {}", plist.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    println!("no memd agent installed ({})", plist.display())
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot remove {}", plist.display()));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Status => {
            let installed = plist.exists();
            let loaded = run_cmd("launchctl", &["print", &target]).is_ok_and(|r| r.0);
            if json {
                let v = serde_json::json!({"manager": "launchd", "plist": plist, "installed": installed, "loaded": loaded});
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "agent:    {} ({})",
                    plist.display(),
                    if installed {
                        "installed"
                    } else {
                        "not installed"
                    }
                );
                println!("launchd:  {}", if loaded { "loaded" } else { "not loaded" });
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// True when a unit or agent file exists (uninstall mentions it, purge removes it).
pub fn is_installed() -> bool {
    let path = if cfg!(target_os = "macos") {
        plist_path()
    } else {
        unit_path()
    };
    path.is_ok_and(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_has_the_binary_restart_policy_and_env() {
        let env = vec![("MEMD_DATA_DIR".to_string(), "/data dir/100%".to_string())];
        let unit = render_unit(Path::new("/home/u/.local/bin/memd"), &env);
        assert!(
            unit.contains("\nExecStart=/home/u/.local/bin/memd serve\n"),
            "{unit}"
        );
        assert!(unit.contains("\nRestart=on-failure\n"));
        assert!(
            unit.contains("\nEnvironment=\"MEMD_DATA_DIR=/data dir/100%%\"\n"),
            "{unit}"
        );
        assert!(unit.contains("WantedBy=default.target"));
        assert!(!unit.contains('@'), "all placeholders replaced: {unit}");
        let spaced = render_unit(Path::new("/opt/my apps/memd"), &[]);
        assert!(
            spaced.contains("ExecStart=\"/opt/my apps/memd\" serve"),
            "{spaced}"
        );
    }

    #[test]
    fn plist_is_filled_and_escaped() {
        let env = vec![("MEMD_PORT".to_string(), "4711".to_string())];
        let p = render_plist(
            Path::new("/Users/a&b/bin/memd"),
            &env,
            Path::new("/Users/x/Library/Logs/memd.log"),
        );
        assert!(
            p.contains("<string>/Users/a&amp;b/bin/memd</string>"),
            "{p}"
        );
        assert!(
            p.contains("<key>MEMD_PORT</key>\n    <string>4711</string>"),
            "{p}"
        );
        assert!(p.contains("<key>RunAtLoad</key>\n  <true/>"));
        assert!(!p.contains('@'), "{p}");
    }
}
