//! The Telegram host against a fake Bot API on 127.0.0.1, with the Faux provider.

mod a2a;
mod chat;
mod resilience;
mod support;
