//! `volcanic a2a …` (issue 24) against `volcanic serve --faux`, on every binding and version the
//! server offers: blocking and streamed sends, input-required and its answer, files both ways,
//! get, list, cancel with a subscriber watching, push config CRUD, and `--json`. The errors are in
//! `client_errors.rs`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

use crate::support::{Rest, listening_base};

pub(crate) const KEY: &str = "k_client_test_key_24";
/// Bounds every run of the client.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// `volcanic serve --faux` for one test, its log in a file (so a chatty debug log never fills a
/// pipe), stopped with SIGTERM on drop.
pub(crate) struct Agent {
    child: Child,
    pub(crate) base: String,
    _workspace: tempfile::TempDir,
    _state: tempfile::TempDir,
    log: PathBuf,
}

impl Agent {
    pub(crate) fn start() -> Agent {
        let workspace = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        volcanic_test_support::callers::write_callers(workspace.path(), &[("tester", KEY)]);
        let log = state.path().join("serve.log");
        let mut child = StdCommand::cargo_bin("volcanic")
            .unwrap()
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", state.path())
            .env("RUST_LOG", "debug")
            // The push tests register webhooks on 127.0.0.1.
            .env("A2A__AllowPrivatePushUrls", "true")
            .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--workspace"])
            .arg(workspace.path())
            .arg("--state-dir")
            .arg(state.path())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let base = listening_base(&mut child, Duration::from_secs(30), Rest::Drain);
        Agent { child, base, _workspace: workspace, _state: state, log }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // The server may have exited already; the wait below tells.
        let _ = StdCommand::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        // scripts/test scans this for leaked keys (docs/reliability.md, "Secrets in logs").
        if let Some(dir) = std::env::var_os("VOLCANIC_TEST_LOG_DIR") {
            let name = format!("client-serve-{}.log", self.child.id());
            let _ = std::fs::copy(&self.log, Path::new(&dir).join(name));
        }
    }
}

/// What one run of the client printed, and its exit code.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// The `--json` lines.
    pub(crate) fn json(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
            .collect()
    }
}

/// Runs `volcanic a2a ARGS` with `key` in VOLCANIC_A2A_KEY (if any), in `dir`, and checks that
/// the key appears in none of its output.
pub(crate) fn a2a(dir: &Path, key: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = assert_cmd::Command::cargo_bin("volcanic").unwrap();
    cmd.env_remove("VOLCANIC_A2A_KEY").current_dir(dir).arg("a2a").args(args).timeout(RUN_TIMEOUT);
    if let Some(key) = key {
        cmd.env("VOLCANIC_A2A_KEY", key);
    }
    let output = cmd.output().unwrap();
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    for secret in [KEY, "k_wrong_client_key_24"] {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "key printed: {}{}",
            run.stdout,
            run.stderr
        );
    }
    run
}

/// The flags that force one interface.
fn forced(binding: &'static str, version: &'static str) -> [&'static str; 4] {
    ["--binding", binding, "--a2a-version", version]
}

fn with<'a>(args: &[&'a str], flags: &[&'a str]) -> Vec<&'a str> {
    args.iter().chain(flags).copied().collect()
}

fn task_of(run: &Run) -> (String, String) {
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains(" · task "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |label: &str| words[words.iter().position(|w| *w == label).unwrap() + 1].to_owned();
    (at("task"), at("context"))
}

const STREAMED: &str = r#"faux> {"steps":[{"tool":"bash","args":{"command":"true"}},{"text":"streamed answer","chunk":3}]}"#;
const ASK: &str = r#"faux> {"steps":[{"tool":"request_input","args":{"question":"Which city?"}}]}"#;
const SLOW: &str = r#"faux> {"steps":[{"text":"slow","delay_ms":30000}]}"#;
/// Sends back, as a file, the file the message brought.
const ROUND_TRIP: &str = r#"faux> {"steps":[{"tool":"bash","args":{"command":"cat inbox/a2a/tester/*-note.txt > copy.txt"}},{"tool":"send","args":{"path":"copy.txt"}},{"text":"sent back"}]}"#;

/// Everything but ListTasks, on one interface.
fn exercise(binding: &'static str, version: &'static str) {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    let url = agent.base.as_str();
    let flags = forced(binding, version);
    let run = |args: &[&str]| a2a(here, Some(KEY), &with(args, &flags));

    // A blocking send, for people and for scripts.
    let sent = run(&["send", url, "hello there"]);
    assert_eq!(sent.code, 0, "{}{}", sent.stdout, sent.stderr);
    assert!(sent.stdout.starts_with("completed · task "), "{}", sent.stdout);
    assert!(sent.stdout.contains("hello there"), "{}", sent.stdout);
    let json = run(&["send", url, "hello json", "--json"]).json();
    assert_eq!(json.len(), 1);
    assert_eq!(json[0]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{json:?}");
    let text = json[0]["task"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(text.ends_with("hello json"), "{text}");

    // The extended card, in this interface's version (0.3 has `url`, 1.0 `supportedInterfaces`).
    let extended = run(&["card", url, "--extended", "--json"]).json();
    assert_eq!(extended[0]["name"], "Volcanic assistant", "{extended:?}");
    let shape = if version == "0.3" { "url" } else { "supportedInterfaces" };
    assert!(extended[0].get(shape).is_some(), "{extended:?}");

    // Streaming: the answer as it comes, a line per tool use and status change.
    let streamed = run(&["send", url, STREAMED, "--stream"]);
    assert_eq!(streamed.code, 0, "{}{}", streamed.stdout, streamed.stderr);
    for expected in ["[working] using bash", "streamed answer\n", "[completed]"] {
        assert!(streamed.stdout.contains(expected), "{expected:?} in {}", streamed.stdout);
    }
    let events = run(&["send", url, STREAMED, "--stream", "--json"]).json();
    assert!(events[0].get("task").is_some(), "{events:?}");
    assert_eq!(events.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(events.iter().any(|e| e.get("artifactUpdate").is_some()), "{events:?}");

    // Input required: the question, the command that answers it, and the answer.
    let asked = run(&["send", url, ASK]);
    assert_eq!(asked.code, 0, "{}{}", asked.stdout, asked.stderr);
    let (task, context) = task_of(&asked);
    assert!(asked.stdout.starts_with("input-required · task "), "{}", asked.stdout);
    assert!(asked.stdout.contains("The agent asks: Which city?"), "{}", asked.stdout);
    let answer = format!(
        "Answer with: volcanic a2a send {url} --task {task} --context {context} --binding {binding} --a2a-version {version} \"<your answer>\""
    );
    assert!(asked.stdout.contains(&answer), "{}", asked.stdout);
    let answered = run(&["send", url, "Paris", "--task", &task, "--context", &context]);
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    assert!(
        answered.stdout.starts_with(&format!("completed · task {task}")),
        "{}",
        answered.stdout
    );
    assert!(answered.stdout.contains("Paris"), "{}", answered.stdout);
    let got = run(&["get", url, &task]);
    assert_eq!(got.code, 0);
    assert!(
        got.stdout.starts_with(&format!("completed · task {task} · context {context}")),
        "{}",
        got.stdout
    );

    // Files both ways: the file sent reaches the agent, which sends it back; it is saved.
    std::fs::write(here.join("note.txt"), "note for the agent\n").unwrap();
    let files = run(&["send", url, ROUND_TRIP, "--file", "note.txt", "--out", "got"]);
    assert_eq!(files.code, 0, "{}{}", files.stdout, files.stderr);
    let (task, _) = task_of(&files);
    let saved = here.join("got").join(&task).join("copy.txt");
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap(),
        "note for the agent\n",
        "{}",
        files.stdout
    );
    assert!(
        files.stdout.contains(&format!("saved got/{task}/copy.txt (19 bytes)")),
        "{}",
        files.stdout
    );

    // Cancel, with a subscriber following the task.
    let started = run(&["send", url, SLOW, "--no-wait", "--json"]).json();
    let slow = started[0]["task"]["id"].as_str().unwrap().to_owned();
    let subscriber = spawn_a2a(here, &with(&["subscribe", url, &slow], &flags));
    let first = subscriber.next_line();
    assert!(first.starts_with(&format!("working · task {slow}")), "{first}");
    let canceled = run(&["cancel", url, &slow]);
    assert_eq!(canceled.code, 0, "{}{}", canceled.stdout, canceled.stderr);
    assert!(canceled.stdout.starts_with(&format!("canceled · task {slow}")), "{}", canceled.stdout);
    let followed = subscriber.finish();
    assert_eq!(followed.code, 1, "canceled is a failure: {}{}", followed.stdout, followed.stderr);
    assert_eq!(followed.stdout, "[canceled]\n");
    let again = run(&["cancel", url, &slow]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("TaskNotCancelable"), "{}", again.stderr);

    // Push config CRUD.
    let hook = "http://127.0.0.1:9/hook";
    let set =
        run(&["push", "set", url, &slow, hook, "--id", "hook-1", "--token", "tok-0123456789"]);
    assert_eq!(set.code, 0, "{}{}", set.stdout, set.stderr);
    assert_eq!(set.stdout, format!("push config hook-1 · task {slow} → {hook} · token set\n"));
    let got = run(&["push", "get", url, &slow, "hook-1", "--json"]).json();
    assert_eq!(
        (got[0]["id"].as_str(), got[0]["url"].as_str()),
        (Some("hook-1"), Some(hook)),
        "{got:?}"
    );
    let listed = run(&["push", "list", url, &slow]);
    assert!(listed.stdout.contains("push config hook-1"), "{}", listed.stdout);
    let deleted = run(&["push", "delete", url, &slow, "hook-1"]);
    assert_eq!(deleted.stdout, format!("deleted push config hook-1 of task {slow}\n"));
    assert_eq!(run(&["push", "list", url, &slow]).stdout, "no push configs\n");
}

/// A client run in the background, its stdout read line by line as it comes.
pub(crate) struct Background {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Background {
    /// The next line of output, waiting at most [`RUN_TIMEOUT`] for it.
    pub(crate) fn next_line(&self) -> String {
        self.lines.recv_timeout(RUN_TIMEOUT).expect("a line from the client")
    }

    /// Waits for the exit (bounded: killed after [`RUN_TIMEOUT`]); the lines not read yet and
    /// the exit code.
    pub(crate) fn finish(mut self) -> Run {
        let mut stdout = String::new();
        while let Ok(line) = self.lines.recv_timeout(RUN_TIMEOUT) {
            stdout.push_str(&line);
            stdout.push('\n');
        }
        // The reader thread ends with the pipe; a child still alive by now is killed.
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut stderr).unwrap();
        Run { code: status.code().unwrap_or(-1), stdout, stderr }
    }
}

pub(crate) fn spawn_a2a(dir: &Path, args: &[&str]) -> Background {
    let mut child = StdCommand::cargo_bin("volcanic")
        .unwrap()
        .env("VOLCANIC_A2A_KEY", KEY)
        .current_dir(dir)
        .arg("a2a")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            // The test may have stopped listening; its assertions say why.
            let _ = tx.send(line);
        }
    });
    Background { child, lines }
}

#[test]
fn a2a_client_speaks_jsonrpc_1_0() {
    exercise("jsonrpc", "1.0");
}

#[test]
fn a2a_client_speaks_rest_1_0() {
    exercise("rest", "1.0");
}

#[test]
fn a2a_client_speaks_jsonrpc_0_3() {
    exercise("jsonrpc", "0.3");
}

#[test]
fn a2a_client_speaks_rest_0_3() {
    exercise("rest", "0.3");
}

#[test]
fn a2a_card_lists_interfaces_and_send_picks_the_first() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let card = a2a(dir.path(), None, &["card", &agent.base]);
    assert_eq!(card.code, 0, "{}", card.stderr);
    let base = &agent.base;
    let interfaces = format!(
        "interfaces:\n  * jsonrpc 1.0 {base}/a2a\n    rest 1.0 {base}/a2a/v1\n    jsonrpc 0.3 {base}/a2a\n    rest 0.3 {base}/a2a\n"
    );
    assert!(card.stdout.contains(&interfaces), "{}", card.stdout);
    assert!(
        card.stdout.contains("auth apiKey: API key in the X-API-Key header"),
        "{}",
        card.stdout
    );
    let json =
        a2a(dir.path(), None, &["card", &format!("{base}/.well-known/agent-card.json"), "--json"])
            .json();
    assert_eq!(json[0]["name"], "Volcanic assistant");
    let forced =
        a2a(dir.path(), None, &["card", base, "--binding", "rest", "--a2a-version", "0.3"]);
    assert!(forced.stdout.contains(&format!("  * rest 0.3 {base}/a2a\n")), "{}", forced.stdout);
    let extended = a2a(dir.path(), Some(KEY), &["card", base, "--extended", "--json"]).json();
    assert_eq!(extended[0]["name"], "Volcanic assistant");
    // The key as a bearer token works as well.
    let bearer = a2a(dir.path(), Some(KEY), &["send", base, "hi", "--bearer"]);
    assert_eq!(bearer.code, 0, "{}", bearer.stderr);
}

#[test]
fn a2a_list_pages_and_filters_on_1_0_and_is_refused_on_0_3() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    let base = agent.base.as_str();
    for text in ["one", "two", "three"] {
        assert_eq!(a2a(here, Some(KEY), &["send", base, text]).code, 0);
    }
    let asked = a2a(here, Some(KEY), &["send", base, ASK]);
    let (waiting, context) = task_of(&asked);
    for binding in ["jsonrpc", "rest"] {
        let page = a2a(
            here,
            Some(KEY),
            &["list", base, "--page-size", "2", "--binding", binding, "--json"],
        )
        .json();
        assert_eq!(page[0]["tasks"].as_array().unwrap().len(), 2, "{page:?}");
        assert_eq!(page[0]["totalSize"], 4);
        let token = page[0]["nextPageToken"].as_str().unwrap();
        assert!(!token.is_empty());
        let rest = a2a(
            here,
            Some(KEY),
            &["list", base, "--page-size", "2", "--page-token", token, "--binding", binding],
        );
        assert!(rest.stdout.ends_with("2 of 4 tasks\n"), "{}", rest.stdout);
        let filtered = a2a(
            here,
            Some(KEY),
            &["list", base, "--status", "input-required", "--binding", binding],
        );
        assert!(
            filtered.stdout.starts_with(&format!("{waiting} input-required")),
            "{}",
            filtered.stdout
        );
        assert!(filtered.stdout.ends_with("1 of 1 tasks\n"), "{}", filtered.stdout);
        let by_context = a2a(
            here,
            Some(KEY),
            &["list", base, "--context", &context, "--artifacts", "--json", "--binding", binding],
        )
        .json();
        assert_eq!(by_context[0]["tasks"][0]["id"].as_str(), Some(waiting.as_str()));
        let after = a2a(
            here,
            Some(KEY),
            &["list", base, "--after", "2999-01-01T00:00:00Z", "--binding", binding],
        );
        assert_eq!(after.stdout, "0 of 0 tasks\n");
    }
    let v03 = a2a(here, Some(KEY), &["list", base, "--a2a-version", "0.3"]);
    assert_eq!(v03.code, 1);
    assert!(v03.stderr.contains("listing tasks does not exist in A2A 0.3"), "{}", v03.stderr);
    let bad = a2a(here, Some(KEY), &["list", base, "--after", "yesterday"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

#[test]
fn a2a_agent_text_cannot_drive_the_terminal() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    // The agent's answer holds a title-setting escape sequence and a carriage return.
    let hostile = r#"faux> {"steps":[{"text":"\u001b]0;pwned\u0007hello\rbye"}]}"#;
    let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, hostile]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains('\u{1b}') && !run.stdout.contains('\r'), "{:?}", run.stdout);
    assert!(run.stdout.contains("\\u{1b}]0;pwned\\u{7}hello\\u{d}bye"), "{}", run.stdout);
    // --json carries the text exactly, as JSON escapes.
    let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, hostile, "--json"]);
    assert!(!run.stdout.contains('\u{1b}'), "{:?}", run.stdout);
    assert!(run.stdout.contains("\\u001b]0;pwned\\u0007hello\\rbye"), "{}", run.stdout);
}
