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
async fn getme_failing_past_the_startup_wait_ends_the_host_with_a_summary() {
    let api = FakeBotApi::start(TOKEN).await;
    // Far more failures than tries fit in the wait (backoff 20 ms doubling to 200 ms).
    for _ in 0..100 {
        api.fail_next("getMe", Injected::Status(502));
    }
    let bot = Bot::with(Setup {
        api_url: Some(api.url.clone()),
        configure: Some(|config| config.startup_timeout = Some(Duration::from_millis(700))),
        ..Setup::default()
    })
    .await;
    let ended = bot.ended().await;
    let Err(volcanic_telegram::Error::Unreachable { tries, wait, last }) = ended else {
        panic!("expected Unreachable, got {ended:?}");
    };
    assert_eq!(wait, Duration::from_millis(700));
    assert_eq!(tries as usize, api.calls_of("getMe").len());
    assert!(tries >= 2, "{tries}");
    assert!(
        matches!(last, volcanic_telegram::api::ApiError::Server { status: 502, .. }),
        "{last:?}"
    );
    assert!(api.calls_of("getUpdates").is_empty(), "polling started without getMe");
}

#[tokio::test]
async fn getme_answering_within_the_startup_wait_starts_the_bot() {
    let api = FakeBotApi::start(TOKEN).await;
    for _ in 0..3 {
        api.fail_next("getMe", Injected::Status(502));
    }
    let bot = Bot::with(Setup {
        api_url: Some(api.url.clone()),
        configure: Some(|config| config.startup_timeout = Some(Duration::from_secs(20))),
        ..Setup::default()
    })
    .await;
    api.push_text(OWNER, "up at last");
    api.wait_for_message(OWNER, DEADLINE, |m| m.text == "echo: up at last").await;
    assert_eq!(api.calls_of("getMe").len(), 4);
    bot.stop().await;
}

#[tokio::test]
async fn getme_without_a_startup_wait_keeps_trying_until_stopped() {
    let api = FakeBotApi::start(TOKEN).await;
    for _ in 0..1000 {
        api.fail_next("getMe", Injected::Status(502));
    }
    let bot = Bot::with(Setup {
        api_url: Some(api.url.clone()),
        configure: Some(|config| config.startup_timeout = None),
        ..Setup::default()
    })
    .await;
    // Well past what the default wait would allow in tries (backoff capped at 200 ms here).
    api.wait_for("8 getMe tries", DEADLINE, |api| (api.calls_of("getMe").len() >= 8).then_some(()))
        .await;
    assert!(bot.is_running());
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
