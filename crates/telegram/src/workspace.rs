//! A chat's workspace folder: where its assistant works (`Telegram__WorkspaceRoot/<chat id>`),
//! created on first use with a starter PERSONA.md the owner can edit. The assistant's files in
//! it (PERSONA.md, MEMORY.md, AGENTS.md) shape its system prompt (core's `workspace`).

use std::path::PathBuf;

use crate::config::TelegramConfig;

/// The PERSONA.md a new workspace starts with.
pub(crate) const STARTER_PERSONA: &str = "# Assistant\n\nYou are the personal assistant of the owner \
of this Telegram chat. Answer concisely: your answers are read on a phone. Files the owner sends \
arrive in inbox/.\n\nThe owner can edit this file (PERSONA.md) to give you a name, a tone and \
standing instructions; MEMORY.md holds what you should remember between conversations.\n";

/// The chat's workspace, created on first use with a starter PERSONA.md (an existing one is
/// never touched).
pub(crate) async fn ensure_workspace(
    config: &TelegramConfig,
    chat_id: i64,
) -> std::io::Result<PathBuf> {
    let dir = config.workspace(chat_id);
    let path = dir.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&path)?;
        match std::fs::OpenOptions::new().write(true).create_new(true).open(path.join("PERSONA.md"))
        {
            Ok(mut file) => std::io::Write::write_all(&mut file, STARTER_PERSONA.as_bytes()),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(err) => Err(err),
        }
    })
    .await
    .map_err(std::io::Error::other)??;
    Ok(dir)
}
