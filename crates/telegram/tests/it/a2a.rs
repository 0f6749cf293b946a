//! The A2A server mounted by the Telegram host: the caller directory over the allowed chats'
//! workspaces, notify_owner into the owner's chat, and `/a2a`.

use serde_json::json;

use crate::support::*;

const KEY: &str = "k_travel_bot_secret_abcd1234";
const OTHER_KEY: &str = "k_other_owner_key_5678";
const STRANGER_KEY: &str = "k_stranger_key_9999";

#[tokio::test]
async fn caller_directory_only_allowed_chats() {
    let bot =
        Bot::with(Setup { allowed: vec![OWNER, OTHER_OWNER], a2a: true, ..Setup::default() }).await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY)]);
    write_callers(&bot.workspace(OTHER_OWNER), &[("calendar", OTHER_KEY)]);
    write_callers(&bot.workspace(STRANGER), &[("intruder", STRANGER_KEY)]);
    let base = bot.a2a_url.clone().unwrap();

    let (status, body) = a2a_send(&base, KEY, "hello").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    let (status, _) = a2a_send(&base, OTHER_KEY, "hello").await;
    assert_eq!(status, 200);
    let (status, _) = a2a_send(&base, STRANGER_KEY, "hello").await;
    assert_eq!(status, 401, "a workspace of a chat that is not allowed is not served");
    // The task landed in the owner's workspace, in the scope of the owner's chat.
    let tasks = std::fs::read_dir(bot.workspace(OWNER).join(".volcanic/a2a/tasks")).unwrap();
    assert_eq!(tasks.count(), 1);
    let scopes: Vec<String> = std::fs::read_dir(bot.state.path().join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(scopes.iter().any(|s| s.starts_with("telegram-4711-a2a-travel-bot_")), "{scopes:?}");
    bot.stop().await;
}

#[tokio::test]
async fn caller_directory_live_edit() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    let (status, _) = a2a_send(&base, OTHER_KEY, "hi").await;
    assert_eq!(status, 401);
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY), ("calendar", OTHER_KEY)]);
    let (status, body) = a2a_send(&base, OTHER_KEY, "hi").await;
    assert_eq!(status, 200, "{body}");
    write_callers(&bot.workspace(OWNER), &[("calendar", OTHER_KEY)]);
    let (status, _) = a2a_send(&base, KEY, "hi").await;
    assert_eq!(status, 401, "a removed caller is refused at once");
    bot.stop().await;
}

#[tokio::test]
async fn notify_owner_reaches_owners_chat() {
    let bot =
        Bot::with(Setup { allowed: vec![OWNER, OTHER_OWNER], a2a: true, ..Setup::default() }).await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    let text = directive(json!([
        {"tool": "notify_owner", "args": {"text": "your flight is booked"}},
        {"text": "told them"}
    ]));
    let (status, body) = a2a_send(&base, KEY, &text).await;
    assert_eq!(status, 200, "{body}");
    let note = bot.message(OWNER, |t| t.starts_with("🤖")).await;
    assert_eq!(note.text, "🤖 A2A · travel-bot: your flight is booked");
    assert!(bot.api().messages(OTHER_OWNER).is_empty());
    bot.stop().await;
}

#[tokio::test]
async fn a2a_command_lists_masked_callers_and_tasks() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY), ("calendar", OTHER_KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    let (status, _) = a2a_send(&base, KEY, "plan a trip").await;
    assert_eq!(status, 200);
    bot.api().push_text(OWNER, "/a2a");
    let listing = bot.message(OWNER, |t| t.starts_with("A2A server")).await.text;
    assert!(listing.starts_with("A2A server: on."), "{listing}");
    assert!(listing.contains("• travel-bot · isolated · tier workspace · key …1234"), "{listing}");
    assert!(listing.contains("• calendar · isolated · tier workspace · key …5678"), "{listing}");
    assert!(listing.contains("Last 1 tasks:\n• travel-bot · completed · "), "{listing}");
    assert!(listing.trim_end().ends_with("ago"), "{listing}");
    assert!(!listing.contains(KEY) && !listing.contains(OTHER_KEY), "a key leaked: {listing}");
    bot.stop().await;
}

#[tokio::test]
async fn a2a_command_without_callers_says_how_to_add_them() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "/a2a");
    let listing = bot.message(OWNER, |t| t.starts_with("A2A server")).await.text;
    assert!(listing.starts_with("A2A server: off"), "{listing}");
    assert!(listing.contains("No callers yet"), "{listing}");
    assert!(listing.contains("No tasks yet."), "{listing}");
    bot.stop().await;
}

#[tokio::test]
async fn notify_owner_from_a_group_workspace_goes_to_the_owners_private_chat() {
    let bot = Bot::with(Setup {
        allowed: vec![OWNER, OTHER_OWNER],
        groups: vec![GROUP],
        a2a: true,
        ..Setup::default()
    })
    .await;
    write_callers(&bot.workspace(GROUP), &[("travel-bot", KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    let text = directive(json!([
        {"tool": "notify_owner", "args": {"text": "the group's trip is booked"}},
        {"text": "told them"}
    ]));
    let (status, body) = a2a_send(&base, KEY, &text).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    // The group's workspace is served, its task is there, and the note went to the owner.
    assert!(bot.workspace(GROUP).join(".volcanic/a2a/tasks").is_dir());
    let note = bot.message(OWNER, |t| t.starts_with("🤖")).await;
    assert_eq!(note.text, "🤖 A2A · travel-bot (group -1001234567): the group's trip is booked");
    assert_eq!(bot.api().messages(GROUP), vec![], "a notification went into the group");
    assert_eq!(bot.api().messages(OTHER_OWNER), vec![]);
    bot.stop().await;
}
