//! Integration tests of the A2A server: the real server on 127.0.0.1, a real HTTP client, the
//! Faux provider, temp workspaces.

// clippy.toml allows these inside `#[test]` functions only; shared helpers panic the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod auth;
mod bad_bodies;
mod bad_input;
mod cards;
mod concurrency;
mod fair_share;
mod generations;
mod guard;
mod history;
mod hostile;
mod hygiene;
mod limits;
mod planted;
mod push;
mod races;
mod receiver;
mod redaction;
mod rest_v03;
mod resume;
mod retention;
mod retention_month;
mod retries;
mod runs;
mod signed_card;
mod support;
mod tasks;
mod tenancy;
mod test_logs;
mod tiers;
mod usage;
mod v03;
