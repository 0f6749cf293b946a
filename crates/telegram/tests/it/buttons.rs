//! Inline buttons (issue 22): the Bot API calls' wire format against the fake, and presses
//! through the host: only allowed users reach the callback handler, nobody else's press and no
//! stale button does, a press never waits for a chat's run, and a handled press is not handled
//! again after a restart.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use volcanic_telegram::api::{
    ApiError, BotApi, Button, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup,
};
use volcanic_telegram::callback::{NOT_ALLOWED, STALE};
use volcanic_telegram::{BotToken, CallbackHandler, CallbackReply, MessageEdit, TelegramConfig};
use volcanic_test_support::telegram::{CallbackAnswer, FakeBotApi, QUERY_TOO_OLD, SentMessage};

use crate::support::*;

/// Knows the button data `approve:1`: answers "Approved" and replaces the message's text and
/// buttons; any other data is unknown. Records every press it sees as (presser, data).
#[derive(Default)]
struct Approvals {
    seen: Mutex<Vec<(i64, String)>>,
}

impl Approvals {
    fn seen(&self) -> Vec<(i64, String)> {
        self.seen.lock().unwrap().clone()
    }
}

impl CallbackHandler for Approvals {
    fn handle<'a>(&'a self, query: &'a CallbackQuery) -> BoxFuture<'a, CallbackReply> {
        Box::pin(async move {
            let data = query.data.clone().unwrap_or_default();
            self.seen.lock().unwrap().push((query.from.id, data.clone()));
            if data != "approve:1" {
                return CallbackReply::Unknown;
            }
            CallbackReply::Handled {
                answer: Some("Approved".into()),
                edit: Some(MessageEdit {
                    text: "Approved ✅".into(),
                    entities: Vec::new(),
                    buttons: Vec::new(),
                }),
            }
        })
    }
}

fn approve_deny() -> Vec<Vec<Button>> {
    vec![vec![Button::new("Approve", "approve:1"), Button::new("Deny", "deny:1")]]
}

fn client(url: &str) -> BotApi {
    let mut config =
        TelegramConfig::new(BotToken::new(TOKEN), vec![OWNER], "/w".into(), "/s".into());
    config.api_url = url.to_string();
    BotApi::new(&config).unwrap()
}

fn answer(id: &str, text: &str) -> CallbackAnswer {
    CallbackAnswer {
        callback_query_id: id.to_string(),
        text: Some(text.to_string()),
        show_alert: false,
    }
}

/// A host with the `Approvals` handler and an Approve/Deny message the bot sent to `chat_id`.
async fn host_with_buttons(chat_id: i64) -> (Bot, Arc<Approvals>, i64) {
    let approvals = Arc::new(Approvals::default());
    let bot = Bot::with(Setup { callbacks: Some(approvals.clone()), ..Setup::default() }).await;
    let sent = client(&bot.api().url)
        .send_message_with_buttons(
            chat_id,
            "Approve?",
            &[],
            &approve_deny(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    (bot, approvals, sent.message_id)
}

#[tokio::test]
async fn buttons_send_edit_and_answer_speak_the_bot_api_wire_format() {
    let fake = FakeBotApi::start(TOKEN).await;
    let api = client(&fake.url);
    let cancel = CancellationToken::new();

    let sent =
        api.send_message_with_buttons(OWNER, "Approve?", &[], &approve_deny(), &cancel).await;
    let sent = sent.unwrap();
    let keyboard = json!({"inline_keyboard": [[
        {"text": "Approve", "callback_data": "approve:1"},
        {"text": "Deny", "callback_data": "deny:1"},
    ]]});
    assert_eq!(
        fake.calls_of("sendMessage")[0].params,
        json!({"chat_id": OWNER, "text": "Approve?", "reply_markup": keyboard})
    );
    let read_back = |data: &str, text: &str| InlineKeyboardButton {
        text: text.to_string(),
        callback_data: Some(data.to_string()),
    };
    assert_eq!(
        sent.reply_markup,
        Some(InlineKeyboardMarkup {
            inline_keyboard: vec![vec![
                read_back("approve:1", "Approve"),
                read_back("deny:1", "Deny")
            ]],
        })
    );
    let pair = |text: &str, data: &str| (text.to_string(), data.to_string());
    let stored = |text: &str, edits: usize, buttons| SentMessage {
        chat_id: OWNER,
        message_id: sent.message_id,
        text: text.to_string(),
        edits,
        buttons,
    };
    assert_eq!(
        fake.messages(OWNER),
        vec![stored(
            "Approve?",
            0,
            vec![vec![pair("Approve", "approve:1"), pair("Deny", "deny:1")]]
        )]
    );

    // New buttons replace the old; the same text and buttons again is "not modified", which
    // counts as success; no buttons remove them.
    let only = vec![vec![Button::new("Undo", "undo:1")]];
    let id = sent.message_id;
    api.edit_message_text_with_buttons(OWNER, id, "Approved", &[], &only, &cancel).await.unwrap();
    api.edit_message_text_with_buttons(OWNER, id, "Approved", &[], &only, &cancel).await.unwrap();
    assert_eq!(
        fake.messages(OWNER),
        vec![stored("Approved", 1, vec![vec![pair("Undo", "undo:1")]])]
    );
    api.edit_message_text_with_buttons(OWNER, id, "Approved", &[], &[], &cancel).await.unwrap();
    assert_eq!(fake.messages(OWNER), vec![stored("Approved", 2, Vec::new())]);
    let edits: Vec<_> = fake.calls_of("editMessageText").into_iter().map(|c| c.params).collect();
    assert_eq!(
        edits,
        vec![
            json!({"chat_id": OWNER, "message_id": id, "text": "Approved",
                   "reply_markup": {"inline_keyboard": [[{"text": "Undo", "callback_data": "undo:1"}]]}}),
            json!({"chat_id": OWNER, "message_id": id, "text": "Approved",
                   "reply_markup": {"inline_keyboard": [[{"text": "Undo", "callback_data": "undo:1"}]]}}),
            json!({"chat_id": OWNER, "message_id": id, "text": "Approved"}),
        ]
    );

    // Callback data over 64 bytes is refused, as Telegram does.
    let too_long = vec![vec![Button::new("x", "d".repeat(65))]];
    let refused = api.send_message_with_buttons(OWNER, "x", &[], &too_long, &cancel).await;
    assert_eq!(
        refused.map(|m| m.message_id),
        Err(ApiError::Rejected {
            status: 400,
            description: "Bad Request: BUTTON_DATA_INVALID".into()
        })
    );

    // A press arrives as a callback_query update carrying the message as stored.
    let query_id = fake.push_callback_query(OWNER, OWNER, id, "approve:1");
    let updates = api.get_updates(None, &cancel).await.unwrap();
    assert_eq!(updates.len(), 1, "{updates:?}");
    let query = updates[0].callback_query.clone().unwrap();
    assert_eq!(
        (query.id.as_str(), query.from.id, query.data.as_deref()),
        (query_id.as_str(), OWNER, Some("approve:1"))
    );
    let message = query.message.unwrap();
    assert_eq!(
        (message.message_id, message.chat.id, message.text.as_deref()),
        (id, OWNER, Some("Approved"))
    );
    assert_eq!(message.reply_markup, None);
    assert_eq!(
        fake.calls_of("getUpdates")[0].params["allowed_updates"],
        json!(["message", "callback_query"])
    );

    // An answer is recorded; a second one is refused as Telegram refuses it.
    api.answer_callback_query(&query_id, Some("Done"), &cancel).await.unwrap();
    let again = api.answer_callback_query(&query_id, None, &cancel).await;
    assert_eq!(again, Err(ApiError::Rejected { status: 400, description: QUERY_TOO_OLD.into() }));
    let unknown = api.answer_callback_query("no-such-query", None, &cancel).await;
    assert_eq!(unknown, Err(ApiError::Rejected { status: 400, description: QUERY_TOO_OLD.into() }));
    assert_eq!(fake.callback_answers(), vec![answer(&query_id, "Done")]);
    let answers: Vec<_> =
        fake.calls_of("answerCallbackQuery").into_iter().map(|c| c.params).collect();
    assert_eq!(
        answers,
        vec![
            json!({"callback_query_id": query_id, "text": "Done"}),
            json!({"callback_query_id": query_id}),
            json!({"callback_query_id": "no-such-query"}),
        ]
    );
}

#[tokio::test]
async fn buttons_get_updates_delivers_only_the_kinds_asked_for() {
    let fake = FakeBotApi::start(TOKEN).await;
    fake.push_callback_query(OWNER, OWNER, 1, "approve:1");
    fake.push_text(OWNER, "hello");
    let url = format!("{}/bot{TOKEN}/getUpdates", fake.url);
    let get = |params: serde_json::Value| {
        let url = url.clone();
        async move {
            let response = reqwest::Client::new().post(url).json(&params).send().await.unwrap();
            let body: serde_json::Value = response.json().await.unwrap();
            let updates = body["result"].as_array().unwrap().clone();
            updates
                .iter()
                .map(|u| if u["message"].is_object() { "message" } else { "callback_query" })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(get(json!({"allowed_updates": []})).await, vec!["callback_query", "message"]);
    // Telegram drops an update of a kind the bot does not take: it is not delivered later.
    assert_eq!(get(json!({"allowed_updates": ["message"]})).await, vec!["message"]);
    assert_eq!(get(json!({})).await, vec!["message"]);
}

#[tokio::test]
async fn buttons_press_by_the_owner_reaches_the_handler_and_edits_the_message() {
    let (bot, approvals, message_id) = host_with_buttons(OWNER).await;
    let query_id = bot.api().push_callback_query(OWNER, OWNER, message_id, "approve:1");
    let answered = bot.api().wait_for_callback_answer(&query_id, DEADLINE).await;
    assert_eq!(answered, answer(&query_id, "Approved"));
    let edited = bot
        .api()
        .wait_for_message(OWNER, DEADLINE, |m| m.message_id == message_id && m.edits == 1)
        .await;
    assert_eq!((edited.text.as_str(), edited.buttons), ("Approved ✅", Vec::new()));
    assert_eq!(approvals.seen(), vec![(OWNER, "approve:1".to_string())]);
    // Not a chat message: the model never saw it.
    assert!(bot.faux.requests().is_empty(), "a press reached the model");
    bot.stop().await;
}

#[tokio::test]
async fn buttons_press_by_a_user_who_is_not_allowed_is_refused_and_never_handled() {
    let (bot, approvals, message_id) = host_with_buttons(OWNER).await;
    // A stranger pressing a button on the owner's message (a forwarded or shared one)…
    let on_owners = bot.api().push_callback_query(OWNER, STRANGER, message_id, "approve:1");
    // …and on a message in the stranger's own chat.
    let theirs = client(&bot.api().url)
        .send_message_with_buttons(
            STRANGER,
            "Approve?",
            &[],
            &approve_deny(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let in_theirs =
        bot.api().push_callback_query(STRANGER, STRANGER, theirs.message_id, "approve:1");
    for id in [&on_owners, &in_theirs] {
        let answered = bot.api().wait_for_callback_answer(id, DEADLINE).await;
        assert_eq!(answered, answer(id, NOT_ALLOWED));
    }
    // The owner's press after theirs is handled: theirs were decided before it.
    let owners = bot.api().push_callback_query(OWNER, OWNER, message_id, "approve:1");
    bot.api().wait_for_callback_answer(&owners, DEADLINE).await;
    assert_eq!(approvals.seen(), vec![(OWNER, "approve:1".to_string())]);
    assert!(bot.api().messages(STRANGER).iter().all(|m| m.edits == 0));
    bot.stop().await;
}

#[tokio::test]
async fn buttons_press_the_handler_does_not_know_is_answered_as_no_longer_active() {
    let (bot, approvals, message_id) = host_with_buttons(OWNER).await;
    let query_id = bot.api().push_callback_query(OWNER, OWNER, message_id, "approve:999");
    let answered = bot.api().wait_for_callback_answer(&query_id, DEADLINE).await;
    assert_eq!(answered, answer(&query_id, STALE));
    assert_eq!(answered.text.as_deref(), Some("This button is no longer active."));
    assert_eq!(approvals.seen(), vec![(OWNER, "approve:999".to_string())]);
    assert_eq!(bot.api().messages(OWNER)[0].edits, 0, "a stale press edited the message");
    bot.stop().await;
}

#[tokio::test]
async fn buttons_press_without_a_handler_is_answered_as_no_longer_active() {
    let bot = Bot::start().await;
    let sent = client(&bot.api().url)
        .send_message_with_buttons(
            OWNER,
            "Approve?",
            &[],
            &approve_deny(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let query_id = bot.api().push_callback_query(OWNER, OWNER, sent.message_id, "approve:1");
    let answered = bot.api().wait_for_callback_answer(&query_id, DEADLINE).await;
    assert_eq!(answered, answer(&query_id, STALE));
    bot.stop().await;
}

#[tokio::test]
async fn buttons_press_during_a_run_is_handled_at_once_and_leaves_the_queue_alone() {
    let (bot, approvals, message_id) = host_with_buttons(OWNER).await;
    bot.api().push_text(OWNER, &directive(json!([{"sleep_ms": 3000}, {"text": "first done"}])));
    bot.api()
        .wait_for("the run to start", DEADLINE, |api| {
            (!api.calls_of("sendChatAction").is_empty()).then_some(())
        })
        .await;
    bot.api().push_text(OWNER, "second");
    let query_id = bot.api().push_callback_query(OWNER, OWNER, message_id, "approve:1");
    bot.api().push_text(OWNER, "third");
    bot.api().wait_for_callback_answer(&query_id, DEADLINE).await;
    bot.api()
        .wait_for_message(OWNER, DEADLINE, |m| m.message_id == message_id && m.edits == 1)
        .await;
    let texts = |bot: &Bot| -> Vec<String> {
        bot.api().messages(OWNER).into_iter().map(|m| m.text).collect()
    };
    assert_eq!(texts(&bot), vec!["Approved ✅"], "the press waited for the run");
    bot.message(OWNER, |t| t == "echo: third").await;
    assert_eq!(texts(&bot), vec!["Approved ✅", "first done", "echo: second", "echo: third"]);
    assert_eq!(approvals.seen(), vec![(OWNER, "approve:1".to_string())]);
    let prompts: Vec<String> = bot
        .faux
        .requests()
        .iter()
        .filter_map(|r| r.latest_user_text().map(str::to_string))
        .skip(1)
        .collect();
    assert_eq!(prompts, vec!["second", "third"]);
    bot.stop().await;
}

#[tokio::test]
async fn buttons_press_handled_before_a_restart_is_not_handled_again() {
    let fake = FakeBotApi::start(TOKEN).await;
    let setup = |approvals: &Arc<Approvals>, dirs| Setup {
        api_url: Some(fake.url.clone()),
        callbacks: Some(approvals.clone()),
        dirs,
        ..Setup::default()
    };
    let sent = client(&fake.url)
        .send_message_with_buttons(
            OWNER,
            "Approve?",
            &[],
            &approve_deny(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let first = Arc::new(Approvals::default());
    let bot = Bot::with(setup(&first, None)).await;
    let query_id = fake.push_callback_query(OWNER, OWNER, sent.message_id, "approve:1");
    fake.wait_for_callback_answer(&query_id, DEADLINE).await;
    fake.wait_for_message(OWNER, DEADLINE, |m| m.edits == 1).await;
    let dirs = bot.stop().await;
    // Whether or not the first host's acknowledgement reached Telegram, the press comes again.
    fake.redeliver_all();

    let second = Arc::new(Approvals::default());
    let bot = Bot::with(setup(&second, Some(dirs))).await;
    // A later press is handled: everything before it has been seen by the new host.
    let later = fake.push_callback_query(OWNER, OWNER, sent.message_id, "deny:1");
    fake.wait_for_callback_answer(&later, DEADLINE).await;
    assert_eq!(first.seen(), vec![(OWNER, "approve:1".to_string())]);
    assert_eq!(second.seen(), vec![(OWNER, "deny:1".to_string())]);
    bot.stop().await;
}
