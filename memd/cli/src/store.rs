//! `memd share` and `memd store`: the shared PostgreSQL store from the command line.
//!
//! Owns the administration a person does by hand: bringing the schema up to date (`migrate`),
//! making a login role for a user (`add-user`), and sharing a memory with the team (`share`,
//! through the running daemon). Must never print or take a password on the command line:
//! passwords come from files.

use crate::query::connect;
use anyhow::{Context, Result};
use memd_engine::config::{Config, StoreConfig};
use memd_pg::connect::Target;
use proto::{ShareRequest, ShareResponse};
use std::path::Path;
use std::process::ExitCode;

/// `memd share <id> [--private]`.
pub fn run_share(id: &str, private: bool, json: bool) -> Result<ExitCode> {
    let client = connect()?;
    let resp: ShareResponse = client.post(
        "/api/share",
        &ShareRequest {
            id: id.to_string(),
            shared: !private,
        },
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
        return Ok(ExitCode::SUCCESS);
    }
    match (resp.shared, resp.shared_store) {
        (true, true) => println!("{} is shared with the team", resp.id),
        (true, false) => println!(
            "{} is marked shared; no shared store is configured, so it reaches nobody yet \
             (set store.url)",
            resp.id
        ),
        (false, _) => println!("{} is private", resp.id),
    }
    Ok(ExitCode::SUCCESS)
}

/// The store settings of the config, with `--url` instead of `store.url` if given.
fn target(url: Option<&str>) -> Result<Target> {
    let store = Config::load(None)
        .map(|c| c.store)
        .unwrap_or_else(|_| StoreConfig::default());
    match url {
        Some(u) => Target::from_url(u, &store),
        None => Target::new(&store),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// `memd store migrate`.
pub fn run_migrate(url: Option<&str>) -> Result<ExitCode> {
    let target = target(url)?;
    let done = runtime()?.block_on(memd_pg::migrate(&target))?;
    if done.from == done.to {
        println!(
            "{}: schema already at version {}",
            target.describe(),
            done.to
        );
    } else {
        println!(
            "{}: schema migrated from version {} to {}",
            target.describe(),
            done.from,
            done.to
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `memd store copy --from postgres://…`: this role's memories in the shared store, imported
/// into the running local daemon (known ids and identical contents are skipped).
pub fn run_copy_to_local(url: Option<&str>, json: bool) -> Result<ExitCode> {
    let target = target(url)?;
    let lines = runtime()?.block_on(memd_pg::own_memories(&target))?;
    if !json {
        println!(
            "{} memories of this role in {}",
            lines.iter().filter(|b| **b == b'\n').count(),
            target.describe()
        );
    }
    crate::transfer::import_lines(&lines, json)
}

/// `memd store add-user <name> [--password-file F]`.
pub fn run_add_user(
    name: &str,
    url: Option<&str>,
    password_file: Option<&Path>,
) -> Result<ExitCode> {
    let target = target(url)?;
    let password = match password_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
        )
        .filter(|pw| !pw.is_empty()),
        None => None,
    };
    runtime()?.block_on(async {
        let db = target.connect().await?;
        memd_pg::schema::add_user(&db, name, password.as_deref()).await
    })?;
    println!(
        "role {name} can use the shared store at {} (its memd connects as {name})",
        target.describe()
    );
    Ok(ExitCode::SUCCESS)
}
