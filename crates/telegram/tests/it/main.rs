//! The Telegram host against a fake Bot API on 127.0.0.1, with the Faux provider.

// clippy.toml allows these inside `#[test]` functions only; shared helpers panic the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod a2a;
mod access;
mod buttons;
mod chat;
mod delivery;
mod intake;
mod resilience;
mod support;
