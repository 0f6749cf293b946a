//! Who may use the bot: a message is handled only when its sender is an allowed user, in their
//! private chat or in an allowed group. Access is decided by the sender, never by the chat
//! alone: in an allowed group other members are ignored, and so are messages sent on behalf of
//! a chat (anonymous admins, channels), which have no user to check.
//!
//! A button press (a callback query) follows the same rule: it is served only when its presser
//! is an allowed user and the message is in a chat the bot serves (their own private chat, or
//! an allowed group). Any other press is refused, since every press needs an answer.

use crate::api::{CallbackQuery, ChatKind, Message};
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

/// What to do with a button press.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Press {
    /// Hand it to the callback handler.
    Serve,
    /// Answer it with a refusal and nothing else.
    Refuse(PressRefused),
}

/// Why a press is refused (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PressRefused {
    /// The presser is not an allowed user.
    UserNotAllowed,
    /// A private chat that is not the presser's own.
    ForeignChat,
    /// A group that is not in `Telegram__AllowedGroupIds`.
    GroupNotAllowed,
    /// A channel, a chat kind this bot does not know, or no message at all (inline mode).
    NotAChat,
}

impl PressRefused {
    /// A constant description for log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            PressRefused::UserNotAllowed => "button press from a user who is not allowed",
            PressRefused::ForeignChat => "button press in another user's private chat",
            PressRefused::GroupNotAllowed => "button press in a group that is not allowed",
            PressRefused::NotAChat => "button press outside a chat the bot serves",
        }
    }
}

/// Decides whether a button press is served.
pub fn decide_press(config: &TelegramConfig, query: &CallbackQuery) -> Press {
    let presser = query.from.id;
    if !config.is_allowed_user(presser) {
        return Press::Refuse(PressRefused::UserNotAllowed);
    }
    let Some(message) = &query.message else {
        return Press::Refuse(PressRefused::NotAChat);
    };
    let chat = &message.chat;
    match chat.kind {
        ChatKind::Private if chat.id != presser => Press::Refuse(PressRefused::ForeignChat),
        ChatKind::Private => Press::Serve,
        ChatKind::Group | ChatKind::Supergroup if !config.is_allowed_group(chat.id) => {
            Press::Refuse(PressRefused::GroupNotAllowed)
        }
        ChatKind::Group | ChatKind::Supergroup => Press::Serve,
        ChatKind::Channel | ChatKind::Unknown => Press::Refuse(PressRefused::NotAChat),
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
    const STRANGER: i64 = 99;

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

    #[test]
    fn press_is_decided_by_the_presser_and_the_chat() {
        let mut config =
            TelegramConfig::new(BotToken::new("1:x"), vec![OWNER], "/w".into(), "/s".into());
        config.allowed_groups = vec![GROUP];
        let press = |chat: Option<(i64, &str)>, from: i64| -> CallbackQuery {
            let mut query = json!({"id": "q", "from": {"id": from}, "data": "x"});
            if let Some((chat, kind)) = chat {
                query["message"] = json!({"message_id": 1, "chat": {"id": chat, "type": kind}});
            }
            serde_json::from_value(query).unwrap()
        };
        let cases = [
            (press(Some((OWNER, "private")), OWNER), Press::Serve),
            (press(Some((GROUP, "supergroup")), OWNER), Press::Serve),
            (
                press(Some((STRANGER, "private")), STRANGER),
                Press::Refuse(PressRefused::UserNotAllowed),
            ),
            (
                press(Some((OWNER, "private")), STRANGER),
                Press::Refuse(PressRefused::UserNotAllowed),
            ),
            (
                press(Some((GROUP, "supergroup")), STRANGER),
                Press::Refuse(PressRefused::UserNotAllowed),
            ),
            (press(Some((STRANGER, "private")), OWNER), Press::Refuse(PressRefused::ForeignChat)),
            (press(Some((-5, "group")), OWNER), Press::Refuse(PressRefused::GroupNotAllowed)),
            (press(Some((-7, "channel")), OWNER), Press::Refuse(PressRefused::NotAChat)),
            (press(None, OWNER), Press::Refuse(PressRefused::NotAChat)),
        ];
        for (query, expected) in cases {
            assert_eq!(decide_press(&config, &query), expected, "{query:?}");
        }
    }
}
