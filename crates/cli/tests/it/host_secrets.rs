//! Issue 18: the host's own secrets (the bot token, the provider keys) out of every session's
//! reach, the owner's own included.
//!
//! `volcanic telegram --faux` runs as a child with the token in its config file, provider keys
//! in its environment and the A2A server on. A Faux-driven bash (standing in for a
//! prompt-injected model) in the owner's chat, then in an A2A caller's session, tries every way
//! to them: the config file, `/proc/<server pid>/{environ,cmdline,mem}`, every `/proc/*/environ`
//! it can see, and the same again after trying to unmount `/proc` (only where it runs in a
//! sandbox: outside one that would be the host's `/proc`). What it finds goes through rot13
//! (so that redaction cannot hide a leak) into a file in the workspace, which the test reads.
//!
//! Three passes: sandboxed with the server as root, sandboxed with the server as `nobody` (when
//! the tests run as root), and with both sandboxes turned off, where the secrets must leak: that
//! pass proves the test can see what it guards against.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::json;
use volcanic_test_support::raw_http::post_a2a;
use volcanic_test_support::telegram::FakeBotApi;

use crate::containment::{Mode, chown_tree, directive, rot13, volcanic_as};
use crate::support::{Rest, listening_base, wait_for_file};

const CHAT: i64 = 4343;
const DEADLINE: Duration = Duration::from_secs(60);

/// Fresh secrets per pass.
struct HostSecrets {
    token: String,
    anthropic: String,
    openai: String,
    caller_key: String,
}

impl HostSecrets {
    fn new() -> Self {
        let fresh = || uuid::Uuid::new_v4().simple().to_string();
        HostSecrets {
            token: format!(
                "{}:tgsecret{}",
                700_000 + uuid::Uuid::new_v4().as_u128() % 100_000,
                fresh()
            ),
            anthropic: format!("sk-ant-api03-{}", fresh()),
            openai: format!("sk-proj-{}", fresh()),
            caller_key: format!("hostcaller{}", fresh()),
        }
    }

    /// What must never reach a session: the token (and its secret part alone) and the keys.
    fn all(&self) -> Vec<(&'static str, String)> {
        let secret_part = self.token.split_once(':').map(|(_, s)| s.to_string()).unwrap();
        vec![
            ("the bot token", self.token.clone()),
            ("the bot token's secret part", secret_part),
            ("ANTHROPIC_API_KEY", self.anthropic.clone()),
            ("OPENAI_API_KEY", self.openai.clone()),
        ]
    }
}

struct Host {
    child: Child,
    base: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(
    api: &FakeBotApi,
    dirs: &Dirs,
    secrets: &HostSecrets,
    mode: Mode,
    extra_env: &[(&str, &str)],
) -> Host {
    let mut cmd = volcanic_as(mode);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &dirs.state)
        .env("RUST_LOG", "info")
        .env("ANTHROPIC_API_KEY", &secrets.anthropic)
        .env("OPENAI_API_KEY", &secrets.openai)
        .env("Telegram__AllowedUserIds", CHAT.to_string())
        .env("Telegram__WorkspaceRoot", &dirs.root)
        .env("Telegram__ApiUrl", &api.url)
        .env("A2A__Enabled", "true")
        .current_dir(&dirs.state)
        .args(["telegram", "--faux", "--listen", "127.0.0.1:0", "--config"])
        .arg(&dirs.config)
        .arg("--state-dir")
        .arg(&dirs.state)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if mode == Mode::OptOut {
        cmd.env("Agent__Sandbox__Mode", "off").env("A2A__Sandbox__Mode", "off");
    } else {
        // Sandboxed passes must not quietly fall back to unconfined tools.
        cmd.env("Agent__Sandbox__Mode", "on");
    }
    for (name, value) in extra_env {
        cmd.env(name, value);
    }
    let mut child = cmd.spawn().unwrap();
    let base = listening_base(&mut child, DEADLINE, Rest::Drain);
    Host { child, base }
}

/// The folders of one pass, under one temp root.
struct Dirs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    config: PathBuf,
}

impl Dirs {
    fn new(secrets: &HostSecrets, mode: Mode) -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let (root, state, conf) =
            (tmp.path().join("chats"), tmp.path().join("state"), tmp.path().join("conf"));
        let ws = root.join(CHAT.to_string());
        std::fs::create_dir_all(ws.join(".volcanic/a2a")).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(
            ws.join(".volcanic/a2a/callers.json"),
            json!([{"name": "mallory", "key": secrets.caller_key}]).to_string(),
        )
        .unwrap();
        let config = conf.join("volcanic.toml");
        std::fs::write(&config, format!("[telegram]\nbot_token = \"{}\"\n", secrets.token))
            .unwrap();
        if mode == Mode::SandboxedUnprivileged {
            chown_tree(tmp.path(), 65534);
        }
        Dirs { _tmp: tmp, root, state, config }
    }

    fn workspace(&self) -> PathBuf {
        self.root.join(CHAT.to_string())
    }
}

/// The bash the prompt-injected model runs: every way to the server's secrets, rot13'd into
/// `out` (in the workspace), between two markers.
fn thief(pid: u32, config: &Path, out: &str) -> String {
    format!(
        r#"P={pid}; C='{config}'
look() {{
  echo "environ:"; cat /proc/$P/environ 2>&1 | tr '\0' '\n'
  echo "cmdline:"; cat /proc/$P/cmdline 2>&1 | tr '\0' ' '
  echo "all environ:"; for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done
  echo "mem:"
  grep -v '^#' /proc/$P/maps 2>/dev/null | while read -r range perms rest; do
    case "$perms" in rw*)
      s=$((16#${{range%-*}})); e=$((16#${{range#*-}}))
      [ $((e-s)) -le 67108864 ] && dd if=/proc/$P/mem bs=4096 skip=$((s/4096)) count=$(((e-s)/4096)) 2>/dev/null ;;
    esac
  done | grep -a -o -E 'tgsecret[0-9a-f]{{8,}}|sk-ant-api03-[0-9a-f]{{8,}}|sk-proj-[0-9a-f]{{8,}}' | sort -u | head -20
  echo "config:"; cat "$C" 2>&1
}}
{{
  echo LOOT-BEGIN
  look
  # Only inside a sandbox: outside one, this would be the host's /proc. Pid 1 of an owner's
  # sandbox is bwrap's init; of a caller's, the tool host itself.
  case "$(cat /proc/1/comm)" in bwrap|tool-host) in_sandbox=1 ;; *) in_sandbox= ;; esac
  if [ -n "$in_sandbox" ]; then
    echo "umount:"; umount /proc 2>&1; umount -l /proc 2>&1
    look
  fi
  echo LOOT-END
}} 2>&1 | tr 'A-Za-z' 'N-ZA-Mn-za-m' > {out}
"#,
        config = config.display()
    )
}

/// Waits for the thief's file and returns it decoded.
fn loot(path: &Path) -> String {
    wait_for_file(path, DEADLINE, |text| {
        let text = rot13(text);
        text.contains("LOOT-END").then_some(text)
    })
}

fn leaks(text: &str, secrets: &HostSecrets) -> Vec<&'static str> {
    secrets.all().into_iter().filter(|(_, s)| text.contains(s.as_str())).map(|(l, _)| l).collect()
}

fn send_as_caller(base: &str, key: &str, text: &str) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m-thief", "role": "ROLE_USER", "parts": [{"text": text}]}},
    })
    .to_string();
    let (_, response) = post_a2a(base, key, &body, DEADLINE);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

fn pass(mode: Mode) {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let secrets = HostSecrets::new();
    let api = rt.block_on(FakeBotApi::start(&secrets.token));
    let dirs = Dirs::new(&secrets, mode);
    let host = start(&api, &dirs, &secrets, mode, &[]);
    let pid = host.child.id();
    let ws = dirs.workspace();

    // The owner's own chat.
    let script = thief(pid, &dirs.config, "loot-owner.txt");
    api.push_text(CHAT, &directive(json!([{"tool": "bash", "args": {"command": script}}])));
    let owner = loot(&ws.join("loot-owner.txt"));

    // An A2A caller of the same workspace.
    let script = thief(pid, &dirs.config, "loot-caller.txt");
    send_as_caller(
        &host.base,
        &secrets.caller_key,
        &directive(json!([{"tool": "bash", "args": {"command": script}}])),
    );
    let caller = loot(&ws.join("loot-caller.txt"));

    // Whatever reached the chat (answers, tool lines, documents) must be clean in every pass.
    let mut chat: String = api.messages(CHAT).iter().map(|m| m.text.clone() + "\n").collect();
    for document in api.documents() {
        chat.push_str(&String::from_utf8_lossy(&document.bytes));
    }
    drop(host);

    if mode.contained() {
        assert!(owner.contains("umount:"), "the owner's bash did not run in a sandbox: {owner}");
        assert!(caller.contains("umount:"), "the caller's bash did not run in a sandbox: {caller}");
        assert_eq!(leaks(&owner, &secrets), Vec::<&str>::new(), "{mode:?}, owner's chat:\n{owner}");
        assert_eq!(leaks(&caller, &secrets), Vec::<&str>::new(), "{mode:?}, caller:\n{caller}");
    } else {
        // Unconfined, the config file alone gives the token away (and root reads the memory).
        assert!(leaks(&owner, &secrets).contains(&"the bot token"), "{owner}");
        assert!(leaks(&caller, &secrets).contains(&"the bot token"), "{caller}");
    }
    assert_eq!(leaks(&chat, &secrets), Vec::<&str>::new(), "{mode:?}: a secret reached the chat");
}

#[test]
fn host_secrets_out_of_reach_sandboxed() {
    pass(Mode::Sandboxed);
}

#[test]
fn host_secrets_out_of_reach_unprivileged() {
    if Mode::all().contains(&Mode::SandboxedUnprivileged) {
        pass(Mode::SandboxedUnprivileged);
    }
}

#[test]
fn host_secrets_leak_without_the_sandboxes() {
    pass(Mode::OptOut);
}

/// The start-up environment in `/proc/<pid>/environ` no longer holds the secrets (the server
/// re-executed itself without them), and the process is not dumpable (its `/proc` files belong
/// to root, whatever user it runs as).
#[test]
fn server_restarts_itself_without_secrets_and_turns_non_dumpable() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let secrets = HostSecrets::new();
    let api = rt.block_on(FakeBotApi::start(&secrets.token));
    let mode = if Mode::all().contains(&Mode::SandboxedUnprivileged) {
        Mode::SandboxedUnprivileged
    } else {
        Mode::Sandboxed
    };
    let dirs = Dirs::new(&secrets, mode);
    // The token in the environment this time, next to the keys.
    std::fs::write(&dirs.config, "").unwrap();
    let mut host = start(&api, &dirs, &secrets, mode, &[("Telegram__BotToken", &secrets.token)]);
    let pid = host.child.id();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.contains("Telegram__AllowedUserIds"),
        "not the server's environment: {environ}"
    );
    assert_eq!(leaks(&environ, &secrets), Vec::<&str>::new(), "{environ}");
    let owner = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(format!("/proc/{pid}/environ")).unwrap(),
    );
    if mode == Mode::SandboxedUnprivileged {
        assert_eq!(owner, 0, "a dumpable process's /proc files belong to its own user");
    }
    // And it still works: the token came through.
    api.push_text(CHAT, "still there?");
    rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| m.text == "echo: still there?"));
    let _ = host.child.kill();
    let _ = host.child.wait();
}

/// `volcanic chat` keeps its start-up environment (its stdin is the terminal), so the keys stay
/// in its `/proc/<pid>/environ`: its own sandbox is what keeps the owner's bash from them, and
/// from the config file holding the token.
fn chat_pass(mode: Mode) {
    let secrets = HostSecrets::new();
    let dirs = Dirs::new(&secrets, mode);
    let ws = dirs.workspace();
    let mut cmd = volcanic_as(mode);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &dirs.state)
        .env("ANTHROPIC_API_KEY", &secrets.anthropic)
        .env("OPENAI_API_KEY", &secrets.openai)
        .env("Agent__Sandbox__Mode", if mode.contained() { "on" } else { "off" })
        .args(["chat", "--faux", "--workspace"])
        .arg(&ws)
        .arg("--config")
        .arg(&dirs.config)
        .arg("--state-dir")
        .arg(&dirs.state)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let script = thief(child.id(), &dirs.config, "loot-chat.txt");
    let line = directive(json!([{"tool": "bash", "args": {"command": script}}]));
    let mut stdin = child.stdin.take().unwrap();
    let child = Kill(child);
    std::io::Write::write_all(&mut stdin, format!("{line}\n").as_bytes()).unwrap();
    let found = loot(&ws.join("loot-chat.txt"));
    drop(stdin);
    drop(child);
    if mode.contained() {
        assert!(found.contains("umount:"), "the chat's bash did not run in a sandbox: {found}");
        assert_eq!(leaks(&found, &secrets), Vec::<&str>::new(), "{mode:?}, chat:\n{found}");
    } else {
        // Unconfined, the config file gives the token away and the environment the keys.
        let leaked = leaks(&found, &secrets);
        assert!(leaked.contains(&"the bot token"), "{found}");
    }
}

#[test]
fn chat_host_secrets_out_of_reach_sandboxed() {
    chat_pass(Mode::Sandboxed);
    if Mode::all().contains(&Mode::SandboxedUnprivileged) {
        chat_pass(Mode::SandboxedUnprivileged);
    }
}

#[test]
fn chat_host_secrets_leak_without_the_sandbox() {
    chat_pass(Mode::OptOut);
}

/// Issue 22: the owner's own chat, prompt-injected, tries to approve a caller's waiting request
/// through the server's control socket and its records; the result goes into a workspace file.
/// Whether the request got approved.
fn owner_chat_approval_pass(mode: Mode) -> bool {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let secrets = HostSecrets::new();
    let api = rt.block_on(FakeBotApi::start(&secrets.token));
    let dirs = Dirs::new(&secrets, mode);
    std::fs::write(
        dirs.workspace().join(".volcanic/a2a/callers.json"),
        json!([{"name": "mallory", "key": secrets.caller_key, "approval": "every-task"}])
            .to_string(),
    )
    .unwrap();
    let host = start(&api, &dirs, &secrets, mode, &[]);
    send_as_caller(&host.base, &secrets.caller_key, "please wire the money");
    let asked = rt.block_on(api.wait_for_message(CHAT, DEADLINE, |m| !m.buttons.is_empty()));
    let id = asked.buttons[0][0].1.trim_start_matches("appr:y:").to_string();

    let state = dirs.state.display();
    // No double quote inside: the script travels as a chat message's directive.
    let connect = format!(
        "import socket, json; s = socket.socket(socket.AF_UNIX); s.connect('{state}/a2a/control.sock'); \
         s.sendall((json.dumps(dict(op='approve', id='{id}')) + chr(10)).encode()); print(s.recv(4096))"
    );
    let script = format!(
        "{{ python3 -c \"{connect}\"; rm -f {state}/a2a/approvals/*; ls {state}/a2a; echo DONE; }} > approve-try.txt 2>&1"
    );
    api.push_text(CHAT, &directive(json!([{"tool": "bash", "args": {"command": script}}])));
    let tried = wait_for_file(&dirs.workspace().join("approve-try.txt"), DEADLINE, |text| {
        text.contains("DONE").then(|| text.to_string())
    });
    // The request is approved exactly when the owner's buttons message stops being pending: the
    // server's own listing is the truth, read through the control socket from here (the test
    // stands for the owner at their shell).
    let listing = rt.block_on(volcanic_a2a::control::request(
        &volcanic_a2a::control::socket_path(&dirs.state),
        &volcanic_a2a::control::ControlRequest::List,
    ));
    drop(host);
    let listing =
        listing.unwrap_or_else(|err| panic!("{mode:?}: no listing ({err}); tried:\n{tried}"));
    let volcanic_a2a::control::ControlAnswer::Approvals(waiting) = listing else {
        panic!("{mode:?}: the listing was refused: {listing:?}; tried:\n{tried}");
    };
    !waiting.iter().any(|a| a.id == id)
}

#[test]
fn owner_chat_cannot_approve_a_callers_request_sandboxed() {
    assert!(
        !owner_chat_approval_pass(Mode::Sandboxed),
        "the owner's sandboxed chat approved a request"
    );
}

#[test]
fn owner_chat_approves_without_the_sandbox_so_the_sandbox_is_what_holds() {
    assert!(owner_chat_approval_pass(Mode::OptOut), "the unconfined chat should reach the socket");
}
