//! Deciding when `hook-stop` may score an exchange itself, and with which endpoints.
//!
//! Owns the sidecar chain's configuration as the hook receives it (seed 000, option 2: memd
//! passes the chain in `sidecar_data`, so the hook needs no config of its own), the rate limits
//! (one run per conversation at a time, none within 10 s of the last, a daily cap) and the
//! cooling periods derived from reported attempts. Must never let a remote target through unless
//! the user opted in, and never put an API key anywhere but the loopback answer to the hook.

use super::Hooks;
use super::format;
use crate::clock::{self, DAY_MS, MINUTE_MS};
use crate::config::SidecarConfig;
use crate::error::ApiError;
use crate::state::Db;
use crate::state::ops::Op;
use crate::state::session::SessionOp;
use proto::{
    CoolingEntry, ExchangeText, SidecarData, SidecarMemory, SidecarStatus, SidecarTarget,
    TargetKind,
};

/// A failing model is skipped for this long.
const MODEL_COOLING_MS: i64 = 10 * MINUTE_MS;
/// A target that refused us (Zen's FreeTierError) is skipped for a day.
const REFUSAL_COOLING_MS: i64 = DAY_MS;
pub const ZEN_BASE: &str = "https://opencode.ai/zen/v1";
/// Used when Zen's `/models` cannot be read.
pub const ZEN_FALLBACK_MODELS: [&str; 3] =
    ["big-pickle", "deepseek-v4-flash-free", "mimo-v2.5-free"];

/// Hands out one sidecar run for `conv` if the rate limits allow it.
pub async fn claim(h: &Hooks<'_>, conv: &str) -> Result<Option<SidecarData>, ApiError> {
    let now = clock::now_ms();
    let cfg = &h.cfg.sidecar;
    let targets = targets(cfg);
    if targets.is_empty() {
        return Ok(None);
    }
    let data = h.db.read(|s| {
        let c = s.sessions.get(conv)?;
        if c.sidecar_lease_until > now
            || now - c.last_sidecar_at < crate::state::session::SIDECAR_MIN_SPACING_MS
        {
            return None;
        }
        let runs_today = s
            .counters
            .get(&crate::state::sidecar_day_counter(now))
            .copied()
            .unwrap_or(0);
        if runs_today >= u64::from(cfg.daily_cap) {
            return None;
        }
        let target = c.target.as_ref().filter(|t| !t.scored)?;
        let memories = target
            .injected
            .iter()
            .filter_map(|id| s.by_id(id))
            .map(|r| SidecarMemory {
                id: r.id.clone(),
                content: r.content.clone(),
            })
            .collect();
        Some(SidecarData {
            conversation_id: conv.to_string(),
            exchange: ExchangeText {
                user: target.user.clone(),
                assistant: target.assistant.clone(),
            },
            memories,
            current_user_message: c.current_prompt.clone(),
            targets: targets.clone(),
            per_model_ms: cfg.per_model_ms,
            total_ms: cfg.total_ms,
            skip: cooling(s.sidecar_attempts.iter(), now)
                .into_iter()
                .map(|c| c.key)
                .collect(),
        })
    });
    let Some(mut data) = data else {
        return Ok(None);
    };
    for t in &mut data.targets {
        if t.kind != TargetKind::Local {
            t.api_key = read_key(cfg);
        }
    }
    // The lease op re-checks the limits when applied, so two stops racing get one run.
    let granted =
        h.db.commit_one(Op::Session(SessionOp::SidecarLease {
            conv: conv.to_string(),
            at: now,
            until: now + cfg.total_ms as i64 + 5_000,
        }))
        .await?;
    Ok(matches!(granted, crate::state::ops::Output::Done).then_some(data))
}

fn is_loopback_url(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or("");
    let host = rest.split(['/', ':']).next().unwrap_or("");
    matches!(host, "127.0.0.1" | "localhost" | "[" | "::1") || rest.starts_with("[::1]")
}

/// The ordered chain: the user's endpoint, local servers, then Zen (remote targets only when
/// the user opted in).
pub fn targets(cfg: &SidecarConfig) -> Vec<SidecarTarget> {
    let mut out = Vec::new();
    if let Some(url) = &cfg.url
        && (cfg.remote || is_loopback_url(url))
    {
        out.push(SidecarTarget {
            name: "user".into(),
            kind: TargetKind::User,
            base_url: url.trim_end_matches('/').to_string(),
            models: cfg.models.clone(),
            api_key: None,
            discover_models: cfg.models.is_empty(),
        });
    }
    if cfg.local {
        for (name, url) in [
            ("ollama", "http://127.0.0.1:11434/v1"),
            ("lmstudio", "http://127.0.0.1:1234/v1"),
        ] {
            out.push(SidecarTarget {
                name: name.into(),
                kind: TargetKind::Local,
                base_url: url.into(),
                models: Vec::new(),
                api_key: None,
                discover_models: true,
            });
        }
    }
    if cfg.zen && cfg.remote {
        out.push(SidecarTarget {
            name: "zen".into(),
            kind: TargetKind::Zen,
            base_url: ZEN_BASE.into(),
            models: ZEN_FALLBACK_MODELS.iter().map(|m| m.to_string()).collect(),
            api_key: None,
            discover_models: true,
        });
    }
    out
}

fn read_key(cfg: &SidecarConfig) -> Option<String> {
    if let Some(var) = &cfg.key_env
        && let Ok(v) = std::env::var(var)
        && !v.trim().is_empty()
    {
        return Some(v.trim().to_string());
    }
    let path = cfg.key_file.as_ref()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                "ignoring sidecar key file {}: mode {:o} is readable by others (chmod 600 it)",
                path.display(),
                mode & 0o777
            );
            return None;
        }
    }
    std::fs::read_to_string(path)
        .ok()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
}

/// Models and targets to skip now, from recent attempts.
pub fn cooling<'a>(
    attempts: impl Iterator<Item = &'a (i64, proto::SidecarAttempt)>,
    now: i64,
) -> Vec<CoolingEntry> {
    let mut out: Vec<CoolingEntry> = Vec::new();
    for (at, a) in attempts {
        let (key, until, reason) = if a.result.starts_with("refused") {
            (
                format!("{}/*", a.target),
                at + REFUSAL_COOLING_MS,
                a.result.clone(),
            )
        } else if a.result.starts_with("ok")
            || a.result == "connect_refused"
            || a.result == "skipped"
        {
            continue;
        } else {
            (
                format!("{}/{}", a.target, a.model),
                at + MODEL_COOLING_MS,
                a.result.clone(),
            )
        };
        if until <= now {
            continue;
        }
        out.retain(|c| c.key != key);
        out.push(CoolingEntry {
            key,
            until: clock::rfc3339(until),
            reason,
        });
    }
    out
}

impl Hooks<'_> {
    /// `POST /api/sidecar/report`: remembers what a sidecar run tried (no content), so failing
    /// models cool down across hook runs and `memd status` can show it.
    pub async fn sidecar_report(
        &self,
        req: &proto::SidecarReport,
    ) -> Result<proto::SuccessResponse, ApiError> {
        let conv = super::validate_conversation(&req.conversation_id)?;
        if req.attempts.len() > 64 {
            return Err(ApiError::bad("attempts", "at most 64 attempts per report"));
        }
        let attempts: Vec<proto::SidecarAttempt> = req
            .attempts
            .iter()
            .map(|a| proto::SidecarAttempt {
                at: String::new(),
                target: format::clip(&crate::redact::scrub(&a.target).text, 64),
                model: format::clip(&crate::redact::scrub(&a.model).text, 128),
                status: a.status,
                latency_ms: a.latency_ms,
                result: format::clip(&crate::redact::scrub(&a.result).text, 64),
            })
            .collect();
        self.trace.append(&crate::trace::TraceEntry::sidecar(
            &conv,
            req.scored,
            req.attempts.len(),
        ));
        self.db
            .commit_one(Op::SidecarAttempts {
                at: clock::now_ms(),
                attempts,
            })
            .await?;
        Ok(proto::SuccessResponse { success: true })
    }
}

/// Sidecar bookkeeping for `memd status` and `/api/stats`.
pub fn sidecar_status(cfg: &SidecarConfig, db: &Db) -> SidecarStatus {
    let now = clock::now_ms();
    db.read(|s| SidecarStatus {
        remote_enabled: cfg.remote,
        calls_today: s
            .counters
            .get(&crate::state::sidecar_day_counter(now))
            .copied()
            .unwrap_or(0) as u32,
        daily_cap: cfg.daily_cap,
        attempts: s
            .sidecar_attempts
            .iter()
            .rev()
            .take(20)
            .map(|(at, a)| proto::SidecarAttempt {
                at: clock::rfc3339(*at),
                ..a.clone()
            })
            .collect(),
        cooling: cooling(s.sidecar_attempts.iter(), now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_targets_need_opt_in() {
        let mut cfg = SidecarConfig {
            url: Some("https://api.example.com/v1".into()),
            models: vec!["m".into()],
            zen: true,
            ..SidecarConfig::default()
        };
        let names: Vec<String> = targets(&cfg).into_iter().map(|t| t.name).collect();
        assert_eq!(names, vec!["ollama", "lmstudio"]);
        cfg.remote = true;
        let names: Vec<String> = targets(&cfg).into_iter().map(|t| t.name).collect();
        assert_eq!(names, vec!["user", "ollama", "lmstudio", "zen"]);
    }

    #[test]
    fn loopback_user_endpoint_needs_no_opt_in() {
        let cfg = SidecarConfig {
            url: Some("http://127.0.0.1:9999/v1".into()),
            local: false,
            ..SidecarConfig::default()
        };
        assert_eq!(targets(&cfg).len(), 1);
    }

    #[test]
    fn refusals_cool_the_whole_target_for_a_day() {
        let a = |result: &str, model: &str| proto::SidecarAttempt {
            target: "zen".into(),
            model: model.into(),
            result: result.into(),
            ..Default::default()
        };
        let attempts = [
            (0, a("refused:FreeTierError", "big-pickle")),
            (0, a("http:500", "x")),
            (0, a("ok:worked", "y")),
        ];
        let c = cooling(attempts.iter(), 60_000);
        let keys: Vec<&str> = c.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, vec!["zen/*", "zen/x"]);
        let later = cooling(attempts.iter(), MODEL_COOLING_MS + 1);
        assert_eq!(later.len(), 1, "model cooling ends before the refusal's");
    }
}
