//! Caller tiers pick the tools a caller's session has (issue 17): `chat` none of the workspace
//! tools, `read` only the read-only ones, `workspace` all. Checked through what the run loop
//! answers a call of a tool the session does not have: the list of the tools it does have.
//! (These tests run with the sandbox off, so tiers are shown to hold by themselves; the sandbox
//! is proven against the real binary in crates/cli/tests/it/containment/.)

use serde_json::json;

use crate::support::{KEY, OTHER_KEY, TestServer, directive, send_params};

/// Writes callers.json with the travel bot (KEY) in `tier` and the other bot (OTHER_KEY) in
/// the default tier.
fn callers_with_tier(server: &TestServer, tier: &str) {
    let list = json!([
        {"name": "travel-bot", "key": KEY, "tier": tier},
        {"name": "other-bot", "key": OTHER_KEY},
    ]);
    std::fs::write(server.workspace.path().join(".volcanic/a2a/callers.json"), list.to_string())
        .unwrap();
}

/// Every tool result the model saw in the sessions of `caller`.
fn tool_results(server: &TestServer, caller: &str) -> Vec<(String, String)> {
    let mut results = Vec::new();
    for entry in std::fs::read_dir(server.state.path().join("sessions")).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().contains(caller) {
            continue;
        }
        let journal = std::fs::read_to_string(entry.path().join("session.jsonl")).unwrap();
        for line in journal.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let message = &value["message"];
            if message["role"] == "tool_result" {
                let tool = message["tool"].as_str().unwrap_or_default().to_string();
                let content = message["content"].as_str().unwrap_or_default().to_string();
                results.push((tool, content));
            }
        }
    }
    results
}

#[tokio::test]
async fn tier_chat_caller_has_no_workspace_tool() {
    let server = TestServer::start().await;
    callers_with_tier(&server, "chat");
    std::fs::write(server.workspace.path().join("notes.txt"), "private notes").unwrap();
    let steps = json!([
        {"tool": "bash", "args": {"command": "cat notes.txt"}},
        {"tool": "read", "args": {"path": "notes.txt"}},
        {"text": "ok"}
    ]);
    let reply = server.rpc(KEY, "SendMessage", send_params(&directive(steps), None)).await;
    assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    assert_eq!(
        tool_results(&server, "travel-bot"),
        vec![
            (
                "bash".to_string(),
                "unknown tool \"bash\"; available tools: request_input, notify_owner".to_string()
            ),
            (
                "read".to_string(),
                "unknown tool \"read\"; available tools: request_input, notify_owner".to_string()
            ),
        ]
    );
}

#[tokio::test]
async fn tier_read_caller_reads_but_cannot_write_or_run_bash() {
    let server = TestServer::start().await;
    callers_with_tier(&server, "read");
    std::fs::write(server.workspace.path().join("notes.txt"), "shared notes").unwrap();
    let steps = json!([
        {"tool": "read", "args": {"path": "notes.txt"}},
        {"tool": "write", "args": {"path": "notes.txt", "content": "overwritten"}},
        {"tool": "bash", "args": {"command": "echo x > notes.txt"}},
        {"tool": "edit", "args": {"path": "notes.txt", "old_text": "shared", "new_text": "x"}},
        {"text": "ok"}
    ]);
    let reply = server.rpc(KEY, "SendMessage", send_params(&directive(steps), None)).await;
    assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let available = "available tools: read, ls, grep, find, send, request_input, notify_owner";
    let results = tool_results(&server, "travel-bot");
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].1.contains("shared notes"), "{results:?}");
    for (tool, content) in &results[1..] {
        assert_eq!(content, &format!("unknown tool \"{tool}\"; {available}"));
    }
    assert_eq!(
        std::fs::read_to_string(server.workspace.path().join("notes.txt")).unwrap(),
        "shared notes"
    );
}

#[tokio::test]
async fn tier_workspace_is_the_default_and_has_every_tool() {
    let server = TestServer::start().await;
    let steps = json!([
        {"tool": "write", "args": {"path": "made.txt", "content": "by the caller"}},
        {"tool": "bash", "args": {"command": "cat made.txt"}},
        {"text": "ok"}
    ]);
    let reply = server.rpc(OTHER_KEY, "SendMessage", send_params(&directive(steps), None)).await;
    assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let results = tool_results(&server, "other-bot");
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[1].1.starts_with("by the caller"), "{results:?}");
}
