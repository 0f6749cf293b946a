//! `volcanic usage` and the caps with the real binary (issue 23): the caps from callers.json and
//! from `A2A__Limits__*`, a send refused over a cap, and the owner's view of the day's usage
//! while the server runs and after it stopped.

use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};

use crate::containment::{Fixture, Mode, Server, directive};

/// Gives alice a daily token cap.
fn cap_alice(fixture: &Fixture, tokens: u64) {
    let path = fixture.ws.join(".volcanic/a2a/callers.json");
    let mut callers: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for caller in &mut callers {
        if caller["name"] == "alice" {
            caller["limits"] = json!({"tokensPerDay": tokens, "requestsPerMinute": 100});
        }
    }
    std::fs::write(&path, serde_json::to_vec(&callers).unwrap()).unwrap();
}

/// `volcanic usage` as the owner: exit code, stdout, stderr.
fn usage(fixture: &Fixture, extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::cargo_bin("volcanic").unwrap();
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &fixture.home)
        .arg("usage")
        .args(extra)
        .arg("--workspace")
        .arg(&fixture.ws)
        .arg("--state-dir")
        .arg(&fixture.state);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn tokens_of(report: &Value, name: &str) -> u64 {
    let callers = report["callers"].as_array().unwrap();
    let caller = callers.iter().find(|c| c["name"] == name).unwrap();
    caller["tokens"].as_u64().unwrap()
}

#[test]
fn usage_shows_each_callers_day_against_its_caps_and_a_send_over_a_cap_is_refused() {
    let fixture = Fixture::new(Mode::Sandboxed);
    cap_alice(&fixture, 1000);
    let env = [("A2A__Limits__TokensPerDay", "50000"), ("A2A__Limits__TimeZone", "Europe/Berlin")];
    let server = Server::start_with(&fixture, Mode::Sandboxed, &env);
    let costly = directive(json!([{"usage": {"input": 900, "output": 250}}, {"text": "done"}]));
    let reply = server.send(&fixture.secrets.alice_key, &costly);
    assert_eq!(reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let refused = server.send(&fixture.secrets.alice_key, "one more");
    assert_eq!(refused["error"]["data"][0]["reason"], "DAILY_LIMIT_REACHED", "{refused}");
    let mallory = server.send(&fixture.mallory_key, "hello");
    assert_eq!(mallory["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED");

    // While the server runs: the day's file follows within a second or so.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let report = loop {
        let (code, stdout, stderr) = usage(&fixture, &["--json"], &env);
        assert_eq!(code, 0, "{stderr}");
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        if tokens_of(&report, "alice") == 1150 || std::time::Instant::now() > deadline {
            break report;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(tokens_of(&report, "alice"), 1150, "{report}");
    assert_eq!(report["timeZone"], "Europe/Berlin");
    assert_eq!(report["total"]["limits"]["tokensPerDay"], 50000);
    let alice =
        report["callers"].as_array().unwrap().iter().find(|c| c["name"] == "alice").unwrap();
    assert_eq!(alice["limits"]["tokensPerDay"], 1000, "{report}");
    // Both of alice's sends were requests; the refused one counts too.
    assert_eq!(alice["usage"]["requests"], 2, "{report}");
    // The workspace's A2A records on disk: one task file each for alice's and mallory's sends.
    let tasks = std::fs::read_dir(fixture.ws.join(".volcanic/a2a/tasks")).unwrap().count();
    assert_eq!(report["disk"]["tasks"], json!(tasks), "{report}");
    assert!(report["disk"]["sessions"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(server.stop(), Some(0));

    // After the server stopped: the same figures, as text.
    let (code, stdout, stderr) = usage(&fixture, &[], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("alice: 2 requests, 1,150 tokens of 1,000 (115%)"), "{stdout}");
    assert!(stdout.contains("at most 100 requests/min"), "{stdout}");
    assert!(stdout.contains("all callers:"), "{stdout}");
    assert!(stdout.contains(&format!("A2A records: {tasks} tasks (")), "{stdout}");
    // A bad time zone is a configuration error (exit 2) naming the variable.
    let (code, _, stderr) = usage(&fixture, &[], &[("A2A__Limits__TimeZone", "Mars/Base")]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("A2A__Limits__TimeZone"), "{stderr}");
}
