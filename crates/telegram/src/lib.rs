//! The Telegram host of Volcanic: the owner talks to their assistant in a Telegram chat, and the
//! host mounts the A2A server so other agents can reach the same workspaces.
//!
//! Layout:
//! - [`api`]: a thin Bot API client over HTTPS (long polling, sends, files) with retries; the
//!   bot token is in every URL, so no URL ever reaches an error or a log line.
//! - `access`: who may use the bot (allowed users, in their private chats and allowed groups).
//! - `poll`: the long-polling loop and the persisted update offset.
//! - `pending`: the accepted messages not yet answered, persisted so a restart loses none.
//! - `chat`: one worker per allowed chat: its workspace, its main session, the run queue.
//! - `render`: an answer streamed into messages (edits, splits at Telegram's limit).
//! - `attachments`: documents and photos saved to the workspace's `inbox/`.
//! - [`callback`]: button presses, and [`callback::CallbackHandler`], the seam through which
//!   they reach the host's code.
//! - `intake`: forwarded messages' origin, and messages the bot cannot use.
//! - `channel`: the `send` tool's way into the chat; `notifier`: `notify_owner` into the
//!   owner's chat; `command`: `/start`, `/help`, `/new`, `/stop`, `/a2a`.
//! - [`host`]: [`TelegramHost`], which ties them together and serves A2A when asked.
//!
//! Invariant: the bot token never appears in a log line, an error, a journal or tool output.
//! The host never exits because the Bot API failed; it retries.

mod access;
pub mod api;
pub mod approvals;
mod attachments;
pub mod callback;
mod channel;
mod chat;
mod command;
pub mod config;
mod error;
pub mod host;
mod intake;
mod notifier;
mod pending;
mod poll;
mod render;
mod usage;
mod workspace;

pub use callback::{CallbackHandler, CallbackReply, MessageEdit};
pub use config::{BotToken, TelegramConfig};
pub use error::{Error, Result};
pub use host::{TelegramHost, TelegramHostBuilder};
