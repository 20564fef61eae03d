//! `memd-engine`: everything memd knows and decides, with no network in it.
//!
//! One daemon per user owns every memory; the server crate puts this engine behind loopback
//! HTTP and MCP. A prompt gets the memories that matter (System 1, milliseconds); learning from
//! outcomes, embedding and promotion happen afterwards in the background (System 2). The engine
//! must never open a socket, parse HTTP or print to stdout: its callers own those.
//!
//! # Layout
//!
//! - [`core`]: the service object ([`core::Core`]) every caller goes through: open, search,
//!   memory bank, takeaways, books, export/import, health, stats. Still both the shared state
//!   and the API (issue 21 makes it a thin facade over narrow handles; not done yet).
//! - [`store`]: the durable engine: write-ahead log with group commit, snapshots, recovery,
//!   the data-dir lock. Generic over a state machine; knows nothing about memories. The shared
//!   PostgreSQL store (memd-pg) does not replace it: it syncs beside it, through
//!   [`shared_sync::SharedSync`].
//! - [`state`]: memd's state machine: records, the ops the log carries, per-conversation hook
//!   state. Replaying the log rebuilds it exactly.
//! - [`record`]: the stored form of one memory.
//! - [`embed`]: sentence embeddings (ONNX Runtime + tokenizers) and where the model files live.
//! - `index`: the derived search indexes: vectors (usearch HNSW), lexical (BM25), fusion.
//! - [`late`]: late-interaction reranking (ColBERT MaxSim): every memory's token states, kept
//!   current in the background, and the reorder of a ranked head under a deadline;
//!   `late_file` saves the states between runs.
//! - [`retrieve`]: the one retrieval pipeline of prompts, searches, MCP and the dashboard:
//!   the query's encodings in parallel, the first stage under one short read of the store,
//!   late interaction and the optional cross-encoder outside the lock.
//! - [`search`]: validating a search, the first stage's ranking and filters, and the
//!   normalized memory shape every read returns.
//! - [`learn`]: outcome math (Wilson, deltas), lifecycle rules, the routing graph. Pure.
//! - [`project`]: which project a working directory belongs to (repository, origin remote).
//! - `registry`: projects as a whole on `Core`: the caller's current project, the list with
//!   counts and last use, forgetting one.
//! - [`scope`]: whose memories a caller sees (its project's and global ones, never another
//!   project's) and where a new memory belongs; caches project resolution per directory.
//! - [`context`]: what a prompt gets (KNOWN CONTEXT, scoring prompt) and the turn cycle
//!   (stop, record-outcome, sidecar decisions).
//! - `bank`: memory-bank writes on `Core` (add with its near-duplicate check, update,
//!   archive), sharing and deleting any memory; [`contradict`] tells a restatement from a fact
//!   that says otherwise.
//! - [`inspect`]: the dashboard's read-only views (filtered lists, one memory's history and
//!   injections, conversations turn by turn, health over time).
//! - `books`, [`ingest`]: reference documents: extraction, chunking, storage; [`confine`] reads
//!   PDFs in a child process under memory and CPU limits.
//! - [`export`]: lossless JSON Lines export and idempotent import, as bytes.
//! - [`redact`]: secrets and `<private>` spans removed before anything is stored.
//! - [`workers`]: background embedding, lifecycle, snapshots.
//! - [`status`]: the statistics report (core counts + sidecar state).
//! - [`trace`]: the append-only hook ledger (ids and digests, never content).
//! - [`tools`]: tool events: the guard before a tool runs (static rules at the `[guards]`
//!   levels, learned guardrails from memories), the evidence after; [`guards_config`] reads
//!   `[guards]`; [`evidence`] keeps what the commands did per conversation (`[evidence]`).
//! - [`shared`], [`shared_sync`]: the shared PostgreSQL store's side of the engine: the sync
//!   worker's status and wake-up bell, and the one handle `memd-pg` syncs through (what is due,
//!   marking it sent, the read cursor, applying what it read); the rules are `state::sync`'s.
//! - [`config`], [`clock`], [`error`], [`shutdown`], [`heap`]: small shared pieces.
//!
//! Dependencies do not point one way yet: `core` uses the pieces below it, and the modules
//! that add operations or workers (`context`, `inspect`, `bank`, `books`, `export`,
//! `registry`, `status`, `tools`, `workers`) as well as `late` and `retrieve`'s query encoding
//! take `&Core` back. Narrow handles in place of `Core` there are the rest of issue 21.

mod bank;
mod books;
pub mod clock;
pub mod config;
pub mod confine;
pub mod context;
pub mod contradict;
pub mod core;
pub mod embed;
pub mod error;
pub mod evidence;
pub mod export;
pub mod guards_config;
pub mod heap;
mod index;
pub mod ingest;
pub mod inspect;
pub mod late;
mod late_file;
pub mod learn;
pub mod project;
pub mod record;
pub mod redact;
mod registry;
pub mod retrieve;
pub mod scope;
pub mod search;
pub mod shared;
pub mod shared_sync;
pub mod shutdown;
pub mod state;
pub mod status;
pub mod store;
pub mod tools;
pub mod trace;
pub mod workers;
