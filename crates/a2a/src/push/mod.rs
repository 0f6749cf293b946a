//! Outbound HTTP of the A2A server: push notifications to webhooks and downloads of file parts
//! given by URL, all through the one SSRF-guarded client of [`guard`].

pub mod guard;
