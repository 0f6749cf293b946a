//! `volcanic a2a` against hostile agents: an agent that redirects the call (with the key and the
//! message) to another origin or to a cloud metadata address, a card that redirects elsewhere,
//! and a stream whose one event never ends. Each fake agent is a raw HTTP server on 127.0.0.1
//! that records what reaches it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{KEY, a2a};

/// One request a fake agent received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// What a fake agent answers on a path.
#[derive(Clone)]
enum Answer {
    /// A whole answer: status, extra headers, body.
    Fixed(u16, Vec<(&'static str, String)>, String),
    /// An SSE stream that begins one event and never ends it: `chunk` bytes every `every`, until
    /// the client leaves or a minute has passed.
    EndlessEvent { chunk: usize, every: Duration },
}

fn ok(body: String) -> Answer {
    Answer::Fixed(200, Vec::new(), body)
}

fn redirect(status: u16, location: String) -> Answer {
    Answer::Fixed(status, vec![("Location", location)], String::new())
}

/// A fake agent on 127.0.0.1.
struct Fake {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    /// `routes` maps a path to its answer; other paths get 404.
    fn start(routes: Vec<(String, Answer)>) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        Fake::serve(listener, base, routes)
    }

    /// A listener whose base URL the routes can name (a card that points at its own agent).
    fn bind() -> (TcpListener, String) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        (listener, base)
    }

    fn serve(listener: TcpListener, base: String, routes: Vec<(String, Answer)>) -> Fake {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        // Lives as long as the test process; every answer closes its connection.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (routes, log) = (routes.clone(), log.clone());
                std::thread::spawn(move || answer(stream, &routes, &log));
            }
        });
        Fake { base, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn answer(mut stream: TcpStream, routes: &[(String, Answer)], log: &Mutex<Vec<Seen>>) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let Some(seen) = read_request(&mut stream) else { return };
    let found = routes.iter().find(|(path, _)| *path == seen.path).map(|(_, a)| a.clone());
    log.lock().unwrap().push(seen);
    // The client may have given up already; what it saw is what the test checks.
    match found.unwrap_or_else(|| Answer::Fixed(404, Vec::new(), String::new())) {
        Answer::Fixed(status, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            let _ = stream.write_all(format!("{head}\r\n{body}").as_bytes());
        }
        Answer::EndlessEvent { chunk, every } => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"";
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            let piece = vec![b'x'; chunk];
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(60) {
                if stream.write_all(&piece).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
    }
}

/// The head and the body (as long as Content-Length says) of one request.
fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = stream.read(&mut buffer).ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
        let mut lines = head.lines();
        let mut start = lines.next()?.split_whitespace();
        let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        if body.len() >= length {
            return Some(Seen { method, path, headers, body: body.to_owned() });
        }
    }
}

/// A card whose one interface is JSON-RPC 1.0 at `rpc`.
fn card(rpc: &str) -> Answer {
    ok(json!({"name": "hostile", "version": "1", "supportedInterfaces": [
        {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
    .to_string())
}

/// A JSON-RPC answer to SendMessage: a message saying `text`.
fn reply(text: &str) -> Answer {
    ok(json!({"jsonrpc": "2.0", "id": 1, "result": {"message": {
        "messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": text}]}}})
    .to_string())
}

const CARD: &str = "/.well-known/agent-card.json";

/// Where stolen calls land: another origin (another port) that answers like an agent.
fn thief() -> Fake {
    Fake::start(vec![
        ("/steal".into(), reply("stolen")),
        (CARD.into(), card("http://127.0.0.1:9/unused")),
    ])
}

/// An agent whose interface redirects (with `status`) to `location`.
fn redirecting(status: u16, location: &str) -> Fake {
    let (listener, base) = Fake::bind();
    let routes = vec![
        (CARD.into(), card(&format!("{base}/rpc"))),
        ("/rpc".into(), redirect(status, location.to_owned())),
    ];
    Fake::serve(listener, base, routes)
}

#[test]
fn a2a_redirect_to_another_origin_is_refused_and_neither_key_nor_message_leaves() {
    let thief = thief();
    let dir = tempfile::tempdir().unwrap();
    for status in [307, 308, 302] {
        let agent = redirecting(status, &format!("{}/steal", thief.base));
        let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, "my secret plans"]);
        assert_eq!(run.code, 1, "{status}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "volcanic: {}/rpc redirected to {}/steal, another origin",
                agent.base, thief.base
            )),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("pass --follow-redirects"), "{}", run.stderr);
        assert_eq!(agent.seen().len(), 2, "the card and the call");
    }
    assert!(thief.seen().is_empty(), "the other origin was called: {:?}", thief.seen());
}

#[test]
fn a2a_follow_redirects_goes_to_another_origin_without_the_key() {
    let thief = thief();
    let dir = tempfile::tempdir().unwrap();
    let agent = redirecting(307, &format!("{}/steal", thief.base));
    for auth in [&[][..], &["--bearer"][..]] {
        let mut args = vec!["send", agent.base.as_str(), "hello", "--follow-redirects"];
        args.extend_from_slice(auth);
        let run = a2a(dir.path(), Some(KEY), &args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "stolen");
    }
    let seen = thief.seen();
    assert_eq!(seen.len(), 2);
    for call in &seen {
        // A 307 keeps the method and the message, which the user chose to follow; never the key.
        assert_eq!((call.method.as_str(), call.path.as_str()), ("POST", "/steal"));
        assert!(call.body.contains("hello"), "{call:?}");
        assert_eq!(call.header("x-api-key"), None, "{call:?}");
        assert_eq!(call.header("authorization"), None, "{call:?}");
        assert!(!format!("{call:?}").contains(KEY), "{call:?}");
    }
    // At home the key was sent, both ways.
    let home: Vec<Seen> = agent.seen().into_iter().filter(|s| s.path == "/rpc").collect();
    assert_eq!(home[0].header("x-api-key"), Some(KEY));
    assert_eq!(home[1].header("authorization"), Some(format!("Bearer {KEY}").as_str()));
}

#[test]
fn a2a_redirect_within_the_origin_is_followed_with_the_key() {
    let (listener, base) = Fake::bind();
    let routes = vec![
        (CARD.into(), card(&format!("{base}/rpc"))),
        ("/rpc".into(), redirect(308, "/rpc/v2".into())),
        ("/rpc/v2".into(), reply("moved, still here")),
    ];
    let agent = Fake::serve(listener, base, routes);
    let dir = tempfile::tempdir().unwrap();
    let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, "hello"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "moved, still here");
    let moved = agent.seen().into_iter().find(|s| s.path == "/rpc/v2").unwrap();
    assert_eq!(moved.header("x-api-key"), Some(KEY));
    assert!(moved.body.contains("hello"));
}

#[test]
fn a2a_redirect_to_a_metadata_address_is_refused_even_when_following_redirects() {
    let dir = tempfile::tempdir().unwrap();
    // None of these is ever connected to: the refusal comes before.
    for target in [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[fe80::1]:8080/",
    ] {
        let agent = redirecting(307, target);
        let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, "hi", "--follow-redirects"]);
        assert_eq!(run.code, 1, "{target}: {}", run.stderr);
        assert!(
            run.stderr.contains("a link-local or cloud metadata address, which is never followed"),
            "{target}: {}",
            run.stderr
        );
    }
}

#[test]
fn a2a_card_redirected_to_another_origin_is_refused_and_never_gets_the_key() {
    let (listener, other) = Fake::bind();
    let elsewhere = Fake::serve(
        listener,
        other.clone(),
        vec![(CARD.into(), card(&format!("{other}/rpc"))), ("/rpc".into(), reply("elsewhere"))],
    );
    let agent = Fake::start(vec![(CARD.into(), redirect(302, format!("{other}{CARD}")))]);
    let dir = tempfile::tempdir().unwrap();
    // By default the card's redirect is not followed.
    let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, "hi"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("another origin"), "{}", run.stderr);
    assert!(elsewhere.seen().is_empty());
    // Followed, the card is the other origin's word: its interface does not get the key.
    let run = a2a(dir.path(), Some(KEY), &["send", &agent.base, "hi", "--follow-redirects"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("your key is not sent to the interface it names"),
        "{}",
        run.stderr
    );
    assert!(elsewhere.seen().iter().all(|s| s.path == CARD), "{:?}", elsewhere.seen());
    // Without a key there is nothing to withhold.
    let run = a2a(dir.path(), None, &["send", &agent.base, "hi", "--follow-redirects"]);
    assert_eq!((run.code, run.stdout.trim()), (0, "elsewhere"), "{}", run.stderr);
}

/// `volcanic a2a send --stream` against an agent whose stream sends one event that never ends,
/// `chunk` bytes every `every`; how long the client took to give up, and its stderr.
fn follow_endless_event(chunk: usize, every: Duration, extra: &[&str]) -> (Duration, String) {
    let (listener, base) = Fake::bind();
    let routes = vec![
        (CARD.into(), card(&format!("{base}/rpc"))),
        ("/rpc".into(), Answer::EndlessEvent { chunk, every }),
    ];
    let agent = Fake::serve(listener, base, routes);
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["send", agent.base.as_str(), "hi", "--stream"];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let run = a2a(dir.path(), Some(KEY), &args);
    let took = started.elapsed();
    assert_eq!(run.code, 1, "{}", run.stderr);
    (took, run.stderr)
}

#[test]
fn a2a_stream_whose_event_trickles_forever_is_given_up_after_the_stall_timeout() {
    let (took, stderr) =
        follow_endless_event(1, Duration::from_millis(100), &["--stall-timeout", "2"]);
    assert!(
        stderr.contains(
            "the agent began an event and stopped sending it (less than 64 KiB of it in 2 s)"
        ),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a2a_stream_whose_event_grows_forever_is_cut_at_the_event_cap() {
    let (took, stderr) = follow_endless_event(1 << 20, Duration::ZERO, &[]);
    assert!(stderr.contains("a stream event is larger than 134217728 bytes"), "{stderr}");
    assert!(took < Duration::from_secs(50), "took {took:?}");
}
