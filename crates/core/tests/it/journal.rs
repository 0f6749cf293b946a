//! The journal on disk: crash repair, resume, redaction, spill files.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use volcanic_core::exec::ExecEnv;
use volcanic_core::message::Message;
use volcanic_core::session::{DANGLING_TOOL_RESULT, INTERRUPTED_NOTE};
use volcanic_core::{
    EventKind, Extension, Registrar, RunFailure, RunOutcome, SessionFactory, SessionOptions,
};

use crate::support::*;

fn journal_path(dirs: &Dirs, scope: &str) -> std::path::PathBuf {
    dirs.state.path().join("sessions").join(scope).join("session.jsonl")
}

fn lines(dirs: &Dirs, scope: &str) -> Vec<Value> {
    std::fs::read_to_string(journal_path(dirs, scope))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn journal_records_runs_and_messages_in_order() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "order").await;
    collect(session.prompt("hi").unwrap()).await;
    let types: Vec<String> =
        lines(&dirs, "order").iter().map(|l| l["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(types, vec!["session", "run_start", "message", "message", "run_end"]);
    let seqs: Vec<u64> = lines(&dirs, "order").iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    assert_eq!(lines(&dirs, "order")[4]["outcome"], json!({"kind": "completed"}));
}

#[tokio::test]
async fn torn_last_line_is_cut_and_session_resumes() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "torn").await;
    collect(session.prompt("before crash").unwrap()).await;
    session.close().unwrap();
    drop(session);
    let path = journal_path(&dirs, "torn");
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"{\"seq\":99,\"type\":\"message\",\"run_id\":\"r\",\"ts\":\"x\",\"message\":{\"role\":\"us").unwrap();
    drop(file);

    let session = open(&factory, &dirs, "torn").await;
    assert!(session.load_report().truncated_bytes > 0);
    assert_eq!(session.load_report().skipped_lines, 0);
    assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
    assert_eq!(session.messages().len(), 2);
    let (_, settled) = collect(session.prompt("after crash").unwrap()).await;
    assert_eq!(settled.final_text, "echo: after crash");
    assert!(lines(&dirs, "torn").iter().all(|l| l["seq"].is_u64()));
}

#[tokio::test]
async fn malformed_lines_are_skipped_and_counted() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "malformed").await;
    collect(session.prompt("one").unwrap()).await;
    session.close().unwrap();
    drop(session);
    let path = journal_path(&dirs, "malformed");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("this is not json\n{\"seq\":50,\"type\":\"unknown_kind\"}\n");
    std::fs::write(&path, text).unwrap();
    let session = open(&factory, &dirs, "malformed").await;
    assert_eq!(session.load_report().skipped_lines, 2);
    assert_eq!(session.messages().len(), 2);
}

#[tokio::test]
async fn dangling_tool_call_and_unfinished_run_are_repaired() {
    let dirs = Dirs::new();
    let path = journal_path(&dirs, "crashed");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let entries = [
        json!({"seq":0,"type":"session","v":1,"id":"sess-1","scope":"crashed","created_at":"2026-12-01T00:00:00.000Z","cwd":"/tmp"}),
        json!({"seq":1,"type":"run_start","run_id":"r1","ts":"2026-12-01T00:00:00.000Z"}),
        json!({"seq":2,"type":"message","run_id":"r1","ts":"t","message":{"role":"user","text":"run a command"}}),
        json!({"seq":3,"type":"message","run_id":"r1","ts":"t","message":{"role":"assistant","content":[{"type":"tool_call","id":"call-1","name":"bash","args":{"command":"sleep 100"}}],"stop_reason":"tool_use"}}),
    ];
    let text: String = entries.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&path, text).unwrap();

    let faux = faux();
    let factory = factory(&dirs, faux.clone());
    let session = open(&factory, &dirs, "crashed").await;
    assert_eq!(session.id(), "sess-1");
    assert_eq!(session.load_report().repaired_tool_calls, 1);
    assert!(session.load_report().repaired_run);
    let messages = session.messages();
    assert!(
        matches!(&messages[2], Message::ToolResult(r) if r.call_id == "call-1" && r.is_error && r.content == DANGLING_TOOL_RESULT)
    );
    assert_eq!(messages[3], Message::Note { text: INTERRUPTED_NOTE.into() });
    let repaired = lines(&dirs, "crashed");
    assert_eq!(repaired[5]["type"], "run_end");
    assert_eq!(repaired[5]["outcome"], json!({"kind": "interrupted"}));

    let (_, settled) = collect(session.prompt("go on").unwrap()).await;
    assert_eq!(settled.final_text, "echo: go on");
    let request = faux.requests().pop().unwrap();
    assert_eq!(request.messages.len(), 5);
    // Reopening again finds nothing to repair.
    session.close().unwrap();
    drop(session);
    let session = open(&factory, &dirs, "crashed").await;
    assert_eq!(session.load_report(), &Default::default());
}

#[tokio::test]
async fn file_without_header_is_set_aside() {
    let dirs = Dirs::new();
    let path = journal_path(&dirs, "corrupt");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "garbage\n").unwrap();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "corrupt").await;
    assert!(session.messages().is_empty());
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("session.jsonl.corrupt-")), "{names:?}");
}

const PLANTED: &str = "planted-secret-value-42";

fn secret_factory(dirs: &Dirs) -> SessionFactory {
    let host = vec![
        ("PATH".to_string(), std::env::var("PATH").unwrap_or_default()),
        ("MY_API_TOKEN".to_string(), PLANTED.to_string()),
    ];
    SessionFactory::builder(faux(), dirs.state.path())
        .config(fast_config())
        .exec_env(ExecEnv::from_host(host, &[], &[]))
        .build()
}

#[tokio::test]
async fn planted_secret_is_redacted_in_tool_output_errors_and_journal() {
    let dirs = Dirs::new();
    let factory = secret_factory(&dirs);
    let session = open(&factory, &dirs, "secrets").await;
    let prompt = format!(
        "my token is {PLANTED}\n{}",
        directive(json!([
            {"tool": "bash", "args": {"command": format!("env; echo {PLANTED}; echo $MY_API_TOKEN")}},
            {"tool": "read", "args": {"path": format!("no-such-{PLANTED}.txt")}},
            {"error": format!("provider said {PLANTED}")}
        ]))
    );
    let (events, settled) = collect(session.prompt(prompt).unwrap()).await;
    let results: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::ToolEnd { result, .. } => Some(result.content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert!(!results[0].contains(PLANTED), "{}", results[0]);
    assert!(results[0].contains("[REDACTED:MY_API_TOKEN]"), "{}", results[0]);
    assert!(
        !results[0].contains("MY_API_TOKEN="),
        "the child did not inherit the variable: {}",
        results[0]
    );
    assert!(!results[1].contains(PLANTED), "{}", results[1]);
    assert_eq!(
        settled.outcome,
        RunOutcome::Failed {
            error: RunFailure::Provider { message: "provider said [REDACTED:MY_API_TOKEN]".into() }
        }
    );
    let journal = std::fs::read_to_string(journal_path(&dirs, "secrets")).unwrap();
    assert!(!journal.contains(PLANTED));
    assert!(journal.contains("my token is [REDACTED:MY_API_TOKEN]"));
}

#[tokio::test]
async fn credentials_the_owners_tools_keep_are_redacted_from_their_output_and_the_journal() {
    // The owner's sessions keep these variables (their deny-list is by name and none of these
    // names is on it), but what they hold looks like a credential and is never shown.
    let credentials = [
        ("MYSQL_PWD", "mysql-pw-Zq81vXk2"),
        ("REDIS_URL", "redis://:r3dis-Pa55w0rd@cache.internal:6379/0"),
        ("NOTIFY_URL", "https://hooks.example.com/services/T0/B0/Xq7pLm2Nz9Rt4Kw8Vb1Yc6Hd"),
        ("BUILD_SIGNATURE", "d41d8cd98f00b204e9800998ecf8427e"),
    ];
    let mut host = vec![("PATH".to_string(), std::env::var("PATH").unwrap_or_default())];
    host.extend(credentials.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let dirs = Dirs::new();
    let factory = SessionFactory::builder(faux(), dirs.state.path())
        .config(fast_config())
        .exec_env(ExecEnv::from_host(host, &[], &[]))
        .build();
    let session = open(&factory, &dirs, "credentials").await;
    let command = "echo \"pwd=$MYSQL_PWD redis=$REDIS_URL hook=$NOTIFY_URL sig=$BUILD_SIGNATURE\"; \
                   echo \"lengths ${#MYSQL_PWD} ${#REDIS_URL}\"; echo r3dis-Pa55w0rd";
    let prompt = directive(json!([{"tool": "bash", "args": {"command": command}}]));
    let (events, _) = collect(session.prompt(prompt).unwrap()).await;
    let output = events
        .iter()
        .find_map(|e| match e {
            EventKind::ToolEnd { result, .. } => Some(result.content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(output.contains("lengths 17 45"), "the variables reached bash: {output}");
    for (name, value) in credentials {
        assert!(!output.contains(value), "{value}: {output}");
        assert!(output.contains(&format!("[REDACTED:{name}]")), "{name}: {output}");
    }
    assert!(!output.contains("r3dis-Pa55w0rd"), "the URL's password alone: {output}");
    assert!(!output.contains("Xq7pLm2Nz9Rt4Kw8Vb1Yc6Hd"), "the webhook's token: {output}");
    let journal = std::fs::read_to_string(journal_path(&dirs, "credentials")).unwrap();
    for (_, value) in credentials {
        assert!(!journal.contains(value), "{value} in the journal");
    }
}

struct KeyExtension {
    seen: Arc<Mutex<u32>>,
}

impl Extension for KeyExtension {
    fn name(&self) -> &str {
        "keys"
    }

    fn register(&self, registrar: &mut Registrar) {
        registrar.secret("caller-key", "k_extension_secret_1");
        let seen = self.seen.clone();
        registrar.listener(Arc::new(move |_| *seen.lock().unwrap() += 1));
    }
}

#[tokio::test]
async fn extension_secrets_are_redacted() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let seen = Arc::new(Mutex::new(0u32));
    let options = SessionOptions {
        extensions: vec![Arc::new(KeyExtension { seen: seen.clone() })],
        ..SessionOptions::new("ext", dirs.ws())
    };
    let session = factory.open(options).await.unwrap();
    let prompt =
        directive(json!([{"tool": "bash", "args": {"command": "echo k_extension_secret_1"}}]));
    let (events, _) = collect(session.prompt(prompt).unwrap()).await;
    let output = events.iter().find_map(|e| match e {
        EventKind::ToolEnd { result, .. } => Some(result.content.clone()),
        _ => None,
    });
    assert!(output.unwrap().starts_with("[REDACTED:caller-key]"));
    assert_eq!(*seen.lock().unwrap() as usize, events.len(), "the listener saw every event");
}

#[tokio::test]
async fn large_output_is_capped_with_spill_file() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "spill").await;
    let prompt = directive(json!([{"tool": "bash", "args": {"command": "seq 1 100000"}}]));
    let (events, _) = collect(session.prompt(prompt).unwrap()).await;
    let result = tool_results(&events).remove(0);
    assert!(result.content.len() <= 52 * 1024, "{} bytes", result.content.len());
    assert!(result.content.starts_with("1\n2\n"));
    assert!(result.content.contains("100000"), "tail kept");
    let spill_dir = dirs.state.path().join("sessions/spill/spill");
    let spill = std::fs::read_dir(&spill_dir).unwrap().next().unwrap().unwrap().path();
    assert!(result.content.contains(&spill.display().to_string()), "notice names the spill file");
    let full = std::fs::read_to_string(&spill).unwrap();
    assert_eq!(full.lines().filter(|l| l.parse::<u32>().is_ok()).count(), 100000);
}

#[tokio::test]
async fn archive_moves_the_journal_aside_and_the_next_open_starts_fresh() {
    let dirs = Dirs::new();
    let factory = factory(&dirs, faux());
    let session = open(&factory, &dirs, "fresh").await;
    collect(session.prompt("remember me").unwrap()).await;
    let old_id = session.id().to_string();

    let refused = factory.archive("fresh").await;
    assert!(
        matches!(refused, Err(volcanic_core::Error::ScopeInUse { .. })),
        "an open session keeps its journal: {refused:?}"
    );
    session.close().unwrap();

    let archived = factory.archive("fresh").await.unwrap().expect("a journal to archive");
    assert!(archived.exists());
    assert!(!journal_path(&dirs, "fresh").exists());
    let reopened = open(&factory, &dirs, "fresh").await;
    assert!(reopened.messages().is_empty());
    assert_ne!(reopened.id(), old_id);
    reopened.close().unwrap();
    assert_eq!(factory.archive("never-used").await.unwrap(), None);
}
