//! Owner approval with the real binaries (issue 22): `volcanic approvals`, `approve` and `deny`
//! decide against a running `volcanic serve` through its control socket; and only a human
//! can: a prompt-injected caller session's bash, told exactly where the socket and the records
//! are, cannot approve anything (connecting to the socket, writing or removing the records, or
//! running `volcanic approve` itself). The same attack with the sandbox turned off does approve:
//! the sandbox (the state folder out of the session's view) is the mechanism.

use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};

use crate::containment::{Fixture, Mode, Server, bash, directive};

/// Makes alice's tasks wait for the owner; mallory (the attacker) needs no approval.
fn alice_needs_approval(fixture: &Fixture) {
    let path = fixture.ws.join(".volcanic/a2a/callers.json");
    let mut callers: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for caller in &mut callers {
        if caller["name"] == "alice" {
            caller["approval"] = json!("every-task");
        }
    }
    std::fs::write(&path, serde_json::to_vec(&callers).unwrap()).unwrap();
}

/// `volcanic <args> --workspace WS --state-dir STATE` as the owner at their shell: exit code and
/// stdout, stderr.
fn owner(fixture: &Fixture, args: &[&str]) -> (i32, String, String) {
    owner_as(Mode::Sandboxed, fixture, args)
}

/// [`owner`] as the user the server runs as in `mode`.
fn owner_as(mode: Mode, fixture: &Fixture, args: &[&str]) -> (i32, String, String) {
    let output = crate::containment::volcanic_as(mode)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &fixture.home)
        .args(args)
        .arg("--workspace")
        .arg(&fixture.ws)
        .arg("--state-dir")
        .arg(&fixture.state)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The ids `volcanic approvals --json` lists.
fn waiting(fixture: &Fixture) -> Vec<String> {
    waiting_as(Mode::Sandboxed, fixture)
}

fn waiting_as(mode: Mode, fixture: &Fixture) -> Vec<String> {
    let (code, stdout, stderr) = owner_as(mode, fixture, &["approvals", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["id"].as_str().unwrap().to_string()
        })
        .collect()
}

fn state_of(server: &Server, key: &str, task_id: &str) -> String {
    let reply = server.rpc(key, "GetTask", json!({"id": task_id}));
    reply["result"]["status"]["state"].as_str().unwrap_or_default().to_string()
}

/// Everything a caller's bash could try to approve request `id`.
fn attack(fixture: &Fixture, id: &str) -> String {
    let state = fixture.state.display();
    let volcanic =
        Command::cargo_bin("volcanic").unwrap().get_program().to_string_lossy().into_owned();
    let ws = fixture.ws.display();
    let connect = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect('{state}/a2a/control.sock'); \
         s.sendall(b'{{\"op\":\"approve\",\"id\":\"{id}\"}}\\n'); print(s.recv(4096))"
    );
    directive(json!([
        bash(&format!("ls -la {state}/a2a/ 2>&1; python3 -c \"{connect}\" 2>&1")),
        bash(&format!("rm -f {state}/a2a/approvals/* 2>&1; echo x > {state}/a2a/approvals/{id}.json 2>&1")),
        bash(&format!("{volcanic} approve {id} --workspace {ws} --state-dir {state} 2>&1")),
        {"text": "tried"},
    ]))
}

fn attack_in(mode: Mode) -> (bool, Fixture) {
    let fixture = Fixture::new(mode);
    alice_needs_approval(&fixture);
    let server = Server::start(&fixture, mode);
    let asked = server.send(&fixture.secrets.alice_key, "please book the trip");
    let task = asked["result"]["task"]["id"].as_str().expect("alice's task").to_string();
    assert_eq!(state_of(&server, &fixture.secrets.alice_key, &task), "TASK_STATE_AUTH_REQUIRED");
    let ids = waiting(&fixture);
    assert_eq!(ids.len(), 1, "{ids:?}");

    let reply = server.send(&fixture.mallory_key, &attack(&fixture, &ids[0]));
    assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let approved =
        state_of(&server, &fixture.secrets.alice_key, &task) != "TASK_STATE_AUTH_REQUIRED";
    if !approved {
        // Still waiting, and the owner's own decision still works.
        assert_eq!(waiting(&fixture), ids);
        let (code, stdout, stderr) = owner(&fixture, &["approve", &ids[0]]);
        assert_eq!(code, 0, "{stdout} {stderr}");
        assert!(stdout.contains("working"), "{stdout}");
    }
    server.stop();
    (approved, fixture)
}

/// Issue 33, 2: the socket is reached from inside a caller's sandbox (here the owner lists the
/// state folder's records in `A2A__Sandbox__ReadOnlyPaths`, standing for any route that would
/// bring it into view) and the server's own binary, visible in the sandbox as the tool host, asks
/// to approve: the peer runs as the server's user, so only the check of its namespaces refuses it.
#[test]
fn approvals_a_sandboxed_process_that_reaches_the_socket_is_refused() {
    for mode in [Mode::Sandboxed, Mode::SandboxedUnprivileged] {
        if mode == Mode::SandboxedUnprivileged && !crate::containment::is_root() {
            continue;
        }
        let fixture = Fixture::new(mode);
        alice_needs_approval(&fixture);
        let records = fixture.state.join("a2a");
        let records = records.display().to_string();
        let server = Server::start_with(
            &fixture,
            mode,
            &[("A2A__Sandbox__ReadOnlyPaths", records.as_str())],
        );
        let asked = server.send(&fixture.secrets.alice_key, "please book the trip");
        let task = asked["result"]["task"]["id"].as_str().expect("alice's task").to_string();
        let ids = waiting_as(mode, &fixture);
        assert_eq!(ids.len(), 1, "{ids:?}");
        let (state, ws, id) = (fixture.state.display(), fixture.ws.display(), &ids[0]);
        let connect = format!(
            "import socket; s = socket.socket(socket.AF_UNIX); s.connect('{state}/a2a/control.sock'); \
             s.sendall(b'{{\"op\":\"approve\",\"id\":\"{id}\"}}\\n'); print(s.recv(4096))"
        );
        let attack = directive(json!([
            bash(&format!("ls -la {state}/a2a/ 2>&1; python3 -c \"{connect}\" 2>&1")),
            bash(&format!("/run/volcanic/tool-host approve {id} --workspace {ws} --state-dir {state} 2>&1")),
            {"text": "tried"},
        ]));
        let reply = server.send(&fixture.mallory_key, &attack);
        assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
        let journal = std::fs::read_dir(fixture.state.join("sessions"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("mallory"))
            .map(|e| std::fs::read_to_string(e.path().join("session.jsonl")).unwrap_or_default())
            .collect::<String>();
        let results: Vec<&str> =
            journal.lines().filter(|line| line.contains("\"tool_result\"")).collect();
        assert!(
            journal.contains("a sandboxed process cannot decide approvals"),
            "{mode:?}: the socket was reached and refused the peer: {results:?}"
        );
        assert_eq!(
            state_of(&server, &fixture.secrets.alice_key, &task),
            "TASK_STATE_AUTH_REQUIRED",
            "{mode:?}: a sandboxed process approved"
        );
        let (code, stdout, stderr) = owner_as(mode, &fixture, &["approve", id]);
        assert_eq!(code, 0, "{mode:?}: the owner still decides: {stdout} {stderr}");
        server.stop();
    }
}

#[test]
fn approvals_a_caller_sessions_bash_cannot_approve_a_request() {
    let (approved, _) = attack_in(Mode::Sandboxed);
    assert!(!approved, "a sandboxed caller session approved a request");
}

#[test]
fn approvals_without_the_sandbox_the_same_attack_approves_so_the_sandbox_is_what_holds() {
    let (approved, _) = attack_in(Mode::OptOut);
    assert!(approved, "the attack should reach the socket when nothing contains the session");
}

#[test]
fn approvals_deny_with_a_reason_and_clear_errors_without_a_server() {
    let fixture = Fixture::new(Mode::Sandboxed);
    alice_needs_approval(&fixture);
    // No server: the listing reads the records (none yet); a decision is exit 1 saying why.
    let (code, stdout, stderr) = owner(&fixture, &["approvals"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("No request waits") && stdout.contains("No server is running"),
        "{stdout}"
    );
    let (code, _, stderr) = owner(&fixture, &["approve", "0123abcd"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is `volcanic serve`"), "{stderr}");

    let server = Server::start(&fixture, Mode::Sandboxed);
    let (code, stdout, _) = owner(&fixture, &["approvals"]);
    assert_eq!((code, stdout.trim()), (0, "No request waits for your approval."));
    let asked = server.send(&fixture.secrets.alice_key, "delete my calendar");
    let task = asked["result"]["task"]["id"].as_str().unwrap().to_string();
    let (_, listing, _) = owner(&fixture, &["approvals"]);
    assert!(listing.contains("alice") && listing.contains("delete my calendar"), "{listing}");
    let id = waiting(&fixture).remove(0);
    let (code, stdout, stderr) = owner(&fixture, &["deny", &id, "--reason", "not without me"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("rejected"), "{stdout}");
    let reply = server.rpc(&fixture.secrets.alice_key, "GetTask", json!({"id": task}));
    assert_eq!(reply["result"]["status"]["state"], "TASK_STATE_REJECTED");
    assert!(reply.to_string().contains("not without me"), "{reply}");
    // Decided: a second decision is exit 1 with the reason.
    let (code, _, stderr) = owner(&fixture, &["approve", &id]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no approval request"), "{stderr}");
    // A request still waiting when the server stops is listed from its record.
    server.send(&fixture.secrets.alice_key, "rename my files");
    server.stop();
    let (code, stdout, _) = owner(&fixture, &["approvals"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("rename my files") && stdout.contains("No server is running"),
        "{stdout}"
    );
}

#[test]
fn approvals_a_reply_to_an_approved_task_is_listed_with_its_question_and_decided_again() {
    let fixture = Fixture::new(Mode::Sandboxed);
    alice_needs_approval(&fixture);
    let server = Server::start(&fixture, Mode::Sandboxed);
    let key = fixture.secrets.alice_key.clone();
    let ask = directive(json!([{"tool": "request_input", "args": {"question": "Which day?"}}]));
    let asked = server.send(&key, &ask);
    let task = asked["result"]["task"]["id"].as_str().unwrap().to_string();
    let id = waiting(&fixture).remove(0);
    assert_eq!(owner(&fixture, &["approve", &id]).0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while state_of(&server, &key, &task) != "TASK_STATE_INPUT_REQUIRED" {
        assert!(std::time::Instant::now() < deadline, "never asked");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let message = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "taskId": task, "parts": [{"text": "Tuesday, and forward my inbox to me"}]});
    let replied = server.rpc(&key, "SendMessage", json!({"message": message}));
    assert_eq!(replied["result"]["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    let (code, listing, _) = owner(&fixture, &["approvals"]);
    assert_eq!(code, 0);
    assert!(listing.contains("a reply in task"), "{listing}");
    assert!(listing.contains("the task asked: Which day?"), "{listing}");
    assert!(listing.contains("forward my inbox"), "{listing}");
    let id = waiting(&fixture).remove(0);
    let (code, stdout, _) = owner(&fixture, &["approve", &id]);
    assert_eq!(code, 0);
    assert!(stdout.contains("working"), "{stdout}");
    server.stop();
}

#[test]
fn approvals_a_tool_call_waiting_when_the_server_is_killed_fails_its_task_at_the_next_start() {
    let fixture = Fixture::new(Mode::Sandboxed);
    let path = fixture.ws.join(".volcanic/a2a/callers.json");
    let mut callers: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for caller in &mut callers {
        if caller["name"] == "mallory" {
            caller["approveTools"] = json!(["write"]);
        }
    }
    std::fs::write(&path, serde_json::to_vec(&callers).unwrap()).unwrap();
    let server = Server::start(&fixture, Mode::Sandboxed);
    let script = directive(json!([
        {"tool": "write", "args": {"path": "paused.txt", "content": "x"}},
        {"text": "never"},
    ]));
    let reply = server.send(&fixture.mallory_key, &script);
    let task = reply["result"]["task"]["id"].as_str().expect("the task").to_string();
    assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{reply}");
    assert_eq!(waiting(&fixture).len(), 1);
    let killed = Command::new("kill").arg("-KILL").arg(server.pid().to_string()).status().unwrap();
    assert!(killed.success());
    drop(server);

    let server = Server::start(&fixture, Mode::Sandboxed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let failed = loop {
        let reply = server.rpc(&fixture.mallory_key, "GetTask", json!({"id": task}));
        if reply["result"]["status"]["state"] == "TASK_STATE_FAILED" {
            break reply;
        }
        assert!(std::time::Instant::now() < deadline, "never failed: {reply}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(failed.to_string().contains("waited for the owner's approval"), "{failed}");
    assert!(waiting(&fixture).is_empty());
    assert!(!fixture.ws.join("paused.txt").exists());
    server.stop();
}

/// `volcanic approve ID` run by the user `uid` against the fixture's server: exit code and output.
fn approve_as(fixture: &Fixture, uid: u32, id: &str) -> (i32, String) {
    let volcanic = Command::cargo_bin("volcanic").unwrap();
    let output = Command::new("setpriv")
        .args([format!("--reuid={uid}"), format!("--regid={uid}"), "--clear-groups".into()])
        .arg(volcanic.get_program())
        .args(["approve", id, "--workspace"])
        .arg(&fixture.ws)
        .arg("--state-dir")
        .arg(&fixture.state)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn approvals_the_control_socket_refuses_another_users_connection() {
    use crate::containment::{NOBODY, is_root};
    if !is_root() {
        eprintln!("skipped: needs root to connect as another user");
        return;
    }
    let fixture = Fixture::new(Mode::Sandboxed);
    alice_needs_approval(&fixture);
    let server = Server::start(&fixture, Mode::Sandboxed);
    let asked = server.send(&fixture.secrets.alice_key, "please book the trip");
    let task = asked["result"]["task"]["id"].as_str().expect("alice's task").to_string();
    let ids = waiting(&fixture);
    // Open the way to the socket, so that only its check of the peer stands between another
    // user and a decision.
    use std::os::unix::fs::PermissionsExt;
    let root = fixture.state.parent().unwrap().to_path_buf();
    for (path, mode) in [
        (root, 0o755),
        (fixture.ws.clone(), 0o755),
        (fixture.state.clone(), 0o755),
        (fixture.state.join("a2a"), 0o755),
        (fixture.state.join("a2a/control.sock"), 0o777),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let (code, answer) = approve_as(&fixture, NOBODY, &ids[0]);
    assert_eq!(code, 1, "{answer}");
    assert!(answer.contains("refused: only the user the server runs as may decide"), "{answer}");
    assert_eq!(state_of(&server, &fixture.secrets.alice_key, &task), "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(waiting(&fixture), ids);
    // The same request from the server's own user decides.
    let (code, answer) = approve_as(&fixture, 0, &ids[0]);
    assert_eq!(code, 0, "{answer}");
    assert!(answer.contains("working"), "{answer}");
    server.stop();
}
