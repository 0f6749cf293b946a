//! The few Bot API objects the host reads (https://core.telegram.org/bots/api#available-types).
//! Unknown fields are ignored, so newer API versions keep working. Incoming messages are also
//! serialized, into the host's record of accepted messages (`pending`).

use serde::{Deserialize, Serialize};

/// A mark over part of a text the bot sends (`MessageEntity`): where it starts and how long it is,
/// in UTF-16 units as Telegram counts them. Marks are given as entities, never through a parse
/// mode, so nothing in the text itself can make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub kind: EntityKind,
    pub offset: usize,
    pub length: usize,
}

/// The marks the bot uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    /// What names who speaks (`🤖 A2A · <caller>:`).
    Bold,
    /// Words someone else wrote, set apart as a quotation.
    Blockquote,
}

/// One incoming update; only `message` and `callback_query` updates are asked for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

/// A press of an inline keyboard's callback button (`CallbackQuery`). It must be answered
/// (`answerCallbackQuery`) within about 15 seconds, or the user's client shows a spinner and
/// then gives up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    /// Who pressed the button.
    pub from: User,
    /// The message the button belongs to; missing for messages sent in inline mode (which this
    /// bot does not use). An old message may come as an inaccessible one: its chat and id only.
    #[serde(default)]
    pub message: Option<Message>,
    /// The button's `callback_data`, chosen by the bot but sent back by the user's client:
    /// untrusted input.
    #[serde(default)]
    pub data: Option<String>,
}

/// A message's inline keyboard, as Telegram shows it (`InlineKeyboardMarkup`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InlineKeyboardMarkup {
    #[serde(default)]
    pub inline_keyboard: Vec<Vec<InlineKeyboardButton>>,
}

/// One button of an inline keyboard as read back; only callback buttons have `callback_data`
/// (a URL button in a message another bot made has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InlineKeyboardButton {
    pub text: String,
    #[serde(default)]
    pub callback_data: Option<String>,
}

/// A callback button to send: its label and the data Telegram hands back when it is pressed
/// (1 to 64 bytes, or Telegram refuses the message with `BUTTON_DATA_INVALID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub text: String,
    pub data: String,
}

impl Button {
    pub fn new(text: impl Into<String>, data: impl Into<String>) -> Self {
        Button { text: text.into(), data: data.into() }
    }
}

/// A message (incoming, or one the bot sent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    #[serde(default)]
    pub from: Option<User>,
    /// The chat a message was sent on behalf of (an anonymous group admin, a channel); `from`
    /// then holds a placeholder bot.
    #[serde(default)]
    pub sender_chat: Option<Chat>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub document: Option<Document>,
    /// The sizes of a photo, smallest first.
    #[serde(default)]
    pub photo: Option<Vec<PhotoSize>>,
    /// Where a forwarded message came from (Bot API 7.0 and later).
    #[serde(default)]
    pub forward_origin: Option<MessageOrigin>,
    /// The older forward fields, for servers before Bot API 7.0.
    #[serde(default)]
    pub forward_from: Option<User>,
    #[serde(default)]
    pub forward_from_chat: Option<Chat>,
    #[serde(default)]
    pub forward_sender_name: Option<String>,
    /// Content the bot cannot use; only their presence matters (kept as JSON so the message
    /// can be written to the record of accepted messages).
    #[serde(default)]
    pub sticker: Option<serde_json::Value>,
    #[serde(default)]
    pub voice: Option<serde_json::Value>,
    #[serde(default)]
    pub audio: Option<serde_json::Value>,
    #[serde(default)]
    pub video: Option<serde_json::Value>,
    #[serde(default)]
    pub video_note: Option<serde_json::Value>,
    #[serde(default)]
    pub animation: Option<serde_json::Value>,
    #[serde(default)]
    pub location: Option<serde_json::Value>,
    #[serde(default)]
    pub contact: Option<serde_json::Value>,
    #[serde(default)]
    pub poll: Option<serde_json::Value>,
    /// The inline keyboard of a message the bot sent (read back in a [`CallbackQuery`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<InlineKeyboardMarkup>,
}

/// Where a forwarded message came from (`MessageOrigin`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessageOrigin {
    User {
        sender_user: User,
    },
    HiddenUser {
        sender_user_name: String,
    },
    Chat {
        sender_chat: Chat,
        #[serde(default)]
        author_signature: Option<String>,
    },
    Channel {
        chat: Chat,
        #[serde(default)]
        author_signature: Option<String>,
    },
    #[serde(other)]
    Unknown,
}

/// A chat; in a private chat its id is the user's id, groups have negative ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    pub id: i64,
    #[serde(rename = "type", default)]
    pub kind: ChatKind,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

/// What kind of chat a [`Chat`] is; a kind this client does not know is `Unknown`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    Private,
    Group,
    Supergroup,
    Channel,
    #[default]
    #[serde(other)]
    Unknown,
}

/// A Telegram user or bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
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
