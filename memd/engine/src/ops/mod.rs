//! The operations: what a hook, the API, MCP or the dashboard asks of the engine, one module
//! per family.
//!
//! Owns the operations' logic. Each takes a small struct of the handles it needs (the store
//! handle `state::Db`, the models, the ledger, the evidence, the project cache), built by the
//! facade (`core::Core`); none takes `Core`, and nothing below this layer imports it.

pub mod bank;
pub mod books;
pub mod confine;
pub mod context;
pub mod contradict;
pub mod evidence;
pub mod export;
pub mod find;
pub mod guardrail;
pub mod ingest;
pub mod inspect;
pub mod registry;
pub mod status;
pub mod tools;
