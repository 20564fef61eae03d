//! Codex CLI: what `memd init --codex` writes and `memd uninstall` removes, and what doctor
//! reads back.
//!
//! Two files under `$CODEX_HOME` (default `~/.codex`): `hooks.json` gets memd's hooks
//! (`SessionStart`, `UserPromptSubmit`, `PreToolUse` and `PostToolUse` for Bash, `Stop`, each
//! running `hook-prompt --codex` or `hook-stop --codex`), and `config.toml` gets the stdio MCP
//! server `[mcp_servers.memd]` (`memd mcp --only score_response`: no token; the tool approved,
//! the variables that locate the daemon passed on) and, because Codex runs a user's hook only
//! once it is trusted, one `[hooks.state."<hooks.json>:<event>:<group>:<handler>"]` entry per memd hook
//! holding the `trusted_hash` Codex computes for that hook (the SHA-256 of its normalized
//! definition: checked against Codex 0.169.0 by tests/tests/client_codex.rs). Running
//! `memd init --codex` is the user's consent to trust these hooks. Must never change another
//! server, another hook or its trust entry, and never rewrite config.toml's formatting:
//! edits go through `toml_edit`, which keeps comments and order.

use super::clients::{ClientFiles, ClientKind};
use super::files::{self, Planned};
use super::json::Json;
use super::merge::{self, HOOK_PROMPT, HOOK_STOP, ShapeError};
use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::path::Path;
use toml_edit::{DocumentMut, Item, Table, value};

/// Codex events → (binary, timeout seconds, matcher). Codex's tool events name the shell
/// `Bash` (its published pre-tool-use input schema allows nothing else).
/// `SessionStart` has no matcher: every source (startup, resume) gets the brief.
pub const CODEX_HOOKS: [(&str, &str, i64, Option<&str>); 5] = [
    ("SessionStart", HOOK_PROMPT, 10, None),
    ("UserPromptSubmit", HOOK_PROMPT, 10, None),
    ("PreToolUse", HOOK_PROMPT, 10, Some("Bash")),
    ("PostToolUse", HOOK_STOP, 10, Some("Bash")),
    ("Stop", HOOK_STOP, 30, None),
];
/// Variables Codex passes on to `memd mcp` (names only: Codex gives a stdio server only a short
/// list of its own environment, so without these a bridge would miss a daemon the user moved
/// with `MEMD_DATA_DIR` and start another; the hooks inherit everything anyway).
pub const FORWARDED_ENV: [&str; 13] = [
    "MEMD_DATA_DIR",
    "MEMD_CONFIG_DIR",
    "MEMD_PORT",
    "MEMD_URL",
    "MEMD_DEV",
    "MEMD_RUNTIME_DIR",
    "MEMD_ORT_LIB",
    "MEMD_MODEL_DIR",
    "MEMD_COLBERT_DIR",
    "MEMD_RERANKER_DIR",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
];
/// What Codex starts: the scoring surface only. Codex loads every tool of every server into
/// every request (memd's eight: 18,427 bytes, about 4,600 tokens, measured with Codex 0.169.0),
/// and the hooks already bring the memories; `score_response` alone costs about 400 tokens.
pub const SERVER_ARGS: [&str; 3] = ["mcp", "--only", "score_response"];
pub const SERVER_TOOLS: [&str; 1] = ["score_response"];
/// The flag every memd command in Codex's hooks.json carries.
pub const FLAG: &str = "--codex";

/// Codex's key for an event in hook trust entries (`pre_tool_use`).
fn event_label(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Adds memd's hooks to a Codex hooks.json document (`{"hooks": {...}}`).
pub fn hooks_add(doc: &mut Json, bin: &Path) -> Result<(), ShapeError> {
    merge::hooks_add(doc, ClientKind::Codex, bin, FLAG, &CODEX_HOOKS)
}

/// Events memd hooks into (for doctor).
pub fn events() -> impl Iterator<Item = &'static str> {
    CODEX_HOOKS.iter().map(|(e, _, _, _)| *e)
}

/// A memd hook in a hooks.json document: where it sits and the hash Codex trusts it by.
#[derive(Debug, Clone, PartialEq)]
pub struct Trust {
    /// `<hooks.json path>:<event label>:<group>:<handler>`.
    pub key: String,
    pub hash: String,
}

/// The trust entries of every memd hook in `doc`, which lives at `hooks_path`.
pub fn trust_entries(hooks_path: &Path, doc: &Json) -> Vec<Trust> {
    let mut out = Vec::new();
    let Some(events) = doc.get("hooks").and_then(Json::as_object) else {
        return out;
    };
    for (event, groups) in events.iter() {
        let label = event_label(event);
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            let handlers = group.get("hooks").and_then(Json::as_array);
            for (h, handler) in handlers.into_iter().flatten().enumerate() {
                if !merge::is_memd_handler(handler) {
                    continue;
                }
                // Codex ignores the matcher of these events when it hashes.
                let matcher = match event {
                    "UserPromptSubmit" | "Stop" => None,
                    _ => group.get("matcher").and_then(Json::as_str),
                };
                out.push(Trust {
                    key: format!("{}:{label}:{g}:{h}", hooks_path.display()),
                    hash: trust_hash(&label, matcher, handler),
                });
            }
        }
    }
    out
}

/// Codex's hash of one command hook: SHA-256 over the compact, key-sorted JSON of
/// `{event_name, matcher?, hooks: [handler]}`, the handler normalized as Codex does (timeout
/// defaults to 600, `async` to false; unset fields absent).
pub fn trust_hash(label: &str, matcher: Option<&str>, handler: &Json) -> String {
    let command = handler.get("command").and_then(Json::as_str).unwrap_or("");
    let timeout = match handler.get("timeout") {
        Some(Json::Number(n)) => n.as_u64().unwrap_or(600).max(1),
        _ => 600,
    };
    let asynchronous = matches!(handler.get("async"), Some(Json::Bool(true)));
    let mut normalized = serde_json::json!({
        "type": "command", "command": command, "timeout": timeout, "async": asynchronous,
    });
    if let Some(message) = handler.get("statusMessage").and_then(Json::as_str) {
        normalized["statusMessage"] = message.into();
    }
    let mut identity = serde_json::json!({"event_name": label, "hooks": [normalized]});
    if let Some(m) = matcher {
        identity["matcher"] = m.into();
    }
    let digest = Sha256::digest(canonical(&identity).as_bytes());
    format!("sha256:{}", hex::encode(digest))
}

/// Compact JSON with every object's keys sorted, whatever order serde_json keeps them in.
fn canonical(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::Value::from(k.as_str()),
                        canonical(&map[k])
                    )
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

fn parse_toml(path: &Path, text: Option<&str>) -> Result<DocumentMut> {
    text.unwrap_or("").parse::<DocumentMut>().with_context(|| {
        format!(
            "{} is not valid TOML. Fix or move that file, then run this command again; it was not changed",
            path.display()
        )
    })
}

/// The table `key` of `parent`, created (without a header of its own) when missing.
fn table_in<'a>(parent: &'a mut Table, key: &str, at: &str) -> Result<&'a mut Table> {
    let item = parent.entry(key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    match item {
        Item::Table(t) => Ok(t),
        _ => bail!("{at} should be a table ([{at}]) but is not; memd leaves it alone"),
    }
}

/// config.toml with memd's MCP server and the trust entries of memd's hooks: those of
/// `old` (the hooks.json memd is replacing) removed, those of `new` added. `None`: unchanged.
pub fn config_add(
    path: &Path,
    before: Option<&str>,
    memd: &Path,
    old: &[Trust],
    new: &[Trust],
) -> Result<Option<String>> {
    let mut doc = parse_toml(path, before)?;
    let servers = table_in(doc.as_table_mut(), "mcp_servers", "mcp_servers")?;
    let mut entry = Table::new();
    entry.insert("command", value(memd.to_string_lossy().as_ref()));
    let mut args = toml_edit::Array::new();
    for a in SERVER_ARGS {
        args.push(a);
    }
    entry.insert("args", value(args));
    let mut forwarded = toml_edit::Array::new();
    for name in FORWARDED_ENV {
        forwarded.push(name);
    }
    entry.insert("env_vars", value(forwarded));
    // memd's own tools run without asking (Codex refuses an unapproved MCP call outright under
    // `approval_policy = "never"`, as `codex exec` runs), as Claude Code's are pre-allowed.
    let mut tools = Table::new();
    tools.set_implicit(true);
    for name in SERVER_TOOLS {
        let mut t = Table::new();
        t.insert("approval_mode", value("approve"));
        tools.insert(name, Item::Table(t));
    }
    entry.insert("tools", Item::Table(tools));
    let unchanged = servers
        .get(merge::SERVER_NAME)
        .and_then(Item::as_table)
        .is_some_and(|t| t.to_string() == entry.to_string());
    if !unchanged {
        servers.insert(merge::SERVER_NAME, Item::Table(entry));
    }
    set_trust(&mut doc, old, new)?;
    let after = doc.to_string();
    Ok((Some(after.as_str()) != before).then_some(after))
}

fn set_trust(doc: &mut DocumentMut, old: &[Trust], new: &[Trust]) -> Result<()> {
    let hooks = table_in(doc.as_table_mut(), "hooks", "hooks")?;
    let state = table_in(hooks, "state", "hooks.state")?;
    for t in old {
        if !new.iter().any(|n| n == t) {
            state.remove(&t.key);
        }
    }
    for t in new {
        let current = state
            .get(&t.key)
            .and_then(|i| i.get("trusted_hash"))
            .and_then(Item::as_str);
        if current != Some(t.hash.as_str()) {
            let mut entry = Table::new();
            entry.insert("trusted_hash", value(t.hash.as_str()));
            state.insert(&t.key, Item::Table(entry));
        }
    }
    drop_if_empty(doc, &["hooks", "state"]);
    drop_if_empty(doc, &["hooks"]);
    Ok(())
}

/// Removes the table at `path` when memd's edits left it empty.
fn drop_if_empty(doc: &mut DocumentMut, path: &[&str]) {
    let (last, parents) = path.split_last().expect("a path");
    let mut table = doc.as_table_mut();
    for p in parents {
        match table.get_mut(p).and_then(Item::as_table_mut) {
            Some(t) => table = t,
            None => return,
        }
    }
    if table
        .get(last)
        .and_then(Item::as_table)
        .is_some_and(Table::is_empty)
    {
        table.remove(last);
    }
}

/// config.toml without memd's server and the trust entries `old`. `None`: unchanged.
pub fn config_remove(path: &Path, before: Option<&str>, old: &[Trust]) -> Result<Option<String>> {
    let Some(text) = before else {
        return Ok(None);
    };
    let mut doc = parse_toml(path, Some(text))?;
    if let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_mut) {
        servers.remove(merge::SERVER_NAME);
    }
    drop_if_empty(&mut doc, &["mcp_servers"]);
    set_trust(&mut doc, old, &[])?;
    let after = doc.to_string();
    Ok((after != text).then_some(after))
}

/// The config.toml change that goes with a planned hooks.json change: memd's server and the
/// trust of its hooks as the new hooks.json places them (`memd`: `Some` for init, `None` for
/// uninstall, which removes both). `None` when config.toml stays as it is.
pub fn config_plan(
    files: &ClientFiles,
    hooks: &Planned,
    memd: Option<&Path>,
) -> Result<Option<Planned>> {
    let doc = |text: Option<&str>| files::parse_doc(&hooks.path, text);
    let old = trust_entries(&files.codex_hooks, &doc(hooks.before.as_deref())?);
    let path = &files.codex_config;
    let before = files::read_optional(path)?;
    let after = match memd {
        Some(memd) => {
            let new = trust_entries(&files.codex_hooks, &doc(hooks.after.as_deref())?);
            config_add(path, before.as_deref(), memd, &old, &new)?
        }
        None => config_remove(path, before.as_deref(), &old)?,
    };
    Ok(after.map(|after| Planned {
        path: path.clone(),
        before,
        after: Some(after),
        new_mode: 0o644,
        secret: false,
    }))
}

/// The `[mcp_servers.memd]` entry's command and args, if registered.
pub fn mcp_registered(text: &str) -> Option<(String, Vec<String>)> {
    let doc = text.parse::<DocumentMut>().ok()?;
    let entry = doc.get("mcp_servers")?.get(merge::SERVER_NAME)?;
    let command = entry.get("command")?.as_str()?.to_string();
    let args = entry
        .get("args")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Some((command, args))
}

/// The trust hash config.toml holds for `key`.
pub fn trusted_hash(text: &str, key: &str) -> Option<String> {
    let doc = text.parse::<DocumentMut>().ok()?;
    let hash = doc
        .get("hooks")?
        .get("state")?
        .get(key)?
        .get("trusted_hash")?;
    hash.as_str().map(str::to_string)
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
