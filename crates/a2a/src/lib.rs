//! The Volcanic A2A server: other agents talk to an owner's assistant over A2A 1.0 (and 0.3).
//!
//! Layout, one room per concern:
//! - `server`: [`A2aServer`], its builder, the router and its lifetime (serve, shutdown).
//! - `edge`: the HTTP edge: `endpoint` (the one pipeline every binding's call runs: the admitted
//!   caller, decoding, the service, encoding, error answers), `wire` (what each binding decodes
//!   and encodes), `http`, `connection` (the accept loop and connection limits), `fair` (the
//!   per-caller and per-peer caps).
//! - [`binding`]: JSON-RPC and REST envelopes, routes, SSE data, 0.3 ⇄ 1.0 conversion; pure.
//! - [`request`]: the one internal model of calls and replies, and the [`request::Binding`] and
//!   [`request::Version`] server and client share.
//! - [`clock`]: the server's clock (the system's, or a test's), for everything dated or aged.
//! - [`error`]: the one mapping of failures to JSON-RPC codes, HTTP statuses and reasons.
//! - [`auth`]: caller directory, callers.json, key checks.
//! - [`card`]: the public and the extended agent card, how the public card is served
//!   (`card::public`), and [`card::signing`].
//! - `service`: the server's state and the operations, one file each.
//! - [`task`]: task files, the index, ListTasks; `tasks`: the one access to tasks, on file or
//!   live (the store and the live registry, restart recovery's question, changes under a hold).
//! - [`run`]: a task's run and what it runs in: the live task and its answer stream, its events
//!   for streams and resumes, the session pool, the caller's session extension and containment,
//!   the message's parts and files.
//! - [`retention`]: what is removed in the background (old settled tasks, their sessions and
//!   inbox files; callers' records over the size cap), and the owner's view of disk use.
//! - [`inbox`]: the workspace's `inbox/` (safe names, no overwrites), shared with other hosts.
//! - [`push`]: push configs and the sender, and all outbound HTTP (webhooks, file downloads)
//!   behind the SSRF guard.
//! - [`approval`], `control`, [`usage`]: the owner's controls (approvals, the control socket,
//!   spend caps and rate limits).
//! - [`client`]: an A2A client for calling other agents (the `volcanic a2a` command; later
//!   delegation), on the same wire shapes as the server.
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
pub mod clock;
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
pub mod retention;
pub mod run;
mod server;
mod service;
pub mod task;
mod tasks;
pub mod usage;

#[cfg(test)]
mod test_logs;

pub use approval::{DecideError, Decided};
pub use config::A2aOptions;
pub use error::A2aError;
pub use run::containment::{Containment, ViewPolicy};
pub use run::extension::OwnerNotifier;
pub use server::{A2aServer, A2aServerBuilder, BuildError, PushHandler};
