//! The Volcanic agent core: sessions that run an LLM agent with tools in a workspace.
//!
//! A host (the CLI, the Telegram bot, the A2A server) opens a [`Session`] by scope through a
//! [`SessionFactory`], prompts it, and follows its [`SessionEvent`]s. Everything a session says
//! and does is appended to a JSONL journal, so a session can be closed and resumed at will.
//!
//! Layout:
//! - [`message`]: the conversation model (also the journal's message format).
//! - [`provider`]: the [`Provider`] trait and the Anthropic, OpenAI-compatible and Faux backends.
//! - [`tool`]: the [`Tool`] trait and the built-in tools (read, write, edit, bash, ls, grep, find, send).
//! - [`session`]: sessions, the run loop, events, the journal.
//! - [`workspace`]: PERSONA.md, AGENTS.md / CLAUDE.md and MEMORY.md → the system prompt.
//! - [`extension`]: extra tools, prompt fragments, listeners, tool gates and the per-session
//!   event bus.
//! - [`channel`]: the chat-channel seam behind the `send` tool.
//! - [`atomic`] and [`durable`]: atomic file writes and shared durability barriers.
//! - [`redact`] and [`exec`]: secrets kept out of child processes, outputs, errors and journals.
//! - [`escape`]: text others wrote, shown on a terminal or in a log line without driving either.
//! - [`safe_file`]: reading files others may have planted (only regular files, capped, never
//!   blocking on a FIFO or device).
//! - [`sandbox`]: which tools a session has, and the bubblewrap sandbox a contained session's
//!   tools run in.
//!
//! Invariant: this crate knows nothing of HTTP servers, A2A or Telegram, never reads process
//! environment variables or config files (hosts pass them in), and never prints.

pub mod atomic;
pub mod channel;
pub mod config;
pub mod durable;
mod error;
pub mod escape;
pub mod exec;
pub mod extension;
#[doc(hidden)]
pub mod fuzzing;
pub mod message;
pub mod provider;
pub mod redact;
pub mod safe_file;
pub mod sandbox;
pub mod session;
pub mod tool;
pub mod workspace;

pub use error::{Error, Result};
pub use extension::{EventBus, Extension, Registrar};
pub use provider::Provider;
pub use session::{
    EventKind, EventStream, RunFailure, RunHandle, RunOutcome, RunSettled, Session, SessionEvent,
    SessionFactory, SessionOptions,
};
pub use tool::Tool;
