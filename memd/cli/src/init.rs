//! `memd init` and `memd uninstall`: wire memd into Claude Code, Codex CLI and Cursor, and out
//! again.
//!
//! Owns which client files are touched (`~/.claude/settings.json`, `~/.claude.json`,
//! `~/.codex/hooks.json` and `config.toml` (see `codex`), `~/.cursor/hooks.json`,
//! `~/.cursor/mcp.json`, memd's own `config.toml`), client detection,
//! and the plan → dry-run diff / apply → report flow. Every file is planned before any is
//! written, so one malformed file stops the run with nothing changed. The MCP entry runs
//! `memd mcp` (stdio) by default, so no client file holds the token; only `--mcp http` writes
//! it, and then that file ends up private (0600) and the report says when its mode was narrowed.
//! A backup of a file that held the token is private too.
//! Must never print the API token (diffs show `<token>`), and never change entries that are not
//! memd's.

use super::client;
use super::codex;
use super::files::{self, Applied, Conflict, EditResult, Planned};
use super::json::Json;
use super::merge;
use super::sidecar_setup::{self, SidecarChoice, SidecarFlags};
use anyhow::{Context, Result, bail};
use memd_engine::config::Config;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where each client keeps what memd edits, under one home directory.
#[derive(Debug, Clone)]
pub struct ClientFiles {
    pub claude_dir: PathBuf,
    pub claude_settings: PathBuf,
    pub claude_json: PathBuf,
    pub cursor_dir: PathBuf,
    pub cursor_hooks: PathBuf,
    pub cursor_mcp: PathBuf,
    pub codex_dir: PathBuf,
    pub codex_hooks: PathBuf,
    pub codex_config: PathBuf,
}

impl ClientFiles {
    pub fn under(home: &Path) -> ClientFiles {
        ClientFiles {
            claude_dir: home.join(".claude"),
            claude_settings: home.join(".claude").join("settings.json"),
            claude_json: home.join(".claude.json"),
            cursor_dir: home.join(".cursor"),
            cursor_hooks: home.join(".cursor").join("hooks.json"),
            cursor_mcp: home.join(".cursor").join("mcp.json"),
            codex_dir: codex::codex_dir(home),
            codex_hooks: codex::codex_dir(home).join("hooks.json"),
            codex_config: codex::codex_dir(home).join("config.toml"),
        }
    }

    pub fn for_user() -> Result<ClientFiles> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .context("HOME is not set")?;
        Ok(ClientFiles::under(Path::new(&home)))
    }

    /// Why Claude Code looks installed, if it does.
    pub fn claude_detected(&self) -> Option<String> {
        if self.claude_dir.is_dir() {
            return Some(format!("{} exists", self.claude_dir.display()));
        }
        on_path("claude").map(|p| format!("`claude` is on PATH ({})", p.display()))
    }

    pub fn codex_detected(&self) -> Option<String> {
        if self.codex_dir.is_dir() {
            return Some(format!("{} exists", self.codex_dir.display()));
        }
        on_path("codex").map(|p| format!("`codex` is on PATH ({})", p.display()))
    }

    pub fn cursor_detected(&self) -> Option<String> {
        self.cursor_dir
            .is_dir()
            .then(|| format!("{} exists", self.cursor_dir.display()))
    }
}

/// The first executable called `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    meta.is_file()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClientKind {
    ClaudeCode,
    Codex,
    Cursor,
}

impl ClientKind {
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::ClaudeCode => "Claude Code",
            ClientKind::Codex => "Codex CLI",
            ClientKind::Cursor => "Cursor",
        }
    }
}

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
    pub claude_code: bool,
    pub codex: bool,
    pub cursor: bool,
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

type EditFn = Box<dyn Fn(&mut Json) -> Result<EditResult>>;

/// One config file and what to do to it.
struct Job {
    path: PathBuf,
    new_mode: u32,
    /// The edit writes memd's token into the file.
    secret: bool,
    edit: EditFn,
}

impl Job {
    fn plan(&self) -> Result<Planned> {
        let mut plan = files::plan_json_edit(&self.path, self.new_mode, |doc| (self.edit)(doc))?;
        plan.secret = self.secret;
        Ok(plan)
    }
}

/// The clients to configure: the ones named by flags, else the ones detected.
fn select_clients(files: &ClientFiles, args: &InitArgs) -> Vec<(ClientKind, String)> {
    let named = [
        (args.claude_code, ClientKind::ClaudeCode, "--claude-code"),
        (args.codex, ClientKind::Codex, "--codex"),
        (args.cursor, ClientKind::Cursor, "--cursor"),
    ];
    if named.iter().any(|(on, _, _)| *on) {
        return named
            .iter()
            .filter(|(on, _, _)| *on)
            .map(|(_, kind, flag)| (*kind, flag.to_string()))
            .collect();
    }
    let detected = [
        (ClientKind::ClaudeCode, files.claude_detected()),
        (ClientKind::Codex, files.codex_detected()),
        (ClientKind::Cursor, files.cursor_detected()),
    ];
    detected
        .into_iter()
        .filter_map(|(kind, why)| why.map(|w| (kind, w)))
        .collect()
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

/// What `mcpServers.memd` should run or call, before it is shaped for one client.
enum McpTarget {
    Stdio { memd: PathBuf },
    Http { url: String, token: String },
}

impl McpTarget {
    /// Claude Code's entries carry `type`; Cursor's do not.
    fn entry(&self, with_type: bool) -> Json {
        match self {
            McpTarget::Stdio { memd } => merge::mcp_stdio_entry(memd, with_type),
            McpTarget::Http { url, token } => merge::mcp_http_entry(url, token, with_type),
        }
    }

    /// Only the HTTP entry puts the token into the client's file.
    fn secret(&self) -> bool {
        matches!(self, McpTarget::Http { .. })
    }
}

/// The job that registers memd in one client's `mcpServers`. A file that gets the token is
/// created private and narrowed if open; otherwise it is an ordinary config file.
fn mcp_job(path: &Path, entry: Json, secret: bool) -> Job {
    Job {
        path: path.to_path_buf(),
        new_mode: if secret { 0o600 } else { 0o644 },
        secret,
        edit: Box::new(move |d| {
            merge::mcp_add(d, entry.clone())?;
            Ok(EditResult::Keep)
        }),
    }
}

/// Claude Code's `~/.claude.json`: the `memd` entry, and the always-loaded scoring entry when
/// `score` (a stdio bridge, a Claude Code that knows `alwaysLoad`) or none.
fn claude_mcp_job(files: &ClientFiles, mcp: &McpTarget, score: Option<Json>) -> Job {
    let entry = mcp.entry(true);
    let secret = mcp.secret();
    Job {
        path: files.claude_json.clone(),
        new_mode: if secret { 0o600 } else { 0o644 },
        secret,
        edit: Box::new(move |d| {
            merge::mcp_add(d, entry.clone())?;
            merge::mcp_set_score(d, score.clone())?;
            Ok(EditResult::Keep)
        }),
    }
}

fn add_jobs(
    kind: ClientKind,
    files: &ClientFiles,
    bin: &Path,
    mcp: &McpTarget,
    always_load: bool,
) -> Vec<Job> {
    let bin = bin.to_path_buf();
    let score = match mcp {
        McpTarget::Stdio { memd } if always_load => Some(merge::mcp_score_entry(memd)),
        _ => None,
    };
    match kind {
        ClientKind::ClaudeCode => {
            vec![
                Job {
                    path: files.claude_settings.clone(),
                    new_mode: 0o644,
                    secret: false,
                    edit: Box::new(move |d| {
                        merge::claude_settings_add(d, &bin)?;
                        Ok(EditResult::Keep)
                    }),
                },
                claude_mcp_job(files, mcp, score),
            ]
        }
        // Codex always gets the stdio bridge: its config.toml is not kept private.
        ClientKind::Codex => vec![Job {
            path: files.codex_hooks.clone(),
            new_mode: 0o644,
            secret: false,
            edit: Box::new(move |d| {
                codex::hooks_add(d, &bin)?;
                Ok(EditResult::Keep)
            }),
        }],
        ClientKind::Cursor => {
            vec![
                Job {
                    path: files.cursor_hooks.clone(),
                    new_mode: 0o644,
                    secret: false,
                    edit: Box::new(move |d| {
                        merge::cursor_hooks_add(d, &bin)?;
                        Ok(EditResult::Keep)
                    }),
                },
                mcp_job(&files.cursor_mcp, mcp.entry(false), mcp.secret()),
            ]
        }
    }
}

/// Removal of memd's entries from every client file; a file left with nothing but what memd
/// created goes.
fn remove_jobs(files: &ClientFiles) -> Vec<Job> {
    fn job(path: &Path, remove: fn(&mut Json) -> Result<bool, merge::ShapeError>) -> Job {
        Job {
            path: path.to_path_buf(),
            new_mode: 0o600,
            secret: false,
            edit: Box::new(move |d| {
                let removed = remove(d)?;
                Ok(if removed && merge::is_leftover_shell(d) {
                    EditResult::Delete
                } else {
                    EditResult::Keep
                })
            }),
        }
    }
    vec![
        job(&files.claude_settings, merge::claude_settings_remove),
        job(&files.claude_json, merge::mcp_remove),
        job(&files.codex_hooks, merge::claude_settings_remove),
        job(&files.cursor_hooks, merge::cursor_hooks_remove),
        job(&files.cursor_mcp, merge::mcp_remove),
    ]
}

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
    memd_server::http::guard::load_or_create_token(&path)
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
    let clients = select_clients(&files, &args);
    let bin = resolve_bin_dir(args.bin_dir.clone())?;
    if clients.is_empty() {
        println!(
            "memd init: no supported client found (looked for {}, `claude` on PATH, {}, `codex` on PATH, {}).",
            files.claude_dir.display(),
            files.codex_dir.display(),
            files.cursor_dir.display()
        );
        println!(
            "Install Claude Code, Codex CLI or Cursor first, or pass --claude-code / --codex / --cursor to configure one anyway."
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
        println!(
            "Done. Start a new Claude Code / Codex / Cursor session to load the hooks and the memd MCP server."
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
    let token = std::fs::read_to_string(cfg.token_path())
        .unwrap_or_default()
        .trim()
        .to_string();
    if args.dry_run {
        let mut all = plans.clone();
        all.extend(codex_plan.clone());
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
    let extra: Vec<Planned> = codex_plan.into_iter().collect();
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
    if let Some(pid) = client::stop_daemon(cfg)? {
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
