//! The Volcanic A2A server: other agents talk to an owner's assistant over A2A 1.0 (and 0.3).
//!
//! Layout:
//! - [`request`]: the one internal model of calls and replies.
//! - [`binding`]: JSON-RPC and REST decoding/encoding, SSE framing, 0.3 ⇄ 1.0 conversion.
//! - [`error`]: the one mapping of failures to JSON-RPC codes, HTTP statuses and reasons.
//! - [`auth`]: caller directory, callers.json, key checks.
//! - [`card`]: the public and the extended agent card.
//! - [`task`]: task files, the index, ListTasks.
//!
//! Invariant: bindings and versions are decoded and encoded at the edge; no handler code
//! branches on them. This crate knows nothing of Telegram or the CLI.

pub mod auth;
pub mod binding;
pub mod card;
pub mod config;
pub mod error;
pub mod request;
pub mod task;

#[cfg(test)]
mod test_logs;

pub use config::A2aOptions;
pub use error::A2aError;
