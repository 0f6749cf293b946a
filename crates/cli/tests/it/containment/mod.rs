//! The containment suite (issue 17): the real `volcanic serve --faux` with two callers, a seeded
//! owner journal, secrets in the server's environment and home folder, and a push config with a
//! token; one caller ("mallory") then tries every route out of its session that a
//! prompt-injected model could take. Faux directives stand in for that model: whatever a caller
//! can make Faux do, it can talk a real model into.
//!
//! Every route is one test, run three ways: sandboxed with the server as root, sandboxed with
//! the server as an unprivileged user (when the tests run as root), and with the owner's opt-out
//! (`A2A__Sandbox__Mode=off`), where the route must work. The opt-out run proves that the test
//! can see the leak it guards against.
//!
//! Evidence of a leak is everything mallory gets back (the reply to its send, with file
//! artifacts decoded) plus what its model was shown (its session journal): a secret that reached
//! the model is one step from the caller. Routes copy what they find through `tr` (rot13), so
//! that the redactor, a second line of defence, does not hide a leak from the opt-out proof;
//! the checks look for the plain and the rot13 form.

mod round_two;
mod routes;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use base64::Engine;
use serde_json::{Value, json};
use volcanic_test_support::raw_http::{a2a_request, body_of, exchange, status_of};

use crate::support::{Rest, listening_base};

/// How the server runs in one pass of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sandboxed, as the user running the tests.
    Sandboxed,
    /// Sandboxed, as the unprivileged user `nobody` (only when the tests run as root).
    SandboxedUnprivileged,
    /// The owner's opt-out: tools unconfined. Routes must work here.
    OptOut,
}

impl Mode {
    /// The passes every route makes.
    pub fn all() -> Vec<Mode> {
        let mut modes = vec![Mode::Sandboxed, Mode::OptOut];
        if is_root() {
            modes.push(Mode::SandboxedUnprivileged);
        }
        modes
    }

    pub fn contained(self) -> bool {
        self != Mode::OptOut
    }
}

/// `volcanic` as the mode runs it: as `nobody` without any capability for
/// [`Mode::SandboxedUnprivileged`], else as the user running the tests.
pub fn volcanic_as(mode: Mode) -> Command {
    let volcanic = Command::cargo_bin("volcanic").unwrap();
    if mode != Mode::SandboxedUnprivileged {
        return volcanic;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]);
    cmd.arg(volcanic.get_program());
    cmd
}

/// The uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

pub fn is_root() -> bool {
    // /proc/self/status "Uid:" line: real, effective, saved, fs.
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(2) == Some("0"))
    })
}

/// The secrets and private texts of one fixture, all fresh per run.
pub struct Secrets {
    pub alice_key: String,
    pub alice_note: String,
    pub alice_private_text: String,
    pub push_token: String,
    pub api_key: String,
    pub owner_transcript: String,
    pub home_secret: String,
    /// A plain (not secret-looking: letters only, so no random token either) variable in the
    /// server's start-up environment, as `envmarker<letters>`. Plain variables reach the owner's
    /// sessions' environment (not callers'), so a route proves it read the server's
    /// `/proc/<pid>/environ` by rewriting the prefix to `fromproc` on the way.
    pub env_marker: String,
}

impl Secrets {
    fn new() -> Self {
        let fresh = |prefix: &str| format!("{prefix}{}", uuid::Uuid::new_v4().simple());
        Secrets {
            alice_key: fresh("alicekey"),
            alice_note: fresh("alicenote"),
            alice_private_text: fresh("aliceprivate"),
            push_token: fresh("pushtoken"),
            api_key: fresh("sk-ant-api03-"),
            owner_transcript: fresh("ownertranscript"),
            home_secret: fresh("homesecret"),
            env_marker: format!("envmarker{}", letters()),
        }
    }

    /// [`Self::env_marker`] as a route that read the server's environment rewrites it.
    fn env_marker_from_proc(&self) -> String {
        self.env_marker.replacen("envmarker", "fromproc", 1)
    }

    /// Every secret with its label.
    pub fn all(&self) -> Vec<(&'static str, String)> {
        vec![
            ("alice's key", self.alice_key.clone()),
            ("alice's callers.json note", self.alice_note.clone()),
            ("alice's message", self.alice_private_text.clone()),
            ("alice's push token", self.push_token.clone()),
            ("the provider key", self.api_key.clone()),
            ("the owner's transcript", self.owner_transcript.clone()),
            ("the home folder's secret", self.home_secret.clone()),
            ("the server's environment marker", self.env_marker_from_proc()),
        ]
    }
}

/// 32 random lower-case letters: unique per run, and shaped like no credential.
pub fn letters() -> String {
    uuid::Uuid::new_v4().simple().to_string().bytes().map(|b| char::from(b'g' + b % 20)).collect()
}

/// A workspace, state and home folder under one root, with callers and seeded secrets.
pub struct Fixture {
    _root: tempfile::TempDir,
    pub ws: PathBuf,
    pub state: PathBuf,
    pub home: PathBuf,
    pub mallory_key: String,
    pub secrets: Secrets,
    pub persona: String,
}

impl Fixture {
    pub fn new(mode: Mode) -> Self {
        let root = tempfile::tempdir().unwrap();
        let (ws, state, home) =
            (root.path().join("ws"), root.path().join("state"), root.path().join("home"));
        let secrets = Secrets::new();
        let mallory_key = format!("mallorykey{}", uuid::Uuid::new_v4().simple());
        std::fs::create_dir_all(ws.join(".volcanic/a2a")).unwrap();
        let callers = json!([
            {"name": "mallory", "key": mallory_key},
            {"name": "alice", "key": secrets.alice_key, "note": secrets.alice_note},
        ]);
        std::fs::write(ws.join(".volcanic/a2a/callers.json"), callers.to_string()).unwrap();
        let persona = "You are the owner's assistant.\n".to_string();
        std::fs::write(ws.join("PERSONA.md"), &persona).unwrap();
        std::fs::write(ws.join("notes.txt"), "an ordinary workspace file\n").unwrap();
        let journal = state.join("sessions/chat-main");
        std::fs::create_dir_all(&journal).unwrap();
        std::fs::write(
            journal.join("session.jsonl"),
            format!("{{\"private\":\"{}\"}}\n", secrets.owner_transcript),
        )
        .unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".netrc"), format!("password {}\n", secrets.home_secret)).unwrap();
        if mode == Mode::SandboxedUnprivileged {
            chown_tree(root.path(), NOBODY);
        }
        Fixture { _root: root, ws, state, home, mallory_key, secrets, persona }
    }

    pub fn callers_json(&self) -> String {
        std::fs::read_to_string(self.ws.join(".volcanic/a2a/callers.json")).unwrap_or_default()
    }
}

pub fn chown_tree(root: &Path, uid: u32) {
    let status =
        Command::new("chown").arg("-R").arg(format!("{uid}:{uid}")).arg(root).status().unwrap();
    assert!(status.success());
    // The temp folder's parents must let the unprivileged user through.
    let mut perms = std::fs::metadata(root).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(root, perms).unwrap();
}

/// A running `volcanic serve`.
pub struct Server {
    child: Child,
    pub base: String,
}

impl Server {
    pub fn start(fixture: &Fixture, mode: Mode) -> Server {
        Server::start_with(fixture, mode, &[])
    }

    /// [`Server::start`] with more environment variables.
    pub fn start_with(fixture: &Fixture, mode: Mode, extra_env: &[(&str, &str)]) -> Server {
        Server::start_command(fixture, mode, volcanic_as(mode), extra_env)
    }

    /// [`Server::start_with`] through `cmd`, a command that runs `volcanic` with the arguments
    /// it is given (the binary itself, or a wrapper that prepares the process first).
    pub fn start_command(
        fixture: &Fixture,
        mode: Mode,
        mut cmd: Command,
        extra_env: &[(&str, &str)],
    ) -> Server {
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &fixture.home)
            .env("RUST_LOG", "info")
            .env("ANTHROPIC_API_KEY", &fixture.secrets.api_key)
            .env("VOLCANIC_TEST_MARKER", &fixture.secrets.env_marker)
            .env("A2A__AllowPrivatePushUrls", "true")
            .args(["serve", "--faux", "--listen", "127.0.0.1:0", "--workspace"])
            .arg(&fixture.ws)
            .arg("--state-dir")
            .arg(&fixture.state)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if mode == Mode::OptOut {
            cmd.env("A2A__Sandbox__Mode", "off");
        }
        for (name, value) in extra_env {
            cmd.env(name, value);
        }
        let mut child = cmd.spawn().unwrap();
        let base = listening_base(&mut child, Duration::from_secs(60), Rest::Drain);
        Server { child, base }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One HTTP request; `None` when no answer came within `timeout`.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: &str,
        timeout: Duration,
    ) -> Option<(u16, String)> {
        http(&self.base, method, path, key, body, timeout)
    }

    /// A JSON-RPC call; the parsed reply.
    pub fn rpc(&self, key: &str, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, text) = self
            .request("POST", "/a2a", Some(key), &body.to_string(), Duration::from_secs(120))
            .expect("an answer");
        assert_eq!(status, 200, "{method}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Sends `text` as a new conversation; the reply.
    pub fn send(&self, key: &str, text: &str) -> Value {
        let message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        });
        self.rpc(key, "SendMessage", json!({"message": message}))
    }

    /// Stops the server with SIGTERM; its exit code, or `None` if it did not exit in time.
    pub fn stop(self) -> Option<i32> {
        self.stop_with_log().0
    }

    /// [`Server::stop`], with what the server logged (its error output).
    pub fn stop_with_log(mut self) -> (Option<i32>, String) {
        let status =
            Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return (Some(status.code().unwrap_or(-1)), stderr);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return (None, String::new());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(
    base: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
    timeout: Duration,
) -> Option<(u16, String)> {
    let address = base.strip_prefix("http://").unwrap();
    let request = a2a_request(method, path, address, key, body);
    let response = exchange(address, &request, timeout).ok()?;
    Some((status_of(&response)?, body_of(&response).to_string()))
}

/// A Faux directive line.
pub fn directive(steps: Value) -> String {
    format!("faux> {}", json!({"steps": steps}))
}

/// A bash step.
pub fn bash(command: &str) -> Value {
    json!({"tool": "bash", "args": {"command": command}})
}

/// A tool step.
pub fn tool(name: &str, args: Value) -> Value {
    json!({"tool": name, "args": args})
}

/// Sets up alice: a completed task with a private text and a push config with a token. Returns
/// the task id.
pub fn seed_alice(server: &Server, fixture: &Fixture) -> String {
    let reply = server.send(&fixture.secrets.alice_key, &fixture.secrets.alice_private_text);
    let task = reply["result"]["task"]["id"].as_str().expect("alice's task").to_string();
    let created = server.rpc(
        &fixture.secrets.alice_key,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "http://127.0.0.1:9/hook", "token": fixture.secrets.push_token}),
    );
    assert!(created.get("result").is_some(), "{created}");
    task
}

/// What mallory got back and what its model saw.
pub struct Evidence {
    pub text: String,
}

impl Evidence {
    /// The reply to mallory's send, with file artifacts decoded, and every journal of mallory's
    /// sessions.
    pub fn gather(fixture: &Fixture, reply: &Value) -> Evidence {
        let mut text = reply.to_string();
        let artifacts =
            reply["result"]["task"]["artifacts"].as_array().cloned().unwrap_or_default();
        for artifact in artifacts {
            for part in artifact["parts"].as_array().cloned().unwrap_or_default() {
                if let Some(raw) = part["raw"].as_str()
                    && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(raw)
                {
                    text.push('\n');
                    text.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        }
        let sessions = fixture.state.join("sessions");
        for entry in std::fs::read_dir(&sessions).unwrap().flatten() {
            if entry.file_name().to_string_lossy().contains("mallory") {
                let journal = entry.path().join("session.jsonl");
                text.push('\n');
                text.push_str(&std::fs::read_to_string(journal).unwrap_or_default());
            }
        }
        Evidence { text }
    }

    /// The secrets found in the evidence, plain or rot13.
    pub fn leaked(&self, secrets: &Secrets) -> Vec<&'static str> {
        secrets
            .all()
            .into_iter()
            .filter(|(_, value)| {
                self.text.contains(value.as_str()) || self.text.contains(&rot13(value))
            })
            .map(|(label, _)| label)
            .collect()
    }
}

pub fn rot13(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='m' | 'A'..='M' => (c as u8 + 13) as char,
            'n'..='z' | 'N'..='Z' => (c as u8 - 13) as char,
            other => other,
        })
        .collect()
}

/// The shell that copies `source` into `loot` through rot13 (errors kept in the output).
pub fn steal(source: &str, loot: &str) -> String {
    format!("tr 'A-Za-z' 'N-ZA-Mn-za-m' < {source} > {loot}; cat {loot} | head -c 200")
}

/// Runs one exfiltration route in every mode: it must leak nothing when contained and must
/// leak `expected` (at least one of them) under the opt-out.
pub fn assert_route(expected: &[&str], attack: impl Fn(&Server, &Fixture, &str) -> Value) {
    assert_route_closing(expected, &[], attack);
}

/// [`assert_route`], where `closed` must not leak even under the opt-out (another mechanism
/// than the sandbox keeps them away).
pub fn assert_route_closing(
    expected: &[&str],
    closed: &[&str],
    attack: impl Fn(&Server, &Fixture, &str) -> Value,
) {
    assert_route_in(&[], |_| {}, expected, closed, attack);
}

/// [`assert_route_closing`] with the server started with `env`, after `prepare` has set up the
/// fixture.
pub fn assert_route_in(
    env: &[(&str, &str)],
    prepare: impl Fn(&Fixture),
    expected: &[&str],
    closed: &[&str],
    attack: impl Fn(&Server, &Fixture, &str) -> Value,
) {
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        prepare(&fixture);
        if mode == Mode::SandboxedUnprivileged {
            chown_tree(fixture.ws.parent().unwrap(), NOBODY);
        }
        let server = Server::start_with(&fixture, mode, env);
        let alice_task = seed_alice(&server, &fixture);
        let reply = attack(&server, &fixture, &alice_task);
        let evidence = Evidence::gather(&fixture, &reply);
        let leaked = evidence.leaked(&fixture.secrets);
        assert_eq!(server.stop(), Some(0), "{mode:?}: the server stops on SIGTERM");
        if mode.contained() {
            assert_eq!(leaked, Vec::<&str>::new(), "{mode:?}: leaked to mallory");
        } else {
            assert!(
                expected.iter().any(|label| leaked.contains(label)),
                "{mode:?}: the route should leak one of {expected:?} under the opt-out, got \
                 {leaked:?}; the test cannot see what it guards against"
            );
            for label in closed {
                assert!(!leaked.contains(label), "{mode:?}: {label} leaked under the opt-out");
            }
        }
    }
}
