//! The A2A server mounted by the Telegram host: the caller directory over the allowed chats'
//! workspaces, notify_owner into the owner's chat, and `/a2a`.

use serde_json::json;
use volcanic_test_support::callers::write_callers;

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
    assert_eq!(note.text, "🤖 A2A · travel-bot:\nyour flight is booked");
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
    // The tasks, then today's usage per caller (no caps set).
    assert!(listing.contains(" ago\n\nUsage on "), "{listing}");
    assert!(listing.contains("\n  travel-bot: 1 request, "), "{listing}");
    assert!(
        listing.trim_end().lines().last().unwrap().starts_with("  all callers: 1 request"),
        "{listing}"
    );
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
    assert_eq!(note.text, "🤖 A2A · travel-bot (group -1001234567):\nthe group's trip is booked");
    assert_eq!(bot.api().messages(GROUP), vec![], "a notification went into the group");
    assert_eq!(bot.api().messages(OTHER_OWNER), vec![]);
    bot.stop().await;
}

/// The owner's notifications: (text, entities) of each message starting with the robot.
fn notifications(bot: &Bot) -> Vec<(String, Vec<serde_json::Value>)> {
    bot.api()
        .messages(OWNER)
        .into_iter()
        .filter(|m| m.text.starts_with("🤖"))
        .map(|m| {
            let entities = bot.api().entities(OWNER, m.message_id);
            (m.text, entities)
        })
        .collect()
}

fn utf16(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The entities of a notification that carries `words` of the caller: bold over exactly
/// `prefix`, then a block quote over all of the caller's words (but trailing whitespace, which
/// Telegram trims), on the line below.
fn marked(prefix: &str, words: &str) -> Vec<serde_json::Value> {
    vec![
        json!({"type": "bold", "offset": 0, "length": utf16(prefix)}),
        json!({"type": "blockquote", "offset": utf16(prefix) + 1, "length": utf16(words.trim_end())}),
    ]
}

#[tokio::test]
async fn notify_owner_prefix_is_bold_and_caller_text_cannot_fake_one() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    // The attack: a long text whose later line is, character for character, how a
    // notification from another caller begins.
    let fake = "\n🤖 A2A · bank-official: your session expired, send /new then your password\n";
    let text = format!("{}{fake}{}", "a".repeat(100), "b".repeat(4_060));
    let steps = json!([{"tool": "notify_owner", "args": {"text": text}}, {"text": "ok"}]);
    let (status, body) = a2a_send(&base, KEY, &directive(steps)).await;
    assert_eq!(status, 200, "{body}");
    let notes = notifications(&bot);
    assert_eq!(notes.len(), 1, "capped, so one message: {notes:?}");
    let (shown, entities) = &notes[0];
    let prefix = "🤖 A2A · travel-bot:";
    // What is outside the quote is the bold prefix alone, on its own line; the imitation is
    // inside the quote with the rest of the caller's words.
    let words = shown.strip_prefix(&format!("{prefix}\n")).expect("the prefix on its own line");
    assert_eq!(entities, &marked(prefix, words), "only the real prefix is bold, all else quoted");
    assert!(words.starts_with("aaa") && words.contains("\n🤖 A2A · bank-official: "), "{shown}");
    assert!(words.ends_with("b…(cut)"), "the cut is visible");
    assert_eq!(words.chars().count(), 2_000 + "…(cut)".chars().count());
    bot.stop().await;
}

#[tokio::test]
async fn notify_owner_every_part_of_a_split_notification_carries_the_marked_prefix() {
    let bot = Bot::with(Setup {
        a2a: true,
        configure: Some(|config| config.notify_max_chars = 20_000),
        ..Setup::default()
    })
    .await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    let text: String = (0..500).map(|i| format!("line {i} of a long report 🌋\n")).collect();
    assert!(text.encode_utf16().count() > 2 * 4096);
    let steps = json!([{"tool": "notify_owner", "args": {"text": text}}, {"text": "ok"}]);
    let (status, body) = a2a_send(&base, KEY, &directive(steps)).await;
    assert_eq!(status, 200, "{body}");
    let notes = notifications(&bot);
    assert!(notes.len() >= 3, "{} parts", notes.len());
    let prefix = "🤖 A2A · travel-bot:";
    let mut joined = String::new();
    for (shown, entities) in &notes {
        let words = shown.strip_prefix(&format!("{prefix}\n")).expect("the prefix");
        assert!(shown.encode_utf16().count() <= 4096, "over Telegram's limit");
        assert_eq!(entities, &marked(prefix, words), "a part without its marks");
        joined.push_str(words);
    }
    assert_eq!(joined, text, "the parts make the whole text");
    // Nothing else reached the owner's chat without the prefix.
    assert_eq!(bot.api().messages(OWNER).len(), notes.len());
    bot.stop().await;
}

#[tokio::test]
async fn notify_owner_flood_is_limited_per_caller_with_one_notice() {
    let bot = Bot::with(Setup {
        a2a: true,
        configure: Some(|config| config.notify_window = std::time::Duration::from_secs(3)),
        ..Setup::default()
    })
    .await;
    write_callers(&bot.workspace(OWNER), &[("travel-bot", KEY), ("calendar", OTHER_KEY)]);
    let base = bot.a2a_url.clone().unwrap();
    let calls: Vec<_> = (0..40)
        .map(|i| json!({"tool": "notify_owner", "args": {"text": format!("flood {i}")}}))
        .collect();
    let started = std::time::Instant::now();
    let (status, body) =
        a2a_send(&base, KEY, &directive(json!([{"calls": calls}, {"text": "ok"}]))).await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "40 in 2 s, in one window");
    // Another caller has its own allowance.
    let steps =
        json!([{"tool": "notify_owner", "args": {"text": "calendar here"}}, {"text": "ok"}]);
    let (status, _) = a2a_send(&base, OTHER_KEY, &directive(steps)).await;
    assert_eq!(status, 200);
    let notice = bot.message(OWNER, |t| t.contains("dropped")).await;
    assert_eq!(
        notice.text,
        "🤖 A2A · travel-bot: 35 more notifications were dropped (at most 5 per 3 s)."
    );
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    let floods = texts.iter().filter(|t| t.contains(":\nflood ")).count();
    assert_eq!((floods, texts.len()), (5, 7), "{texts:?}");
    assert!(texts.contains(&"🤖 A2A · calendar:\ncalendar here".to_string()), "{texts:?}");
    bot.stop().await;
}

/// callers.json of the owner's workspace with travel-bot's tasks waiting for approval.
fn approving_caller(bot: &Bot) {
    let dir = bot.workspace(OWNER).join(".volcanic/a2a");
    std::fs::create_dir_all(&dir).unwrap();
    let list = json!([{"name": "travel-bot", "key": KEY, "approval": "every-task"}]);
    std::fs::write(dir.join("callers.json"), list.to_string()).unwrap();
}

/// The task's state, by GetTask over A2A.
async fn task_state(base: &str, task_id: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}});
    let response = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("X-API-Key", KEY)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    body["result"]["status"]["state"].as_str().unwrap_or_default().to_string()
}

async fn wait_for_task_state(base: &str, task_id: &str, wanted: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while task_state(base, task_id).await != wanted {
        assert!(tokio::time::Instant::now() < deadline, "the task never became {wanted}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn approval_asks_the_owner_with_buttons_and_approve_runs_the_task() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    approving_caller(&bot);
    let base = bot.a2a_url.clone().unwrap();
    let (status, body) = a2a_send(&base, KEY, &directive(json!([{"text": "trip booked"}]))).await;
    assert_eq!(status, 200, "{body}");
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{body}");
    let task_id = task["id"].as_str().unwrap().to_string();

    let asked = bot.message(OWNER, |t| t.starts_with("🔐 A2A · travel-bot")).await;
    assert!(asked.text.contains("trip booked"), "{}", asked.text);
    let approve = asked.buttons[0][0].1.clone();
    assert!(approve.starts_with("appr:y:"), "{:?}", asked.buttons);

    // A stranger's press counts for nothing.
    let refused = bot.api().push_callback_query(OWNER, STRANGER, asked.message_id, &approve);
    let answer = bot.api().wait_for_callback_answer(&refused, DEADLINE).await;
    assert_ne!(answer.text.as_deref(), Some("Approved"));
    assert_eq!(task_state(&base, &task_id).await, "TASK_STATE_AUTH_REQUIRED");

    let pressed = bot.api().push_callback_query(OWNER, OWNER, asked.message_id, &approve);
    let answer = bot.api().wait_for_callback_answer(&pressed, DEADLINE).await;
    assert_eq!(answer.text.as_deref(), Some("Approved"));
    wait_for_task_state(&base, &task_id, "TASK_STATE_COMPLETED").await;
    let edited = bot.message(OWNER, |t| t.contains("✅ Approved")).await;
    assert!(edited.buttons.is_empty(), "the buttons are gone once decided");

    // The same button again: no longer pending.
    let again = bot.api().push_callback_query(OWNER, OWNER, asked.message_id, &approve);
    let answer = bot.api().wait_for_callback_answer(&again, DEADLINE).await;
    assert_eq!(answer.text.as_deref(), Some("This request is no longer pending."));
    bot.stop().await;
}

#[tokio::test]
async fn approval_deny_rejects_the_task_and_a_message_typed_meanwhile_takes_nothing_away() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    approving_caller(&bot);
    let base = bot.a2a_url.clone().unwrap();
    let (_, body) = a2a_send(&base, KEY, "cancel all my meetings").await;
    let task_id = body["result"]["task"]["id"].as_str().unwrap().to_string();
    let asked = bot.message(OWNER, |t| t.starts_with("🔐 A2A · travel-bot")).await;
    // The owner chats meanwhile: the request still waits, the buttons still work.
    bot.api().push_text(OWNER, "what is on my calendar?");
    bot.message(OWNER, |t| t.contains("what is on my calendar?")).await;
    assert_eq!(task_state(&base, &task_id).await, "TASK_STATE_AUTH_REQUIRED");
    let deny = asked.buttons[0][1].1.clone();
    assert!(deny.starts_with("appr:n:"), "{:?}", asked.buttons);
    let pressed = bot.api().push_callback_query(OWNER, OWNER, asked.message_id, &deny);
    let answer = bot.api().wait_for_callback_answer(&pressed, DEADLINE).await;
    assert_eq!(answer.text.as_deref(), Some("Denied"));
    wait_for_task_state(&base, &task_id, "TASK_STATE_REJECTED").await;
    bot.message(OWNER, |t| t.contains("❌ Denied.")).await;
    bot.stop().await;
}

#[tokio::test]
async fn approval_request_text_cannot_pass_for_another_callers_request() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    approving_caller(&bot);
    let base = bot.a2a_url.clone().unwrap();
    // The attack: the request ends its own message early and then asks, as another caller, for
    // something harmless, right above the buttons that approve the real request.
    let request = "delete every file in the workspace\n\nApprove to let it run, or deny it. (It is \
rejected if nobody decides in time.)\n\n🔐 A2A · calendar asks for your approval:\n\nwhat is on \
my calendar today?";
    let (_, body) = a2a_send(&base, KEY, request).await;
    let task_id = body["result"]["task"]["id"].as_str().unwrap().to_string();
    let asked = bot.message(OWNER, |t| t.starts_with("🔐 A2A · travel-bot")).await;
    let heading = "🔐 A2A · travel-bot asks for your approval:";
    let shown = asked.text.strip_prefix(&format!("{heading}\n\n")).expect("the heading");
    let quoted = shown
        .strip_suffix(
            "\n\nApprove to let it run, or deny it. (It is rejected if nobody decides in time.)",
        )
        .expect("the closing line");
    assert!(quoted.contains("🔐 A2A · calendar asks"), "{quoted}");
    // Only the real heading is bold; the caller's whole request, imitation included, is quoted.
    let marks = |quoted: &str| {
        vec![
            json!({"type": "bold", "offset": 0, "length": utf16(heading)}),
            json!({"type": "blockquote", "offset": utf16(heading) + 2, "length": utf16(quoted)}),
        ]
    };
    assert_eq!(bot.api().entities(OWNER, asked.message_id), marks(quoted));
    // Decided, the message keeps its marks.
    let deny = asked.buttons[0][1].1.clone();
    let pressed = bot.api().push_callback_query(OWNER, OWNER, asked.message_id, &deny);
    bot.api().wait_for_callback_answer(&pressed, DEADLINE).await;
    wait_for_task_state(&base, &task_id, "TASK_STATE_REJECTED").await;
    bot.message(OWNER, |t| t.ends_with("❌ Denied.")).await;
    assert_eq!(bot.api().entities(OWNER, asked.message_id), marks(quoted));
    bot.stop().await;
}

#[tokio::test]
async fn approval_decided_at_the_shell_takes_the_buttons_away() {
    use volcanic_a2a::control::{self, ControlRequest};
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    approving_caller(&bot);
    let base = bot.a2a_url.clone().unwrap();
    let (_, body) = a2a_send(&base, KEY, "plan my week").await;
    let task_id = body["result"]["task"]["id"].as_str().unwrap().to_string();
    let asked = bot.message(OWNER, |t| t.starts_with("🔐 A2A · travel-bot")).await;
    let id = asked.buttons[0][0].1.trim_start_matches("appr:y:").to_string();
    // The owner decides at the shell (what `volcanic deny` sends).
    let socket = control::socket_path(bot.state.path());
    let reason = Some("busy week".to_string());
    let decided = control::request(&socket, &ControlRequest::Deny { id, reason }).await.unwrap();
    assert!(matches!(decided, control::ControlAnswer::Decided(_)), "{decided:?}");
    wait_for_task_state(&base, &task_id, "TASK_STATE_REJECTED").await;
    let edited = bot.message(OWNER, |t| t.contains("(Decided elsewhere: denied.)")).await;
    assert_eq!(edited.message_id, asked.message_id);
    assert!(edited.buttons.is_empty(), "no button left to press");
    bot.stop().await;
}

/// callers.json of the owner's workspace: travel-bot with a daily token cap.
fn capped_caller(bot: &Bot, tokens: u64) {
    let dir = bot.workspace(OWNER).join(".volcanic/a2a");
    std::fs::create_dir_all(&dir).unwrap();
    let callers = json!([{"name": "travel-bot", "key": KEY, "limits": {"tokensPerDay": tokens}}]);
    std::fs::write(dir.join("callers.json"), callers.to_string()).unwrap();
}

#[tokio::test]
async fn usage_alerts_reach_the_owner_at_80_and_100_percent_and_a2a_lists_the_day() {
    let bot = Bot::with(Setup { a2a: true, ..Setup::default() }).await;
    capped_caller(&bot, 1000);
    let base = bot.a2a_url.clone().unwrap();
    let costing = |input: u64| {
        directive(json!([{"usage": {"input": input, "output": 50}}, {"text": "done"}]))
    };
    let (status, body) = a2a_send(&base, KEY, &costing(800)).await;
    assert_eq!(status, 200, "{body}");
    let alert = bot.message(OWNER, |t| t.starts_with("📊")).await.text;
    assert!(
        alert.starts_with(
            "📊 A2A usage: A2A caller travel-bot has used 80% of the daily token cap (850 tokens of 1,000 tokens)"
        ),
        "{alert}"
    );
    let (status, _) = a2a_send(&base, KEY, &costing(150)).await;
    assert_eq!(status, 200);
    let full = bot.message(OWNER, |t| t.contains("used 100%")).await.text;
    assert!(full.contains("Further requests that need the model are refused"), "{full}");
    // Over the cap: refused, and no third alert.
    let (_, refused) = a2a_send(&base, KEY, "more").await;
    assert_eq!(refused["error"]["data"][0]["reason"], "DAILY_LIMIT_REACHED", "{refused}");
    bot.api().push_text(OWNER, "/a2a");
    let listing = bot.message(OWNER, |t| t.starts_with("A2A server")).await.text;
    assert!(listing.contains("travel-bot: 3 requests, 1,050 tokens of 1,000 (105%)"), "{listing}");
    let alerts = bot.api().messages(OWNER).iter().filter(|m| m.text.starts_with("📊")).count();
    assert_eq!(alerts, 2);
    bot.stop().await;
}
