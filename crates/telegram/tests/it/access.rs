//! Access by user (issue 18, item 2): a message is handled only when its sender is an allowed
//! user, in private chats and in allowed groups alike; other groups hear nothing from the bot,
//! and commands addressed to another bot are not ours.

use crate::support::*;

/// Every text the Faux provider was prompted with, in order.
fn prompts(bot: &Bot) -> Vec<String> {
    bot.faux.requests().iter().filter_map(|r| r.latest_user_text().map(str::to_string)).collect()
}

#[tokio::test]
async fn access_private_chat_message_from_another_sender_is_not_run() {
    let bot = Bot::start().await;
    // Chat 4711 is allowed, but this message's sender is not (the "chat 42, from 99").
    bot.api().push_message(serde_json::json!({
        "chat": {"id": OWNER, "type": "private"},
        "from": {"id": STRANGER, "is_bot": false, "first_name": "Mallory"},
        "text": "touch pwned",
    }));
    bot.api().push_text(OWNER, "ping");
    bot.message(OWNER, |t| t == "echo: ping").await;
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert_eq!(texts, vec!["echo: ping"]);
    assert_eq!(prompts(&bot), vec!["ping"]);
    bot.stop().await;
}

#[tokio::test]
async fn access_group_handles_only_allowed_members_and_no_anonymous_admins() {
    let bot = Bot::with(Setup { groups: vec![GROUP], ..Setup::default() }).await;
    bot.api().push_group_text(GROUP, STRANGER, "touch by a member");
    bot.api().push_anonymous_admin_text(GROUP, "touch by an anonymous admin");
    bot.api().push_message(serde_json::json!({
        "chat": {"id": GROUP, "type": "supergroup", "title": "Test group"},
        "text": "no sender at all",
    }));
    bot.api().push_group_text(GROUP, OWNER, "hello group");
    bot.message(GROUP, |t| t == "echo: hello group").await;
    // The owner's private chat still works, with its own workspace and conversation.
    bot.api().push_text(OWNER, "hello me");
    bot.message(OWNER, |t| t == "echo: hello me").await;
    let texts: Vec<String> = bot.api().messages(GROUP).into_iter().map(|m| m.text).collect();
    assert_eq!(texts, vec!["echo: hello group"], "other members are ignored silently");
    assert_eq!(prompts(&bot), vec!["hello group", "hello me"]);
    assert!(bot.workspace(GROUP).join("PERSONA.md").is_file(), "the group has its own workspace");
    assert!(bot.state.path().join("sessions/telegram--1001234567/session.jsonl").is_file());
    bot.stop().await;
}

#[tokio::test]
async fn access_group_not_allowed_gets_no_message_even_from_the_owner() {
    let bot = Bot::with(Setup { groups: vec![GROUP], ..Setup::default() }).await;
    bot.api().push_group_text(OTHER_GROUP, OWNER, "hi from another group");
    bot.api().push_group_text(OTHER_GROUP, STRANGER, "/start");
    // A group id in the user list does not make a group allowed either.
    bot.api().push_text(OWNER, "ping");
    bot.message(OWNER, |t| t == "echo: ping").await;
    assert_eq!(bot.api().messages(OTHER_GROUP), vec![], "a group that is not allowed heard us");
    assert!(!bot.workspace(OTHER_GROUP).exists());
    assert_eq!(prompts(&bot), vec!["ping"]);
    bot.stop().await;
}

#[tokio::test]
async fn access_group_ids_in_the_user_list_do_not_allow_the_group() {
    let bot = Bot::with(Setup { allowed: vec![OWNER, GROUP], ..Setup::default() }).await;
    bot.api().push_group_text(GROUP, OWNER, "hello group");
    bot.api().push_text(OWNER, "ping");
    bot.message(OWNER, |t| t == "echo: ping").await;
    assert_eq!(bot.api().messages(GROUP), vec![]);
    bot.stop().await;
}

#[tokio::test]
async fn access_stranger_in_a_private_chat_still_gets_one_refusal() {
    let bot = Bot::start().await;
    bot.api().push_text(STRANGER, "hi");
    bot.api().push_text(STRANGER, "hi again");
    bot.api().push_text(OWNER, "ping");
    bot.message(OWNER, |t| t == "echo: ping").await;
    let refusals = bot.api().messages(STRANGER);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(refusals[0].text.contains("private assistant"), "{}", refusals[0].text);
    bot.stop().await;
}

#[tokio::test]
async fn access_command_addressed_to_another_bot_is_ignored() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "remember me");
    bot.message(OWNER, |t| t == "echo: remember me").await;
    bot.api().push_text(OWNER, "/new@some_other_bot");
    bot.api().push_text(OWNER, "/stop@some_other_bot");
    bot.api().push_text(OWNER, "/weather@some_other_bot Paris");
    bot.api().push_text(OWNER, "ping");
    bot.message(OWNER, |t| t == "echo: ping").await;
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert_eq!(texts, vec!["echo: remember me", "echo: ping"]);
    assert_eq!(prompts(&bot), vec!["remember me", "ping"]);
    assert!(bot.state.path().join("sessions/telegram-4711/session.jsonl").is_file());
    // Ours (getMe says fake_bot), in any case, still works.
    bot.api().push_text(OWNER, "/new@Fake_Bot");
    bot.message(OWNER, |t| t.starts_with("🆕")).await;
    bot.stop().await;
}
