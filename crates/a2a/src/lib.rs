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
//! - `server`: the axum router, authentication, SSE, shutdown; `service`: the server's state
//!   and the operations, one file each; `live`: tasks with a run in progress; `event_log`: a running task's recent events, for
//!   streams and resumes; `pool`: sessions per (caller, context); `files`:
//!   inbound parts → inbox and prompt; [`extension`]: `request_input`, `notify_owner`, the channel.
//! - `fair`: fair share, the per-caller caps on requests and streams and the per-peer cap on
//!   unauthenticated connections; `connection`: the accept loop and connection limits.
//! - [`retention`]: what is removed in the background (old settled tasks, their sessions and
//!   inbox files; callers' records over the size cap), and the owner's view of disk use.
//! - [`inbox`]: the workspace's `inbox/` (safe names, no overwrites), shared with other hosts.
//! - [`client`]: an A2A client for calling other agents (the `volcanic a2a` command; later
//!   delegation), on the same wire shapes as the server.
//! - [`push`]: push configs and the sender, and all outbound HTTP (webhooks, file downloads)
//!   behind the SSRF guard.
//!
//! Invariant: bindings and versions are decoded and encoded at the edge; no service code
//! branches on them. This crate knows nothing of Telegram or the CLI.

pub mod approval;
pub mod auth;
pub mod binding;
pub mod card;
pub mod client;
pub mod config;
mod connection;
pub mod containment;
#[cfg(unix)]
pub mod control;
mod endpoint;
pub mod error;
mod event_log;
pub mod extension;
mod fair;
mod files;
#[doc(hidden)]
pub mod fuzzing;
mod http;
pub mod inbox;
mod live;
mod parts;
mod pool;
mod public_card;
pub mod push;
pub mod request;
pub mod retention;
mod server;
mod service;
pub mod signing;
pub mod task;
mod tasks;
pub mod usage;

#[cfg(test)]
mod test_logs;

pub use config::A2aOptions;
pub use containment::{Containment, ViewPolicy};
pub use error::A2aError;
pub use extension::OwnerNotifier;
pub use server::{A2aServer, A2aServerBuilder, BuildError, PushHandler};
pub use service::approve::{DecideError, Decided};
