//! Integration tests of volcanic-core, built as one binary.

mod journal;
mod session;
mod support;
