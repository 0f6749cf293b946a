//! The long-polling loop and the update offset.
//!
//! An update is acknowledged (the next getUpdates asks for the ids after it) only once it has
//! been handled: accepted into its chat's queue (and that written to the record of accepted
//! messages, `pending`), answered, or refused. The last handled id is persisted in
//! `<state dir>/telegram/<botId>-offset.json` after every batch, so a restart does not run old
//! messages again.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::api::{BotApi, Update};
use crate::pending::Pending;

#[derive(Serialize, Deserialize)]
struct Saved {
    last_update_id: i64,
}

/// Where the last handled update id is kept.
pub struct OffsetFile {
    path: PathBuf,
}

impl OffsetFile {
    pub fn new(state_dir: &std::path::Path, bot_id: &str) -> Self {
        OffsetFile { path: state_dir.join("telegram").join(format!("{bot_id}-offset.json")) }
    }

    /// The last handled update id; `None` when there is none (or the file is unreadable, with
    /// a warning: polling then starts with what Telegram still holds).
    pub async fn load(&self) -> Option<i64> {
        let bytes = match tokio::fs::read(&self.path).await {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(file = %self.path.display(), error = %err, "cannot read the update offset");
                return None;
            }
        };
        match serde_json::from_slice::<Saved>(&bytes) {
            Ok(saved) => Some(saved.last_update_id),
            Err(err) => {
                tracing::warn!(file = %self.path.display(), error = %err, "the update offset file is malformed");
                None
            }
        }
    }

    /// Persists the last handled update id (atomically).
    pub async fn save(&self, last_update_id: i64) {
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let bytes =
                serde_json::to_vec(&Saved { last_update_id }).map_err(std::io::Error::other)?;
            volcanic_core::atomic::write_atomic(&path, &bytes)
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r);
        if let Err(err) = written {
            tracing::error!(file = %self.path.display(), error = %err, "cannot save the update offset");
        }
    }
}

/// Polls until `cancel` fires, handing every update to `handle` in order. `handle` must not
/// wait on the outside world (it queues work), so one slow chat cannot hold up the others.
/// What `handle` accepted into `pending` is written before the batch is acknowledged.
pub async fn run(
    api: &BotApi,
    offsets: &OffsetFile,
    pending: &Pending,
    cancel: &CancellationToken,
    mut handle: impl FnMut(Update),
) {
    let mut offset = offsets.load().await.map(|id| id + 1);
    tracing::info!(offset, "polling for Telegram updates");
    loop {
        let updates = match api.get_updates(offset, cancel).await {
            Ok(updates) => updates,
            // Cancelled: the only error get_updates returns.
            Err(_) => return,
        };
        let mut last = None;
        for update in updates {
            // Telegram may resend an update we already handled if our offset was lost.
            if offset.is_some_and(|next| update.update_id < next) {
                continue;
            }
            let id = update.update_id;
            handle(update);
            last = Some(id);
            offset = Some(id + 1);
        }
        if let Some(last) = last {
            pending.persist().await;
            offsets.save(last).await;
        }
    }
}
