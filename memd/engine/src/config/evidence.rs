//! `[evidence]`: whether the tool evidence scores abandoned exchanges and boosts memories.
//!
//! Owns the section's fields and defaults only. Must never import an operation: the settings sit
//! below everything that reads them.

use serde::Deserialize;

/// `[evidence]` in config.toml. Both parts are experimental: bench/EVAL.md section 8 measures
/// each with and without.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvidenceConfig {
    /// An exchange nobody scored takes its turn's tool verdict as its outcome when a failing
    /// command passed (`worked`).
    pub outcomes: bool,
    /// With `outcomes`: a command failing again counts as `failed` too. Off by default:
    /// `memd-eval evidence` measured it deleting right notes shown beside a wrong one (bench/EVAL.md
    /// section 8).
    pub failures: bool,
    /// Memories naming a command or file of the conversation's recent tool events move up.
    pub boost: bool,
}

impl EvidenceConfig {
    /// Whether tool results need keeping at all.
    pub fn tracking(&self) -> bool {
        self.outcomes || self.boost
    }
}
