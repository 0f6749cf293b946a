//! The few Bot API objects the host reads (https://core.telegram.org/bots/api#available-types).
//! Unknown fields are ignored, so newer API versions keep working. Incoming messages are also
//! serialized, into the host's record of accepted messages (`pending`).

use serde::{Deserialize, Serialize};

/// One incoming update; only `message` updates are asked for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
}

/// A message (incoming, or one the bot sent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    #[serde(default)]
    pub from: Option<User>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub document: Option<Document>,
    /// The sizes of a photo, smallest first.
    #[serde(default)]
    pub photo: Option<Vec<PhotoSize>>,
}

/// A chat; in a private chat its id is the user's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    pub id: i64,
}

/// A Telegram user or bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub username: Option<String>,
}

/// A general file sent as a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub file_id: String,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// One size of a photo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    pub file_unique_id: String,
    pub width: u32,
    pub height: u32,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A file ready to download (`getFile`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct File {
    pub file_id: String,
    #[serde(default)]
    pub file_size: Option<u64>,
    /// Where to download it; missing when the file is not available.
    #[serde(default)]
    pub file_path: Option<String>,
}
