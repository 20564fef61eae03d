//! What `memd init` and `memd uninstall` do to each client's files, as jobs: per client, which
//! file gets which of memd's entries (hooks, MCP server, the always-loaded scoring entry), with
//! which mode, and whether the edit writes the token. The flow (plan, diff, apply, report) is
//! `init`'s. Must never touch a file outside the client's own, and never mark a job that
//! writes the token as not secret.

use super::super::codex;
use super::super::files::{self, EditResult, Planned};
use super::super::json::Json;
use super::super::merge::{self, agents};
use super::ClientFiles;
use super::ClientKind;
use anyhow::Result;
use std::path::{Path, PathBuf};

pub(super) type EditFn = Box<dyn Fn(&mut Json) -> Result<EditResult>>;

/// One config file and what to do to it.
pub(super) struct Job {
    pub(super) path: PathBuf,
    new_mode: u32,
    /// The edit writes memd's token into the file.
    secret: bool,
    edit: EditFn,
}

impl Job {
    pub(super) fn plan(&self) -> Result<Planned> {
        let mut plan = files::plan_json_edit(&self.path, self.new_mode, |doc| (self.edit)(doc))?;
        plan.secret = self.secret;
        Ok(plan)
    }
}

/// What `mcpServers.memd` should run or call, before it is shaped for one client.
pub(super) enum McpTarget {
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

    fn gemini_entry(&self) -> Json {
        match self {
            McpTarget::Stdio { memd } => merge::mcp_stdio_entry(memd, false),
            McpTarget::Http { url, token } => agents::gemini_http_entry(url, token),
        }
    }

    fn copilot_entry(&self) -> Json {
        match self {
            McpTarget::Stdio { memd } => agents::copilot_entry(&memd.to_string_lossy(), None),
            McpTarget::Http { url, token } => agents::copilot_entry(url, Some(token)),
        }
    }

    fn opencode_entry(&self) -> Json {
        match self {
            McpTarget::Stdio { memd } => agents::opencode_stdio_entry(memd),
            McpTarget::Http { url, token } => agents::opencode_http_entry(url, token),
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
    mcp_job_with(path, entry, secret, merge::mcp_add)
}

fn mcp_job_with(
    path: &Path,
    entry: Json,
    secret: bool,
    add: fn(&mut Json, Json) -> Result<(), merge::ShapeError>,
) -> Job {
    Job {
        path: path.to_path_buf(),
        new_mode: if secret { 0o600 } else { 0o644 },
        secret,
        edit: Box::new(move |d| {
            add(d, entry.clone())?;
            Ok(EditResult::Keep)
        }),
    }
}

/// Gemini CLI keeps hooks and servers in one file: one job, one plan, one diff.
fn gemini_job(files: &ClientFiles, bin: &Path, mcp: &McpTarget) -> Job {
    let (bin, entry) = (bin.to_path_buf(), mcp.gemini_entry());
    Job {
        path: files.gemini_settings.clone(),
        new_mode: if mcp.secret() { 0o600 } else { 0o644 },
        secret: mcp.secret(),
        edit: Box::new(move |d| {
            agents::gemini_settings_add(d, &bin)?;
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

pub(super) fn add_jobs(
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
        ClientKind::Gemini => vec![gemini_job(files, &bin, mcp)],
        // The plugin file is planned apart (`opencode::plan_install`): it is not JSON.
        ClientKind::Opencode => vec![mcp_job_with(
            &files.opencode_config,
            mcp.opencode_entry(),
            mcp.secret(),
            agents::opencode_mcp_add,
        )],
        // Copilot CLI's hooks live in each repository (`.github/hooks/`) and cannot inject
        // context; memd registers only its MCP server there.
        ClientKind::Copilot => vec![mcp_job(
            &files.copilot_mcp,
            mcp.copilot_entry(),
            mcp.secret(),
        )],
    }
}

/// Removal of memd's entries from every client file; a file left with nothing but what memd
/// created goes.
pub(super) fn remove_jobs(files: &ClientFiles) -> Vec<Job> {
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
        job(&files.gemini_settings, agents::gemini_settings_remove),
        job(&files.opencode_config, agents::opencode_mcp_remove),
        job(&files.copilot_mcp, merge::mcp_remove),
    ]
}
