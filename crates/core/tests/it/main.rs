//! Integration tests of `volcanic-core`, built as one binary.

// clippy.toml allows these inside `#[test]` functions only; shared helpers panic the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction;
mod journal;
mod model_gate;
mod providers;
mod retry;
mod session;
mod support;
mod tool_gate;
