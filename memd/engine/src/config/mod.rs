//! Configuration: `config.toml` in the config dir, then environment overrides.
//!
//! Owns every tunable the daemon reads at start (port, data dir, context budgets, learning
//! switches, sidecar chain). Must never read secrets into fields that get logged or serialised
//! to clients: the sidecar key is read from a file or an env var only when a hook needs it.

pub mod evidence;
pub mod guards;

use anyhow::{Context, Result, bail};
use proto::settings::Settings;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Everything `memd serve` needs, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub data_dir: PathBuf,
    pub config_file: Option<PathBuf>,
    pub context: ContextConfig,
    pub learning: LearningConfig,
    pub sidecar: SidecarConfig,
    pub cursor: CursorConfig,
    pub search: SearchConfig,
    pub store: StoreConfig,
    pub ui: UiConfig,
    pub guards: guards::GuardsConfig,
    pub evidence: evidence::EvidenceConfig,
}

/// The dashboard (`memd ui`, served under `/ui`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UiConfig {
    /// Seconds a login link from `memd ui` works (1-600). It works once either way; longer
    /// suits a link copied from a remote shell into a local browser by hand.
    pub link_ttl_secs: u64,
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig { link_ttl_secs: 60 }
    }
}

/// The shared store (issue 14): a PostgreSQL database with pgvector that several daemons (a
/// user's machines, a team) share. Without `url`, memd is local only.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://ROLE@HOST:PORT/DB` (add `?sslmode=require` for TLS). `MEMD_STORE_URL`
    /// overrides. Never with a password in it: see `password_file`.
    pub url: Option<String>,
    /// A file whose first line is the password. Without it, the standard `PGPASSFILE` (or
    /// `~/.pgpass`) is read; without either, no password is sent.
    pub password_file: Option<PathBuf>,
    /// PEM certificates to trust for TLS, in addition to the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Milliseconds between two exchanges with the shared store (50-60000).
    pub sync_ms: u64,
    /// Milliseconds one exchange with the shared store may take (100-60000); past it the
    /// store counts as down and changes wait in the local log.
    pub timeout_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            password_file: None,
            ca_file: None,
            sync_ms: 1000,
            timeout_ms: 5000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// At most this many memories are injected per prompt.
    pub max_memories: usize,
    /// Token budget for memory text in one injection (≈ 4 chars per token).
    pub token_budget: usize,
    /// Cosine similarity below which a memory is not relevant enough to inject.
    pub relevance_floor: f32,
    /// Per-conversation state is forgotten after this many hours without activity.
    pub session_ttl_hours: u64,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            max_memories: 5,
            token_budget: 400,
            relevance_floor: 0.35,
            session_ttl_hours: 7 * 24,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearningConfig {
    /// Scale outcome deltas by `1/(1 + age_days/30)` (seed 001). Off: a score is a score.
    pub time_weighting: bool,
    /// How much the outcome prior may move a relevance score (bounded; see `learn`).
    pub prior_weight: f64,
    /// Relevance multiplier for raw exchange records ("User: … Assistant: …", stored at every
    /// stop) against curated notes. They repeat the user's wording, so without it they
    /// outrank the notes that answer the question (bench/EVAL.md).
    pub exchange_weight: f64,
    /// Multiply each candidate's relevance by its collection's routing boost (how well that
    /// collection's memories did for queries sharing the prompt's concepts).
    pub graph_boosts: bool,
}

/// Chosen with `memd-eval learning` (bench/EVAL.md).
pub const EXCHANGE_WEIGHT: f64 = 0.7;

/// Off: the routing boosts did not help measurably (bench/EVAL.md, section 4). In `memd-eval
/// learning --graph-boosts on,off` at the shipped prior 0.15 they turned 91 right / 23 wrong
/// injections into 92 / 23 and changed no eviction; over prior weights 0–0.6 right injections
/// gained 0–4, wrong ones none, and eviction was worse at 0.25 and 0.40, better at 0.60.
/// LoCoMo recall is identical either way (one collection, nothing scored).
pub const GRAPH_BOOSTS: bool = false;

impl Default for LearningConfig {
    fn default() -> Self {
        LearningConfig {
            time_weighting: false,
            prior_weight: 0.15,
            exchange_weight: EXCHANGE_WEIGHT,
            graph_boosts: GRAPH_BOOSTS,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SidecarConfig {
    /// Remote targets (anything not on loopback) are used only when this is true.
    pub remote: bool,
    /// The user's own OpenAI-compatible endpoint (base URL ending in `/v1`).
    pub url: Option<String>,
    pub models: Vec<String>,
    /// File holding the API key (must be mode 0600).
    pub key_file: Option<PathBuf>,
    /// Environment variable holding the API key (read by the daemon, never logged).
    pub key_env: Option<String>,
    /// Try Ollama and LM Studio on loopback.
    pub local: bool,
    /// Try OpenCode Zen's free models (remote; needs `remote = true`).
    pub zen: bool,
    /// Hard cap on sidecar runs per day, whatever happens.
    pub daily_cap: u32,
    pub per_model_ms: u64,
    pub total_ms: u64,
}

impl Default for SidecarConfig {
    fn default() -> Self {
        SidecarConfig {
            remote: false,
            url: None,
            models: Vec::new(),
            key_file: None,
            key_env: None,
            local: true,
            zen: false,
            daily_cap: 200,
            per_model_ms: 6_000,
            total_ms: 15_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CursorConfig {
    /// Keep `<workspace>/.cursor/rules/memd-context.mdc` (alwaysApply) current with the context.
    pub rules_file: bool,
}

/// The second stage behind the fused ranking: late interaction (ColBERT MaxSim) on prompts and
/// searches, the cross-encoder after it on searches (`/api/search`, MCP).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// Rerank at all (both models load in the background; until then, the fused order).
    pub rerank: bool,
    /// How many fused results late interaction reorders (1-100), together with those of the
    /// vector list's first `retrieve::VECTOR_CANDIDATES` that fusion left out.
    pub rerank_depth: usize,
    /// How many of those the cross-encoder then reorders on searches (0-100; 0: never, and the
    /// model is not loaded). Not on the prompt path: ~9 ms a pair.
    pub cross_encoder_depth: usize,
    /// Milliseconds reranking may add to a prompt, counted from the end of the first stage:
    /// the wait for the query's late-interaction states (encoded beside its embedding) and
    /// MaxSim; what is not done by then keeps the fused order (0-1000).
    pub prompt_budget_ms: u64,
    /// Memory the token states may take, in MiB (1-4096). Once a store has ~300 memories
    /// they are 16-byte codes of the words' tokens (~450 bytes a LoCoMo turn; the full states
    /// live in a log on disk): 64 MiB holds ~140,000 such memories. Before that, or without
    /// the log, i8 (~14 KB a memory). Memories past the cap keep their fused place inside the
    /// head.
    pub token_states_mb: usize,
}

/// Depth 40: `memd-eval rerankers` (bench/EVAL.md section 7), MaxSim alone: LoCoMo R@5 0.638 →
/// 0.721, MRR 0.459 → 0.584; the coding set R@5 0.746 → 0.806, MRR 0.507 → 0.639 (with the
/// cosine term of `late::COSINE_WEIGHT`: 0.721 / 0.583 and 0.851 / 0.695). Depth 20 is as good on
/// the coding set (0.821 / 0.645) and worse on LoCoMo (0.717 / 0.583); 60 costs ~0.3 ms more
/// MaxSim for 0.013 more LoCoMo R@5 and nothing on the coding set.
pub const RERANK_DEPTH: usize = 40;
/// Off: behind late interaction (`memd-eval rerankers`, bench/EVAL.md section 7) the
/// cross-encoder at 10 lifts LoCoMo MRR 0.584 → 0.620 but drops the coding set's 0.639 → 0.527
/// (a web-search model; coding notes are what memd holds). 10 for conversational memory.
pub const CROSS_ENCODER_DEPTH: usize = 0;
/// See `SearchConfig::token_states_mb`.
pub const TOKEN_STATES_MB: usize = 64;
/// See `SearchConfig::prompt_budget_ms`. About 3x the idle cost at p99 (`memd-eval rerankers`,
/// bench/EVAL.md section 7: query encoding 5.8 ms, MaxSim over 60 memories 1.2 ms), so an idle
/// machine always reranks and a busy one gives up before a prompt waits much longer. Counted
/// from the first stage's end: the query's embedding, and its wait behind a background run of
/// the embedder, are not reranking's (from the request, 27 of 50 prompts at 10,000 memories
/// went over on an idle machine).
pub const PROMPT_BUDGET_MS: u64 = 20;

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            rerank: true,
            rerank_depth: RERANK_DEPTH,
            cross_encoder_depth: CROSS_ENCODER_DEPTH,
            prompt_budget_ms: PROMPT_BUDGET_MS,
            token_states_mb: TOKEN_STATES_MB,
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct FileConfig {
    port: Option<u16>,
    data_dir: Option<PathBuf>,
    context: ContextConfig,
    learning: LearningConfig,
    sidecar: SidecarConfig,
    cursor: CursorConfig,
    search: SearchConfig,
    store: StoreConfig,
    ui: UiConfig,
    guards: guards::GuardsConfig,
    evidence: evidence::EvidenceConfig,
}

impl Config {
    /// Config file (if present) then env overrides. `port_override` comes from `--port`.
    pub fn load(port_override: Option<u16>) -> Result<Config> {
        let config_file = proto::paths::config_file().filter(|p| p.exists());
        let file = match &config_file {
            Some(path) => read_file_config(path)?,
            None => FileConfig::default(),
        };
        // The same resolution order the hooks, the CLI and `memd mcp` use (proto::paths).
        let client_keys = Settings {
            data_dir: file.data_dir.clone(),
            port: file.port,
        };
        let resolved = proto::paths::resolve_with(client_keys, config_file.clone())
            .map_err(anyhow::Error::msg)?;
        let port = port_override.unwrap_or(resolved.port);
        let data_dir = resolved.data_dir;
        let mut sidecar = file.sidecar;
        apply_sidecar_env(&mut sidecar);
        let mut store = file.store;
        if let Some(url) = std::env::var("MEMD_STORE_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            store.url = Some(url.trim().to_string());
        }
        let cfg = Config {
            port,
            data_dir,
            config_file,
            context: file.context,
            learning: file.learning,
            sidecar,
            cursor: file.cursor,
            search: file.search,
            store,
            ui: file.ui,
            guards: file.guards,
            evidence: file.evidence,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// A config for tests and benchmarks: defaults, the given dir and port.
    pub fn for_dir(data_dir: &Path, port: u16) -> Config {
        Config {
            port,
            data_dir: data_dir.to_path_buf(),
            config_file: None,
            context: ContextConfig::default(),
            learning: LearningConfig::default(),
            sidecar: SidecarConfig::default(),
            cursor: CursorConfig::default(),
            search: SearchConfig::default(),
            store: StoreConfig::default(),
            ui: UiConfig::default(),
            guards: Default::default(),
            evidence: Default::default(),
        }
    }

    fn validate(&self) -> Result<()> {
        let c = &self.context;
        if !(1..=100).contains(&self.search.rerank_depth) {
            bail!(
                "search.rerank_depth must be 1-100 (got {})",
                self.search.rerank_depth
            );
        }
        if self.search.cross_encoder_depth > 100 {
            bail!(
                "search.cross_encoder_depth must be 0-100 (got {})",
                self.search.cross_encoder_depth
            );
        }
        if !(1..=4096).contains(&self.search.token_states_mb) {
            bail!(
                "search.token_states_mb must be 1-4096 (got {})",
                self.search.token_states_mb
            );
        }
        if self.search.prompt_budget_ms > 1000 {
            bail!(
                "search.prompt_budget_ms must be 0-1000 (got {})",
                self.search.prompt_budget_ms
            );
        }
        if c.max_memories == 0 || c.max_memories > 50 {
            bail!("context.max_memories must be 1-50 (got {})", c.max_memories);
        }
        if !(50..=4000).contains(&c.token_budget) {
            bail!(
                "context.token_budget must be 50-4000 (got {})",
                c.token_budget
            );
        }
        if !(0.0..=1.0).contains(&c.relevance_floor) {
            bail!(
                "context.relevance_floor must be 0-1 (got {})",
                c.relevance_floor
            );
        }
        if !(0.0..=1.0).contains(&self.learning.prior_weight) {
            bail!(
                "learning.prior_weight must be 0-1 (got {})",
                self.learning.prior_weight
            );
        }
        if !(0.0..=1.0).contains(&self.learning.exchange_weight) {
            bail!(
                "learning.exchange_weight must be 0-1 (got {})",
                self.learning.exchange_weight
            );
        }
        self.store.validate()?;
        if !(1..=600).contains(&self.ui.link_ttl_secs) {
            bail!(
                "ui.link_ttl_secs must be 1-600 (got {})",
                self.ui.link_ttl_secs
            );
        }
        let s = &self.sidecar;
        if s.per_model_ms == 0 || s.total_ms < s.per_model_ms || s.total_ms > 60_000 {
            bail!("sidecar budgets: need 0 < per_model_ms <= total_ms <= 60000");
        }
        if let Some(url) = &s.url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("sidecar.url must start with http:// or https:// (got {url:?})");
        }
        Ok(())
    }

    pub fn token_path(&self) -> PathBuf {
        self.data_dir.join(proto::paths::TOKEN_FILE)
    }
}

impl StoreConfig {
    fn validate(&self) -> Result<()> {
        if !(50..=60_000).contains(&self.sync_ms) {
            bail!("store.sync_ms must be 50-60000 (got {})", self.sync_ms);
        }
        if !(100..=60_000).contains(&self.timeout_ms) {
            bail!(
                "store.timeout_ms must be 100-60000 (got {})",
                self.timeout_ms
            );
        }
        if let Some(url) = &self.url {
            check_store_url(url)?;
        }
        Ok(())
    }
}

/// A shared store URL memd accepts: PostgreSQL, and no password in it (URLs end up in process
/// lists, shell history and logs).
pub fn check_store_url(url: &str) -> Result<()> {
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        bail!("store.url must start with postgres:// or postgresql://");
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if let Some((user_info, _)) = authority.rsplit_once('@')
        && user_info.contains(':')
    {
        bail!(
            "store.url must not contain a password: put it in store.password_file or a \
             PGPASSFILE (see the README, \"Team and multi-machine memory\")"
        );
    }
    if rest.contains("password=") {
        bail!("store.url must not contain a password parameter: use store.password_file");
    }
    Ok(())
}

fn read_file_config(path: &Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: FileConfig =
        toml::from_str(&text).with_context(|| format!("invalid config in {}", path.display()))?;
    check_client_readable(&text, &file)
        .with_context(|| format!("invalid config in {}", path.display()))?;
    Ok(file)
}

/// The hooks read `data_dir` and `port` with proto's small reader (no TOML library in the
/// static binaries). A file they would read differently must not start a daemon: they would
/// look for it in another data dir.
fn check_client_readable(text: &str, file: &FileConfig) -> Result<()> {
    const HINT: &str = "write data_dir as a one-line string and port as a decimal number, \
        before any [section]: the hooks read them without a full TOML parser";
    let client = proto::settings::parse(text).map_err(|e| anyhow::anyhow!("{e}; {HINT}"))?;
    if client.data_dir != file.data_dir || client.port != file.port {
        bail!(
            "data_dir/port read as {:?}/{:?} by the hooks but {:?}/{:?} by memd; {HINT}",
            client.data_dir,
            client.port,
            file.data_dir,
            file.port
        );
    }
    Ok(())
}

fn apply_sidecar_env(s: &mut SidecarConfig) {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let Some(url) = var("MEMD_SIDECAR_URL") {
        s.url = Some(url.trim().trim_end_matches('/').to_string());
    }
    if let Some(models) = var("MEMD_SIDECAR_MODELS") {
        s.models = models
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
    }
    if let Some(f) = var("MEMD_SIDECAR_KEY_FILE") {
        s.key_file = Some(PathBuf::from(f));
    }
    if let Some(r) = var("MEMD_SIDECAR_REMOTE") {
        s.remote = r != "0";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        Config::for_dir(Path::new("/nonexistent"), 1)
            .validate()
            .unwrap();
    }

    #[test]
    fn unknown_keys_are_errors_not_silently_ignored() {
        let err = toml::from_str::<FileConfig>("[context]\nmax_memoris = 3\n").unwrap_err();
        assert!(err.to_string().contains("max_memoris"), "{err}");
    }

    /// The hooks read `data_dir` and `port` with proto's small reader; the daemon with the
    /// `toml` crate. They must find the same values or a hook looks in the wrong data dir.
    #[test]
    fn client_reader_agrees_with_the_daemon_config() {
        let files = [
            "",
            "port = 47200\n",
            "data_dir = \"/srv/memd\"\nport = 4_711 # fixed\n[context]\nmax_memories = 3\n",
            "# comment\n\"data_dir\" = '/home/a b/memd' # literal\n",
            "data_dir = \"/x/\\u00e9\\t\\\\y\"\n[sidecar]\nmodels = [\n  \"a\",\n]\n",
            "[cursor]\nrules_file = true\n",
        ];
        for text in files {
            let daemon: FileConfig = toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let client = proto::settings::parse(text).unwrap();
            assert_eq!(client.data_dir, daemon.data_dir, "{text}");
            assert_eq!(client.port, daemon.port, "{text}");
        }
    }

    #[test]
    fn a_config_the_hooks_would_read_differently_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        for text in ["data_dir = \"\"\"/srv/memd\"\"\"\n", "port = 0xB847\n"] {
            std::fs::write(&path, text).unwrap();
            assert!(
                toml::from_str::<FileConfig>(text).is_ok(),
                "valid TOML: {text}"
            );
            let e = format!("{:#}", read_file_config(&path).unwrap_err());
            assert!(e.contains("without a full TOML parser"), "{e}");
        }
        std::fs::write(&path, "\u{feff}data_dir = \"/srv/memd\"\n").unwrap();
        let file = read_file_config(&path).unwrap();
        assert_eq!(file.data_dir, Some(PathBuf::from("/srv/memd")));
    }

    #[test]
    fn graph_boosts_can_be_switched_either_way() {
        for on in [true, false] {
            let file: FileConfig =
                toml::from_str(&format!("[learning]\ngraph_boosts = {on}\n")).unwrap();
            assert_eq!(file.learning.graph_boosts, on);
            assert_eq!(
                file.learning.prior_weight,
                LearningConfig::default().prior_weight
            );
        }
    }

    #[test]
    fn login_link_lifetime_is_bounded_and_named() {
        let file: FileConfig = toml::from_str("[ui]\nlink_ttl_secs = 300\n").unwrap();
        assert_eq!(file.ui.link_ttl_secs, 300);
        let mut c = Config::for_dir(Path::new("/x"), 1);
        for bad in [0, 601] {
            c.ui.link_ttl_secs = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("ui.link_ttl_secs"), "{e}");
        }
    }

    #[test]
    fn out_of_range_budget_names_the_key() {
        let mut c = Config::for_dir(Path::new("/x"), 1);
        c.context.token_budget = 10;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("context.token_budget"), "{e}");
    }
}
