//! `volcanic telegram` as a real child process against a fake Bot API on 127.0.0.1: a chat
//! round trip, the A2A server when enabled (and no listener when not), SIGTERM, and the token
//! nowhere in the output even at RUST_LOG=debug.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use volcanic_test_support::callers::write_callers;
use volcanic_test_support::raw_http::post_a2a;
use volcanic_test_support::telegram::FakeBotApi;

use crate::support::{Rest, listening_base, wait_for_file};

const TOKEN: &str = "777000:AAH-cli-test-token-sekrit";
const CHAT: i64 = 4242;
const KEY: &str = "k_cli_caller_key_31337";
const DEADLINE: Duration = Duration::from_secs(30);

struct Bot {
    child: Child,
    /// The `listening on` line's address, when A2A is enabled.
    base: Option<String>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn spawn(api: &FakeBotApi, root: &Path, state: &Path, env: &[(&str, &str)], listen: &str) -> Bot {
    let mut cmd = Command::cargo_bin("volcanic").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .env("RUST_LOG", "debug")
        .env("Telegram__BotToken", TOKEN)
        .env("Telegram__AllowedUserIds", CHAT.to_string())
        .env("Telegram__WorkspaceRoot", root)
        .env("Telegram__ApiUrl", &api.url)
        .current_dir(state)
        .args(["telegram", "--faux", "--listen", listen, "--state-dir"])
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Bot { child: cmd.spawn().unwrap(), base: None }
}

/// SIGTERM; returns (exit code, stdout, stderr).
fn stop(mut bot: Bot) -> (i32, String, String) {
    let status =
        Command::new("kill").arg("-TERM").arg(bot.child.id().to_string()).status().unwrap();
    assert!(status.success());
    let mut stderr = String::new();
    bot.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let mut stdout = String::new();
    if let Some(mut out) = bot.child.stdout.take() {
        out.read_to_string(&mut stdout).unwrap();
    }
    let code = bot.child.wait().unwrap().code().unwrap_or(-1);
    (code, stdout, stderr)
}

#[test]
fn telegram_chats_serves_a2a_and_never_logs_the_token() {
    let rt = runtime();
    let api = rt.block_on(FakeBotApi::start(TOKEN));
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let ws = root.path().join(CHAT.to_string());
    write_callers(&ws, &[("tester", KEY)]);
    let mut bot =
        spawn(&api, root.path(), state.path(), &[("A2A__Enabled", "true")], "127.0.0.1:0");
    let base = listening_base(&mut bot.child, DEADLINE, Rest::Close);
    bot.base = Some(base.clone());

    api.push_text(CHAT, "hello from the CLI");
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text == "echo: hello from the CLI"));
    api.push_document(CHAT, "notes.txt", b"some notes", None);
    rt.block_on(
        api.wait_for_message(CHAT, DEADLINE, |m| {
            m.text == "echo: [file received: inbox/notes.txt]"
        }),
    );

    let body = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#;
    let (status, response) = post_a2a(&base, KEY, body, DEADLINE);
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("TASK_STATE_COMPLETED"), "{response}");
    let (status, _) = post_a2a(&base, "wrong-key", body, DEADLINE);
    assert_eq!(status, 401);

    let (code, stdout, stderr) = stop(bot);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("bot api call"), "debug logging was on: {stderr}");
    for secret in [TOKEN, "AAH-cli-test-token-sekrit", KEY] {
        assert!(!stderr.contains(secret), "a secret reached stderr");
        assert!(!stdout.contains(secret), "a secret reached stdout");
    }
}

#[test]
fn a2a_disabled_no_endpoints() {
    let rt = runtime();
    let api = rt.block_on(FakeBotApi::start(TOKEN));
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    // A free port, released again: with A2A off, nothing may listen there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let bot = spawn(&api, root.path(), state.path(), &[("A2A__Enabled", "false")], &listen);
    api.push_text(CHAT, "are you there?");
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text == "echo: are you there?"));
    let refused = std::net::TcpStream::connect(&listen);
    assert!(refused.is_err(), "something listens on {listen} with A2A disabled");
    let (code, stdout, stderr) = stop(bot);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("listening on"), "{stdout}");
}

#[test]
fn telegram_without_token_exits_2_naming_the_key() {
    let state = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state.path())
        .env("Telegram__AllowedUserIds", "1")
        .current_dir(state.path())
        .args(["telegram", "--faux", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Telegram__BotToken"));
}

#[test]
fn telegram_rejected_token_exits_2_without_printing_it() {
    let rt = runtime();
    let api = rt.block_on(FakeBotApi::start("999:another-token"));
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut bot = spawn(&api, root.path(), state.path(), &[], "127.0.0.1:0");
    let code = bot.child.wait().unwrap().code();
    let mut stderr = String::new();
    bot.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("Telegram__BotToken"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token reached stderr");
}

#[test]
fn telegram_group_id_among_users_exits_2_naming_allowed_group_ids() {
    let state = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state.path())
        .env("Telegram__BotToken", TOKEN)
        .env("Telegram__AllowedUserIds", "4242,-1001234")
        .env("Telegram__WorkspaceRoot", state.path())
        .current_dir(state.path())
        .args(["telegram", "--faux", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Telegram__AllowedUserIds: -1001234"), "{stderr}");
    assert!(stderr.contains("Telegram__AllowedGroupIds"), "{stderr}");
}

/// Waits for `path` to hold a line `END`; returns its text.
fn wait_for_end(path: &Path) -> String {
    wait_for_file(path, DEADLINE, |text| text.lines().any(|l| l == "END").then(|| text.to_string()))
}

#[test]
fn telegram_group_is_served_logged_and_hidden_from_the_owners_chat() {
    const GROUP: i64 = -1_000_777;
    let rt = runtime();
    let api = rt.block_on(FakeBotApi::start(TOKEN));
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let group_ws = root.path().join(GROUP.to_string());
    std::fs::create_dir_all(&group_ws).unwrap();
    std::fs::write(group_ws.join("group-note.txt"), "for the group's eyes only").unwrap();
    let chat_ws = root.path().join(CHAT.to_string());
    let env = [("Telegram__AllowedGroupIds", "-1000777"), ("Agent__Sandbox__Mode", "on")];
    let bot = spawn(&api, root.path(), state.path(), &env, "127.0.0.1:0");

    // Written relative to the session's workspace (its working folder).
    let peek = || {
        let command = format!(
            "{{ pwd; id; cat '{}'; echo; echo END; }} > seen.txt 2>&1",
            group_ws.join("group-note.txt").display(),
        );
        format!(r#"faux> {{"steps": [{{"tool": "bash", "args": {{"command": {command:?}}}}}]}}"#)
    };
    // The group's own session sees its note (so the path is right)...
    api.push_group_text(GROUP, CHAT, &peek());
    let seen = wait_for_end(&group_ws.join("seen.txt"));
    assert!(seen.contains("for the group's eyes only"), "{seen}");
    // ...and the owner's private chat does not.
    std::fs::create_dir_all(&chat_ws).unwrap();
    api.push_text(CHAT, &peek());
    let seen = wait_for_end(&chat_ws.join("seen.txt"));
    assert!(!seen.contains("eyes only"), "the owner's chat read the group's workspace: {seen}");

    let (code, _, stderr) = stop(bot);
    assert_eq!(code, 0, "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("serving these Telegram users"))
        .unwrap_or_else(|| panic!("no start-up line naming users and groups: {stderr}"));
    // The line may be coloured: drop the escape sequences first.
    let mut plain = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            plain.push(c);
        }
    }
    assert!(plain.contains("users=4242 groups=-1000777 owner=4242"), "{plain}");
}

/// Issue 18, item 4: messages Telegram was told we have (acknowledged) survive a SIGTERM. The
/// ones still queued are answered after the restart; the run the restart cut is reported, not
/// run again; none is answered twice.
#[test]
fn telegram_restart_answers_or_reports_every_acknowledged_message_once() {
    let rt = runtime();
    let api = rt.block_on(FakeBotApi::start(TOKEN));
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let bot = spawn(&api, root.path(), state.path(), &[], "127.0.0.1:0");
    let long =
        r#"faux> {"steps":[{"tool":"bash","args":{"command":"sleep 120"}},{"text":"slept"}]}"#;
    api.push_text(CHAT, long);
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text.starts_with("🔧 bash sleep")));
    let queued = ["first queued", "second queued", "third queued"];
    for text in queued {
        api.push_text(CHAT, text);
    }
    // Acknowledged: a getUpdates has confirmed them, so Telegram would not send them again.
    rt.block_on(api.wait_for("the queued messages to be acknowledged", DEADLINE, |api| {
        (api.pending_updates() == 0).then_some(())
    }));
    let (code, _, stderr) = stop(bot);
    assert_eq!(code, 0, "{stderr}");
    let before = api.messages(CHAT).len();

    let bot = spawn(&api, root.path(), state.path(), &[], "127.0.0.1:0");
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| {
        m.text.starts_with("⚠️ The bot restarted while I was answering your message “faux>")
    }));
    for text in queued {
        let answer = format!("echo: {text}");
        rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text == answer));
    }
    // One more round trip, so that a late duplicate would be there to see.
    api.push_text(CHAT, "after the restart");
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text == "echo: after the restart"));
    let (code, _, stderr) = stop(bot);
    assert_eq!(code, 0, "{stderr}");
    let texts: Vec<String> = api.messages(CHAT).into_iter().map(|m| m.text).collect();
    let after = &texts[before..];
    for text in queued {
        let answer = format!("echo: {text}");
        assert_eq!(after.iter().filter(|t| **t == answer).count(), 1, "{texts:?}");
    }
    assert_eq!(after.iter().filter(|t| t.starts_with("⚠️ The bot restarted")).count(), 1);
    assert!(
        !texts
            .iter()
            .any(|t| t == "slept" || t.contains("bash sleep 120") && t.starts_with("echo")),
        "{texts:?}"
    );
}

/// Issue 18, item 5: a Bot API error that echoes the request path (the token in it, raw and
/// percent-encoded) reaches neither the chat nor a log line.
#[test]
fn telegram_errors_echoing_the_token_are_redacted_in_chat_and_logs() {
    use volcanic_test_support::telegram::Fault;
    let rt = runtime();
    let api = rt.block_on(FakeBotApi::start(TOKEN));
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let bot = spawn(&api, root.path(), state.path(), &[], "127.0.0.1:0");
    api.fault_next("getFile", Fault::EchoPath);
    api.push_document(CHAT, "notes.txt", b"some notes", None);
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text.contains("I couldn't receive")));
    // The answer's send is refused with the path echoed: it is delivered later, with the error.
    api.fault_next("sendMessage", Fault::EchoPath);
    api.push_text(CHAT, "after");
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text.contains("echo: after")));
    let (code, stdout, stderr) = stop(bot);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("[REDACTED:Telegram__BotToken]"),
        "the echoed error was logged: {stderr}"
    );
    let secret_part = TOKEN.split_once(':').unwrap().1;
    let encoded = TOKEN.replace(':', "%3A");
    let texts: Vec<String> = api.messages(CHAT).into_iter().map(|m| m.text).collect();
    for leak in [TOKEN, secret_part, encoded.as_str()] {
        assert!(!stderr.contains(leak), "the token reached stderr");
        assert!(!stdout.contains(leak), "the token reached stdout");
        assert!(!texts.iter().any(|t| t.contains(leak)), "the token reached the chat: {texts:?}");
    }
}

/// A card-signing key that cannot be used is a configuration problem for both hosts: exit 2,
/// naming the setting (`volcanic telegram` used to exit 1 where `serve` exited 2).
#[test]
fn telegram_and_serve_exit_2_on_an_invalid_card_key_naming_the_setting() {
    let state = tempfile::tempdir().unwrap();
    let key = state.path().join("card-key.pem");
    std::fs::write(&key, "not a key\n").unwrap();
    let run = |args: &[&str]| {
        let out = Command::cargo_bin("volcanic")
            .unwrap()
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", state.path())
            .env("Telegram__BotToken", "123456:test-token-not-real")
            .env("Telegram__AllowedUserIds", "1")
            .env("Telegram__WorkspaceRoot", state.path().join("chats"))
            .env("A2A__Enabled", "true")
            .env("A2A__CardSigning__KeyFile", &key)
            .current_dir(state.path())
            .args(args)
            .args(["--faux", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for command in [&["telegram"][..], &["serve", "--workspace", "."][..]] {
        let (code, stderr) = run(command);
        assert_eq!(code, Some(2), "{command:?}: {stderr}");
        assert!(stderr.contains("A2A__CardSigning__KeyFile"), "{command:?}: {stderr}");
        assert!(!stderr.contains("test-token-not-real"), "{stderr}");
    }
}
