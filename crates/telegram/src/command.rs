//! The bot's commands: `/start`, `/help`, `/new`, `/compact`, `/stop`, `/a2a`, and the `/a2a`
//! listing.
//!
//! Anything else starting with a slash is an ordinary message for the assistant.

use chrono::{DateTime, Utc};
use volcanic_a2a::auth::CallerEntry;
use volcanic_a2a::task::{TaskSummary, state_name};

/// A command the host answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Start,
    Help,
    New,
    /// `/compact [what to keep]`.
    Compact,
    Stop,
    A2a,
}

/// The command menu (`setMyCommands`).
pub const MENU: &[(&str, &str)] = &[
    ("new", "Start a fresh conversation"),
    ("compact", "Summarise the older conversation to make room"),
    ("stop", "Stop the current answer and drop queued messages"),
    ("a2a", "List A2A callers and recent tasks"),
    ("help", "What this bot does"),
];

/// How many tasks `/a2a` lists.
pub const A2A_TASKS: usize = 10;

/// Parses `/name` or `/name@bot` (plus anything after), case-insensitively.
pub fn parse(text: &str) -> Option<Command> {
    let first = text.split_whitespace().next()?;
    let name = first.strip_prefix('/')?;
    let name = name.split('@').next().unwrap_or_default().to_ascii_lowercase();
    match name.as_str() {
        "start" => Some(Command::Start),
        "help" => Some(Command::Help),
        "new" => Some(Command::New),
        "compact" => Some(Command::Compact),
        "stop" => Some(Command::Stop),
        "a2a" => Some(Command::A2a),
        _ => None,
    }
}

/// What follows a command's name (`/compact keep the dates` → `keep the dates`), `None` when
/// nothing does.
pub fn argument(text: &str) -> Option<String> {
    let rest = text.trim_start().split_once(char::is_whitespace)?.1.trim();
    (!rest.is_empty()).then(|| rest.to_string())
}

/// Whether `text` is a command addressed to another bot (`/new@some_other_bot`): in a group
/// every bot sees it, and none but the named one may act on it. `me` is this bot's username
/// (from getMe); when it is unknown, no addressed command is taken as ours.
pub fn is_for_another_bot(text: &str, me: Option<&str>) -> bool {
    let Some(first) = text.split_whitespace().next() else { return false };
    let Some(name) = first.strip_prefix('/') else { return false };
    match name.split_once('@') {
        None => false,
        Some((_, bot)) => me.is_none_or(|me| !bot.eq_ignore_ascii_case(me)),
    }
}

/// The answer to `/start` and `/help`.
pub fn help(queue_capacity: usize) -> String {
    format!(
        "Hi! I'm your assistant. Write to me, or send a document or photo (saved to inbox/ in \
your workspace).\n\nOne answer at a time: messages sent while I'm answering wait in a queue (up \
to {queue_capacity}) and are answered in order.\n\n/new — start a fresh conversation\n/compact — summarise our older \
conversation to make room (add what to keep: /compact the trip plans)\n/stop — \
stop the current answer and drop queued messages\n/a2a — A2A callers and recent tasks\n/help — \
this text"
    )
}

/// The refusal a user who is not allowed gets in their private chat, once. Groups that are not
/// allowed get nothing.
pub const REFUSAL: &str = "Sorry, this is a private assistant and I can't talk with you. \
(The owner can allow you by adding your user id to Telegram__AllowedUserIds.)";

/// `3m ago`, `2h ago`, `5d ago`.
pub fn age(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - then).num_seconds().max(0);
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// The `/a2a` answer: the chat's callers (keys masked) and its latest server tasks.
pub fn a2a_listing(
    enabled: bool,
    callers: &[CallerEntry],
    tasks: &[TaskSummary],
    now: DateTime<Utc>,
) -> String {
    let mut out = String::new();
    out.push_str(if enabled {
        "A2A server: on.\n"
    } else {
        "A2A server: off (set A2A__Enabled=true to let other agents call).\n"
    });
    if callers.is_empty() {
        out.push_str(
            "\nNo callers yet. Add them to .volcanic/a2a/callers.json in your workspace.\n",
        );
    } else {
        out.push_str(&format!("\nCallers ({}):\n", callers.len()));
        for caller in callers {
            out.push_str(&format!(
                "• {} · {} · tier {} · key {}\n",
                caller.name,
                caller.mode.as_str(),
                caller.tier.as_str(),
                caller.key.masked()
            ));
        }
    }
    if tasks.is_empty() {
        out.push_str("\nNo tasks yet.");
    } else {
        out.push_str(&format!("\nLast {} tasks:\n", tasks.len()));
        for task in tasks {
            let when = task.timestamp.map(|t| age(t, now)).unwrap_or_else(|| "–".into());
            out.push_str(&format!("• {} · {} · {}\n", task.caller, state_name(&task.state), when));
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_bot_names_and_arguments() {
        assert_eq!(parse("/new"), Some(Command::New));
        assert_eq!(parse("/STOP@my_bot now"), Some(Command::Stop));
        assert_eq!(parse("  /a2a"), Some(Command::A2a));
        assert_eq!(parse("/start"), Some(Command::Start));
        assert_eq!(parse("/compact keep the trip plans"), Some(Command::Compact));
        assert_eq!(parse("/unknown"), None);
        assert_eq!(parse("new"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_command_argument_is_what_follows_its_name() {
        assert_eq!(
            argument("/compact keep the trip plans").as_deref(),
            Some("keep the trip plans")
        );
        assert_eq!(argument("/compact@my_bot\n dates "), Some("dates".to_string()));
        assert_eq!(argument("/compact"), None);
        assert_eq!(argument("/compact   "), None);
    }

    #[test]
    fn commands_for_other_bots_are_recognised() {
        let me = Some("fake_bot");
        assert!(is_for_another_bot("/new@some_other_bot", me));
        assert!(is_for_another_bot("/weather@other_bot Paris", me));
        assert!(!is_for_another_bot("/new@Fake_Bot", me));
        assert!(!is_for_another_bot("/new", me));
        assert!(!is_for_another_bot("mail me@example.com", me));
        assert!(is_for_another_bot("/new@fake_bot", None), "unknown name: not ours");
    }

    #[test]
    fn ages_read_naturally() {
        let now = Utc::now();
        let ago = |secs| age(now - chrono::Duration::seconds(secs), now);
        assert_eq!(ago(5), "5s ago");
        assert_eq!(ago(180), "3m ago");
        assert_eq!(ago(7200), "2h ago");
        assert_eq!(ago(3 * 86_400), "3d ago");
        assert_eq!(age(now + chrono::Duration::seconds(10), now), "0s ago");
    }
}
