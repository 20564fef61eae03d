//! `memd-engine`: everything memd knows and decides, with no network in it.
//!
//! One daemon per user owns every memory; the server crate puts this engine behind loopback
//! HTTP and MCP. A prompt gets the memories that matter (System 1, milliseconds); learning from
//! outcomes, embedding and promotion happen afterwards in the background (System 2). The engine
//! must never open a socket, parse HTTP or print to stdout: its callers own those.
//!
//! # Layout
//!
//! [`core`] is the facade: [`core::Core`] owns the handles and has one short method per
//! operation; the operation itself lives in its module and takes only the handles it needs
//! (a small struct of references such as `ops::context::PromptDeps`, `ops::bank::Bank`),
//! never `Core`. From the bottom up (a module imports only from its own layer or below; no
//! import circles, checked by `tests/tests/architecture.rs`):
//!
//! - Base: [`config`] (`config.toml`, `[guards]`, `[evidence]`), [`clock`], [`record`] (the stored form of a memory), [`indexed_text`] (what of a memory the
//!   indexes read), [`redact`] (secrets and `<private>` spans
//!   removed before anything is stored), [`learn`] (outcome math, lifecycle rules, the routing
//!   graph; pure), [`command`] (a shell line's command words), [`project`] (which project
//!   a directory belongs to), [`shutdown`],
//!   [`heap`], [`trace`] (the hook ledger: ids and digests, never content), [`shared`] (the
//!   shared store's status and bell).
//! - [`store`]: the durable engine: write-ahead log with group commit, snapshots, recovery,
//!   the data-dir lock. Generic over a state machine; knows nothing about memories. [`error`]:
//!   the typed errors every operation returns (the store's among them); only memd-server maps
//!   them to HTTP status codes. [`scope`]: whose memories a caller sees, where a new one
//!   belongs, the directory → project cache.
//! - `index`: the derived search indexes (vectors, BM25, fusion). [`state`]: memd's state
//!   machine (records, the ops the log carries, per-conversation hook state) and the handles
//!   the operations take: `state::Db` (reads, commits, queued writes) and `state::Signals`
//!   (the workers' and the stop hook's wake-ups).
//! - [`models`]: the models handle (embedder, late interaction, cross-encoder, query cache,
//!   the late-interaction query encoding with its load shedding), `models::embed` (ONNX
//!   Runtime), `models::late` (every memory's token states, MaxSim reorder).
//! - [`search`] (validating a search, the first stage's ranking and filters, the normalized
//!   memory shape) and [`retrieve`]: the one retrieval pipeline of prompts, searches, MCP and the
//!   dashboard (the query's encodings in parallel, the first stage under one short read, late
//!   interaction and the optional cross-encoder outside the lock).
//! - [`ops`], the operations: `context` (get-context's stages, stop, record-outcome,
//!   pre-compact, the sidecar decision), `find` (searches), `bank` (memory-bank writes,
//!   takeaways, share, delete; `contradict` tells a restatement from a fact that says
//!   otherwise), `books` and `ingest` (reference documents; `confine` reads PDFs in a child
//!   process under memory and CPU limits), `export`, `registry` (projects as a whole),
//!   `inspect` (the dashboard's read-only views), `tools` (the guard before a tool, the
//!   evidence after; `evidence` keeps what commands did per conversation), `status` (health,
//!   stats, recent hook calls).
//! - [`workers`]: background embedding, token states, lifecycle, snapshots.
//! - [`core`], then [`shared_sync`] (the narrow interface memd-pg syncs through).
//!
//! The shared PostgreSQL store (memd-pg) does not replace the local store: it syncs beside it
//! through `shared_sync`.

pub mod clock;
pub mod command;
pub mod config;
pub mod core;
pub mod error;
pub mod heap;
mod index;
pub mod indexed_text;
pub mod learn;
pub mod models;
pub mod ops;
pub mod project;
pub mod record;
pub mod redact;
pub mod retrieve;
pub mod scope;
pub mod search;
pub mod shared;
pub mod shared_sync;
pub mod shutdown;
pub mod state;
pub mod store;
pub mod trace;
pub mod workers;
