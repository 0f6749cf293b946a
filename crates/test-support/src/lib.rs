//! Test-only fakes shared across Volcanic's crates. Nothing here ships in the binary.
//!
//! Layout:
//! - [`telegram`]: a local Telegram Bot API on 127.0.0.1 that speaks the real wire format.
//! - [`tls`]: a local HTTPS file server with a certificate authority made for the test.

// A test fake: a broken invariant here should fail the test loudly, at the line that broke.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod telegram;
pub mod tls;
