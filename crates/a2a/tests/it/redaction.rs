//! Nothing a caller gets back carries a secret the server knows (issue 17, guarantee 3): the
//! response artifact, streamed chunks, status messages, `send` texts and files, task files on
//! disk and push payloads all pass through the session's redactor, whose values are every
//! plaintext caller key and push secret of the workspace, followed as callers.json changes.
//!
//! The model is told to say a secret without the caller's message holding it: a JSON escape in
//! the `faux>` directive (`\u006b` is `k`) spells the key only once the directive is parsed, so
//! the caller's own message in the task's history does not carry it.

use base64::Engine;
use serde_json::{Value, json};

use crate::support::*;

/// What a redacted caller key becomes.
const REDACTED_CALLER_MARK: &str = "[REDACTED:a2a-caller-key]";

/// A `faux>` directive whose steps are `steps_json` (raw JSON text, so escapes stay as written).
fn raw_directive(steps_json: &str) -> String {
    format!(r#"faux> {{"steps":{steps_json}}}"#)
}

/// `secret` as a JSON string body that spells it only once parsed.
fn escaped(secret: &str) -> String {
    let mut chars = secret.chars();
    let first = chars.next().unwrap();
    format!("\\u{:04x}{}", u32::from(first), chars.as_str())
}

fn artifact_texts(task: &Value) -> Vec<(String, String)> {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let text: String = a["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .collect();
            (a["name"].as_str().unwrap_or("").to_string(), text)
        })
        .collect()
}

fn task_file_text(server: &TestServer, task_id: &str) -> String {
    std::fs::read_to_string(server.task_path(task_id)).unwrap()
}

#[tokio::test]
async fn response_artifact_and_task_file_hide_another_callers_key() {
    let server = TestServer::start().await;
    let prompt = raw_directive(&format!(r#"[{{"text":"their key is {}."}}]"#, escaped(OTHER_KEY)));
    assert!(!prompt.contains(OTHER_KEY));
    let task = server.send(&prompt).await["task"].clone();
    assert_eq!(
        artifact_texts(&task),
        vec![("response".to_string(), format!("their key is {REDACTED_CALLER_MARK}."))]
    );
    let id = task["id"].as_str().unwrap();
    let file = task_file_text(&server, id);
    assert!(!file.contains(OTHER_KEY), "{file}");
    let got = server.rpc(KEY, "GetTask", json!({"id": id})).await;
    assert!(!got.to_string().contains(OTHER_KEY), "{got}");
}

#[tokio::test]
async fn streamed_chunks_never_carry_a_key_even_split_across_chunks() {
    let server = TestServer::start().await;
    let prompt = raw_directive(&format!(
        r#"[{{"text":"the key: {} and more text after it","chunk":3}}]"#,
        escaped(OTHER_KEY)
    ));
    let events = server
        .rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params(&prompt, None))
        .await;
    let mut text = String::new();
    // Every chunk that went out, one after the other: no piece of the key in any of them, so
    // none that together spell it.
    let mut sent = String::new();
    for event in &events {
        if let Some(update) = event["result"].get("artifactUpdate") {
            let chunk = update["artifact"]["parts"][0]["text"].as_str().unwrap_or("");
            sent.push_str(chunk);
            if update["append"] == true {
                text.push_str(chunk);
            } else {
                text = chunk.to_string();
            }
        }
    }
    assert!(!sent.contains("k_other"), "{sent}");
    assert_eq!(text, format!("the key: {REDACTED_CALLER_MARK} and more text after it"));
}

#[tokio::test]
async fn input_required_question_is_redacted() {
    let server = TestServer::start().await;
    let prompt = raw_directive(&format!(
        r#"[{{"tool":"request_input","args":{{"question":"is {} yours?"}}}}]"#,
        escaped(OTHER_KEY)
    ));
    let task = server.send(&prompt).await["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        task["status"]["message"]["parts"],
        json!([{"text": format!("is {REDACTED_CALLER_MARK} yours?")}])
    );
    let file = task_file_text(&server, task["id"].as_str().unwrap());
    assert!(!file.contains(OTHER_KEY), "{file}");
}

#[tokio::test]
async fn send_text_is_redacted() {
    let server = TestServer::start().await;
    let prompt = raw_directive(&format!(
        r#"[{{"tool":"send","args":{{"text":"psst {}"}}}},{{"text":"sent"}}]"#,
        escaped(OTHER_KEY)
    ));
    let task = server.send(&prompt).await["task"].clone();
    let texts = artifact_texts(&task);
    assert_eq!(
        texts,
        vec![
            ("response".to_string(), "sent".to_string()),
            (String::new(), format!("psst {REDACTED_CALLER_MARK}")),
        ]
    );
}

/// The bytes of the file artifacts of `task`.
fn file_bytes(task: &Value) -> Vec<Vec<u8>> {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["raw"].as_str().map(str::to_string))
        .map(|raw| base64::engine::general_purpose::STANDARD.decode(raw).unwrap())
        .collect()
}

#[tokio::test]
async fn send_of_a_copied_callers_file_and_of_its_base64_is_redacted() {
    let server = TestServer::start().await;
    let prompt = directive(json!([
        {"tool": "bash", "args": {"command":
            "cp .volcanic/a2a/callers.json leak.txt && base64 .volcanic/a2a/callers.json > leak.b64 && base64 -w0 leak.txt > leak1.b64 && (printf 'x'; cat leak.txt) | base64 -w0 > leak2.b64 && (printf 'xy'; cat leak.txt) | base64 -w0 > leak3.b64"}},
        {"calls": [
            {"tool": "send", "args": {"path": "leak.txt"}},
            {"tool": "send", "args": {"path": "leak.b64"}},
            {"tool": "send", "args": {"path": "leak1.b64"}},
            {"tool": "send", "args": {"path": "leak2.b64"}},
            {"tool": "send", "args": {"path": "leak3.b64"}}
        ]},
        {"text": "sent"}
    ]));
    let task = server.send(&prompt).await["task"].clone();
    let files = file_bytes(&task);
    assert_eq!(files.len(), 5, "{task}");
    let decoded = |b64: &[u8]| {
        let text: String = String::from_utf8_lossy(b64).split_whitespace().collect();
        base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
    };
    let plain = String::from_utf8(files[0].clone()).unwrap();
    assert!(!plain.contains(KEY) && !plain.contains(OTHER_KEY), "{plain}");
    assert!(plain.contains(REDACTED_CALLER_MARK), "{plain}");
    for b64 in &files[1..] {
        let text = String::from_utf8_lossy(b64);
        assert!(text.contains(REDACTED_CALLER_MARK), "{text}");
        // Whatever still decodes holds neither key.
        let back = String::from_utf8_lossy(&decoded(b64)).to_string();
        assert!(!back.contains(KEY) && !back.contains(OTHER_KEY), "{back}");
    }
    let file = task_file_text(&server, task["id"].as_str().unwrap());
    assert!(!file.contains(OTHER_KEY), "the task file holds a key");
}

#[tokio::test]
async fn send_of_a_binary_file_holding_a_key_is_refused() {
    let server = TestServer::start().await;
    let prompt = directive(json!([
        {"tool": "bash", "args": {"command":
            "(printf '\\000\\377'; cat .volcanic/a2a/callers.json) > leak.bin && printf '\\000\\377 no secret' > clean.bin"}},
        {"calls": [
            {"tool": "send", "args": {"path": "leak.bin"}},
            {"tool": "send", "args": {"path": "clean.bin"}}
        ]},
        {"text": "sent"}
    ]));
    let task = server.send(&prompt).await["task"].clone();
    assert_eq!(file_bytes(&task), vec![b"\x00\xff no secret".to_vec()]);
    let results: Vec<String> = server
        .faux
        .requests()
        .iter()
        .flat_map(|r| r.messages.clone())
        .filter_map(|m| match m {
            volcanic_core::message::Message::ToolResult(r) if r.tool == "send" => {
                Some(r.content.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        results.iter().any(|r| r
            == "could not send leak.bin: the file contains a secret (or an encoded form of one) and cannot be sent"),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_three_character_key_is_redacted() {
    let server = TestServer::start().await;
    write_callers(server.ws(), &[("travel-bot", KEY), ("other-bot", OTHER_KEY), ("tiny", "q7z")]);
    let prompt = raw_directive(&format!(r#"[{{"text":"tiny uses {} as key"}}]"#, escaped("q7z")));
    let task = server.send(&prompt).await["task"].clone();
    assert_eq!(
        artifact_texts(&task),
        vec![("response".to_string(), format!("tiny uses {REDACTED_CALLER_MARK} as key"))]
    );
}

#[tokio::test]
async fn a_key_added_while_the_session_is_open_is_redacted_in_its_next_answer() {
    const NEW_KEY: &str = "k_added_later_key_0003";
    let server = TestServer::start().await;
    let first = server.send("hello").await["task"].clone();
    let context = first["contextId"].clone();
    write_callers(
        server.ws(),
        &[("travel-bot", KEY), ("other-bot", OTHER_KEY), ("late-bot", NEW_KEY)],
    );
    let prompt = raw_directive(&format!(r#"[{{"text":"new key {}"}}]"#, escaped(NEW_KEY)));
    let body = server
        .rpc(KEY, "SendMessage", send_params(&prompt, Some(json!({"contextId": context}))))
        .await;
    let task = &body["result"]["task"];
    assert_eq!(task["contextId"], context, "{body}");
    assert_eq!(
        artifact_texts(task),
        vec![("response".to_string(), format!("new key {REDACTED_CALLER_MARK}"))]
    );
}

#[tokio::test]
async fn push_payload_and_other_sessions_hide_push_tokens_and_keys() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    const TOKEN: &str = "push-token-abcdef-0123";
    let webhook = MockServer::start().await;
    // Both webhooks answer, so the fake never logs a request (with its token) as unexpected.
    for hook in ["/hook", "/other"] {
        Mock::given(method("POST"))
            .and(path(hook))
            .respond_with(ResponseTemplate::new(200))
            .mount(&webhook)
            .await;
    }
    let options = volcanic_a2a::A2aOptions { allow_private_push_urls: true, ..Default::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    // Another caller's task holds a push token.
    let mut params = send_params("hello", None);
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": format!("{}/other", webhook.uri()), "token": TOKEN}});
    let other = server.rpc(OTHER_KEY, "SendMessage", params).await;
    assert_eq!(other["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{other}");
    // This caller's model repeats it and a key; its webhook gets the final task.
    let prompt = raw_directive(&format!(
        r#"[{{"text":"token {} key {}"}}]"#,
        escaped(TOKEN),
        escaped(OTHER_KEY)
    ));
    let mut params = send_params(&prompt, None);
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": format!("{}/hook", webhook.uri()), "token": "my-own-token-0001"}});
    let task = server.rpc(KEY, "SendMessage", params).await["result"]["task"].clone();
    let expected = format!("token [REDACTED:a2a-push-secret] key {REDACTED_CALLER_MARK}");
    assert_eq!(artifact_texts(&task), vec![("response".to_string(), expected.clone())]);
    let completed = tokio::time::timeout(DEADLINE, async {
        loop {
            let requests = webhook.received_requests().await.unwrap_or_default();
            let done = requests.into_iter().find_map(|r| {
                let body: Value = serde_json::from_slice(&r.body).ok()?;
                (r.url.path() == "/hook"
                    && body["task"]["status"]["state"] == "TASK_STATE_COMPLETED")
                    .then_some(body)
            });
            if let Some(body) = done {
                return body;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the completed push never arrived");
    assert_eq!(artifact_texts(&completed["task"]), vec![("response".to_string(), expected)]);
    assert!(!completed.to_string().contains(TOKEN), "{completed}");
}

#[tokio::test]
async fn push_tokens_and_credentials_shorter_than_8_characters_are_refused() {
    let server = TestServer::start().await;
    let task = server.send("hi").await["task"].clone();
    let cases = [
        (
            json!({"taskId": task["id"], "url": "https://hook.example.com/a", "token": "short7!"}),
            "token is shorter than 8 characters; use a longer, random one",
        ),
        (
            json!({"taskId": task["id"], "url": "https://hook.example.com/a",
                   "authentication": {"scheme": "Bearer", "credentials": "abc"}}),
            "authentication.credentials is shorter than 8 characters; use a longer, random one",
        ),
    ];
    for (config, reason) in cases {
        let body = server.rpc(KEY, "CreateTaskPushNotificationConfig", config).await;
        assert_eq!(body["error"]["code"], -32602, "{body}");
        assert_eq!(body["error"]["message"], format!("Invalid parameters: {reason}"), "{body}");
    }
    let mut params = send_params("hello", None);
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": "https://hook.example.com/a", "token": "tok"}});
    let body = server.rpc(KEY, "SendMessage", params).await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid parameters: configuration.taskPushNotificationConfig: token is shorter than 8 characters; use a longer, random one"
    );
}

#[tokio::test]
async fn a_hashed_key_authenticates_and_an_entry_with_both_forms_does_not() {
    let server = TestServer::start().await;
    const HASHED: &str = "k_hashed_bot_key_0000000000000004";
    const BOTH: &str = "k_both_forms_key_00000000000000005";
    let hash = volcanic_a2a::auth::KeyHash::of(HASHED).to_text();
    let both_hash = volcanic_a2a::auth::KeyHash::of(BOTH).to_text();
    let callers = json!([
        {"name": "hashed", "keyHash": hash, "tier": "read"},
        {"name": "both", "key": BOTH, "keyHash": both_hash},
        {"name": "travel-bot", "key": KEY}
    ]);
    std::fs::write(
        server.ws().join(".volcanic/a2a/callers.json"),
        serde_json::to_string(&callers).unwrap(),
    )
    .unwrap();
    let status = |key: &'static str| {
        let request = server
            .client
            .post(format!("{}/a2a", server.base))
            .header("X-API-Key", key)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(HASHED).await, 200);
    assert_eq!(status("k_hashed_bot_key_0000000000000005").await, 401);
    assert_eq!(status(BOTH).await, 401);
    assert_eq!(status(KEY).await, 200);
}
