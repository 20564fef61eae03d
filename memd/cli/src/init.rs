//! `memd init` and `memd uninstall`: wire memd into Claude Code, Codex CLI, Cursor, Gemini CLI,
//! OpenCode and Copilot CLI, and out again.
//!
//! Owns which client files are touched (`~/.claude/settings.json`, `~/.claude.json`,
//! `~/.codex/hooks.json` and `config.toml` (see `codex`), `~/.cursor/hooks.json`,
//! `~/.cursor/mcp.json`, `~/.gemini/settings.json`, OpenCode's `opencode.json` and
//! `plugins/memd.ts` (see `opencode`), `~/.copilot/mcp-config.json`, memd's own
//! `config.toml`),
//! and the plan → dry-run diff / apply → report flow. Every file is planned before any is
//! written, so one malformed file stops the run with nothing changed. The MCP entry runs
//! `memd mcp` (stdio) by default, so no client file holds the token; only `--mcp http` writes
//! it, and then that file ends up private (0600) and the report says when its mode was narrowed.
//! A backup of a file that held the token is private too.
//! Must never print the API token (diffs show `<token>`), and never change entries that are not
//! memd's. What each client's files get is `jobs` (`init_jobs.rs`); this file is the flow.

use super::client;
use super::codex;
use super::files::{self, Applied, Conflict, Planned};
use super::merge;
use super::opencode;
use super::sidecar_setup::{self, SidecarChoice, SidecarFlags};
use anyhow::{Context, Result, bail};
use memd_engine::config::Config;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use super::clients::{ClientFiles, ClientKind, is_executable, on_path};

/// How the clients reach memd's MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Default, clap::ValueEnum)]
pub enum McpKind {
    /// The client starts `memd mcp`; no token in its config.
    #[default]
    Stdio,
    /// The client calls the daemon's `/mcp` with the bearer token from its config.
    Http,
}

pub struct InitArgs {
    /// The clients named by flags (empty: the detected ones).
    pub clients: Vec<ClientKind>,
    pub dry_run: bool,
    pub yes: bool,
    pub bin_dir: Option<PathBuf>,
    pub mcp: McpKind,
    pub sidecar: SidecarFlags,
}

pub struct UninstallArgs {
    pub purge: bool,
    pub dry_run: bool,
    pub yes: bool,
}

/// This `memd`, by its real path: what the stdio MCP entry starts.
fn memd_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the memd executable")?;
    Ok(std::fs::canonicalize(&exe).unwrap_or(exe))
}

/// Where the hook binaries are: `--bin-dir`, else beside this `memd`.
fn resolve_bin_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match flag {
        Some(d) => d,
        None => memd_exe()?
            .parent()
            .map(Path::to_path_buf)
            .context("memd executable has no directory")?,
    };
    let dir = if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir()?.join(dir)
    };
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

/// The port clients should use: the configured one (a fixed port), else the running daemon's.
fn mcp_port(cfg: &Config) -> Result<u16> {
    if cfg.port != 0 {
        return Ok(cfg.port);
    }
    client::daemon_info(&cfg.data_dir)
        .map(|i| i.port)
        .context("the configured port is 0 (a random port per start); set a fixed port in config.toml or MEMD_PORT before `memd init`")
}

#[path = "init_jobs.rs"]
mod jobs;
use jobs::{Job, McpTarget, add_jobs, remove_jobs};

/// Replaces the token with a placeholder in anything shown to the user.
fn mask(text: &str, token: &str) -> String {
    if token.len() >= 16 {
        text.replace(token, "<token>")
    } else {
        text.to_string()
    }
}

fn print_diffs(plans: &[Planned], token: &str) -> bool {
    let mut any = false;
    for p in plans.iter().filter(|p| p.changes()) {
        any = true;
        let before = p.before.as_deref().map(|t| mask(t, token));
        let after = p.after.as_deref().map(|t| mask(t, token));
        print!(
            "{}",
            super::diff::unified(
                &p.path.display().to_string(),
                before.as_deref(),
                after.as_deref()
            )
        );
    }
    any
}

/// What applying one plan did to its file.
struct Done {
    path: PathBuf,
    applied: Applied,
    /// The file's mode before and after, when memd narrowed it (it holds the token).
    narrowed: Option<(u32, u32)>,
}

/// Applies one plan, noting a mode change of an existing file.
fn apply_one(plan: &Planned, stamp: &str, token: &str) -> Result<Done> {
    let before = files::existing_mode(&plan.path);
    let applied = files::apply(plan, stamp)?;
    protect_backup(plan, &applied, token)?;
    let after = files::existing_mode(&plan.path);
    let narrowed = match (before, after) {
        (Some(b), Some(a)) if a != b => Some((b, a)),
        _ => None,
    };
    Ok(Done {
        path: plan.path.clone(),
        applied,
        narrowed,
    })
}

/// The backup of a file that held the token (an HTTP entry being switched to stdio or removed)
/// is made private even though the new content holds no secret: the backup still does.
fn protect_backup(plan: &Planned, applied: &Applied, token: &str) -> Result<()> {
    let held_token = token.len() >= 16 && plan.before.as_deref().is_some_and(|t| t.contains(token));
    match applied {
        Applied::Updated { backup } | Applied::Deleted { backup } if held_token => {
            files::make_private(backup)
        }
        _ => Ok(()),
    }
}

/// Applies the plans in order, re-planning a file another program changed meanwhile.
fn apply_all(
    jobs: &[Job],
    mut plans: Vec<Planned>,
    extra: Vec<Planned>,
    stamp: &str,
    token: &str,
) -> Result<Vec<Done>> {
    let mut done = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let mut attempts = 0;
        loop {
            match apply_one(&plans[i], stamp, token) {
                Ok(d) => {
                    done.push(d);
                    break;
                }
                Err(e) if e.downcast_ref::<Conflict>().is_some() && attempts < 3 => {
                    attempts += 1;
                    plans[i] = job.plan()?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    for plan in extra {
        done.push(apply_one(&plan, stamp, token)?);
    }
    Ok(done)
}

fn report(done: &[Done]) -> bool {
    let mut changed = false;
    for Done {
        path,
        applied,
        narrowed,
    } in done
    {
        match applied {
            Applied::Unchanged => println!("  unchanged {}", path.display()),
            Applied::Created => {
                changed = true;
                println!("  created   {}", path.display());
            }
            Applied::Updated { backup } => {
                changed = true;
                println!(
                    "  updated   {} (backup: {})",
                    path.display(),
                    backup.display()
                );
            }
            Applied::Deleted { backup } => {
                changed = true;
                println!(
                    "  removed   {} (backup: {})",
                    path.display(),
                    backup.display()
                );
            }
        }
        if let Some((before, after)) = narrowed {
            changed = true;
            println!(
                "  chmod     {} {:o} -> {:o}: it holds memd's token, so only you may read it",
                path.display(),
                before & 0o777,
                after & 0o777
            );
        }
    }
    changed
}

fn token_for(cfg: &Config, dry_run: bool) -> Result<String> {
    let path = cfg.token_path();
    if dry_run {
        let existing = std::fs::read_to_string(&path)
            .ok()
            .map(|t| t.trim().to_string());
        return Ok(existing
            .filter(|t| t.len() >= 32)
            .unwrap_or_else(|| "<token created on first run>".into()));
    }
    for note in memd_server::daemon::prepare_data_dir(&cfg.data_dir)? {
        println!("{note}");
    }
    memd_server::guard::load_or_create_token(&path)
}

fn config_plan(choice: &SidecarChoice) -> Result<Option<Planned>> {
    let Some(dir) = proto::paths::config_dir() else {
        return Ok(None);
    };
    let path = dir.join("config.toml");
    let before = files::read_optional(&path)?;
    let Some(after) = sidecar_setup::updated_config(before.as_deref(), choice)
        .with_context(|| format!("cannot update {}", path.display()))?
    else {
        return Ok(None);
    };
    Ok(Some(Planned {
        path,
        before,
        after: Some(after),
        new_mode: 0o644,
        secret: false,
    }))
}

pub fn run_init(args: InitArgs) -> Result<ExitCode> {
    let cfg = Config::load(None)?;
    let files = ClientFiles::for_user()?;
    let clients = super::clients::select(&files, &args.clients);
    let bin = resolve_bin_dir(args.bin_dir.clone())?;
    if clients.is_empty() {
        let looked: Vec<String> = ClientKind::ALL
            .iter()
            .map(|k| files.dir_of(*k).display().to_string())
            .collect();
        println!(
            "memd init: no supported client found (looked for {} and `claude`, `codex`, `gemini`, `opencode`, `copilot` on PATH).",
            looked.join(", ")
        );
        println!(
            "Install a client first, or name one (--claude-code, --codex, --cursor, --gemini, --opencode, --copilot) to configure it anyway."
        );
        return Ok(ExitCode::SUCCESS);
    }
    for (kind, why) in &clients {
        println!("{}: {why}", kind.name());
    }
    for exe in [merge::HOOK_PROMPT, merge::HOOK_STOP] {
        if !is_executable(&bin.join(exe)) {
            eprintln!(
                "warning: {} is missing or not executable; install the hooks there (install/install.sh) or pass --bin-dir",
                bin.join(exe).display()
            );
        }
    }
    // The port is settled before the token is created, so a port problem leaves nothing behind.
    let http_url = match args.mcp {
        McpKind::Http => Some(format!("http://127.0.0.1:{}/mcp", mcp_port(&cfg)?)),
        McpKind::Stdio => None,
    };
    // Created for stdio too: the hooks and `memd mcp` read it from the data dir.
    let token = token_for(&cfg, args.dry_run)?;
    let mcp = match http_url {
        Some(url) => McpTarget::Http {
            url,
            token: token.clone(),
        },
        None => McpTarget::Stdio { memd: memd_exe()? },
    };
    let always_load = clients.iter().any(|(k, _)| *k == ClientKind::ClaudeCode)
        && super::claude::announce_always_load();
    let jobs: Vec<Job> = clients
        .iter()
        .flat_map(|(k, _)| add_jobs(*k, &files, &bin, &mcp, always_load))
        .collect();
    let plans = jobs.iter().map(Job::plan).collect::<Result<Vec<_>>>()?;
    let sidecar = if args.dry_run && args.sidecar.mode.is_none() {
        SidecarChoice::Keep
    } else {
        sidecar_setup::choose(&args.sidecar, args.yes)?
    };
    let mut extra: Vec<Planned> = config_plan(&sidecar)?.into_iter().collect();
    if let Some(i) = jobs.iter().position(|j| j.path == files.codex_hooks) {
        let memd = memd_exe()?;
        extra.extend(codex::config_plan(&files, &plans[i], Some(&memd))?);
    }
    if clients.iter().any(|(k, _)| *k == ClientKind::Opencode) {
        extra.push(opencode::plan_install(&files.opencode_plugin, &bin)?);
    }
    if args.dry_run {
        let mut all = plans.clone();
        all.extend(extra);
        if !print_diffs(&all, &token) {
            println!("memd init --dry-run: nothing to change; memd is already set up.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let done = apply_all(&jobs, plans, extra, &files::timestamp(), &token)?;
    if report(&done) {
        let names: Vec<&str> = clients.iter().map(|(k, _)| k.name()).collect();
        println!(
            "Done. Start a new {} session to load memd's hooks and MCP server.",
            names.join(" / ")
        );
        println!("Undo with `memd uninstall` (backups are kept next to each changed file).");
    } else {
        println!("Nothing to change: memd is already set up.");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_uninstall(args: UninstallArgs) -> Result<ExitCode> {
    let cfg = Config::load(None)?;
    let files = ClientFiles::for_user()?;
    let jobs = remove_jobs(&files);
    let plans = jobs.iter().map(Job::plan).collect::<Result<Vec<_>>>()?;
    let codex_plan = jobs
        .iter()
        .position(|j| j.path == files.codex_hooks)
        .map(|i| codex::config_plan(&files, &plans[i], None))
        .transpose()?
        .flatten();
    let plugin = opencode::plan_remove(&files.opencode_plugin)?;
    let token = std::fs::read_to_string(cfg.token_path())
        .unwrap_or_default()
        .trim()
        .to_string();
    if args.dry_run {
        let mut all = plans.clone();
        all.extend(codex_plan.clone());
        all.push(plugin.clone());
        if !print_diffs(&all, &token) {
            println!("memd uninstall --dry-run: no memd entries in any client config.");
        }
        if args.purge {
            println!(
                "would delete the data dir {} (all memories)",
                cfg.data_dir.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut extra: Vec<Planned> = codex_plan.into_iter().collect();
    extra.push(plugin);
    let done = apply_all(&jobs, plans, extra, &files::timestamp(), &token)?;
    if !report(&done) {
        println!("No memd entries found in any client config.");
    }
    if args.purge {
        purge(&cfg, args.yes)?;
    } else {
        println!(
            "Memories kept in {} (`memd uninstall --purge` deletes them).",
            cfg.data_dir.display()
        );
        if super::service::is_installed() {
            println!("The memd service is still installed: `memd service uninstall` removes it.");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A directory memd created: it holds the token, the store or the daemon file.
fn looks_like_data_dir(dir: &Path) -> bool {
    ["token", "store", proto::paths::DAEMON_FILE]
        .iter()
        .any(|n| dir.join(n).exists())
}

fn purge(cfg: &Config, yes: bool) -> Result<()> {
    let dir = &cfg.data_dir;
    if !dir.exists() {
        println!("No data dir at {}; nothing to delete.", dir.display());
        return Ok(());
    }
    if !looks_like_data_dir(dir) {
        bail!(
            "{} does not look like a memd data dir (no token, store or daemon.json); not deleting it",
            dir.display()
        );
    }
    if !yes
        && !confirm(&format!(
            "Delete {} with all memories? This cannot be undone. [y/N] ",
            dir.display()
        ))?
    {
        println!("Kept {}.", dir.display());
        return Ok(());
    }
    if super::service::is_installed() {
        super::service::run(super::service::Action::Uninstall, false, false)?;
    }
    if let Some(pid) = super::lifecycle::stop_daemon(cfg)? {
        println!("stopped memd (pid {pid})");
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot delete {}", dir.display()))?;
    println!("deleted {}", dir.display());
    Ok(())
}

pub(crate) fn confirm(question: &str) -> Result<bool> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
