//! Containment, round two (issue 33): the attacks that broke the first design, each kept as a
//! test. The principle they test: nothing a caller can write decides what a sandbox binds,
//! hides or loads.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    Fixture, Mode, Server, assert_route, assert_route_in, bash, directive, seed_alice, steal, tool,
};

/// Sends `loot.txt` back as an artifact after `command`.
fn steal_and_send(server: &Server, fixture: &Fixture, command: &str) -> Value {
    let steps = json!([bash(command), tool("send", json!({"path": "loot.txt"})), {"text": "ok"}]);
    server.send(&fixture.mallory_key, &directive(steps))
}

/// Whether alice (another caller) can still run bash: she echoes a computed line, and her
/// session's journal must hold its output.
fn alice_bash_runs(server: &Server, fixture: &Fixture) -> bool {
    server.send(
        &fixture.secrets.alice_key,
        &directive(json!([bash("echo alice-$((40+2))"), {"text": "ok"}])),
    );
    std::fs::read_dir(fixture.state.join("sessions")).unwrap().flatten().any(|e| {
        e.file_name().to_string_lossy().contains("alice")
            && std::fs::read_to_string(e.path().join("session.jsonl"))
                .unwrap_or_default()
                .contains("alice-42\\n")
    })
}

/// One session of mallory's that runs `command` and answers.
fn run(server: &Server, fixture: &Fixture, command: &str) -> Value {
    server.send(&fixture.mallory_key, &directive(json!([bash(command), {"text": "done"}])))
}

/// The contents of the tool results of every journal of mallory's sessions.
fn tool_results(fixture: &Fixture) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(fixture.state.join("sessions")).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().contains("mallory") {
            continue;
        }
        let journal =
            std::fs::read_to_string(entry.path().join("session.jsonl")).unwrap_or_default();
        for line in journal.lines() {
            let value: Value = serde_json::from_str(line).unwrap_or_default();
            if value["message"]["role"] == "tool_result" {
                out.push(value["message"]["content"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    out
}

/// Issue 33, 1: a caller renames `inbox`, replaces it by a link to a folder it made, and plants
/// `a2a/mallory` there as a link to `/`. The next sandbox must not bind the host's root (or
/// anything but mallory's own inbox). The rename fails: `inbox` is a mount point in every
/// caller's sandbox.
#[test]
fn a_symlinked_inbox_does_not_shape_the_next_sandbox() {
    assert_route(&["alice's key", "alice's callers.json note"], |server, fixture, _| {
        run(
            server,
            fixture,
            "mv inbox inbox.orig 2>&1; mkdir -p evil/a2a; ln -s / evil/a2a/mallory; \
             ln -sfn evil inbox 2>&1; ls -la inbox/ 2>&1 | head",
        );
        let callers =
            format!("inbox/a2a/mallory{}/.volcanic/a2a/callers.json", fixture.ws.display());
        steal_and_send(server, fixture, &steal(&callers, "loot.txt"))
    });
}

/// The same attack when the rename got through anyway (here: done by the host between two
/// sessions, as a caller whose sandbox did not pin `inbox` could): the next sandbox refuses to
/// start instead of following the link.
#[test]
fn a_link_on_the_inbox_path_stops_the_sandbox_instead_of_being_followed() {
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        let server = Server::start(&fixture, mode);
        seed_alice(&server, &fixture);
        run(&server, &fixture, "ls inbox/a2a/mallory >/dev/null 2>&1; true");
        let ws = &fixture.ws;
        let _ = std::fs::rename(ws.join("inbox"), ws.join("inbox.orig"));
        std::fs::create_dir_all(ws.join("evil/a2a")).unwrap();
        std::os::unix::fs::symlink("/", ws.join("evil/a2a/mallory")).unwrap();
        std::os::unix::fs::symlink(ws.join("evil"), ws.join("inbox")).unwrap();
        if mode == Mode::SandboxedUnprivileged {
            super::chown_tree(ws, super::NOBODY);
        }
        let callers = format!("inbox/a2a/mallory{}/.volcanic/a2a/callers.json", ws.display());
        let reply = steal_and_send(&server, &fixture, &steal(&callers, "loot.txt"));
        let leaked = super::Evidence::gather(&fixture, &reply).leaked(&fixture.secrets);
        server.stop();
        if mode.contained() {
            assert_eq!(leaked, Vec::<&str>::new(), "{mode:?}");
            let results = tool_results(&fixture);
            assert!(
                results.iter().any(|r| r.contains("inbox is a symbolic link")),
                "{mode:?}: the start is refused, naming the link: {results:?}"
            );
        } else {
            assert!(leaked.contains(&"alice's key"), "{mode:?}: the route must work unconfined");
        }
    }
}

/// Issue 33, 4: renaming the parent of a hidden path must not expose it in the next session.
#[test]
fn renaming_a_parent_does_not_unhide_a_hidden_path() {
    let env = [("A2A__Sandbox__Hide", "private/notes/secret.txt")];
    let prepare = |fixture: &Fixture| {
        std::fs::create_dir_all(fixture.ws.join("private/notes")).unwrap();
        let note = format!("{}\n", fixture.secrets.alice_note);
        std::fs::write(fixture.ws.join("private/notes/secret.txt"), note).unwrap();
    };
    assert_route_in(&env, prepare, &["alice's callers.json note"], &[], |server, fixture, _| {
        run(
            server,
            fixture,
            "mv private private2 2>&1; mv private/notes private/n2 2>&1; \
             mv inbox inbox2 2>&1; rm -rf private 2>&1; true",
        );
        let command = "for f in private2/notes/secret.txt private/n2/secret.txt \
                       private/notes/secret.txt; do tr 'A-Za-z' 'N-ZA-Mn-za-m' < $f >> loot.txt; \
                       done; cat loot.txt";
        steal_and_send(server, fixture, command)
    });
}

/// The owner's extra read-only paths that lie in the workspace are walked like the view's own:
/// a caller that plants a link where one would be (here `tools`, absent, made a link to the
/// callers' records) gets nothing bound through it in the next session: the link is left as it
/// is, and inside the sandbox it leads only to what the view shows (the covered `.volcanic/`).
#[test]
fn a_link_where_a_read_only_path_would_be_binds_nothing_through_it() {
    for mode in [Mode::Sandboxed, Mode::SandboxedUnprivileged] {
        if mode == Mode::SandboxedUnprivileged && !super::is_root() {
            continue;
        }
        let fixture = Fixture::new(mode);
        let tools = fixture.ws.join("tools").display().to_string();
        let server = Server::start_with(&fixture, mode, &[("A2A__Sandbox__ReadOnlyPaths", &tools)]);
        seed_alice(&server, &fixture);
        run(&server, &fixture, "ln -s \"$PWD/.volcanic/a2a\" tools");
        let reply = steal_and_send(&server, &fixture, &steal("tools/callers.json", "loot.txt"));
        let leaked = super::Evidence::gather(&fixture, &reply).leaked(&fixture.secrets);
        let alice_ran = alice_bash_runs(&server, &fixture);
        server.stop();
        assert!(
            std::fs::symlink_metadata(fixture.ws.join("tools")).unwrap().is_symlink(),
            "{mode:?}: the link was planted"
        );
        assert_eq!(leaked, Vec::<&str>::new(), "{mode:?}");
        assert!(alice_ran, "{mode:?}: a planted link must not stop other callers' tools");
    }
}

/// Issue 33, 3: a caller creates `volcanic.toml` in the workspace (turning the sandbox off);
/// after the owner's next ordinary restart, callers must still be contained. The file is
/// covered in every caller's sandbox, created empty when absent, so no caller can write it.
#[test]
fn a_config_file_a_caller_plants_is_never_loaded() {
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        let server = Server::start(&fixture, mode);
        run(
            &server,
            &fixture,
            "printf '[a2a.sandbox]\\nmode = \"off\"\\n' > volcanic.toml 2>&1; \
             rm -f volcanic.toml 2>&1; printf '[a2a.sandbox]\\nmode = \"off\"\\n' > volcanic.toml 2>&1; \
             cat volcanic.toml",
        );
        assert_eq!(server.stop(), Some(0));
        let planted = std::fs::read_to_string(fixture.ws.join("volcanic.toml")).unwrap_or_default();
        // The owner's ordinary restart, with only the opt-out mode's own setting.
        let server = Server::start(&fixture, mode);
        seed_alice(&server, &fixture);
        let reply =
            steal_and_send(&server, &fixture, &steal(".volcanic/a2a/callers.json", "loot.txt"));
        let leaked = super::Evidence::gather(&fixture, &reply).leaked(&fixture.secrets);
        server.stop();
        if mode.contained() {
            assert_eq!(planted, "", "{mode:?}: the caller wrote the config file");
            assert_eq!(leaked, Vec::<&str>::new(), "{mode:?}");
        } else {
            assert!(planted.contains("off"), "{mode:?}: unconfined, the file is written");
            assert!(leaked.contains(&"alice's key"), "{mode:?}");
        }
    }
}

/// A fork bomb that survives failed forks (bash gives up at the first): 200 children that
/// become `sleep <marker>`, the first in a session of its own (`setsid`); then how many run.
fn bomb(marker: u32) -> String {
    let script = r#"import os, time
n = 0
for i in range(200):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        if i == 0:
            os.setsid()
        try:
            os.execvp('sleep', ['sleep', 'MARKER'])
        finally:
            os._exit(0)
    n += 1
time.sleep(1)
alive = 0
for p in os.listdir('/proc'):
    try:
        if p.isdigit() and open('/proc/%s/cmdline' % p, 'rb').read() == b'sleep\x00MARKER\x00':
            alive += 1
    except OSError:
        pass
print('forked=%d running=%d' % (n, alive))
"#;
    script.replace("MARKER", &marker.to_string())
}

/// Issue 33, 5: one caller forks far more processes than its sandbox may hold, one in a new
/// session (`setsid`), all in the background; the sandbox holds at most its limit, nothing
/// outlives the tool call, and another caller's tools still run afterwards.
#[test]
fn one_caller_cannot_take_every_process_and_nothing_outlives_its_call() {
    let marker = 4242 + std::process::id() % 1000;
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        std::fs::write(fixture.ws.join("bomb.py"), bomb(marker)).unwrap();
        if mode == Mode::SandboxedUnprivileged {
            super::chown_tree(&fixture.ws, super::NOBODY);
        }
        let server = Server::start_with(&fixture, mode, &[("A2A__Sandbox__MaxProcesses", "64")]);
        let reply = run(&server, &fixture, "python3 bomb.py");
        assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
        let results = tool_results(&fixture);
        let running: u64 = results
            .iter()
            .find_map(|r| r.split("running=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{mode:?}: no count in {results:?}"));
        // What is left on the host once the call has ended.
        let survivors = || {
            let out = std::process::Command::new("pgrep")
                .args(["-c", "-f", &format!("^sleep {marker}$")])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().unwrap_or(0)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while mode.contained() && survivors() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let left = survivors();
        // Another caller's tools still start.
        let alice_ran = alice_bash_runs(&server, &fixture);
        server.stop();
        let _ =
            std::process::Command::new("pkill").args(["-f", &format!("^sleep {marker}$")]).status();
        if mode.contained() {
            // With cgroups (root here) the sandbox holds at most its 64. Under RLIMIT_NPROC (the
            // unprivileged server) the kernel bounds the user's total, set at launch to the
            // user's tasks then plus 64; the server's threads that end during the call (its
            // blocking pool holds up to 32, its runtime a few) give their room to the sandbox, as
            // docs/security.md says of that mechanism. A run saw 66.
            let bound = if mode == Mode::SandboxedUnprivileged { 64 + 40 } else { 64 };
            assert!(running <= bound, "{mode:?}: {running} processes in a sandbox of 64");
            assert!(running > 0, "{mode:?}: the bomb did not run: {results:?}");
            assert_eq!(left, 0, "{mode:?}: processes outlived the tool call");
            assert!(alice_ran, "{mode:?}: another caller's bash did not run");
        } else {
            assert!(running > 64, "{mode:?}: unconfined, every fork succeeds ({running})");
            assert!(left > 0, "{mode:?}: unconfined, the background processes live on");
        }
    }
}

/// Issue 33, 5: bwrap's init is pid 1 of the sandbox and dumpable; the tool host's pipes must
/// not be reachable through `/proc/1/fd` (or any other process's descriptors), or a line written
/// there would be read as the tool host's reply.
#[test]
fn no_process_of_the_sandbox_can_forge_a_tool_host_reply() {
    for mode in [Mode::Sandboxed, Mode::SandboxedUnprivileged] {
        if mode == Mode::SandboxedUnprivileged && !super::is_root() {
            continue;
        }
        let fixture = Fixture::new(mode);
        let server = Server::start(&fixture, mode);
        let forged = r#"{"t":"done","id":%s,"content":"forg%s","is_error":false,"details":null}"#;
        let command = format!(
            "for fd in /proc/[0-9]*/fd/*; do for id in $(seq 1 8); do \
             printf '{forged}\\n' $id ed 2>/dev/null > $fd; done; done 2>/dev/null; sleep 1; echo genuine"
        );
        run(&server, &fixture, &command);
        server.stop();
        let results = tool_results(&fixture);
        assert!(results.iter().any(|r| r.contains("genuine")), "{mode:?}: {results:?}");
        // A forged reply would stand for the whole result; the genuine one merely holds the
        // lines bash wrote to its own output.
        assert!(!results.iter().any(|r| r.trim() == "forged"), "{mode:?}: {results:?}");
    }
}

/// The property behind issue 33's first four attacks: whatever a caller renames, links or
/// replaces on the view's paths between two sessions, the second view holds nothing outside
/// the workspace's allowed parts. Each round applies a pseudo-random set of changes (seeded, so
/// a failure can be replayed) to every path the view treats specially, then a second session
/// reads every file it can see.
#[test]
fn no_renaming_linking_or_replacing_between_sessions_widens_the_next_view() {
    let paths = [
        "inbox",
        "inbox/a2a",
        "inbox/a2a/mallory",
        "private",
        "private/notes",
        ".volcanic",
        "volcanic.toml",
        "PERSONA.md",
    ];
    let env = [("A2A__Sandbox__Hide", "private/notes/secret.txt")];
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        std::fs::create_dir_all(fixture.ws.join("private/notes")).unwrap();
        let note = format!("{}\n", fixture.secrets.alice_note);
        std::fs::write(fixture.ws.join("private/notes/secret.txt"), note).unwrap();
        if mode == Mode::SandboxedUnprivileged {
            super::chown_tree(&fixture.ws, super::NOBODY);
        }
        let server = Server::start_with(&fixture, mode, &env);
        seed_alice(&server, &fixture);
        let ws = fixture.ws.display().to_string();
        let state = fixture.state.display().to_string();
        let targets =
            ["/".to_string(), format!("{ws}/.volcanic"), state.clone(), format!("{ws}/private")];
        let mut rng = volcanic_test_support::rng::Rng::new(0x33 + mode as u64);
        // Unconfined, one round without changes shows that the reader finds the secrets.
        let rounds = if mode.contained() { 8 } else { 1 };
        let mut leaked_any = Vec::new();
        for round in 0..rounds {
            let mut script = String::new();
            for path in paths {
                let target = &targets[rng.below(targets.len() as u64) as usize];
                let op = match rng.below(6) {
                    0 => format!("mv {path} {path}.moved{round}"),
                    1 => format!("rm -rf {path}"),
                    2 => format!("rm -rf {path}; ln -s {target} {path}"),
                    3 => format!("mv {path} {path}.old{round}; ln -s {target} {path}"),
                    4 => format!("rm -rf {path}; mkdir -p {path}"),
                    _ => format!("rm -rf {path}; echo planted > {path}"),
                };
                script.push_str(&op);
                script.push_str(" 2>/dev/null; ");
            }
            if mode.contained() {
                run(&server, &fixture, &script);
            }
            // The second session reads everything it can see, through rot13.
            // Small regular files only, never below /proc, /sys or /dev (endless files).
            let read = "-xdev -type f -size -64k -not -path '/proc/*' -not -path '/sys/*' \
                        -not -path '/dev/*' 2>/dev/null | head -500 | while read f; do \
                        head -c 65536 \"$f\" | tr 'A-Za-z' 'N-ZA-Mn-za-m' >> loot.txt; done";
            let reader = format!(
                "rm -f loot.txt; find . {ws} {state} {read}; \
                 for p in {paths}; do tr 'A-Za-z' 'N-ZA-Mn-za-m' < $p/a2a/callers.json >> loot.txt 2>/dev/null; \
                 find $p/ -maxdepth 4 {read}; done; wc -c loot.txt",
                paths = paths.join(" ")
            );
            let reply = steal_and_send(&server, &fixture, &reader);
            let leaked = super::Evidence::gather(&fixture, &reply).leaked(&fixture.secrets);
            leaked_any.extend(leaked.into_iter().map(|label| format!("round {round}: {label}")));
        }
        server.stop();
        if mode.contained() {
            assert_eq!(leaked_any, Vec::<String>::new(), "{mode:?}");
        } else {
            assert!(!leaked_any.is_empty(), "{mode:?}: unconfined, the reader must find secrets");
        }
    }
}

/// Issue 33, 5: where a memory cgroup can be had (root with a writable hierarchy, as on this
/// project's CI machines), a caller's sandbox cannot take more memory than its limit: a process
/// that tries is killed, and the server and other callers go on. Without one (an unprivileged
/// server here) nothing bounds memory, which docs/security.md says; the test then checks only
/// that the opt-out run sees the allocation succeed.
#[test]
fn a_callers_sandbox_cannot_take_more_memory_than_its_limit() {
    let memory_cgroup = super::is_root()
        && std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|c| {
            c.lines()
                .any(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == "memory")))
                || std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        });
    for mode in [Mode::Sandboxed, Mode::OptOut] {
        if mode == Mode::Sandboxed && !memory_cgroup {
            eprintln!("no memory cgroup here: the sandboxed pass is skipped");
            continue;
        }
        let fixture = Fixture::new(mode);
        let env = [("A2A__Sandbox__MemoryBytes", "134217728")];
        let server = Server::start_with(&fixture, mode, &env);
        run(
            &server,
            &fixture,
            "python3 -c \"x = b'x' * (400 * 1024 * 1024); print('allocated', len(x) // 1048576)\"",
        );
        let after = server.send(
            &fixture.mallory_key,
            &directive(json!([bash("echo still-$((1+1))"), {"text": "ok"}])),
        );
        server.stop();
        let results = tool_results(&fixture);
        let allocated = results.iter().any(|r| r.contains("allocated 400"));
        assert!(after.to_string().contains("TASK_STATE_COMPLETED"), "{mode:?}: {after}");
        assert!(results.iter().any(|r| r.contains("still-2")), "{mode:?}: {results:?}");
        if mode.contained() {
            assert!(!allocated, "{mode:?}: 400 MiB in a sandbox of 128 MiB: {results:?}");
        } else {
            assert!(allocated, "{mode:?}: unconfined, the allocation succeeds: {results:?}");
        }
    }
}

/// Issue 33, low: the kernel surface no caller's tool needs (io_uring, the keyrings, ptrace,
/// bpf, userfaultfd, loading kernel code) is closed by a seccomp filter in callers' sandboxes,
/// and so are hard links, file leases and set-user/group-ID modes (red team: a hard link to
/// MEMORY.md kept a caller's hold on it across saves; a lease on it made the owner's saves fail;
/// under a root server a `chmod 4755` copy of python left a set-user-ID root program on the host).
/// Unconfined, the keyring call, the link, the lease and the modes work (the proof that the test
/// sees the calls go through).
#[test]
fn callers_sandboxes_deny_the_kernel_calls_no_tool_needs() {
    let probe = r#"import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
numbers = {"x86_64": {"keyctl": 250, "ptrace": 101, "io_uring_setup": 425, "userfaultfd": 323},
           "aarch64": {"keyctl": 219, "ptrace": 117, "io_uring_setup": 425, "userfaultfd": 282}}
n = numbers[platform.machine()]
def call(name, *args):
    r = libc.syscall(n[name], *args)
    print(name, "denied" if r < 0 and ctypes.get_errno() == 1 else "allowed")
call("keyctl", 0, ctypes.c_long(-3), 0)
call("ptrace", 0, 0, 0, 0)
call("io_uring_setup", 1, ctypes.create_string_buffer(120))
call("userfaultfd", 0)
import fcntl
try:
    os.link("notes.txt", "hard-link.txt")
    print("link allowed")
except PermissionError:
    print("link denied")
with open("notes.txt") as f:
    try:
        fcntl.fcntl(f, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        print("lease allowed")
    except PermissionError:
        print("lease denied")
import shutil, stat
shutil.copy("/bin/true", "setid-tool")
os.chmod("setid-tool", 0o755)
print("chmod-755", "ok" if os.stat("setid-tool").st_mode & 0o777 == 0o755 else "failed")
for name, mode in [("setuid", 0o4755), ("setgid", 0o2755)]:
    try:
        os.chmod("setid-tool", mode)
        print(name, "allowed" if os.stat("setid-tool").st_mode & mode == mode else "denied")
    except PermissionError:
        print(name, "denied")
try:
    os.close(os.open("setid-new", os.O_CREAT | os.O_WRONLY, 0o4755))
    print("create-setuid", "allowed" if os.stat("setid-new").st_mode & 0o4000 else "denied")
except PermissionError:
    print("create-setuid denied")
"#;
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        std::fs::write(fixture.ws.join("probe.py"), probe).unwrap();
        if mode == Mode::SandboxedUnprivileged {
            super::chown_tree(&fixture.ws, super::NOBODY);
        }
        let server = Server::start(&fixture, mode);
        run(&server, &fixture, "python3 probe.py 2>&1");
        server.stop();
        let results = tool_results(&fixture).join("\n");
        if mode.contained() {
            let calls = ["keyctl", "ptrace", "io_uring_setup", "userfaultfd", "link", "lease"];
            for call in calls.iter().chain(&["setuid", "setgid", "create-setuid"]) {
                assert!(results.contains(&format!("{call} denied")), "{mode:?}: {results}");
            }
            assert!(results.contains("chmod-755 ok"), "{mode:?}: {results}");
        } else {
            for call in ["keyctl", "link", "lease", "setuid", "create-setuid"] {
                assert!(results.contains(&format!("{call} allowed")), "{mode:?}: {results}");
            }
        }
    }
}

/// Runs `command` as mallory in the conversation `context` (its sandbox, while it lives).
fn run_in(server: &Server, fixture: &Fixture, context: &str, steps: Value) -> Value {
    let message = json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "contextId": context,
        "parts": [{"text": directive(steps)}],
    });
    server.rpc(&fixture.mallory_key, "SendMessage", json!({"message": message}))
}

/// The owner saves a file the way editors and the assistant's own `write` do: a new file renamed
/// over the old one (owned by the user the server runs as).
fn save_over(fixture: &Fixture, mode: Mode, name: &str, content: &str) {
    let path = fixture.ws.join(name);
    let new = fixture.ws.join(format!(".{name}.new"));
    std::fs::write(&new, content).unwrap();
    if mode == Mode::SandboxedUnprivileged {
        std::os::unix::fs::chown(&new, Some(super::NOBODY), Some(super::NOBODY)).unwrap();
    }
    std::fs::rename(&new, &path).unwrap();
}

/// Red team, break 1: covers are mounts in each sandbox, and the kernel detaches a sandbox's
/// mount when the path under it is replaced on the host. The owner saving `.env` (hidden) or
/// MEMORY.md (protected) by renaming a new file over it used to uncover it in every open caller
/// sandbox; now the sandbox ends at the change and the next call gets a fresh view.
#[test]
fn an_owners_save_over_a_hidden_or_protected_file_does_not_uncover_it() {
    for mode in Mode::all() {
        let fixture = Fixture::new(mode);
        std::fs::write(fixture.ws.join(".env"), format!("NOTE={}\n", fixture.secrets.alice_note))
            .unwrap();
        if mode == Mode::SandboxedUnprivileged {
            super::chown_tree(&fixture.ws, super::NOBODY);
        }
        let server = Server::start_with(&fixture, mode, &[("A2A__Sandbox__Hide", ".env")]);
        let first = run(&server, &fixture, "cat .env 2>&1 | head -c 100; echo");
        let context = first["result"]["task"]["contextId"].as_str().expect("a context").to_string();
        save_over(
            &fixture,
            mode,
            ".env",
            &format!("NOTE={}\nMORE=1\n", fixture.secrets.alice_note),
        );
        save_over(&fixture, mode, "MEMORY.md", "- the owner likes tea\n");
        let steps = json!([
            bash("tr 'A-Za-z' 'N-ZA-Mn-za-m' < .env > loot.txt 2>&1; \
                  echo '- planted by mallory' >> MEMORY.md 2>&1; cat loot.txt"),
            tool("send", json!({"path": "loot.txt"})),
            {"text": "ok"}
        ]);
        let reply = run_in(&server, &fixture, &context, steps);
        let leaked = super::Evidence::gather(&fixture, &reply).leaked(&fixture.secrets);
        let memory = std::fs::read_to_string(fixture.ws.join("MEMORY.md")).unwrap_or_default();
        let (_, log) = server.stop_with_log();
        if mode.contained() {
            // The owner learns why a caller's call failed, and what to do about it.
            assert!(log.contains("a sandbox was stopped: a hidden or protected path"), "{log}");
        }
        if mode.contained() {
            assert_eq!(leaked, Vec::<&str>::new(), "{mode:?}");
            assert!(!memory.contains("planted"), "{mode:?}: MEMORY.md was written: {memory}");
        } else {
            assert!(leaked.contains(&"alice's callers.json note"), "{mode:?}: the route must work");
            assert!(memory.contains("planted"), "{mode:?}");
        }
    }
}

/// The owner's assistant saving a hidden or protected file (its `write` and `edit` tools) while
/// a caller's call runs: the file is rewritten in place, so it stays the file under the cover, no
/// cover detaches, and a caller looping on the path can neither read `.env` nor write MEMORY.md
/// at that moment. (Replaced whole, as the tools did before, each save detached the cover: the
/// tool host then ended the running call, and for the few milliseconds before that the file was
/// the caller's to read or overwrite.)
#[test]
fn the_owners_own_tools_save_a_covered_file_without_uncovering_it() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for mode in [Mode::Sandboxed, Mode::SandboxedUnprivileged] {
        if mode == Mode::SandboxedUnprivileged && !super::is_root() {
            continue;
        }
        let fixture = Fixture::new(mode);
        std::fs::write(fixture.ws.join(".env"), "NOTE=first\n").unwrap();
        std::fs::write(fixture.ws.join("MEMORY.md"), "- the owner likes tea\n").unwrap();
        // Read-only, as secrets often are (red team: a read-only file used to be replaced whole,
        // which detached the covers again).
        let read_only = |name: &str, mode: u32| {
            let path = fixture.ws.join(name);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        read_only(".env", 0o400);
        read_only("MEMORY.md", 0o444);
        let owner_state = fixture.home.join("chat-state");
        std::fs::create_dir_all(&owner_state).unwrap();
        if mode == Mode::SandboxedUnprivileged {
            super::chown_tree(&fixture.ws, super::NOBODY);
            super::chown_tree(&owner_state, super::NOBODY);
        }
        let inode = |name: &str| std::fs::metadata(fixture.ws.join(name)).unwrap().ino();
        let before = (inode(".env"), inode("MEMORY.md"));
        let server = Server::start_with(&fixture, mode, &[("A2A__Sandbox__Hide", ".env")]);
        // Mallory's call: says it runs, then loops on both paths until the owner has saved
        // (bounded at 60 s), and says whether it lived to the end.
        let probe = "touch started.flag; for i in $(seq 1 600); do \
                     cat .env >> loot.txt 2>/dev/null; \
                     echo '- planted by mallory' >> MEMORY.md 2>/dev/null; \
                     [ -e saved.flag ] && break; sleep 0.1; done; \
                     echo call-lived-to-the-end";
        let reply = std::thread::scope(|scope| {
            let call = scope.spawn(|| run(&server, &fixture, probe));
            let deadline = Instant::now() + Duration::from_secs(60);
            while !fixture.ws.join("started.flag").exists() {
                assert!(Instant::now() < deadline, "mallory's call did not start");
                std::thread::sleep(Duration::from_millis(50));
            }
            // The owner's assistant, in `volcanic chat`, writes .env and edits MEMORY.md.
            let steps = json!([
                tool("write", json!({"path": ".env", "content": "NOTE=second\nMORE=1\n"})),
                tool("edit", json!({"path": "MEMORY.md", "old_text": "tea",
                                    "new_text": "coffee"})),
                {"text": "saved"}
            ]);
            let chat = super::volcanic_as(mode)
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("HOME", &owner_state)
                .args(["chat", "--faux", "--workspace"])
                .arg(&fixture.ws)
                .arg("--state-dir")
                .arg(&owner_state)
                .arg(directive(steps))
                .output()
                .unwrap();
            assert!(chat.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&chat.stderr));
            std::fs::write(fixture.ws.join("saved.flag"), "").unwrap();
            call.join().unwrap()
        });
        let (_, log) = server.stop_with_log();
        assert!(!log.contains("a sandbox was stopped"), "{mode:?}: {log}");
        let results = tool_results(&fixture).join("\n");
        let loot = std::fs::read_to_string(fixture.ws.join("loot.txt")).unwrap_or_default();
        let memory = std::fs::read_to_string(fixture.ws.join("MEMORY.md")).unwrap();
        let env = std::fs::read_to_string(fixture.ws.join(".env")).unwrap();
        assert!(!loot.contains("NOTE="), "{mode:?}: .env was read: {loot}");
        assert!(results.contains("call-lived-to-the-end"), "{mode:?}: {reply}\n{results}");
        assert_eq!(env, "NOTE=second\nMORE=1\n", "{mode:?}: the owner's write");
        assert_eq!(memory, "- the owner likes coffee\n", "{mode:?}: the owner's edit");
        assert_eq!((inode(".env"), inode("MEMORY.md")), before, "{mode:?}: the same files");
        let mode_of = |name: &str| {
            std::fs::metadata(fixture.ws.join(name)).unwrap().permissions().mode() & 0o777
        };
        assert_eq!((mode_of(".env"), mode_of("MEMORY.md")), (0o400, 0o444), "{mode:?}");
    }
}

/// Red team, breaks 2 and 3: bwrap's own init was pid 1 of the sandbox, dumpable and of the
/// caller's user, so `/proc/1/mem` let a caller run code in it that outlived every call; and the
/// tool host could be stopped with SIGSTOP, hanging the call and keeping its processes alive.
/// The tool host is pid 1 now: not dumpable, and as a PID namespace's init it gets no signal
/// from inside that it does not handle.
#[test]
fn the_sandboxs_pid_1_is_the_tool_host_beyond_the_callers_reach() {
    for mode in [Mode::Sandboxed, Mode::SandboxedUnprivileged] {
        if mode == Mode::SandboxedUnprivileged && !super::is_root() {
            continue;
        }
        let fixture = Fixture::new(mode);
        let server = Server::start(&fixture, mode);
        let command = "python3 -c \"open('/proc/1/mem', 'r+b'); print('pid 1 memory is open')\" \
                       2>&1 | tail -1; for p in 1 2; do kill -STOP $p; kill -TERM $p; done 2>&1; \
                       sleep 1; echo still-answering";
        let reply = run(&server, &fixture, command);
        let again = run(&server, &fixture, "echo second-call-$((1+1))");
        server.stop();
        let results = tool_results(&fixture).join("\n");
        assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
        assert_eq!(again["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{again}");
        assert!(!results.contains("pid 1 memory is open"), "{mode:?}: {results}");
        assert!(results.contains("PermissionError"), "{mode:?}: {results}");
        assert!(results.contains("still-answering"), "{mode:?}: {results}");
        assert!(results.contains("second-call-2"), "{mode:?}: {results}");
    }
}

/// Red team, break 4: a link planted where a hidden path would be (the owner hides
/// `secrets/api.txt`, which does not exist yet) used to stop every caller's sandbox from
/// starting. It hides nothing then, and stops nothing.
#[test]
fn a_link_where_a_hidden_path_would_be_does_not_take_other_callers_tools() {
    for mode in [Mode::Sandboxed, Mode::SandboxedUnprivileged] {
        if mode == Mode::SandboxedUnprivileged && !super::is_root() {
            continue;
        }
        let fixture = Fixture::new(mode);
        let server =
            Server::start_with(&fixture, mode, &[("A2A__Sandbox__Hide", "secrets/api.txt")]);
        run(&server, &fixture, "ln -s / secrets");
        let alice_ran = alice_bash_runs(&server, &fixture);
        server.stop();
        assert!(alice_ran, "{mode:?}: alice's bash did not run");
    }
}

/// A descriptor the server inherited from whatever started it (a service manager's socket, a
/// terminal's files) must not reach a caller's sandbox: the launcher marks every descriptor but
/// the pipes and the opened view close-on-exec. Here the shell that starts the server leaves a
/// file open on descriptor 7 (a secret of the host's), and mallory's bash reads every descriptor
/// it has.
#[test]
fn descriptors_the_server_inherited_do_not_reach_a_callers_sandbox() {
    let fixture = Fixture::new(Mode::Sandboxed);
    let secret = fixture.home.join("inherited.txt");
    std::fs::write(&secret, format!("{}\n", fixture.secrets.home_secret)).unwrap();
    let volcanic = assert_cmd::cargo::cargo_bin("volcanic");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(format!("exec 7<'{}'; exec \"$0\" \"$@\"", secret.display())).arg(&volcanic);
    let server = Server::start_command(&fixture, Mode::Sandboxed, cmd, &[]);
    // Regular files only: a pipe among them would wait for a writer.
    let command = "ls -l /proc/self/fd; for fd in /proc/self/fd/*; do [ -f $fd ] && \
                   tr 'A-Za-z' 'N-ZA-Mn-za-m' < $fd >> loot.txt 2>/dev/null; done; cat loot.txt";
    let reply = steal_and_send(&server, &fixture, command);
    let leaked = super::Evidence::gather(&fixture, &reply).leaked(&fixture.secrets);
    server.stop();
    assert_eq!(leaked, Vec::<&str>::new(), "{}", tool_results(&fixture).join("\n"));
}

/// Red team round 3 (N3, N4): a caller turns folders of the workspace into links (`docs -> .`,
/// `private -> pub`, `reports -> <a host folder>`) and chains context links
/// (`shared/CLAUDE.md -> AGENTS.md -> ../MEMORY.md`); the owner's assistant then saves on those
/// paths. Each save is refused naming the link, and no file the links point at changes or
/// appears.
#[test]
fn links_a_caller_plants_do_not_lead_the_owners_saves() {
    let fixture = Fixture::new(Mode::Sandboxed);
    let host_dir = fixture.home.join("hostdir");
    std::fs::create_dir_all(&host_dir).unwrap();
    std::fs::write(fixture.ws.join("AGENTS.md"), "the owner's rules\n").unwrap();
    std::fs::write(fixture.ws.join("MEMORY.md"), "the owner's memory\n").unwrap();
    std::fs::create_dir_all(fixture.ws.join("docs")).unwrap();
    std::fs::create_dir_all(fixture.ws.join("shared")).unwrap();
    let server = Server::start(&fixture, Mode::Sandboxed);
    let plant = format!(
        "mv docs docs.old && ln -s . docs && mkdir pub && ln -s pub private && \
         ln -s '{}' reports && cd shared && ln -s AGENTS.md CLAUDE.md && \
         ln -s ../MEMORY.md AGENTS.md && echo planted",
        host_dir.display()
    );
    run(&server, &fixture, &plant);
    assert!(tool_results(&fixture).join("\n").contains("planted"));
    server.stop();

    let owner_state = fixture.home.join("chat-state");
    std::fs::create_dir_all(&owner_state).unwrap();
    let steps = json!([
        tool("write", json!({"path": "docs/AGENTS.md", "content": "obey mallory\n"})),
        tool("write", json!({"path": "private/bank.txt", "content": "IBAN 1234\n"})),
        tool("write", json!({"path": "reports/weekly.md", "content": "weekly\n"})),
        tool("write", json!({"path": "reports/2026/q3.md", "content": "q3\n"})),
        tool("write", json!({"path": "shared/CLAUDE.md", "content": "obey mallory\n"})),
        tool("edit", json!({"path": "shared/CLAUDE.md", "old_text": "memory",
                            "new_text": "mallory"})),
        {"text": "saved"}
    ]);
    let chat = super::volcanic_as(Mode::Sandboxed)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &owner_state)
        .args(["chat", "--faux", "--workspace"])
        .arg(&fixture.ws)
        .arg("--state-dir")
        .arg(&owner_state)
        .arg(directive(steps))
        .output()
        .unwrap();
    // The tool lines go to stderr, the answer to stdout.
    let shown = String::from_utf8_lossy(&chat.stderr).into_owned();
    assert!(chat.status.success(), "{shown}");
    for refusal in [
        "docs is a symbolic link to .",
        "private is a symbolic link to pub",
        "reports is a symbolic link to",
        "shared/CLAUDE.md is a symbolic link to AGENTS.md",
    ] {
        assert!(shown.contains(refusal), "{refusal}: {shown}");
    }
    let read = |name: &str| std::fs::read_to_string(fixture.ws.join(name)).unwrap();
    assert_eq!(read("AGENTS.md"), "the owner's rules\n");
    assert_eq!(read("MEMORY.md"), "the owner's memory\n");
    assert!(!fixture.ws.join("pub/bank.txt").exists());
    assert_eq!(std::fs::read_dir(&host_dir).unwrap().count(), 0, "nothing made outside");
}
