//! `memd status` and `memd stats`: what the running daemon reports, for people and scripts.
//!
//! Owns the presentation of `/api/health` and `/api/stats`. Never starts the daemon: when it is
//! down, that is the answer (exit 1).

use super::client::{Client, ClientError};
use anyhow::Result;
use memd_engine::config::Config;
use proto::{HealthResponse, StatsResponse};
use std::process::ExitCode;

pub fn run_status(json: bool) -> Result<ExitCode> {
    let cfg = Config::load(None)?;
    let client = Client::new(&cfg);
    let health = match client.health() {
        Ok(h) => h,
        Err(e) => return Ok(report_down(&cfg, &client, &e, json)),
    };
    let stats = client.get::<StatsResponse>("/api/stats");
    if json {
        let mut v = serde_json::json!({
            "running": true,
            "data_dir": cfg.data_dir,
            "health": health,
            "service": super::service::state_word(),
        });
        match &stats {
            Ok(s) => {
                v["recent_hooks"] = serde_json::to_value(&s.recent_hooks)?;
                v["prompt_rerank"] = serde_json::to_value(s.index.prompt_rerank)?;
                v["pending_token_states"] = serde_json::Value::from(s.index.pending_token_states);
                v["pending_reindex"] = serde_json::Value::from(s.index.pending_reindex);
                v["sidecar"] = serde_json::to_value(&s.sidecar)?;
            }
            Err(e) => v["stats_error"] = serde_json::Value::from(e.to_string()),
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_health(&cfg, &health);
    match &stats {
        Ok(s) => {
            print_hooks(s);
            println!("prompts:   {}", prompt_rerank(&s.index.prompt_rerank));
            print_token_states(s);
            print_sidecar(s);
            print_shared_store(s);
        }
        Err(e) => println!("details:   unavailable ({e})"),
    }
    println!("service:   {}", super::service::state_word());
    Ok(ExitCode::SUCCESS)
}

/// `3 reranked, 1 over budget (1 late encoding, 0 MaxSim cut short), 0 shed (25.0% kept the
/// fused order)`: how prompts fared against
/// the reranking budget since the daemon started (the share only once there was a prompt), and
/// how many had nothing to rerank (when any).
fn prompt_rerank(pr: &proto::PromptRerankStats) -> String {
    let fell_back = pr.over_budget + pr.shed;
    let share = match pr.reranked + fell_back {
        0 => String::new(),
        n => format!(
            " ({:.1}% kept the fused order)",
            fell_back as f64 * 100.0 / n as f64
        ),
    };
    let nothing = match pr.nothing_to_rerank {
        0 => String::new(),
        n => format!("; {n} with nothing to rerank"),
    };
    format!(
        "{} reranked, {} over budget ({} late encoding, {} MaxSim cut short), {} shed\
         {share}{nothing}",
        pr.reranked, pr.over_budget, pr.late_encoding_late, pr.maxsim_cut_short, pr.shed
    )
}

fn print_shared_store(s: &StatsResponse) {
    let Some(st) = &s.shared_store else {
        println!("shared:    none (local only)");
        return;
    };
    let state = match (st.connected, &st.last_error) {
        (true, _) => format!(
            "connected as {}, {:.1} ms",
            st.role.as_deref().unwrap_or("?"),
            st.latency_ms.unwrap_or(0.0)
        ),
        (false, Some(e)) => format!("unreachable ({e})"),
        (false, None) => "connecting".to_string(),
    };
    println!(
        "shared:    {} {state}; {} waiting to be sent, {} from other machines",
        st.target, st.backlog, st.mirrored
    );
}

fn report_down(cfg: &Config, client: &Client, e: &ClientError, json: bool) -> ExitCode {
    if json {
        let v = serde_json::json!({
            "running": false,
            "port": client.port,
            "data_dir": cfg.data_dir,
            "error": e.to_string(),
            "service": super::service::state_word(),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        println!("{e}");
        if let Some(info) = super::client::daemon_info(&cfg.data_dir) {
            println!(
                "(a daemon with pid {} announced port {} but does not answer; it may have \
                 crashed or hang: `memd restart` stops what is left of it and starts a new one)",
                info.pid, info.port
            );
        }
        println!("service:   {}", super::service::state_word());
    }
    ExitCode::FAILURE
}

fn print_health(cfg: &Config, h: &HealthResponse) {
    println!(
        "memd {} running (pid {}, 127.0.0.1:{}, data {})",
        h.version,
        h.pid,
        h.port,
        cfg.data_dir.display()
    );
    match (&h.model_error, h.model_loaded) {
        (_, true) => println!("model:     loaded"),
        (Some(why), false) => println!(
            "model:     not loaded: {}",
            why.replace('\n', "\n           ")
        ),
        (None, false) => println!("model:     not loaded"),
    }
    let counts: Vec<String> = h.counts.iter().map(|(c, n)| format!("{c} {n}")).collect();
    println!("memories:  {}", counts.join(", "));
    println!(
        "dashboard: http://127.0.0.1:{}/ui (`memd ui` logs a browser in)",
        h.port
    );
}

/// While memories' token states are being encoded in the background (new memories, or all of
/// them after an upgrade or a change of the late-interaction model), how far along it is.
fn print_token_states(s: &StatsResponse) {
    let ix = &s.index;
    if ix.pending_token_states > 0 {
        println!(
            "states:    encoding token states in the background: {} of {} memories done, {} \
             waiting",
            ix.token_states.min(ix.token_states_total),
            ix.token_states_total,
            ix.pending_token_states
        );
    }
    if ix.pending_reindex > 0 {
        println!(
            "reindex:   conversation turns indexed again with their dates in the background: {} \
             waiting",
            ix.pending_reindex
        );
    }
}

fn print_hooks(s: &StatsResponse) {
    if s.recent_hooks.is_empty() {
        println!("hooks:     no hook calls since the daemon started");
        return;
    }
    println!(
        "hooks:     last {} calls (newest first):",
        s.recent_hooks.len().min(5)
    );
    for call in s.recent_hooks.iter().take(5) {
        println!(
            "  {}  {:<26} {:>8}  {}",
            call.at,
            call.endpoint,
            ms(call.micros),
            call.status
        );
    }
}

fn print_sidecar(s: &StatsResponse) {
    let sc = &s.sidecar;
    println!(
        "sidecar:   remote {}, {} of {} runs today",
        if sc.remote_enabled { "on" } else { "off" },
        sc.calls_today,
        sc.daily_cap
    );
    if let Some(a) = sc.attempts.last() {
        println!(
            "  last attempt: {} {} → {} ({} ms, {})",
            a.target, a.model, a.result, a.latency_ms, a.at
        );
    }
    for c in &sc.cooling {
        println!("  cooling down: {} until {} ({})", c.key, c.until, c.reason);
    }
}

pub fn ms(micros: u64) -> String {
    format!("{:.1} ms", micros as f64 / 1000.0)
}

pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

pub fn run_stats(json: bool) -> Result<ExitCode> {
    let cfg = Config::load(None)?;
    let client = Client::new(&cfg);
    let stats: StatsResponse = client.get("/api/stats")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<12} {:>8} {:>8} {:>11}",
        "collection", "count", "scored", "mean score"
    );
    for (name, c) in &stats.collections {
        println!(
            "{name:<12} {:>8} {:>8} {:>11.2}",
            c.count, c.scored, c.mean_score
        );
    }
    let ix = &stats.index;
    println!(
        "index:     {} vectors, {} waiting for embedding, {} lexical docs ({})",
        ix.vectors, ix.pending_embeddings, ix.lexical_docs, ix.state
    );
    println!(
        "rerank:    token states of {} / {} memories ({} {} in memory, {} on disk in {}; {} \
         waiting); prompts since start: {}",
        ix.token_states,
        ix.token_states_total,
        human_bytes(ix.token_state_bytes as u64),
        if ix.token_states_coded { "coded" } else { "i8" },
        ix.token_states_on_disk,
        human_bytes(ix.token_state_disk_bytes),
        ix.pending_token_states,
        prompt_rerank(&ix.prompt_rerank)
    );
    let lifecycle: Vec<String> = stats
        .lifecycle
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "lifecycle: {}",
        if lifecycle.is_empty() {
            "nothing yet".into()
        } else {
            lifecycle.join(", ")
        }
    );
    let graph: Vec<String> = stats
        .knowledge_graph
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "knowledge graph: {}",
        if graph.is_empty() {
            "empty".into()
        } else {
            graph.join(", ")
        }
    );
    println!("disk:      {}", human_bytes(stats.disk_bytes));
    print!("{}", memory_table(&stats.memory));
    Ok(ExitCode::SUCCESS)
}

/// The memory breakdown: resident set, then each component (largest first), then the rest.
fn memory_table(m: &proto::MemoryStats) -> String {
    if m.rss_bytes == 0 && m.components.is_empty() {
        return String::new();
    }
    let mut out = format!("memory:    {} resident\n", human_bytes(m.rss_bytes));
    let mut parts: Vec<(&String, &u64)> = m.components.iter().collect();
    parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (name, bytes) in parts {
        let how = match m.measured_at_load.contains(name) {
            true => "  (growth measured at load)",
            false => "",
        };
        out.push_str(&format!("  {name:<24} {:>10}{how}\n", human_bytes(*bytes)));
    }
    out.push_str(&format!(
        "  {:<24} {:>10}\n",
        "unattributed",
        human_bytes(m.unattributed_bytes)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_table_lists_components_largest_first() {
        let m = proto::MemoryStats {
            rss_bytes: 300 << 20,
            components: [
                ("records".to_string(), 2 << 20),
                ("model.embedder".to_string(), 90 << 20),
            ]
            .into_iter()
            .collect(),
            measured_at_load: vec!["model.embedder".into()],
            unattributed_bytes: 208 << 20,
        };
        let table = memory_table(&m);
        let embedder = table.find("model.embedder").expect("embedder listed");
        let records = table.find("records").expect("records listed");
        assert!(embedder < records, "{table}");
        assert!(
            table.contains("measured at load") && table.contains("unattributed"),
            "{table}"
        );
        assert_eq!(memory_table(&proto::MemoryStats::default()), "");
    }

    #[test]
    fn sizes_and_latencies_read_well() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MB");
        assert_eq!(ms(2345), "2.3 ms");
    }
}
