//! Documents and photos sent to the bot, saved into the chat workspace's `inbox/` and named in
//! the prompt (`[file received: inbox/report.pdf]`).
//!
//! Names come from the document's own name ([`safe_name`]: letters of every script and the
//! extension kept, only what is unsafe in a file name replaced, long names shortened before the
//! extension); a photo is `photo-<message id>.jpg` (its largest size). Nothing is ever overwritten: a taken
//! name gets a numeric prefix. Files over the download cap are refused before downloading.

use std::path::Path;

use tokio_util::sync::CancellationToken;
use volcanic_a2a::inbox;

use crate::api::{ApiError, BotApi, Message};

/// One attachment of a message.
struct Attachment {
    file_id: String,
    name: String,
    declared_size: Option<u64>,
}

fn attachments(message: &Message) -> Vec<Attachment> {
    let mut found = Vec::new();
    if let Some(document) = &message.document {
        let given = document.file_name.as_deref().map(safe_name).filter(|n| !n.is_empty());
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
    let too_large =
        |size: u64| refuse(format!("{}, over the {} limit", human_size(size), human_size(limit)));
    if let Some(size) = attachment.declared_size.filter(|size| *size > limit) {
        return Err(too_large(size));
    }
    let (_, bytes) =
        api.download(&attachment.file_id, limit, cancel).await.map_err(|err| match err {
            ApiError::TooLarge { size, .. } => too_large(size),
            other => refuse(other.to_string()),
        })?;
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

/// Longest saved name, in bytes (file systems allow 255; `save_new` may add a `NNN-` prefix).
const NAME_BYTES: usize = 120;

/// Longest extension kept whole when a name is shortened, in bytes (`.tar.gz`, `.markdown`).
const EXTENSION_BYTES: usize = 16;

/// A sender's file name made safe to save in `inbox/`: the last path component; path
/// separators, control characters, characters that are unsafe in file names on common systems
/// (`: * ? " < > |`) and invisible direction or zero-width marks (which can disguise an
/// extension) become `_`; leading dots and trailing dots and spaces go; a name over
/// [`NAME_BYTES`] is shortened before its extension. Letters of every script stay.
pub fn safe_name(given: &str) -> String {
    let last = given.rsplit(['/', '\\']).next().unwrap_or_default();
    let replaced: String = last.chars().map(|c| if is_unsafe(c) { '_' } else { c }).collect();
    let name = replaced.trim_start_matches(['.', ' ']).trim_end_matches(['.', ' ']);
    if name.len() <= NAME_BYTES {
        return name.to_string();
    }
    // The extension: from the first dot of the last EXTENSION_BYTES bytes (`.tar.gz` whole).
    let tail_start = floor_char_boundary(name, name.len() - EXTENSION_BYTES);
    let extension = name[tail_start..].find('.').map_or("", |dot| &name[tail_start + dot..]);
    let stem = &name[..name.len() - extension.len()];
    let keep = floor_char_boundary(stem, NAME_BYTES - extension.len());
    format!("{}{extension}", stem[..keep].trim_end_matches(['.', ' ']))
}

fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// The largest char boundary of `text` at or below `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0)
}

/// A size as people read it: `512 bytes`, `1.5 KB`, `20 MB` (1024-based, one decimal unless
/// whole), as Telegram's apps show sizes.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} byte{}", if bytes == 1 { "" } else { "s" });
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let rounded = (value * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0} {}", UNITS[unit])
    } else {
        format!("{rounded:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names_keep_letters_and_extensions() {
        assert_eq!(safe_name("отчёт 2024.pdf"), "отчёт 2024.pdf");
        assert_eq!(safe_name("報告書.docx"), "報告書.docx");
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("C:\\Users\\me\\plan.txt"), "plan.txt");
        assert_eq!(safe_name("..hidden"), "hidden");
        assert_eq!(safe_name("a:b*c?.txt"), "a_b_c_.txt");
        assert_eq!(safe_name("invoice\u{202e}fdp.exe"), "invoice_fdp.exe");
        assert_eq!(safe_name("line\nbreak.txt"), "line_break.txt");
        assert_eq!(safe_name("trailing. . "), "trailing");
        let long = safe_name(&format!("{}.tar.gz", "я".repeat(200)));
        assert!(long.len() <= NAME_BYTES && long.ends_with("я.tar.gz"), "{long}");
        let no_ext = safe_name(&"x".repeat(300));
        assert_eq!(no_ext.len(), NAME_BYTES);
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human_size(0), "0 bytes");
        assert_eq!(human_size(1), "1 byte");
        assert_eq!(human_size(1023), "1023 bytes");
        assert_eq!(human_size(1536), "1.5 KB");
        assert_eq!(human_size(1_234_567), "1.2 MB");
        assert_eq!(human_size(20 * 1024 * 1024), "20 MB");
        assert_eq!(human_size(50 * 1024 * 1024 * 1024), "50 GB");
    }
}
