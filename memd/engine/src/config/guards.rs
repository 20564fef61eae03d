//! `[guards]` in config.toml: the level of each guard rule, and the MCP servers the user trusts.
//!
//! Owns reading the section (rule name = "off" | "ask" | "deny", `mcp_approved` = [names],
//! `learned_from_teammates` = true | false) with
//! errors that name the key, and turning it into the `memd-guard` policy plus the level of the
//! learned guardrails. Must never accept a rule name it does not know (a typo would silently
//! leave a rule at its default).

use memd_guard::{Level, Policy};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The learned guardrails' rule name (not a static rule: the daemon applies it from memories).
pub const LEARNED: &str = "learned";

/// The section as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuardsConfig {
    /// Rule name → level, for the rules the user set.
    pub levels: BTreeMap<String, Level>,
    /// MCP servers whose tools pass the `mcp_unapproved` rule (memd's own always does).
    pub mcp_approved: Vec<String>,
    /// Whether a teammate's memory (from the shared store, written by another role) may guard
    /// this machine. Off: another user's fact must never make your tools ask.
    pub learned_from_teammates: bool,
}

/// The key of [`GuardsConfig::learned_from_teammates`].
pub const LEARNED_FROM_TEAMMATES: &str = "learned_from_teammates";

impl<'de> Deserialize<'de> for GuardsConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = BTreeMap::<String, toml::Value>::deserialize(d)?;
        GuardsConfig::from_table(table).map_err(serde::de::Error::custom)
    }
}

impl GuardsConfig {
    fn from_table(table: BTreeMap<String, toml::Value>) -> Result<GuardsConfig, String> {
        let mut out = GuardsConfig::default();
        for (key, value) in table {
            if key == "mcp_approved" {
                let names = value
                    .as_array()
                    .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
                    .ok_or("guards.mcp_approved must be a list of server names")?;
                out.mcp_approved = names;
                continue;
            }
            if key == LEARNED_FROM_TEAMMATES {
                out.learned_from_teammates = value
                    .as_bool()
                    .ok_or("guards.learned_from_teammates must be true or false")?;
                continue;
            }
            if key != LEARNED && !memd_guard::RULES.iter().any(|r| r.name == key) {
                return Err(format!(
                    "guards.{key} is not a guard rule (known: {}, {LEARNED}, \
                     {LEARNED_FROM_TEAMMATES}, mcp_approved)",
                    rule_names()
                ));
            }
            let level = value
                .as_str()
                .and_then(Level::parse)
                .ok_or_else(|| format!("guards.{key} must be \"off\", \"ask\" or \"deny\""))?;
            // Memories can be written by the agent (and by whatever it reads): a learned
            // guardrail may make the user look, never refuse on its own.
            if key == LEARNED && level == Level::Deny {
                return Err(format!(
                    "guards.{LEARNED} can be \"off\" or \"ask\", not \"deny\""
                ));
            }
            out.levels.insert(key, level);
        }
        Ok(out)
    }

    /// The static rules' policy: the defaults, then the user's levels and approved servers.
    pub fn policy(&self) -> Policy {
        let mut policy = Policy::default();
        for (rule, level) in &self.levels {
            // Names were checked when the file was read; `learned` is not a static rule.
            let _ = policy.set(rule, *level);
        }
        for server in &self.mcp_approved {
            policy.approve_mcp_server(server);
        }
        policy
    }

    /// How a learned guardrail answers (ask unless the user chose otherwise).
    pub fn learned(&self) -> Level {
        self.levels.get(LEARNED).copied().unwrap_or(Level::Ask)
    }
}

fn rule_names() -> String {
    memd_guard::RULES
        .iter()
        .map(|r| r.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GuardsConfig, String> {
        toml::from_str::<BTreeMap<String, GuardsConfig>>(text)
            .map(|mut m| m.remove("guards").unwrap_or_default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn levels_and_servers_are_read_and_typos_named() {
        let g = parse(
            "[guards]\npipe_to_shell = \"ask\"\nlearned = \"off\"\nmcp_approved = [\"github\"]\n",
        )
        .unwrap();
        assert_eq!(g.levels.get("pipe_to_shell"), Some(&Level::Ask));
        assert_eq!(g.learned(), Level::Allow);
        assert_eq!(g.policy().level("pipe_to_shell"), Level::Ask);
        assert_eq!(g.mcp_approved, ["github"]);
        let e = parse("[guards]\nrm_rot = \"deny\"\n").unwrap_err();
        assert!(e.contains("guards.rm_rot is not a guard rule"), "{e}");
        let e = parse("[guards]\nlearned = \"deny\"\n").unwrap_err();
        assert!(e.contains("not \"deny\""), "{e}");
        let e = parse("[guards]\nlearned_from_teammates = \"yes\"\n").unwrap_err();
        assert!(
            e.contains("guards.learned_from_teammates must be true or false"),
            "{e}"
        );
        assert!(
            parse("[guards]\nlearned_from_teammates = true\n")
                .unwrap()
                .learned_from_teammates
        );
        let e = parse("[guards]\nrm_root = \"block\"\n").unwrap_err();
        assert!(e.contains("guards.rm_root must be"), "{e}");
    }

    #[test]
    fn defaults_deny_the_catastrophic_and_ask_for_learned() {
        let g = GuardsConfig::default();
        assert_eq!(g.learned(), Level::Ask);
        assert!(
            !g.learned_from_teammates,
            "a teammate's memory guards nothing here by default"
        );
        assert_eq!(g.policy().level("rm_root"), Level::Deny);
        assert_eq!(g.policy().level("infra_destroy"), Level::Ask);
        assert_eq!(g.policy().level("pipe_to_shell"), Level::Allow);
    }
}
