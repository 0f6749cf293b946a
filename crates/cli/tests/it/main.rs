//! Tests of the `volcanic` binary, run as a real child process.

// clippy.toml allows these inside `#[test]` functions only; shared helpers panic the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod bwrap_path;
mod caller_text;
mod callers;
mod chat;
mod cli;
mod client;
mod client_errors;
mod client_hostile;
mod client_wait;
mod compaction;
mod containment;
mod crash;
mod host_secrets;
mod memory;
mod messages;
mod one_server;
mod push_outbox;
mod resume;
mod retention;
mod retries;
mod serve;
mod support;
mod telegram;
mod terminal;
mod usage;
