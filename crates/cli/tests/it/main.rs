//! Tests of the `volcanic` binary, run as a real child process.

mod chat;
