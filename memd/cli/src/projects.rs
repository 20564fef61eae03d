//! `memd projects` and `memd projects forget <id>`: the projects memd keeps memories for.
//!
//! Owns the table of projects (memories per collection, last use, where the repository was
//! seen) and the confirmation before one project's memories are deleted. Must never delete
//! without a yes (typed, or `--yes`), and never touch global memories (the daemon guarantees
//! it; this module never asks for it).

use super::client::{self, Client};
use anyhow::Result;
use memd_engine::config::Config;
use proto::{Collection, ForgetProjectRequest, ForgetProjectResponse, ProjectsResponse};
use std::collections::BTreeMap;
use std::process::ExitCode;

fn connect() -> Result<Client> {
    let cfg = Config::load(None)?;
    client::connect(&cfg, true)
}

pub fn run_list(json: bool) -> Result<ExitCode> {
    let resp: ProjectsResponse = connect()?.get("/api/projects")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
        return Ok(ExitCode::SUCCESS);
    }
    if resp.projects.is_empty() {
        println!("No project-scoped memories yet: every memory is global.");
    }
    for p in &resp.projects {
        println!("{}", p.id);
        println!("    {}", counts_line(&p.memories, p.total));
        if let Some(when) = &p.last_used {
            println!("    last used {when}");
        }
        if let Some(root) = &p.root {
            println!("    at {root}");
        }
    }
    let global: usize = resp.global.values().sum();
    println!("global (every project)");
    println!("    {}", counts_line(&resp.global, global));
    Ok(ExitCode::SUCCESS)
}

/// `12 memories: working 8, history 2, memory_bank 2`.
fn counts_line(per: &BTreeMap<String, usize>, total: usize) -> String {
    let parts: Vec<String> = Collection::ALL
        .iter()
        .filter_map(|c| per.get(c.as_str()).map(|n| format!("{} {n}", c.as_str())))
        .collect();
    let noun = if total == 1 { "memory" } else { "memories" };
    if parts.is_empty() {
        format!("{total} {noun}")
    } else {
        format!("{total} {noun}: {}", parts.join(", "))
    }
}

pub fn run_forget(project: &str, yes: bool, json: bool) -> Result<ExitCode> {
    let client = connect()?;
    let list: ProjectsResponse = client.get("/api/projects")?;
    let Some(found) = list.projects.iter().find(|p| p.id == project) else {
        anyhow::bail!("no project {project:?}; `memd projects` lists the known ones");
    };
    if !yes
        && !super::init::confirm(&format!(
            "Delete all {} memories of {project}? Global memories stay. This cannot be undone. [y/N] ",
            found.total
        ))?
    {
        println!("Kept {project}.");
        return Ok(ExitCode::FAILURE);
    }
    let resp: ForgetProjectResponse = client.post(
        "/api/projects/forget",
        &ForgetProjectRequest {
            project: project.to_string(),
        },
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
    } else {
        println!(
            "forgot {project}: {} memories deleted, {} conversations dropped",
            resp.deleted, resp.conversations
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_collection_order() {
        let per: BTreeMap<String, usize> = [("working".into(), 8), ("memory_bank".into(), 2)]
            .into_iter()
            .collect();
        assert_eq!(
            counts_line(&per, 10),
            "10 memories: working 8, memory_bank 2"
        );
        assert_eq!(counts_line(&BTreeMap::new(), 0), "0 memories");
    }
}
