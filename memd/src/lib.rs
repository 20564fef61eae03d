//! memd: persistent, outcome-learning memory for AI coding agents.
//!
//! One daemon per user owns every memory; short-lived hooks and MCP clients talk to it over
//! loopback HTTP. A prompt gets the memories that matter (System 1, milliseconds); learning from
//! outcomes, embedding and promotion happen afterwards in the background (System 2).
//!
//! # Layout
//!
//! - [`store`]: the durable engine: write-ahead log with group commit, snapshots, recovery,
//!   the data-dir lock. Generic over a state machine; knows nothing about memories.
//! - [`state`]: memd's state machine: records, the ops the log carries, per-conversation hook
//!   state. Replaying the log rebuilds it exactly.
//! - [`record`]: the stored form of one memory.
//! - [`embed`]: sentence embeddings (ONNX Runtime + tokenizers) and where the model files live.
//! - [`index`]: the derived search indexes: vectors (usearch HNSW), lexical (BM25), fusion.
//! - [`search`]: the query pipeline and the normalized memory shape every read returns.
//! - [`learn`]: outcome math (Wilson, deltas), lifecycle rules, knowledge graphs. Pure.
//! - [`context`]: what a prompt gets (KNOWN CONTEXT, scoring prompt) and the turn cycle
//!   (stop, record-outcome, sidecar decisions).
//! - [`core`]: the service object shared by HTTP, MCP and workers.
//! - [`books`], [`ingest`]: reference documents: extraction, chunking, storage.
//! - [`export`]: lossless JSONL export and idempotent import.
//! - [`redact`]: secrets and `<private>` spans removed before anything is stored.
//! - [`http`]: the loopback HTTP server, auth, limits, routes.
//! - [`mcp`]: the agent's tools over streamable HTTP and stdio.
//! - [`workers`]: background embedding, lifecycle, snapshots.
//! - [`daemon`]: `memd serve` start-up and shutdown.
//! - [`cli`]: every other `memd` command.
//! - [`config`], [`clock`], [`error`], [`shutdown`], [`heap`]: small shared pieces.

pub mod books;
pub mod cli;
pub mod clock;
pub mod config;
pub mod context;
pub mod core;
pub mod daemon;
pub mod embed;
pub mod error;
pub mod eval;
pub mod export;
pub mod heap;
pub mod http;
pub mod index;
pub mod ingest;
pub mod learn;
pub mod mcp;
pub mod record;
pub mod redact;
pub mod search;
pub mod shutdown;
pub mod state;
pub mod store;
pub mod trace;
pub mod workers;
