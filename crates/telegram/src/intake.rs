//! What an incoming message brings to the model beyond its text: the origin of a forwarded
//! message (so forwarded words are never taken as the owner's own), and what to say to a
//! message the bot cannot use at all (a sticker, a voice message…).
//!
//! Names in an origin are chosen by strangers: they are cut short and kept on one line, with no
//! brackets, so a name cannot end the marker early or start a line of its own.

use crate::api::{Chat, ChatKind, Message, MessageOrigin, User};

/// Longest name shown in a forward marker, in characters.
const NAME_CHARS: usize = 64;

/// `[forwarded from …]` for a forwarded message, `None` for one the sender wrote.
pub fn forward_marker(message: &Message) -> Option<String> {
    let from = match &message.forward_origin {
        Some(MessageOrigin::User { sender_user }) => user(sender_user),
        Some(MessageOrigin::HiddenUser { sender_user_name }) => {
            format!("{} (hidden user)", clean(sender_user_name))
        }
        Some(MessageOrigin::Chat { sender_chat, author_signature }) => {
            signed(chat(sender_chat), author_signature.as_deref())
        }
        Some(MessageOrigin::Channel { chat: channel, author_signature }) => {
            signed(chat(channel), author_signature.as_deref())
        }
        Some(MessageOrigin::Unknown) => "an unknown origin".to_string(),
        None => {
            match (&message.forward_from, &message.forward_from_chat, &message.forward_sender_name)
            {
                (Some(sender), _, _) => user(sender),
                (None, Some(from_chat), _) => chat(from_chat),
                (None, None, Some(name)) => format!("{} (hidden user)", clean(name)),
                (None, None, None) => return None,
            }
        }
    };
    Some(format!("[forwarded from {from}]"))
}

/// What a message holds that the bot cannot use, when it holds nothing it can (no text,
/// caption, document or photo); `None` for a usable message or one of Telegram's service
/// messages (members joining, a pinned message…), which deserve no answer.
pub fn unusable(message: &Message) -> Option<&'static str> {
    let usable = message.text.is_some()
        || message.caption.is_some()
        || message.document.is_some()
        || message.photo.as_ref().is_some_and(|p| !p.is_empty());
    if usable {
        return None;
    }
    [
        (message.sticker.is_some(), "a sticker"),
        (message.voice.is_some(), "a voice message"),
        (message.audio.is_some(), "an audio file"),
        (message.video.is_some(), "a video"),
        (message.video_note.is_some(), "a video message"),
        (message.animation.is_some(), "an animation"),
        (message.location.is_some(), "a location"),
        (message.contact.is_some(), "a contact"),
        (message.poll.is_some(), "a poll"),
    ]
    .into_iter()
    .find_map(|(present, what)| present.then_some(what))
}

/// The reply to an unusable message.
pub fn unusable_reply(what: &str) -> String {
    format!("I can't use {what}. Send me text, a document or a photo (with a caption if you like).")
}

fn user(user: &User) -> String {
    let name = [user.first_name.as_deref(), user.last_name.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let name = if name.trim().is_empty() { format!("user {}", user.id) } else { clean(&name) };
    match &user.username {
        Some(username) => format!("{name} (@{})", clean(username)),
        None => name,
    }
}

fn chat(chat: &Chat) -> String {
    let kind = match chat.kind {
        ChatKind::Channel => "the channel ",
        ChatKind::Group | ChatKind::Supergroup => "the group ",
        ChatKind::Private | ChatKind::Unknown => "",
    };
    let title = chat.title.as_deref().map(clean).unwrap_or_else(|| format!("chat {}", chat.id));
    match &chat.username {
        Some(username) => format!("{kind}{title} (@{})", clean(username)),
        None => format!("{kind}{title}"),
    }
}

fn signed(from: String, signature: Option<&str>) -> String {
    match signature {
        Some(author) => format!("{from}, signed {}", clean(author)),
        None => from,
    }
}

/// A stranger's name made safe for a marker line: no line breaks or control characters, no
/// square brackets, at most [`NAME_CHARS`] characters.
fn clean(name: &str) -> String {
    let one_line: String = name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .filter(|c| !matches!(c, '[' | ']'))
        .collect();
    let words = one_line.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = words.chars().take(NAME_CHARS).collect();
    if words.chars().count() > NAME_CHARS {
        short.push('…');
    }
    short
}
