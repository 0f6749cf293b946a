//! Nothing lost silently, nothing sent twice, the token in no text (issue 18, items 4 and 5):
//! sends that may have reached Telegram are not repeated, failed edits continue in a fresh
//! message, undelivered answers are delivered later instead of a "✅ Done.", and Bot API error
//! texts that echo the request path are redacted.

use std::time::Duration;

use serde_json::json;
use volcanic_test_support::telegram::{Fault, Injected};

use crate::support::*;

/// Waits for `echo: <text>` of a follow-up message, so that whatever the run before it would
/// send (a duplicate, a note) has been sent.
async fn settle(bot: &Bot, text: &str) {
    bot.api().push_text(OWNER, text);
    bot.message(OWNER, |t| t == format!("echo: {text}")).await;
}

fn count(bot: &Bot, check: impl Fn(&str) -> bool) -> usize {
    bot.api().messages(OWNER).iter().filter(|m| check(&m.text)).count()
}

/// The chat's messages other than warnings, joined: the answers as the user reads them.
fn answers(bot: &Bot) -> String {
    bot.api()
        .messages(OWNER)
        .iter()
        .filter(|m| !m.text.starts_with("⚠️"))
        .map(|m| m.text.as_str())
        .collect()
}

#[tokio::test]
async fn send_whose_connection_drops_after_telegram_took_it_is_not_repeated() {
    let bot = Bot::start().await;
    bot.api().fault_next("sendMessage", Fault::AcceptThenDrop);
    bot.api().push_text(OWNER, "hello");
    // The user is told that Telegram did not confirm a part, rather than getting it twice.
    bot.message(OWNER, |t| t.starts_with("⚠️ Telegram did not confirm")).await;
    settle(&bot, "next").await;
    // The dropped call did deliver its part; what followed came in a new message, once.
    assert_eq!(answers(&bot), "echo: helloecho: next", "{:?}", bot.api().messages(OWNER));
    assert_eq!(count(&bot, |t| t == "✅ Done."), 0);
    bot.stop().await;
}

#[tokio::test]
async fn send_answered_after_the_client_timeout_is_not_repeated() {
    let bot =
        Bot::with(Setup { call_timeout: Some(Duration::from_secs(1)), ..Setup::default() }).await;
    bot.api().fault_next("sendMessage", Fault::AcceptThenDelay(Duration::from_secs(3)));
    bot.api().push_text(OWNER, "slow");
    bot.message(OWNER, |t| t.starts_with("⚠️ Telegram did not confirm")).await;
    settle(&bot, "next").await;
    assert_eq!(answers(&bot), "echo: slowecho: next", "{:?}", bot.api().messages(OWNER));
    bot.stop().await;
}

#[tokio::test]
async fn edit_of_a_deleted_message_continues_in_a_fresh_message_with_the_rest() {
    let bot = Bot::start().await;
    let answer: String =
        (0..80).map(|i| format!("line {i:02} of a long answer\n")).collect::<String>();
    assert!(answer.len() > 1500);
    let steps = json!([{"text": answer, "chunk": 60, "delay_ms": 40}]);
    bot.api().push_text(OWNER, &directive(steps));
    let first = bot.message(OWNER, |t| t.starts_with("line 00")).await;
    // The user deletes the answer while it streams: every later edit of it is refused.
    let deleted = bot.api().delete_message(OWNER, first.message_id).unwrap();
    assert!(deleted.len() < answer.len(), "deleted only part of the answer");
    let rest = answer[deleted.len()..].to_string();
    bot.api()
        .wait_for("the rest of the answer", DEADLINE, |api| {
            let joined: String = api.messages(OWNER).iter().map(|m| m.text.as_str()).collect();
            (joined == rest).then_some(())
        })
        .await;
    settle(&bot, "next").await;
    let joined: String = bot.api().messages(OWNER).iter().map(|m| m.text.clone()).collect();
    assert_eq!(joined, format!("{rest}echo: next"));
    bot.stop().await;
}

#[tokio::test]
async fn edit_refused_continues_in_a_fresh_message_and_nothing_is_lost() {
    let bot = Bot::start().await;
    let answer: String = (0..60).map(|i| format!("row {i:02} of the answer\n")).collect();
    let steps = json!([{"text": answer, "chunk": 60, "delay_ms": 40}]);
    for _ in 0..200 {
        let description = "Bad Request: message to edit not found".to_string();
        bot.api().fault_next("editMessageText", Fault::Refuse { status: 400, description });
    }
    bot.api().push_text(OWNER, &directive(steps));
    bot.api()
        .wait_for("the whole answer", DEADLINE, |api| {
            let joined: String = api.messages(OWNER).iter().map(|m| m.text.as_str()).collect();
            (joined == answer).then_some(())
        })
        .await;
    bot.stop().await;
}

#[tokio::test]
async fn undelivered_answer_is_delivered_when_telegram_is_back_and_never_followed_by_done() {
    let bot = Bot::start().await;
    // Telegram fails every send for a while: the streamed send, the final one and two rounds
    // of redelivery (5 attempts each) fail.
    for _ in 0..500 {
        bot.api().fail_next("sendMessage", Injected::Status(502));
    }
    bot.api().push_text(OWNER, &directive(json!([{"text": "the answer"}])));
    bot.api()
        .wait_for("two rounds of redelivery", DEADLINE, |api| {
            // Counted by the owed text's own attempts: a count of all sends could be reached
            // while the first delivery is still retrying, which may then succeed as a plain
            // answer once Telegram is back.
            let redelivered = api
                .calls_of("sendMessage")
                .iter()
                .filter(|call| {
                    call.params["text"]
                        .as_str()
                        .is_some_and(|text| text.starts_with("⚠️ I couldn't deliver this at first"))
                })
                .count();
            (redelivered >= 10).then_some(())
        })
        .await;
    assert_eq!(bot.api().messages(OWNER), vec![]);
    bot.api().clear_failures();
    let late = bot.message(OWNER, |t| t.contains("the answer")).await;
    assert!(
        late.text.starts_with("⚠️ I couldn't deliver this at first (Bot API error 502"),
        "{}",
        late.text
    );
    settle(&bot, "next").await;
    assert_eq!(count(&bot, |t| t.contains("the answer")), 1);
    assert_eq!(count(&bot, |t| t == "✅ Done."), 0, "{:?}", bot.api().messages(OWNER));
    bot.stop().await;
}

#[tokio::test]
async fn bot_api_errors_that_echo_the_request_path_never_show_the_token() {
    let bot = Bot::start().await;
    let secret_part = TOKEN.split_once(':').unwrap().1;
    bot.api().fault_next("getFile", Fault::EchoPath);
    bot.api().push_document(OWNER, "a.txt", b"aaa", None);
    let echoed = bot.message(OWNER, |t| t.starts_with("⚠️ I couldn't receive")).await;
    let description = format!("Unauthorized: the part {secret_part} is not valid");
    bot.api().fault_next("getFile", Fault::Refuse { status: 400, description });
    bot.api().push_document(OWNER, "b.txt", b"bbb", None);
    let part = bot
        .message(OWNER, |t| t.starts_with("⚠️ I couldn't receive") && t.contains("is not valid"))
        .await;
    let encoded = TOKEN.replace(':', "%3A");
    for text in [&echoed.text, &part.text] {
        for leak in [TOKEN, secret_part, encoded.as_str()] {
            assert!(!text.contains(leak), "the token reached the chat: {text}");
        }
        assert!(text.contains("[REDACTED:Telegram__BotToken]"), "{text}");
    }
    bot.stop().await;
}

#[tokio::test]
async fn send_tool_documents_never_carry_the_token_in_any_form() {
    let bot = Bot::start().await;
    // The token is put together in bash, so no directive or tool argument holds it whole.
    let command = "printf '%s%s\\n' '123456:AAE-te' 'st-token-sekrit' > t.txt; \
        printf 'part %s%s\\n' 'AAE-te' 'st-token-sekrit' >> t.txt; \
        printf 'url /bot%s%s/getMe\\n' '123456%3AAAE-te' 'st-token-sekrit' >> t.txt; \
        printf '%s%s' '123456:AAE-te' 'st-token-sekrit' | base64 >> t.txt; \
        printf '\\x00\\xff%s%s' '123456:AAE-te' 'st-token-sekrit' > b.bin";
    let steps = json!([
        {"tool": "bash", "args": {"command": command}},
        {"tool": "send", "args": {"path": "t.txt"}},
        {"tool": "send", "args": {"path": "b.bin"}},
        {"text": "sent"},
    ]);
    bot.api().push_text(OWNER, &directive(steps));
    bot.message(OWNER, |t| t == "sent").await;
    let written = std::fs::read_to_string(bot.workspace(OWNER).join("t.txt")).unwrap();
    assert!(written.contains(TOKEN), "the test file holds the token: {written}");
    let documents = bot.api().documents();
    let names: Vec<&str> = documents.iter().map(|d| d.file_name.as_str()).collect();
    assert_eq!(names, vec!["t.txt"], "the binary holding the token is refused");
    let sent = String::from_utf8(documents[0].bytes.clone()).unwrap();
    let secret_part = TOKEN.split_once(':').unwrap().1;
    for leak in [TOKEN, secret_part, "123456%3AAAE", "MTIzNDU2OkFBRS1"] {
        assert!(!sent.contains(leak), "{leak} reached the chat: {sent}");
    }
    assert_eq!(sent.matches("[REDACTED:Telegram__BotToken]").count(), 4, "{sent}");
    bot.stop().await;
}
