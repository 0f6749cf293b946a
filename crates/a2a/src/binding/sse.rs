//! Server-sent events framing (PROTOCOL.md §5.3, §6.3): one `data:` line of single-line JSON per
//! event, `event: error` for a REST stream's closing error, and comment keep-alives.

use serde_json::Value;

/// A comment line that keeps proxies from cutting a silent stream; clients ignore it.
pub const KEEP_ALIVE: &str = ": keep-alive\n\n";

/// One SSE event carrying `json` on a single `data:` line.
pub fn data_event(json: &Value) -> String {
    // serde_json's compact form escapes every newline inside strings, so the JSON stays on one
    // line, as SSE requires.
    format!("data: {json}\n\n")
}

/// One `event: error` SSE event carrying `json` (REST mid-stream errors, §6.3).
pub fn error_event(json: &Value) -> String {
    format!("event: error\ndata: {json}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_framed_on_one_line() {
        let json = json!({"text": "two\nlines"});
        assert_eq!(
            (data_event(&json), error_event(&json)),
            (
                "data: {\"text\":\"two\\nlines\"}\n\n".to_owned(),
                "event: error\ndata: {\"text\":\"two\\nlines\"}\n\n".to_owned()
            )
        );
    }
}
