//! `memd-lab`: offline measurement of memd, never shipped inside the `memd` binary.
//!
//! # Layout
//!
//! - [`eval`]: the evaluations behind `memd-eval` (LoCoMo retrieval, retrieval on the
//!   repository's coding-memory set, outcome learning on a simulated session). They drive the engine directly or a real daemon, and print tables.
//! - `src/bin/memd-bench/`: the end-to-end benchmark (real daemons, real hooks, one line per
//!   figure, a JSON report).
//! - `examples/embed_bench.rs`: embedder load time, latency and throughput.
//!
//! Nothing here may be a dependency of the engine, the server, the CLI or the hooks.

pub mod eval;
