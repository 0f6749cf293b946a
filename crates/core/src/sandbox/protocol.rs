//! The messages between a session and its tool host: one JSON value per line, each way.
//!
//! The session (outside the sandbox) sends [`Request`]s on the host's stdin; the host (inside)
//! answers with [`Reply`]s on its stdout. Calls are numbered by the session and may overlap.
//!
//! The host runs next to processes the caller controls, so the session treats every reply as
//! untrusted: lines are capped ([`MAX_LINE_BYTES`]), unknown ids are dropped, and nothing in a
//! reply is more than a tool result (which the run loop redacts like any other).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::ToolLimits;

/// Longest line either side reads. A `write` call carries its whole content and a `send` file
/// comes back base64-encoded, so this bounds both.
pub(crate) const MAX_LINE_BYTES: usize = 96 * 1024 * 1024;

/// From the session to the host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Request {
    /// The first line: how to run tools. The host answers [`Reply::Ready`].
    Init { cwd: String, spill_dir: String, limits: ToolLimits, env: Vec<(String, String)> },
    /// Runs one built-in tool.
    Call { id: u64, tool: String, call_id: String, args: Value },
    /// Reads a file for the `send` tool: a regular file inside `cwd` of at most `max_bytes`.
    ReadFile { id: u64, path: String, max_bytes: u64 },
    /// Stops a call (the run was aborted).
    Cancel { id: u64 },
}

/// From the host to the session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Reply {
    Ready,
    /// Partial output of a running call.
    Update {
        id: u64,
        text: String,
    },
    /// A call's result.
    Done {
        id: u64,
        content: String,
        is_error: bool,
        details: Value,
    },
    /// A call that failed as a tool error (its message goes to the model).
    Failed {
        id: u64,
        message: String,
    },
    /// A file read for `send`: its name, how the tool shows its path, and its bytes (base64).
    File {
        id: u64,
        name: String,
        shown: String,
        bytes: String,
    },
}

impl Reply {
    /// The call a reply belongs to (`None` for [`Reply::Ready`]).
    pub(crate) fn id(&self) -> Option<u64> {
        match self {
            Reply::Ready => None,
            Reply::Update { id, .. }
            | Reply::Done { id, .. }
            | Reply::Failed { id, .. }
            | Reply::File { id, .. } => Some(*id),
        }
    }
}

/// A message as one line.
pub(crate) fn to_line<T: Serialize>(message: &T) -> Vec<u8> {
    // Serializing these types cannot fail: every field is a string, number, bool or JSON value.
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_and_replies_round_trip_as_tagged_lines() {
        let call = Request::Call {
            id: 7,
            tool: "read".into(),
            call_id: "c1".into(),
            args: json!({"path": "a.txt"}),
        };
        let line = to_line(&call);
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            "{\"t\":\"call\",\"id\":7,\"tool\":\"read\",\"call_id\":\"c1\",\"args\":{\"path\":\"a.txt\"}}\n"
        );
        let back: Request = serde_json::from_slice(&line).unwrap();
        assert!(matches!(back, Request::Call { id: 7, .. }));

        let done: Reply = serde_json::from_str(
            r#"{"t":"done","id":3,"content":"x","is_error":false,"details":null}"#,
        )
        .unwrap();
        assert_eq!(done.id(), Some(3));
        assert_eq!(serde_json::from_str::<Reply>(r#"{"t":"ready"}"#).unwrap().id(), None);
    }
}
