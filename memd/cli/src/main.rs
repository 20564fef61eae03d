//! `memd`: the command users run. Argument parsing and dispatch.
//!
//! Owns the user-facing commands. `serve` runs the daemon (the `memd-server` crate); every other
//! command is a client of a running daemon through `memd-client` (or works on files directly,
//! like `init`). Must never print secrets (the API token, sidecar keys).
//!
//! # Layout
//!
//! - `client`: the CLI's view of the daemon (errors a person can act on, starting it);
//!   `lifecycle`: `memd stop` and `memd restart`.
//! - `init`, `clients`, `merge`, `codex`, `opencode`, `files`, `diff`, `json`, `sidecar_setup`:
//!   wiring memd into Claude Code, Codex CLI, Cursor, Gemini CLI, OpenCode and Copilot CLI
//!   (merge, the OpenCode plugin file, backups, dry-run diffs); `claude`: Claude Code's version,
//!   for what its config accepts; `service`: systemd / launchd. `clients` knows where each
//!   client keeps its files; `init`, `codex`, `opencode` and `doctor` read and write them.
//! - `status`, `doctor`, `query`, `transfer`: status, checks, search/ingest/books, export/import.
//! - `projects`: `memd projects` (list, forget one); `store`: `memd store` (migrate, add-user)
//!   and `memd share`, the shared PostgreSQL store by hand (through `memd-pg`).
//! - `roampal`: `memd import --from-roampal`, moving in from a Roampal store.
//! - `bridge`, `launch`: `memd mcp`, the stdio MCP server that relays to the daemon's `/mcp`.
//! - `dashboard`: `memd ui`, a one-time login link to the daemon's `/ui` pages.
//!
//! The offline evaluations are `memd-eval` in the `memd-lab` crate, not a `memd` subcommand:
//! they never ship inside the user's binary.

mod bridge;
mod claude;
mod client;
mod clients;
mod codex;
mod dashboard;
mod diff;
mod doctor;
mod files;
mod hookcmd;
mod init;
mod json;
mod launch;
mod lifecycle;
mod merge;
mod opencode;
mod projects;
mod query;
mod roampal;
mod service;
mod sidecar_setup;
mod status;
mod store;
mod transfer;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "memd",
    version,
    about = "Persistent, outcome-learning memory for AI coding agents"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground (hooks start it on demand; `memd service install` keeps it running).
    Serve {
        /// Port on 127.0.0.1 (default: MEMD_PORT, else 47111; 0 picks a free port).
        #[arg(long)]
        port: Option<u16>,
    },
    /// Show what the hooks did per conversation (ids injected and scored, outcomes, content hashes; never content).
    Trace {
        /// Only this conversation.
        #[arg(long)]
        conversation: Option<String>,
        /// At most this many entries (newest last).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Serve memd's MCP tools over stdio, for clients that only launch stdio servers (starts the daemon if needed).
    Mcp {
        /// Expose only these tools (comma-separated), with one-line descriptions: the small
        /// always-loaded scoring entry `memd init` registers next to the full server.
        #[arg(long, value_delimiter = ',', value_name = "TOOL,...")]
        only: Vec<String>,
    },
    /// Wire memd into Claude Code, Codex CLI, Cursor, Gemini CLI, OpenCode and Copilot CLI:
    /// hooks (OpenCode: a plugin), MCP server, tool permissions.
    ///
    /// Configures the clients it finds (~/.claude or `claude` on PATH; ~/.cursor; ~/.gemini
    /// or `gemini`; ~/.config/opencode or `opencode`) unless flags name them. Keeps every entry
    /// that is not memd's, backs up each changed file as <file>.memd-backup-<time>, and
    /// changes nothing on a second run.
    Init {
        /// Configure Claude Code (even if not detected).
        #[arg(long)]
        claude_code: bool,
        /// Configure Cursor (even if not detected).
        #[arg(long)]
        cursor: bool,
        /// Configure Codex CLI (even if not detected).
        #[arg(long)]
        codex: bool,
        /// Configure Gemini CLI (and Antigravity's `agy`, which reads the same settings).
        #[arg(long)]
        gemini: bool,
        /// Configure OpenCode: memd's plugin and MCP server.
        #[arg(long)]
        opencode: bool,
        /// Configure GitHub Copilot CLI: memd's MCP server only (its hooks cannot inject
        /// context, and live in each repository).
        #[arg(long)]
        copilot: bool,
        /// Print the changes as a diff; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Ask nothing: keep the sidecar setting as it is (local only by default).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Directory holding hook-prompt and hook-stop (default: beside this memd).
        #[arg(long, value_name = "DIR")]
        bin_dir: Option<PathBuf>,
        /// How clients reach memd's MCP server: stdio runs `memd mcp` (no token in their
        /// config); http gives them the URL and the bearer token (that file is kept 0600).
        #[arg(long, value_enum, default_value_t = init::McpKind::Stdio)]
        mcp: init::McpKind,
        /// Where outcome scoring may run when the agent did not score: local or remote.
        #[arg(long, value_name = "local|remote")]
        sidecar: Option<String>,
        /// Remote sidecar: base URL of an OpenAI-compatible API (ending in /v1).
        #[arg(long, value_name = "URL")]
        sidecar_url: Option<String>,
        /// Remote sidecar: model names, comma-separated, tried in order.
        #[arg(long, value_name = "M1,M2")]
        sidecar_models: Option<String>,
        /// Remote sidecar: file holding the API key (must be mode 0600; the key is never copied).
        #[arg(long, value_name = "FILE")]
        sidecar_key_file: Option<PathBuf>,
    },
    /// Remove exactly what `memd init` added; memories are kept unless --purge.
    Uninstall {
        /// Also delete the data dir (all memories), after confirmation unless --yes.
        #[arg(long)]
        purge: bool,
        /// Print the changes as a diff; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask before deleting the data dir.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Stop the daemon gracefully: it finishes the requests in flight and saves, then exits
    /// (exit 0 when none runs). The hooks start it again on the next prompt.
    Stop {
        #[command(flatten)]
        args: lifecycle::StopArgs,
    },
    /// Stop the daemon as `memd stop` does and start it again (through systemd / launchd when
    /// the service runs it).
    Restart {
        #[command(flatten)]
        args: lifecycle::StopArgs,
    },
    /// Is the daemon up: port, pid, version, counts, model, recent hook calls, sidecar.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Per-collection counts and scores, lifecycle counters, index, knowledge graph, disk.
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Check everything end to end and say how to fix what fails (exit 1 if anything does).
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Search memories and print them like the MCP tool does.
    Search {
        /// What to look for.
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Only these collections (books, working, history, patterns, memory_bank); repeatable.
        #[arg(long, short = 'c', value_name = "C")]
        collection: Vec<String>,
        /// At most this many results (1-100).
        #[arg(long, short = 'n', value_name = "N")]
        limit: Option<i64>,
        /// Whose memories: current (this directory's project and global ones), global, all,
        /// or a project id from `memd projects`.
        #[arg(long, short = 'p', value_name = "P", default_value = "current")]
        project: String,
        #[arg(long)]
        json: bool,
    },
    /// Store a reference document (.txt, .md, .pdf, up to 10 MB) as a book.
    Ingest {
        file: PathBuf,
        /// Title (default: the file name without extension).
        #[arg(long)]
        title: Option<String>,
        /// Only for the project of the current directory (default: every project).
        #[arg(long)]
        project: bool,
        #[arg(long)]
        json: bool,
    },
    /// List projects with their memory counts and last use; `forget <id>` deletes one's memories.
    Projects {
        #[command(subcommand)]
        action: Option<ProjectsAction>,
        #[arg(long)]
        json: bool,
    },
    /// List books with their chunk counts.
    Books {
        #[arg(long)]
        json: bool,
    },
    /// Delete a book (all its chunks) by title.
    Remove {
        title: String,
        #[arg(long)]
        json: bool,
    },
    /// Write memories as JSON Lines (lossless; to stdout unless --output).
    Export {
        /// Only this collection.
        #[arg(long, short = 'c', value_name = "C")]
        collection: Option<String>,
        /// Write to this file instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Read memories from a `memd export` file (`-` for stdin), or from a Roampal store with
    /// `--from-roampal`; what is already here is skipped, so running it again is safe.
    Import {
        /// A `memd export` file, or `-` for stdin.
        #[arg(
            required_unless_present = "from_roampal",
            conflicts_with = "from_roampal"
        )]
        file: Option<PathBuf>,
        #[command(flatten)]
        roampal: roampal::Args,
        #[arg(long)]
        json: bool,
    },
    /// Keep the daemon running as a per-user service (systemd on Linux, launchd on macOS).
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Open the dashboard (served by the daemon at /ui) in your browser, logged in.
    Ui {
        /// Print the one-time login link instead of opening a browser (remote shells, scripts).
        #[arg(long)]
        print_url: bool,
    },
    /// Share a memory-bank fact or pattern with the team through the shared store.
    Share {
        /// The memory's id.
        id: String,
        /// Make it private again instead.
        #[arg(long)]
        private: bool,
        #[arg(long)]
        json: bool,
    },
    /// The shared PostgreSQL store: schema and roles.
    Store {
        #[command(subcommand)]
        action: StoreAction,
    },
}

#[derive(Subcommand)]
pub enum StoreAction {
    /// Bring the database's schema up to this memd's version (run as the database owner).
    Migrate {
        /// postgres://ROLE@HOST:PORT/DB (default: store.url / MEMD_STORE_URL).
        #[arg(long)]
        url: Option<String>,
    },
    /// Copy this role's memories from the shared store into the local store (the other way
    /// needs no command: a daemon with `store.url` set sends every memory it has).
    Copy {
        /// postgres://ROLE@HOST:PORT/DB to copy from (default: store.url / MEMD_STORE_URL).
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Create a login role for one user (or let an existing role use memd).
    AddUser {
        /// The role's name (lowercase letters, digits, underscores).
        name: String,
        /// File whose first line is the new role's password.
        #[arg(long, value_name = "FILE")]
        password_file: Option<PathBuf>,
        /// postgres://OWNER@HOST:PORT/DB (default: store.url / MEMD_STORE_URL).
        #[arg(long)]
        url: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum ProjectsAction {
    /// Delete every memory of one project (global memories stay), after confirmation.
    Forget {
        /// The project id as `memd projects` shows it.
        id: String,
        /// Do not ask.
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum ServiceAction {
    /// Write the unit / agent and start it (restarts it when already installed).
    Install {
        /// Print the unit instead of installing it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Stop and remove the unit / agent.
    Uninstall {
        #[arg(long)]
        dry_run: bool,
    },
    /// Whether the unit / agent is installed, enabled and running.
    Status {
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // The confined PDF reader (`memd_engine::ops::confine`): not a command anyone types.
    if std::env::args().nth(1).as_deref() == Some(memd_engine::ops::confine::CHILD_ARG) {
        return memd_engine::ops::confine::child_main();
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { port } => run_serve(port).map(|()| ExitCode::SUCCESS),
        other => dispatch(other),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve { port } => run_serve(port).map(|()| ExitCode::SUCCESS),
        // The bridge owns stdout: nothing else may print there.
        Command::Mcp { only } => crate::bridge::run_stdio_bridge(only).map(|()| ExitCode::SUCCESS),
        Command::Trace {
            conversation,
            limit,
            json,
        } => run_trace(conversation.as_deref(), limit, json),
        Command::Init {
            claude_code,
            codex,
            cursor,
            gemini,
            opencode,
            copilot,
            dry_run,
            yes,
            bin_dir,
            mcp,
            sidecar,
            sidecar_url,
            sidecar_models,
            sidecar_key_file,
        } => init::run_init(init::InitArgs {
            clients: [
                (claude_code, init::ClientKind::ClaudeCode),
                (codex, init::ClientKind::Codex),
                (cursor, init::ClientKind::Cursor),
                (gemini, init::ClientKind::Gemini),
                (opencode, init::ClientKind::Opencode),
                (copilot, init::ClientKind::Copilot),
            ]
            .into_iter()
            .filter_map(|(named, kind)| named.then_some(kind))
            .collect(),
            dry_run,
            yes,
            bin_dir,
            mcp,
            sidecar: sidecar_setup::SidecarFlags {
                mode: sidecar,
                url: sidecar_url,
                models: sidecar_models,
                key_file: sidecar_key_file,
            },
        }),
        Command::Uninstall {
            purge,
            dry_run,
            yes,
        } => init::run_uninstall(init::UninstallArgs {
            purge,
            dry_run,
            yes,
        }),
        Command::Stop { args } => lifecycle::run_stop(args),
        Command::Restart { args } => {
            // Through the service manager when it runs memd: a daemon started by hand would be
            // outside its care.
            let cfg = memd_engine::config::Config::load(None)?;
            match service::restart_managed(&cfg)? {
                Some(code) => Ok(code),
                None => lifecycle::run_restart(&cfg, args),
            }
        }
        Command::Status { json } => status::run_status(json),
        Command::Stats { json } => status::run_stats(json),
        Command::Doctor { json } => doctor::run_doctor(json),
        Command::Search {
            query,
            collection,
            limit,
            project,
            json,
        } => query::run_search(&query.join(" "), &collection, limit, &project, json),
        Command::Ingest {
            file,
            title,
            project,
            json,
        } => query::run_ingest(&file, title, project, json),
        Command::Projects { action, json } => match action {
            None => projects::run_list(json),
            Some(ProjectsAction::Forget { id, yes, json }) => projects::run_forget(&id, yes, json),
        },
        Command::Books { json } => query::run_books(json),
        Command::Remove { title, json } => query::run_remove(&title, json),
        Command::Export { collection, output } => {
            transfer::run_export(collection.as_deref(), output.as_deref())
        }
        Command::Import {
            file,
            roampal,
            json,
        } => match (roampal.from_roampal.is_some(), file) {
            (true, _) => roampal::run(roampal::Args { json, ..roampal }),
            (false, Some(_)) if roampal.stray_option().is_some() => Err(anyhow::anyhow!(
                "{} only applies with --from-roampal",
                roampal.stray_option().unwrap_or_default()
            )),
            (false, Some(file)) => transfer::run_import(&file, json),
            (false, None) => Err(anyhow::anyhow!(
                "name a file to import, or use --from-roampal"
            )),
        },
        Command::Service { action } => match action {
            ServiceAction::Install { dry_run } => {
                service::run(service::Action::Install, dry_run, false)
            }
            ServiceAction::Uninstall { dry_run } => {
                service::run(service::Action::Uninstall, dry_run, false)
            }
            ServiceAction::Status { json } => service::run(service::Action::Status, false, json),
        },
        Command::Ui { print_url } => dashboard::run_ui(print_url),
        Command::Share { id, private, json } => store::run_share(&id, private, json),
        Command::Store { action } => match action {
            StoreAction::Migrate { url } => store::run_migrate(url.as_deref()),
            StoreAction::Copy { from, json } => store::run_copy_to_local(from.as_deref(), json),
            StoreAction::AddUser {
                name,
                password_file,
                url,
            } => store::run_add_user(&name, url.as_deref(), password_file.as_deref()),
        },
    }
}

fn run_trace(conversation: Option<&str>, limit: usize, json: bool) -> anyhow::Result<ExitCode> {
    let cfg = memd_engine::config::Config::load(None)?;
    let trace = memd_engine::trace::Trace::open(&cfg.data_dir.join("logs"));
    for entry in trace.read(conversation, limit) {
        if json {
            println!("{}", serde_json::to_string(&entry)?);
        } else {
            println!("{}", entry.display_line());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_serve(port: Option<u16>) -> anyhow::Result<()> {
    memd_engine::heap::tune_for_daemon();
    let cfg = memd_engine::config::Config::load(port)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(memd_server::daemon::serve(cfg))
}
