//! `memd doctor`: end-to-end checks, each failure with the command that fixes it.
//!
//! Owns the check list: config, data dir and token permissions, embedding runtime files,
//! daemon, model, token accepted, a search round trip, and each detected client's hooks and MCP
//! registration (a stdio entry must start `memd mcp`; an HTTP entry must carry the current URL and
//! token, and its file must be private), OpenCode's plugin included. Read-only: must never change
//! a file or start the daemon. This file checks memd itself; `agents` (`doctor_agents.rs`) picks
//! the detected clients and `entries` (`doctor_entries.rs`) checks their files' entries.

use super::client::{Client, ClientError};
use super::files;
use super::init::{ClientFiles, ClientKind, is_executable, on_path};
use super::json::Json;
use anyhow::Result;
use memd_engine::config::Config;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Level {
    Ok,
    Warn,
    Fail,
}

struct Check {
    level: Level,
    name: &'static str,
    detail: String,
    fix: Option<String>,
}

#[derive(Default)]
struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn ok(&mut self, name: &'static str, detail: impl Into<String>) {
        self.checks.push(Check {
            level: Level::Ok,
            name,
            detail: detail.into(),
            fix: None,
        });
    }
    fn warn(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.checks.push(Check {
            level: Level::Warn,
            name,
            detail: detail.into(),
            fix: Some(fix.into()),
        });
    }
    fn fail(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.checks.push(Check {
            level: Level::Fail,
            name,
            detail: detail.into(),
            fix: Some(fix.into()),
        });
    }
    fn failed(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.level == Level::Fail)
            .count()
    }
}

pub fn run_doctor(json: bool) -> Result<ExitCode> {
    let mut r = Report::default();
    let cfg = match Config::load(None) {
        Ok(c) => {
            r.ok(
                "config",
                c.config_file
                    .as_ref()
                    .map_or("defaults (no config.toml)".into(), |p| {
                        p.display().to_string()
                    }),
            );
            Some(c)
        }
        Err(e) => {
            r.fail(
                "config",
                format!("{e:#}"),
                "fix the file named above (unknown keys and out-of-range values are errors)",
            );
            None
        }
    };
    if let Some(cfg) = &cfg {
        check_data_dir(&mut r, cfg);
        check_runtime(&mut r);
        let port = check_daemon(&mut r, cfg);
        let token = std::fs::read_to_string(cfg.token_path())
            .unwrap_or_default()
            .trim()
            .to_string();
        match ClientFiles::for_user() {
            Ok(files) => agents::check_clients(&mut r, &files, port, &token),
            Err(e) => r.fail("clients", e.to_string(), "set HOME"),
        }
    }
    print(&r, json)?;
    Ok(if r.failed() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print(r: &Report, json: bool) -> Result<()> {
    if json {
        let checks: Vec<serde_json::Value> = r
            .checks
            .iter()
            .map(|c| {
                serde_json::json!({
                    "check": c.name,
                    "status": match c.level { Level::Ok => "ok", Level::Warn => "warn", Level::Fail => "fail" },
                    "detail": c.detail,
                    "fix": c.fix,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "failed": r.failed(), "checks": checks })
            )?
        );
        return Ok(());
    }
    for c in &r.checks {
        let tag = match c.level {
            Level::Ok => "[ok]  ",
            Level::Warn => "[warn]",
            Level::Fail => "[FAIL]",
        };
        // Continuation lines of multi-line details line up under the first.
        println!(
            "{tag} {:<14} {}",
            c.name,
            c.detail.replace('\n', &format!("\n{:22}", ""))
        );
        let explained = c.detail.contains("fix:");
        if let (Some(fix), false, false) = (&c.fix, c.level == Level::Ok, explained) {
            println!("{:22}fix: {fix}", "");
        }
    }
    match r.failed() {
        0 => println!("\nAll checks passed."),
        n => println!("\n{n} check(s) failed."),
    }
    Ok(())
}

fn check_data_dir(r: &mut Report, cfg: &Config) {
    let dir = &cfg.data_dir;
    match files::existing_mode(dir) {
        None if !dir.exists() => r.warn(
            "data dir",
            format!("{} does not exist yet", dir.display()),
            "it is created at the first start (`memd serve`)",
        ),
        Some(mode) if mode & 0o022 != 0 => r.fail(
            "data dir",
            format!(
                "{} is writable by others (mode {:o}); memd refuses to start",
                dir.display(),
                mode & 0o777
            ),
            format!("chmod 700 {}", dir.display()),
        ),
        // The store holds every memory (prompts, code, maybe secrets): as private as the token.
        Some(mode) if files::is_open(mode) => r.fail(
            "data dir",
            format!(
                "{} is open to other users (mode {:o}); they could read your memories",
                dir.display(),
                mode & 0o777
            ),
            format!(
                "chmod 700 {} (memd also narrows it when it starts)",
                dir.display()
            ),
        ),
        _ => r.ok("data dir", dir.display().to_string()),
    }
    let token = cfg.token_path();
    match files::existing_mode(&token) {
        _ if !token.exists() => r.warn(
            "token",
            format!("{} does not exist yet", token.display()),
            "`memd init` or the first start creates it",
        ),
        // Windows has no mode bits: the token's DACL must be memd's owner-only one.
        None if memd_server::guard::token_is_private(&token) != Some(true) => r.fail(
            "token",
            format!(
                "{} is not limited to you (its ACL is not memd's owner-only one); other users could call memd",
                token.display()
            ),
            "`memd init`, or the next start of memd, sets it",
        ),
        Some(mode) if files::is_open(mode) => r.fail(
            "token",
            format!(
                "{} has mode {:o}; other users could call memd",
                token.display(),
                mode & 0o777
            ),
            format!("chmod 600 {}", token.display()),
        ),
        _ => r.ok("token", format!("{} (private)", token.display())),
    }
}

fn check_runtime(r: &mut Report) {
    match memd_engine::models::embed::RuntimePaths::resolve().check() {
        Ok(()) => r.ok("runtime", "ONNX Runtime and model files present"),
        Err(e) => r.fail(
            "runtime",
            e.to_string(),
            "run install/fetch-runtime.sh (search works without it, but only lexically)",
        ),
    }
}

/// The late-interaction model loads after the embedder (a second or so); missing files leave
/// prompts in the fused order, which works but finds the right memory first less often.
fn check_reranker(r: &mut Report, cfg: &Config, health: &proto::HealthResponse) {
    // The files are looked up with this shell's environment (MEMD_COLBERT_DIR,
    // MEMD_RUNTIME_DIR), as the hooks start the daemon with it.
    let dir = memd_engine::models::embed::late_interaction_dir();
    let files = ["model.onnx", "tokenizer.json"].map(|f| dir.join(f));
    if !cfg.search.rerank {
        r.ok("reranker", "off (`[search] rerank = false`): fused order");
    } else if health.late_interaction_loaded {
        r.ok("reranker", "late interaction loaded");
    } else if let Some(missing) = files.iter().find(|f| !f.is_file()) {
        r.warn(
            "reranker",
            format!(
                "missing {} (results keep the fused order)",
                missing.display()
            ),
            "run install/fetch-runtime.sh, then restart memd",
        );
    } else if health.model_loaded {
        r.warn(
            "reranker",
            "not loaded yet (it loads a second after the embedding model) or failed",
            "see <data dir>/logs/daemon.log; restart memd after fixing what it says",
        );
    }
}

/// The shared store, as the daemon last reached it.
fn check_shared_store(r: &mut Report, cfg: &Config, client: &Client) {
    if cfg.store.url.is_none() {
        return;
    }
    let status = client
        .get::<proto::StatsResponse>("/api/stats")
        .ok()
        .and_then(|s| s.shared_store);
    match status {
        Some(s) if s.connected => r.ok(
            "shared store",
            format!(
                "{} as {}, {:.1} ms, {} waiting to be sent",
                s.target,
                s.role.unwrap_or_default(),
                s.latency_ms.unwrap_or(0.0),
                s.backlog
            ),
        ),
        Some(s) => r.fail(
            "shared store",
            format!(
                "{}: {} ({} changes wait in the local log)",
                s.target,
                s.last_error.unwrap_or_else(|| "not reached yet".into()),
                s.backlog
            ),
            "check store.url, the password file and that the database is up; \
             `memd store migrate` as its owner if the schema is behind",
        ),
        None => r.warn(
            "shared store",
            "configured, but the running daemon does not use it",
            "restart memd so it reads the [store] settings",
        ),
    }
}

/// Daemon, model, token and a search round trip. Returns the port clients should use.
fn check_daemon(r: &mut Report, cfg: &Config) -> u16 {
    let client = Client::new(cfg);
    let health = match client.health() {
        Ok(h) => h,
        Err(e) => {
            r.fail(
                "daemon",
                e.to_string(),
                "`memd serve` (foreground) or `memd service install`; the hooks also start it",
            );
            return if cfg.port != 0 { cfg.port } else { client.port };
        }
    };
    r.ok(
        "daemon",
        format!(
            "memd {} (pid {}) on 127.0.0.1:{}",
            health.version, health.pid, health.port
        ),
    );
    match (health.model_loaded, &health.model_error) {
        (true, _) => r.ok("model", "loaded"),
        (false, why) => r.fail(
            "model",
            why.clone().unwrap_or_else(|| "not loaded".into()),
            "run install/fetch-runtime.sh, then restart memd",
        ),
    }
    check_reranker(r, cfg, &health);
    check_shared_store(r, cfg, &client);
    let started = Instant::now();
    let req = proto::SearchRequest {
        query: Some("memd doctor round trip".into()),
        limit: Some(1),
        ..Default::default()
    };
    match client.post::<_, proto::SearchResponse>("/api/search", &req) {
        Ok(resp) => r.ok(
            "search",
            format!(
                "round trip {:.1} ms ({} result{})",
                started.elapsed().as_secs_f64() * 1000.0,
                resp.count,
                if resp.count == 1 { "" } else { "s" }
            ),
        ),
        Err(e @ ClientError::Unauthorized { .. }) => r.fail(
            "search",
            e.to_string(),
            "restart memd so it and the CLI use the same data dir",
        ),
        Err(e) => r.fail(
            "search",
            e.to_string(),
            format!("see {}", cfg.data_dir.join("logs").display()),
        ),
    }
    health.port
}

#[path = "doctor_agents.rs"]
mod agents;

#[path = "doctor_entries.rs"]
mod entries;
use entries::{
    check_claude_score, check_codex, check_hooks, check_mcp, check_mcp_http, check_mcp_stdio,
    read_json,
};
