//! `volcanic a2a` errors (issue 24): each says what happened and what to do, with the exit code of
//! the command contract (1 a failure reported, 2 bad usage), and none prints the key. Errors our
//! server cannot be made to answer (VersionNotSupported, broken cards) come from a canned agent.

use std::io::{Read, Write};
use std::net::TcpListener;

use crate::client::{Agent, KEY, a2a};

/// A fake agent on 127.0.0.1: each path gets a fixed answer (status, body), anything else 404.
/// `routes` is given the agent's base URL, so that a card can point at the agent itself.
pub(crate) fn canned(routes: impl FnOnce(&str) -> Vec<(&'static str, u16, String)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let routes = routes(&base);
    // Lives as long as the test process; every answer closes its connection.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // The head, then as much body as Content-Length says.
            while let Ok(n) = stream.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
            }
            let text = String::from_utf8_lossy(&request).to_string();
            let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let (status, body) = routes
                .iter()
                .find(|(route, _, _)| *route == path)
                .map(|(_, status, body)| (*status, body.clone()))
                .unwrap_or((404, String::new()));
            let answer = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            // The client may have given up; the test's assertions say so.
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    base
}

fn card_with(base_hint: &str) -> String {
    serde_json::json!({"name": "canned", "version": "1", "supportedInterfaces": [
        {"url": format!("{base_hint}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
    .to_string()
}

#[test]
fn a2a_unreachable_agent_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let run = a2a(dir.path(), Some(KEY), &["get", &format!("http://127.0.0.1:{port}"), "t-1"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with(&format!(
            "volcanic: cannot reach http://127.0.0.1:{port}/.well-known/agent-card.json: "
        )),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("is the agent running"), "{}", run.stderr);
}

#[test]
fn a2a_missing_or_wrong_key_is_401_with_what_to_do() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    let missing = a2a(dir.path(), None, &["send", &agent.base, "hi"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("refused the call (HTTP 401): it needs a key"),
        "{}",
        missing.stderr
    );
    assert!(missing.stderr.contains("--key or VOLCANIC_A2A_KEY"), "{}", missing.stderr);
    for flags in
        [&["--key", "k_wrong_client_key_24"][..], &["--key", "k_wrong_client_key_24", "--bearer"]]
    {
        let mut args = vec!["get", agent.base.as_str(), "t-1", "--binding", "rest"];
        args.extend_from_slice(flags);
        let wrong = a2a(dir.path(), None, &args);
        assert_eq!(wrong.code, 1);
        assert!(wrong.stderr.contains("(HTTP 401): the key was not accepted"), "{}", wrong.stderr);
    }
    // The key from the environment is not shown in the help either.
    let help = a2a(dir.path(), Some(KEY), &["send", "--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("VOLCANIC_A2A_KEY"), "{}", help.stdout);
}

#[test]
fn a2a_unknown_task_is_task_not_found_on_every_interface() {
    let agent = Agent::start();
    let dir = tempfile::tempdir().unwrap();
    for (binding, version) in
        [("jsonrpc", "1.0"), ("rest", "1.0"), ("jsonrpc", "0.3"), ("rest", "0.3")]
    {
        for command in ["get", "cancel", "subscribe"] {
            let args = [
                command,
                &agent.base,
                "no-such-task",
                "--binding",
                binding,
                "--a2a-version",
                version,
            ];
            let run = a2a(dir.path(), Some(KEY), &args);
            assert_eq!(run.code, 1, "{command} {binding} {version}: {}", run.stderr);
            assert!(
                run.stderr.starts_with("volcanic: the agent answered TaskNotFound: "),
                "{command} {binding} {version}: {}",
                run.stderr
            );
            assert!(run.stderr.contains("check the task id"), "{}", run.stderr);
        }
    }
}

#[test]
fn a2a_version_not_supported_names_the_fix() {
    let refused = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32009,"message":"Version 1.0 is not supported; this agent speaks 0.3"}}"#;
    let agent = canned(|base| {
        vec![("/.well-known/agent-card.json", 200, card_with(base)), ("/rpc", 200, refused.into())]
    });
    let dir = tempfile::tempdir().unwrap();
    let run = a2a(dir.path(), Some(KEY), &["send", &agent, "hi"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("the agent answered VersionNotSupported: Version 1.0 is not supported"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--a2a-version 1.0 or --a2a-version 0.3"), "{}", run.stderr);
}

#[test]
fn a2a_bad_cards_and_missing_interfaces_are_reported() {
    let agent = canned(|_| {
        vec![
        ("/.well-known/agent-card.json", 200, "<html>not a card</html>".into()),
        ("/empty/.well-known/agent-card.json", 200, r#"{"name": "x"}"#.into()),
        ("/grpc/.well-known/agent-card.json", 200, r#"{"supportedInterfaces": [{"url": "http://h", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]}"#.into()),
        ("/v1/.well-known/agent-card.json", 200, card_with("http://127.0.0.1:9")),
    ]
    });
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("", "not JSON"),
        ("/empty", "it lists no interface"),
        ("/grpc", "none of its interfaces is JSON-RPC or HTTP+JSON"),
        ("/missing", "HTTP 404"),
    ];
    for (path, reason) in cases {
        let run = a2a(dir.path(), Some(KEY), &["send", &format!("{agent}{path}"), "hi"]);
        assert_eq!(run.code, 1, "{path}: {}", run.stderr);
        assert!(
            run.stderr.starts_with(&format!(
                "volcanic: bad agent card at {agent}{path}/.well-known/agent-card.json: "
            )),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains(reason), "{path}: {}", run.stderr);
        assert!(run.stderr.contains("is this an A2A agent?"), "{}", run.stderr);
    }
    let forced =
        a2a(dir.path(), Some(KEY), &["send", &format!("{agent}/v1"), "hi", "--a2a-version", "0.3"]);
    assert_eq!(forced.code, 2, "{}", forced.stderr);
    assert!(
        forced.stderr.contains("the agent offers no A2A 0.3 interface (it offers: jsonrpc 1.0)"),
        "{}",
        forced.stderr
    );
}

#[test]
fn a2a_bad_usage_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [&[&str]; 4] = [
        &["send", "ftp://example.com", "hi"],
        &["send", "http://127.0.0.1:9", "hi", "--file", "no-such-file.txt"],
        &["send", "http://127.0.0.1:9"],
        &["get", "http://127.0.0.1:9", "t", "--binding", "grpc"],
    ];
    for args in cases {
        let run = a2a(dir.path(), Some(KEY), args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
}
