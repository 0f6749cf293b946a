//! Who may use the bot: a message is handled only when its sender is an allowed user, in their
//! private chat or in an allowed group. Access is decided by the sender, never by the chat
//! alone: in an allowed group other members are ignored, and so are messages sent on behalf of
//! a chat (anonymous admins, channels), which have no user to check.

use crate::api::{ChatKind, Message};
use crate::config::TelegramConfig;

/// What to do with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Handle it.
    Serve,
    /// A user who is not allowed wrote in their private chat: one polite refusal per chat.
    Refuse,
    /// Say nothing and do nothing.
    Ignore(Ignored),
}

/// Why a message is ignored (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// Sent on behalf of a chat (`sender_chat`), or without any sender.
    NoUser,
    /// In a private chat, the sender is not the chat's user.
    ForeignSender,
    /// A group that is not in `Telegram__AllowedGroupIds`.
    GroupNotAllowed,
    /// A member of an allowed group who is not an allowed user.
    MemberNotAllowed,
    /// A channel, or a chat kind this bot does not know.
    NotAChat,
}

impl Ignored {
    /// A constant description for log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Ignored::NoUser => "message without a user as its sender",
            Ignored::ForeignSender => {
                "private-chat message from someone other than the chat's user"
            }
            Ignored::GroupNotAllowed => "message in a group that is not allowed",
            Ignored::MemberNotAllowed => "message from a group member who is not allowed",
            Ignored::NotAChat => "message in a channel or an unknown kind of chat",
        }
    }
}

/// Decides whether `message` is served.
pub fn decide(config: &TelegramConfig, message: &Message) -> Access {
    if message.sender_chat.is_some() {
        return Access::Ignore(Ignored::NoUser);
    }
    let Some(sender) = &message.from else {
        return Access::Ignore(Ignored::NoUser);
    };
    let chat = &message.chat;
    match chat.kind {
        ChatKind::Private if sender.id != chat.id => Access::Ignore(Ignored::ForeignSender),
        ChatKind::Private if config.is_allowed_user(sender.id) => Access::Serve,
        ChatKind::Private => Access::Refuse,
        ChatKind::Group | ChatKind::Supergroup if !config.is_allowed_group(chat.id) => {
            Access::Ignore(Ignored::GroupNotAllowed)
        }
        ChatKind::Group | ChatKind::Supergroup if config.is_allowed_user(sender.id) => {
            Access::Serve
        }
        ChatKind::Group | ChatKind::Supergroup => Access::Ignore(Ignored::MemberNotAllowed),
        ChatKind::Channel | ChatKind::Unknown => Access::Ignore(Ignored::NotAChat),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::BotToken;

    const OWNER: i64 = 42;
    const GROUP: i64 = -100_123;

    fn message(value: serde_json::Value) -> Message {
        let mut value = value;
        value["message_id"] = json!(1);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn access_is_decided_by_the_sender() {
        let mut config =
            TelegramConfig::new(BotToken::new("1:x"), vec![OWNER], "/w".into(), "/s".into());
        config.allowed_groups = vec![GROUP];
        let private = |chat: i64, from: i64| {
            message(json!({"chat": {"id": chat, "type": "private"}, "from": {"id": from}}))
        };
        let group = |chat: i64, from: i64| {
            message(json!({"chat": {"id": chat, "type": "supergroup"}, "from": {"id": from}}))
        };
        let cases = [
            (private(OWNER, OWNER), Access::Serve),
            (private(99, 99), Access::Refuse),
            (private(OWNER, 99), Access::Ignore(Ignored::ForeignSender)),
            (group(GROUP, OWNER), Access::Serve),
            (group(GROUP, 99), Access::Ignore(Ignored::MemberNotAllowed)),
            (group(-5, OWNER), Access::Ignore(Ignored::GroupNotAllowed)),
            (
                message(json!({"chat": {"id": GROUP, "type": "group"},
                               "sender_chat": {"id": GROUP, "type": "group"},
                               "from": {"id": OWNER}})),
                Access::Ignore(Ignored::NoUser),
            ),
            (
                message(json!({"chat": {"id": GROUP, "type": "supergroup"}})),
                Access::Ignore(Ignored::NoUser),
            ),
            (
                message(json!({"chat": {"id": -7, "type": "channel"}, "from": {"id": OWNER}})),
                Access::Ignore(Ignored::NotAChat),
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(decide(&config, &message), expected, "{message:?}");
        }
    }
}
