//! Bot API failures: retried, never fatal, nothing received is lost; the offset survives a
//! restart.

use std::time::{Duration, Instant};

use volcanic_test_support::telegram::{FakeBotApi, Injected};

use crate::support::*;

#[tokio::test]
async fn api_429_is_honoured_with_retry_after() {
    let bot = Bot::start().await;
    bot.api().fail_next("sendMessage", Injected::TooManyRequests { retry_after: 1 });
    let started = Instant::now();
    bot.api().push_text(OWNER, "hello");
    bot.message(OWNER, |t| t == "echo: hello").await;
    // The backoff here is 20 ms: only honouring retry_after makes the retry wait a second.
    assert!(started.elapsed() >= Duration::from_secs(1), "retried after {:?}", started.elapsed());
    assert_eq!(bot.api().calls_of("sendMessage").len(), 2);
    bot.stop().await;
}

#[tokio::test]
async fn api_5xx_is_retried_and_the_bot_keeps_running() {
    let bot = Bot::start().await;
    for _ in 0..3 {
        bot.api().fail_next("getUpdates", Injected::Status(502));
    }
    bot.api().fail_next("sendMessage", Injected::Status(500));
    bot.api().push_text(OWNER, "still there?");
    bot.message(OWNER, |t| t == "echo: still there?").await;
    assert!(bot.is_running());
    bot.stop().await;
}

#[tokio::test]
async fn api_refusal_of_getupdates_does_not_stop_polling() {
    let bot = Bot::start().await;
    bot.api().fail_next("getUpdates", Injected::Status(409));
    bot.api().push_text(OWNER, "after a conflict");
    bot.message(OWNER, |t| t == "echo: after a conflict").await;
    assert!(bot.is_running());
    bot.stop().await;
}

#[tokio::test]
async fn api_network_errors_are_retried_without_exiting() {
    // The first connections are accepted and dropped at once (a network error for the client);
    // then the fake API takes over the same port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bot = Bot::with(Setup { api_url: Some(url), ..Setup::default() }).await;
    for _ in 0..2 {
        let (socket, _) = tokio::time::timeout(DEADLINE, listener.accept()).await.unwrap().unwrap();
        drop(socket);
    }
    assert!(bot.is_running());
    let api = FakeBotApi::start_on(listener, TOKEN);
    api.push_text(OWNER, "through");
    api.wait_for_message(OWNER, DEADLINE, |m| m.text == "echo: through").await;
    bot.stop().await;
}

#[tokio::test]
async fn offset_is_persisted_so_a_restart_does_not_rerun_messages() {
    let bot = Bot::start().await;
    bot.api().push_text(OWNER, "once");
    bot.message(OWNER, |t| t == "echo: once").await;
    let offset_file = bot.state.path().join("telegram/123456-offset.json");
    let saved: serde_json::Value = bot
        .api()
        .wait_for("the offset file", DEADLINE, |_| {
            std::fs::read(&offset_file).ok().and_then(|b| serde_json::from_slice(&b).ok())
        })
        .await;
    assert!(saved["last_update_id"].as_i64().is_some(), "{saved}");
    let contents = std::fs::read_to_string(&offset_file).unwrap();
    assert!(!contents.contains("sekrit"));
    bot.stop().await;
}
