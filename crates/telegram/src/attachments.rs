//! Documents and photos sent to the bot, saved into the chat workspace's `inbox/` and named in
//! the prompt (`[file received: inbox/report.pdf]`).
//!
//! Names come from the document's own name (last path component, sanitized like A2A files); a
//! photo is `photo-<message id>.jpg` (its largest size). Nothing is ever overwritten: a taken
//! name gets a numeric prefix. Files over the download cap are refused before downloading.

use std::path::Path;

use tokio_util::sync::CancellationToken;
use volcanic_a2a::inbox;

use crate::api::{BotApi, Message};

/// One attachment of a message.
struct Attachment {
    file_id: String,
    name: String,
    declared_size: Option<u64>,
}

fn attachments(message: &Message) -> Vec<Attachment> {
    let mut found = Vec::new();
    if let Some(document) = &message.document {
        let given = document
            .file_name
            .as_deref()
            .and_then(|n| n.rsplit(['/', '\\']).next())
            .map(inbox::sanitize)
            .filter(|n| !n.is_empty());
        found.push(Attachment {
            file_id: document.file_id.clone(),
            name: given.unwrap_or_else(|| format!("document-{}", message.message_id)),
            declared_size: document.file_size,
        });
    }
    if let Some(largest) = message
        .photo
        .iter()
        .flatten()
        .max_by_key(|p| (u64::from(p.width) * u64::from(p.height), p.file_size.unwrap_or(0)))
    {
        found.push(Attachment {
            file_id: largest.file_id.clone(),
            name: format!("photo-{}.jpg", message.message_id),
            declared_size: largest.file_size,
        });
    }
    found
}

/// Whether a message carries files.
pub fn has_attachments(message: &Message) -> bool {
    message.document.is_some() || message.photo.as_ref().is_some_and(|p| !p.is_empty())
}

/// Downloads a message's files into `<workspace>/inbox/`. Each result is the path relative to
/// the workspace (`inbox/report.pdf`), or why that file could not be saved (for the chat and
/// the prompt).
pub async fn save(
    api: &BotApi,
    workspace: &Path,
    message: &Message,
    limit: u64,
    cancel: &CancellationToken,
) -> Vec<Result<String, String>> {
    let mut saved = Vec::new();
    for attachment in attachments(message) {
        saved.push(save_one(api, workspace, &attachment, limit, cancel).await);
    }
    saved
}

async fn save_one(
    api: &BotApi,
    workspace: &Path,
    attachment: &Attachment,
    limit: u64,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let refuse = |reason: String| format!("{}: {reason}", attachment.name);
    if let Some(size) = attachment.declared_size.filter(|size| *size > limit) {
        return Err(refuse(format!("{size} bytes, over the {limit}-byte limit")));
    }
    let (_, bytes) = api
        .download(&attachment.file_id, limit, cancel)
        .await
        .map_err(|err| refuse(err.to_string()))?;
    let dir = inbox::inbox_dir(workspace);
    let name = attachment.name.clone();
    let path = tokio::task::spawn_blocking(move || inbox::save_new(&dir, &name, &bytes))
        .await
        .map_err(|err| refuse(err.to_string()))?
        .map_err(|err| {
            tracing::error!(error = %err, "cannot save a received file");
            refuse(format!("cannot save it: {err}"))
        })?;
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(format!("inbox/{file_name}"))
}
