//! The vocabulary of answers and the user's settings: [`Level`], the catalogue of static
//! [`RULES`] with their defaults, and the [`Policy`] that says which level each rule answers at
//! and which MCP servers are trusted.
//!
//! Must never decide anything about an action itself (that is `rules`), and must never let an
//! unknown rule name pass silently: a typo in the user's configuration is an error, not a
//! disabled rule.

use std::fmt;

/// How the guard answers. Ordered so that the strictest of several findings wins with `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Allow,
    Ask,
    Deny,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Ask => "ask",
            Level::Deny => "deny",
        }
    }

    /// `off` is accepted as a synonym of `allow` because that is how users think of switching a
    /// rule off in a configuration file.
    pub fn parse(s: &str) -> Option<Level> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") || s.eq_ignore_ascii_case("allow") {
            Some(Level::Allow)
        } else if s.eq_ignore_ascii_case("ask") {
            Some(Level::Ask)
        } else if s.eq_ignore_ascii_case("deny") {
            Some(Level::Deny)
        } else {
            None
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One static rule: its configuration name, its default level, and a line for docs and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInfo {
    pub name: &'static str,
    pub default: Level,
    pub what: &'static str,
}

/// Every static rule. The catastrophic ones deny by default; the ones that destroy data or
/// infrastructure off this machine's disks (or cannot be read to the end) ask; the high-risk
/// ones are opt-in (`Allow` until the user raises them) because they also match everyday work.
pub const RULES: &[RuleInfo] = &[
    RuleInfo {
        name: "rm_root",
        default: Level::Deny,
        what: "recursive delete of /, the home directory or a top-level system directory",
    },
    RuleInfo {
        name: "disk_wipe",
        default: Level::Deny,
        what: "formatting, wiping or writing raw data onto a block device",
    },
    RuleInfo {
        name: "force_push_default",
        default: Level::Deny,
        what: "force push (or delete, or mirror push) of a default branch such as main",
    },
    RuleInfo {
        name: "drop_database",
        default: Level::Deny,
        what: "DROP DATABASE / DROP SCHEMA … CASCADE / dropdb run against a database",
    },
    RuleInfo {
        name: "fork_bomb",
        default: Level::Deny,
        what: "a fork bomb (a function that spawns copies of itself without end)",
    },
    RuleInfo {
        name: "infra_destroy",
        default: Level::Ask,
        what: "tearing down infrastructure: terraform/tofu/pulumi destroy, kubectl delete namespace or --all, helm uninstall in production",
    },
    RuleInfo {
        name: "bucket_delete",
        default: Level::Ask,
        what: "recursive deletes in object storage: aws s3 rm --recursive, aws s3 rb --force, gsutil rm -r, gcloud storage rm -r, az storage blob delete-batch",
    },
    RuleInfo {
        name: "volume_prune",
        default: Level::Ask,
        what: "container pruning that deletes volumes: docker system prune -a --volumes, docker volume prune",
    },
    RuleInfo {
        name: "kv_flush",
        default: Level::Ask,
        what: "flushing a key-value store: redis-cli FLUSHALL / FLUSHDB",
    },
    RuleInfo {
        name: "perm_root",
        default: Level::Ask,
        what: "recursive chmod, chown or chgrp of /, the home directory or a system directory",
    },
    RuleInfo {
        name: "system_file",
        default: Level::Ask,
        what: "moving, truncating or overwriting a system file (/etc/passwd, /etc/fstab, /boot, binaries)",
    },
    RuleInfo {
        name: "git_dir_delete",
        default: Level::Ask,
        what: "deleting a repository's .git directory (its whole history)",
    },
    RuleInfo {
        name: "too_nested",
        default: Level::Ask,
        what: "a command nested deeper than the guard follows (8 levels of sh -c, eval, $(…)), which it cannot vouch for",
    },
    RuleInfo {
        name: "pipe_to_shell",
        default: Level::Allow,
        what: "a download run straight by an interpreter (curl … | sh and its variants)",
    },
    RuleInfo {
        name: "secret_exfiltration",
        default: Level::Allow,
        what: "a command line that reads a private key or secrets file and sends data off the machine",
    },
    RuleInfo {
        name: "chmod_world",
        default: Level::Allow,
        what: "making files world-writable recursively (chmod -R 777, o+w) or on /",
    },
    RuleInfo {
        name: "secret_read",
        default: Level::Allow,
        what: "the agent reading a private key or secrets file into its context",
    },
    RuleInfo {
        name: "mcp_unapproved",
        default: Level::Allow,
        what: "a tool of an MCP server that is not on the approved list",
    },
];

/// The rule called `name`, if there is one.
pub fn rule(name: &str) -> Option<&'static RuleInfo> {
    RULES.iter().find(|r| r.name == name)
}

/// What the user configured: a level per rule, and the MCP servers they trust.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Parallel to `RULES`, so a lookup is a short scan with no allocation.
    levels: Vec<Level>,
    approved_mcp: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            levels: RULES.iter().map(|r| r.default).collect(),
            approved_mcp: vec!["memd".to_string()],
        }
    }
}

impl Policy {
    pub fn set(&mut self, rule: &str, level: Level) -> Result<(), String> {
        let name = rule.trim();
        match RULES.iter().position(|r| r.name == name) {
            Some(i) => {
                self.levels[i] = level;
                Ok(())
            }
            None => {
                let known: Vec<&str> = RULES.iter().map(|r| r.name).collect();
                Err(format!(
                    "unknown guard rule `{name}`; the rules are: {}",
                    known.join(", ")
                ))
            }
        }
    }

    /// Unknown names answer `Allow`: a rule the policy does not know cannot have been enabled.
    pub fn level(&self, rule: &str) -> Level {
        RULES
            .iter()
            .position(|r| r.name == rule)
            .and_then(|i| self.levels.get(i).copied())
            .unwrap_or(Level::Allow)
    }

    pub fn approve_mcp_server(&mut self, server: &str) {
        let server = server.trim();
        if !server.is_empty() && !self.is_mcp_server_approved(server) {
            self.approved_mcp.push(server.to_string());
        }
    }

    pub fn is_mcp_server_approved(&self, server: &str) -> bool {
        let server = server.trim();
        self.approved_mcp.iter().any(|s| s == server)
    }

    pub fn approved_mcp_servers(&self) -> &[String] {
        &self.approved_mcp
    }
}
