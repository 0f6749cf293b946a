//! Reading server-sent events in tests, the way a client does: every event's `data` parsed as
//! JSON. Reading is bounded by a deadline the caller passes, so a stream that never ends fails
//! the test instead of hanging it.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;

/// The events of an SSE response, each event's `data` parsed as JSON. A broken stream or an event
/// that is not JSON panics (the test fails at the event that broke).
pub fn json_events(response: reqwest::Response) -> BoxStream<'static, Value> {
    response
        .bytes_stream()
        .eventsource()
        .map(|event| serde_json::from_str(&event.unwrap().data).unwrap())
        .boxed()
}

/// Every event of an SSE response until the server ends the stream, each `data` parsed as JSON.
/// Panics when the stream has not ended within `deadline`.
pub async fn collect_json(response: reqwest::Response, deadline: Duration) -> Vec<Value> {
    let mut events = Vec::new();
    let mut stream = json_events(response);
    tokio::time::timeout(deadline, async {
        while let Some(event) = stream.next().await {
            events.push(event);
        }
    })
    .await
    .expect("stream did not end in time");
    events
}

/// The `data` of one raw event block (its `data: ` lines joined without separators), for tests
/// that read a stream's bytes themselves.
pub fn data_of(block: &str) -> String {
    block.lines().filter_map(|line| line.strip_prefix("data: ")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_of_joins_data_lines_and_skips_the_others() {
        assert_eq!(data_of("event: x\ndata: {\"a\":\ndata: 1}\n\n"), "{\"a\":1}");
        assert_eq!(data_of(": comment\n\n"), "");
    }
}
