//! A task's run and what it runs in: the live task and its events, the session pool, the
//! caller's session (its extension, its containment), and the message's parts and files on the
//! way in.

pub mod containment;
pub(crate) mod event_log;
pub mod extension;
pub(crate) mod files;
pub(crate) mod live;
pub(crate) mod parts;
pub(crate) mod pool;
