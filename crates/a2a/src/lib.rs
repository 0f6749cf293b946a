//! The Volcanic A2A server: other agents talk to an owner's assistant over A2A 1.0 (and 0.3).
//!
//! Layout:
//! - [`request`]: the one internal model of calls and replies.
//! - [`binding`]: JSON-RPC and REST decoding/encoding, SSE framing, 0.3 ⇄ 1.0 conversion.
//! - [`error`]: the one mapping of failures to JSON-RPC codes, HTTP statuses and reasons.
//! - [`auth`]: caller directory, callers.json, key checks.
//! - [`card`]: the public and the extended agent card; `public_card`: which shape of the public
//!   card a request gets, and its HTTP caching.
//! - [`signing`]: the card-signing key, JWS signatures of the 1.0 cards, the JWK Set.
//! - [`containment`]: caller tiers → tools, and the sandbox view of the workspace callers get.
//! - [`task`]: task files, the index, ListTasks; `tasks`: the one access to tasks, on file or
//!   live (the store and the live registry, restart recovery's question, changes under a hold).
//! - `server`: the axum router and shutdown; `endpoint`: the one pipeline every binding's call
//!   runs (the admitted caller, decoding, the service, encoding, error answers); `wire`: what
//!   each binding decodes and encodes; `service`: the server's state
//!   and the operations, one file each; `live`: tasks with a run in progress; `event_log`: a running task's recent events, for
//!   streams and resumes; `pool`: sessions per (caller, context); `files`:
//!   inbound parts → inbox and prompt; [`extension`]: `request_input`, `notify_owner`, the channel.
//! - `fair`: fair share, the per-caller caps on requests and streams and the per-peer cap on
//!   unauthenticated connections; `connection`: the accept loop and connection limits.
//! - [`inbox`]: the workspace's `inbox/` (safe names, no overwrites), shared with other hosts.
//! - [`client`]: an A2A client for calling other agents (the `volcanic a2a` command; later
//!   delegation), on the same wire shapes as the server.
//! - [`push`]: push configs and the sender, and all outbound HTTP (webhooks, file downloads)
//!   behind the SSRF guard.
//!
//! Invariant: bindings and versions are decoded and encoded at the edge; no service code
//! branches on them. This crate knows nothing of Telegram or the CLI.
//!
//! Comments cite the A2A specification as `A2A 1.0.1 §n` (a2aproject/A2A, `docs/specification.md`
//! at tag v1.0.1) and `A2A 0.3.0 §n` (at tag v0.3.0); what the SDKs do beside it, and the choices
//! this server makes where the two versions meet, are in docs/a2a.md.

pub mod approval;
pub mod auth;
pub mod binding;
pub mod card;
pub mod client;
pub mod config;
#[cfg(unix)]
pub mod control;
mod edge;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod inbox;
pub mod push;
pub mod request;
pub mod run;
mod server;
mod service;
pub mod task;
mod tasks;
pub mod usage;

#[cfg(test)]
mod test_logs;

pub use config::A2aOptions;
pub use error::A2aError;
pub use run::containment::{Containment, ViewPolicy};
pub use run::extension::OwnerNotifier;
pub use server::{A2aServer, A2aServerBuilder, BuildError, PushHandler};
pub use service::approve::{DecideError, Decided};
