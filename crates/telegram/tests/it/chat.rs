//! Chatting: round trip, streaming and splitting, attachments, refusals, the queue, commands,
//! and the send tool.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn chat_round_trip_answers_in_the_chat_and_creates_the_workspace() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "hello there");
    bot.message(OWNER, |t| t == "echo: hello there").await;
    assert!(!bot.api().calls_of("sendChatAction").is_empty(), "typing shown first");
    let persona = std::fs::read_to_string(bot.workspace(OWNER).join("PERSONA.md")).unwrap();
    assert!(persona.contains("personal assistant"), "{persona}");
    // The main session's scope, in the state folder.
    assert!(bot.state.path().join("sessions/telegram-4711/session.jsonl").is_file());
    bot.stop().await;
}

#[tokio::test]
async fn chat_existing_persona_is_left_alone() {
    let bot = Bot::start().await;
    std::fs::create_dir_all(bot.workspace(OWNER)).unwrap();
    std::fs::write(bot.workspace(OWNER).join("PERSONA.md"), "I am Ada.").unwrap();
    bot.api().push_text(OWNER, "hi");
    bot.message(OWNER, |t| t == "echo: hi").await;
    let persona = std::fs::read_to_string(bot.workspace(OWNER).join("PERSONA.md")).unwrap();
    assert_eq!(persona, "I am Ada.");
    let system = bot.faux.requests().last().unwrap().system.clone();
    assert!(system.contains("I am Ada."), "{system}");
    bot.stop().await;
}

#[tokio::test]
async fn chat_long_answer_is_split_under_the_limit_and_concatenates_to_the_answer() {
    let bot = Bot::start().await;
    let mut answer = String::new();
    for i in 0..400 {
        answer.push_str(&format!("Paragraph {i}: the volcano 🌋 is calm today, mostly.\n\n"));
        if i % 7 == 0 {
            answer.push_str(&"😀".repeat(300));
        }
    }
    let answer = answer.trim_end().to_string();
    let total_units = answer.encode_utf16().count();
    assert!(total_units > 3 * 4096, "a test answer of {total_units} units");
    bot.api().push_text(OWNER, &directive(json!([{"text": answer, "chunk": 700}])));
    let joined = |api: &volcanic_test_support::telegram::FakeBotApi| -> String {
        api.messages(OWNER).iter().map(|m| m.text.as_str()).collect()
    };
    bot.api()
        .wait_for("the whole answer", DEADLINE, |api| {
            (joined(api).len() >= answer.len()).then_some(())
        })
        .await;
    // Let the run settle, so a wrong extra message would be there to see.
    bot.api().push_text(OWNER, "next");
    bot.message(OWNER, |t| t == "echo: next").await;
    let mut parts = bot.api().messages(OWNER);
    parts.pop();
    assert!(parts.len() >= 4, "{} parts", parts.len());
    for part in &parts {
        assert!(part.text.encode_utf16().count() <= 4096, "part over the limit");
    }
    let joined: String = parts.iter().map(|m| m.text.as_str()).collect();
    // Compared by length and first difference: printing two 30 kB texts helps nobody.
    let differs = joined.chars().zip(answer.chars()).position(|(a, b)| a != b);
    assert_eq!((joined.len(), differs), (answer.len(), None), "the parts do not make the answer");
    bot.stop().await;
}

#[tokio::test]
async fn chat_document_is_saved_to_inbox_and_named_in_the_prompt() {
    let bot = Bot::start().await;
    bot.api().push_document(OWNER, "../report.pdf", b"%PDF-1.7 data", Some("summarize this"));
    bot.message(OWNER, |t| t == "echo: [file received: inbox/report.pdf]\nsummarize this").await;
    let saved = std::fs::read(bot.workspace(OWNER).join("inbox/report.pdf")).unwrap();
    assert_eq!(saved, b"%PDF-1.7 data");
    let prompt = bot.faux.requests().last().unwrap().latest_user_text().unwrap().to_string();
    assert_eq!(prompt, "[file received: inbox/report.pdf]\nsummarize this");

    // The same name again does not overwrite the first file.
    bot.api().push_document(OWNER, "report.pdf", b"second", None);
    bot.message(OWNER, |t| t == "echo: [file received: inbox/1-report.pdf]").await;
    assert_eq!(std::fs::read(bot.workspace(OWNER).join("inbox/1-report.pdf")).unwrap(), b"second");
    bot.stop().await;
}

#[tokio::test]
async fn chat_photo_largest_size_is_saved_to_inbox() {
    let bot = Bot::start().await;
    let update = bot.api().push_photo(OWNER, b"JPEG-large-bytes", None);
    let answer = bot.message(OWNER, |t| t.starts_with("echo:") && t.ends_with(".jpg]")).await;
    let name = answer
        .text
        .strip_prefix("echo: [file received: inbox/")
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{}", answer.text))
        .to_string();
    assert!(name.starts_with("photo-") && name.ends_with(".jpg"), "{name} (update {update})");
    let saved = std::fs::read(bot.workspace(OWNER).join("inbox").join(&name)).unwrap();
    assert_eq!(saved, b"JPEG-large-bytes");
    bot.stop().await;
}

#[tokio::test]
async fn chat_disallowed_chat_is_refused_once_and_nothing_is_downloaded() {
    let bot = Bot::start().await;
    bot.api().push_text(STRANGER, "hi");
    bot.api().push_document(STRANGER, "x.pdf", b"data", None);
    bot.api().push_text(STRANGER, "hello?");
    // An allowed chat's message after them: once it is answered, theirs were handled.
    bot.api().push_text(OWNER, "ping");
    bot.message(OWNER, |t| t == "echo: ping").await;
    let refusals = bot.api().messages(STRANGER);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(refusals[0].text.contains("private assistant"), "{}", refusals[0].text);
    assert!(bot.api().calls_of("getFile").is_empty(), "a stranger's file was fetched");
    assert!(!bot.workspace(STRANGER).exists());
    bot.stop().await;
}

#[tokio::test]
async fn chat_messages_during_a_run_are_queued_and_answered_in_order() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, &directive(json!([{"sleep_ms": 800}, {"text": "first done"}])));
    bot.api()
        .wait_for("the run to start", DEADLINE, |api| {
            (!api.calls_of("sendChatAction").is_empty()).then_some(())
        })
        .await;
    bot.api().push_text(OWNER, "second");
    bot.api().push_text(OWNER, "third");
    bot.message(OWNER, |t| t == "echo: third").await;
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert_eq!(texts, vec!["first done", "echo: second", "echo: third"]);
    bot.stop().await;
}

#[tokio::test]
async fn chat_full_queue_tells_the_user_and_skips_the_message() {
    let bot = Bot::with(Setup { queue_capacity: 1, ..Setup::default() }).await;
    bot.api().push_text(OWNER, &directive(json!([{"sleep_ms": 800}, {"text": "first done"}])));
    bot.api()
        .wait_for("the run to start", DEADLINE, |api| {
            (!api.calls_of("sendChatAction").is_empty()).then_some(())
        })
        .await;
    bot.api().push_text(OWNER, "queued");
    bot.api().push_text(OWNER, "overflow");
    bot.message(OWNER, |t| t.starts_with("⏳")).await;
    bot.message(OWNER, |t| t == "echo: queued").await;
    bot.api().push_text(OWNER, "after");
    bot.message(OWNER, |t| t == "echo: after").await;
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert!(!texts.contains(&"echo: overflow".to_string()), "{texts:?}");
    bot.stop().await;
}

#[tokio::test]
async fn chat_stop_aborts_the_run_and_drops_the_queue() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, &directive(json!([{"sleep_ms": 60000}, {"text": "never"}])));
    bot.api()
        .wait_for("the run to start", DEADLINE, |api| {
            (!api.calls_of("sendChatAction").is_empty()).then_some(())
        })
        .await;
    bot.api().push_text(OWNER, "queued behind");
    bot.api().push_text(OWNER, "/stop");
    let reply = bot.message(OWNER, |t| t.starts_with("⏹")).await;
    assert_eq!(reply.text, "⏹ Stopped. Dropped 1 queued message.");
    bot.api().push_text(OWNER, "after the stop");
    bot.message(OWNER, |t| t == "echo: after the stop").await;
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert!(!texts.iter().any(|t| t == "never" || t == "echo: queued behind"), "{texts:?}");
    bot.api().push_text(OWNER, "/stop");
    bot.message(OWNER, |t| t == "Nothing to stop.").await;
    bot.stop().await;
}

#[tokio::test]
async fn chat_new_starts_a_fresh_session_and_keeps_the_old_journal() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "remember the password swordfish");
    bot.message(OWNER, |t| t.starts_with("echo: remember")).await;
    bot.api().push_text(OWNER, "/new");
    bot.message(OWNER, |t| t.starts_with("🆕")).await;
    bot.api().push_text(OWNER, "what was it?");
    bot.message(OWNER, |t| t == "echo: what was it?").await;
    let last = bot.faux.requests().last().unwrap().clone();
    assert_eq!(last.messages.len(), 1, "the fresh session has only the new message");
    let dir = bot.state.path().join("sessions/telegram-4711");
    let archived = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl.archived"))
        .count();
    assert_eq!(archived, 1);
    bot.stop().await;
}

#[tokio::test]
async fn chat_compact_summarises_the_older_conversation_and_says_so_in_one_line() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "remember: the cat is called Tom");
    bot.message(OWNER, |t| t.starts_with("echo: remember")).await;
    bot.api().push_text(OWNER, "what's the weather");
    bot.message(OWNER, |t| t == "echo: what's the weather").await;
    bot.api().push_text(OWNER, "/compact the cat's name");
    let line = bot.message(OWNER, |t| t.starts_with("🗜")).await;
    assert!(line.text.starts_with("🗜 Compacted 2 older messages ("), "{}", line.text);
    assert!(line.text.ends_with(" tokens)"), "{}", line.text);
    let summary = bot.faux.requests().last().unwrap().clone();
    assert_eq!(summary.system, volcanic_core::session::SUMMARY_SYSTEM_PROMPT);
    let volcanic_core::message::Message::User { text } = &summary.messages[0] else { panic!() };
    assert!(text.ends_with("keep in particular:\nthe cat's name"), "{text}");
    bot.api().push_text(OWNER, "and now?");
    bot.message(OWNER, |t| t == "echo: and now?").await;
    let next = bot.faux.requests().last().unwrap().clone();
    let volcanic_core::message::Message::Note { text } = &next.messages[0] else {
        panic!("{:?}", next.messages)
    };
    assert!(text.contains("- remember: the cat is called Tom"), "{text}");
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert!(!texts.iter().any(|t| t.starts_with("✅")), "the line is the answer: {texts:?}");
    bot.stop().await;
}

#[tokio::test]
async fn chat_help_and_tool_use_are_shown() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "/help");
    let help = bot.message(OWNER, |t| t.contains("/new")).await;
    assert!(help.text.contains("/stop") && help.text.contains("/a2a"), "{}", help.text);
    assert!(help.text.contains("/compact"), "{}", help.text);
    bot.api().push_text(
        OWNER,
        &directive(json!([{"tool": "ls", "args": {"path": "."}}, {"text": "listed"}])),
    );
    bot.message(OWNER, |t| t == "listed").await;
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert!(texts.contains(&"🔧 ls .".to_string()), "{texts:?}");
    bot.stop().await;
}

#[tokio::test]
async fn chat_send_tool_delivers_a_file_and_a_text() {
    let bot = Bot::start().await;
    bot.api().push_text(
        OWNER,
        &directive(json!([
            {"tool": "write", "args": {"path": "out.txt", "content": "report body"}},
            {"tool": "send", "args": {"path": "out.txt", "text": "your report"}},
            {"tool": "send", "args": {"text": "and a note"}},
            {"text": "sent"}
        ])),
    );
    bot.message(OWNER, |t| t == "sent").await;
    let documents = bot.api().documents();
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0].chat_id, OWNER);
    assert_eq!(documents[0].file_name, "out.txt");
    assert_eq!(documents[0].bytes, b"report body");
    assert_eq!(documents[0].caption.as_deref(), Some("your report"));
    let texts: Vec<String> = bot.api().messages(OWNER).into_iter().map(|m| m.text).collect();
    assert!(texts.contains(&"and a note".to_string()), "{texts:?}");
    bot.stop().await;
}

#[tokio::test]
async fn chat_failed_run_is_reported_in_the_chat() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, &directive(json!([{"error": "the model is down"}])));
    let note = bot.message(OWNER, |t| t.starts_with("⚠️")).await;
    assert!(note.text.contains("the model is down"), "{}", note.text);
    bot.stop().await;
}

#[tokio::test]
async fn chat_shutdown_during_an_answer_aborts_it_and_exits_cleanly() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, &directive(json!([{"sleep_ms": 60000}, {"text": "never"}])));
    let journal = bot.state.path().join("sessions/telegram-4711/session.jsonl");
    // The journal changes with nothing the fake sees, so it is polled within the deadline.
    let started = tokio::time::timeout(DEADLINE, async {
        while !std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("run_start")) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(started.is_ok(), "the run did not start");
    let (_root, state) = bot.stop().await;
    let journal = state.path().join("sessions/telegram-4711/session.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains(r#""kind":"aborted""#), "the run settled as aborted: {text}");
}
