//! Test-only fakes shared across Volcanic's crates. Nothing here ships in the binary.
//!
//! Layout:
//! - [`callers`]: a workspace's callers.json with known keys.
//! - [`raw_http`]: a tiny blocking HTTP/1.1 client over `std::net`, one connection per request.
//! - [`rng`]: a seeded, replayable random generator for property-style tests.
//! - [`sse`]: server-sent events read as JSON, bounded by a deadline.
//! - [`telegram`]: a local Telegram Bot API on 127.0.0.1 that speaks the real wire format.
//! - [`tls`]: a local HTTPS file server with a certificate authority made for the test.

// A test fake: a broken invariant here should fail the test loudly, at the line that broke.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod callers;
pub mod raw_http;
pub mod rng;
pub mod sse;
pub mod telegram;
pub mod tls;
