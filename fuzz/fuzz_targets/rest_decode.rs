//! The REST request decoder: verb, path, query and body, with the version read the way the server
//! reads it (no `A2A-Version`: the path and the body's shape decide), so that 0.3 bodies reach
//! the 0.3 converters. Input: `VERB PATH[?QUERY]`, a newline, then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volcanic_a2a::binding::rest;
use volcanic_a2a::request::Request;

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (String::from_utf8_lossy(&data[..at]).into_owned(), &data[at + 1..]),
        None => (String::from_utf8_lossy(data).into_owned(), &[][..]),
    };
    let (verb, target) = head.split_once(' ').unwrap_or(("GET", head.as_str()));
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    let version = rest::version(None, path, body);
    match rest::decode(version, verb, path, query, body) {
        Ok(request) => {
            // Ids taken from the path are never empty.
            let ids: Vec<&str> = match &request {
                Request::GetTask(r) => vec![&r.id],
                Request::CancelTask(r) => vec![&r.id],
                Request::SubscribeToTask { request: r, .. } => vec![&r.id],
                Request::ListPushConfigs(r) => vec![&r.task_id],
                Request::GetPushConfig(r) => vec![&r.task_id, &r.id],
                Request::DeletePushConfig(r) => vec![&r.task_id, &r.id],
                Request::CreatePushConfig { config, .. } => vec![&config.task_id],
                Request::SendMessage(_)
                | Request::SendStreamingMessage(_)
                | Request::ListTasks(_)
                | Request::GetExtendedAgentCard => vec![],
            };
            assert!(ids.iter().all(|id| !id.is_empty()), "empty id from {path:?}");
        }
        Err(error) => {
            let (status, _) = rest::encode_error(version, &error);
            assert!((400..600).contains(&status), "error status {status}");
        }
    }
});
