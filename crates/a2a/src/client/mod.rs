//! An A2A client for talking to any agent: `volcanic a2a …` drives it from the command line, and
//! assistants that call other agents (delegation) will drive it from a session.
//!
//! It reads the agent's card, picks an interface (1.0 or 0.3, JSON-RPC or HTTP+JSON; the card's
//! order unless the caller forces one), and speaks that binding and version on the wire; the
//! caller sees only the 1.0 `a2a` types, whatever the agent spoke.
//!
//! Layout: [`card`] (the card and the choice of interface), `wire` (operations → HTTP calls,
//! answers → `a2a` types; pure), [`redirect`] (which redirects are followed, and where the key
//! goes), [`events`] (the bounds of one stream event), [`error`] (what a call fails with), this
//! file (HTTP and SSE).
//!
//! Invariants: the key is sent in a header marked sensitive and never enters an error, a log line
//! or a `Debug` output, and it goes to one origin only: the interface's (or with a card reached
//! through a redirect to another origin, the one the user named, [`AgentCard::check_key_goes_to`]).
//! There is no SSRF guard on what the user asks for: the client calls whatever URL its user gives
//! it, loopback included; it is the user's tool, not the server's (`push::guard` is the server's).
//! What the agent chooses, a redirect, is followed only within the origin unless the user asks
//! for more, and never to a link-local or metadata address. It imports the wire shapes of
//! `binding` and nothing of the server's state.

pub mod card;
pub mod error;
pub mod events;
pub mod redirect;
mod wire;

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use self::card::{AgentCard, card_url};
pub use self::error::ClientError;
use self::error::{chain, unreachable_at};
pub use self::events::EventLimits;
pub use self::redirect::Redirects;
use self::wire::{Call, Op, Shape, Verb};
pub use crate::request::{Binding, Version};

/// How long to wait for a connection to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call that does not wait for the agent's work may take (a blocking send or a stream
/// waits as long as the agent works).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest answer read (a task with files is base64 in its JSON); a bigger one is refused, so a
/// hostile or broken agent cannot make the client hold unbounded memory.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024 * 1024;

/// Largest stream event read: the smallest power of two above the largest event this server
/// sends by default (a task at its file cap, 8 files of 10 MiB as base64 plus 1 MiB: 107.7 MiB).
pub const MAX_EVENT_BYTES: usize = 128 * 1024 * 1024;

/// How long an event that has begun may take to grow by [`events::MIN_PROGRESS`] bytes or end.
pub const DEFAULT_STALL: Duration = Duration::from_secs(30);

/// What the client allows an agent beyond answering: which redirects it follows, and how long a
/// stream event may stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions {
    pub redirects: Redirects,
    pub events: EventLimits,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            redirects: Redirects::SameOrigin,
            events: EventLimits { max_bytes: MAX_EVENT_BYTES, stall: DEFAULT_STALL },
        }
    }
}

/// One interface of an agent: where to call it, with which binding and protocol version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub url: String,
    pub binding: Binding,
    pub version: Version,
}

/// The caller's key and how to present it. `Debug` never shows the key.
#[derive(Clone)]
pub struct Credential {
    header: HeaderName,
    value: HeaderValue,
}

impl Credential {
    /// The key as `X-API-Key`.
    ///
    /// # Errors
    ///
    /// When the key holds characters a header cannot carry (the message does not quote it).
    pub fn api_key(key: &str) -> Result<Credential, InvalidKey> {
        Credential::new(HeaderName::from_static("x-api-key"), key.to_owned())
    }

    /// The key as `Authorization: Bearer <key>`.
    ///
    /// # Errors
    ///
    /// When the key holds characters a header cannot carry (the message does not quote it).
    pub fn bearer(key: &str) -> Result<Credential, InvalidKey> {
        Credential::new(AUTHORIZATION, format!("Bearer {key}"))
    }

    fn new(header: HeaderName, value: String) -> Result<Credential, InvalidKey> {
        let mut value = HeaderValue::from_str(&value).map_err(|_| InvalidKey)?;
        value.set_sensitive(true);
        Ok(Credential { header, value })
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}: [redacted])", self.header)
    }
}

/// A key that cannot be sent in an HTTP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the key holds characters an HTTP header cannot carry (control characters or non-ASCII)")]
pub struct InvalidKey;

/// A stream of 1.0 stream events; it ends when the agent closes the stream, or after an error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<a2a::StreamResponse, ClientError>> + Send>>;

/// A connection to one interface of one agent.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    interface: Interface,
    credential: Option<Credential>,
    options: ClientOptions,
    next_id: AtomicU64,
}

/// The HTTP client every call to `url` uses: connect timeout, no overall timeout (set per call),
/// no redirects of its own (`redirect::send_following` decides them). Building it fails only
/// when TLS cannot be set up, which no call to `url` could then get past.
fn http_client(url: &str) -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ClientError::Unreachable { url: url.to_owned(), reason: chain(&e) })
}

/// Reads an agent's public card from what the user typed ([`card_url`]), following the
/// redirects `redirects` allows (the card records the URL that served it).
///
/// The card is asked for without `A2A-Version`, so a server that serves both versions answers
/// with the blended card (docs/a2a.md, "The public card"), which lists the interfaces of both.
///
/// # Errors
///
/// [`ClientError::Unreachable`], [`ClientError::Redirected`], [`ClientError::Http`] for an error
/// status, and [`ClientError::BadCard`] for a body that is not a card with a usable interface.
pub async fn fetch_card(base: &str, redirects: Redirects) -> Result<AgentCard, ClientError> {
    let url = card_url(base);
    let http = http_client(&url)?;
    let request = http
        .get(&url)
        .header(ACCEPT, "application/json")
        .timeout(CALL_TIMEOUT)
        .build()
        .map_err(|e| unreachable_at(&url, &e))?;
    let response =
        redirect::send_following(&http, request, None, redirects, CONNECT_TIMEOUT).await?;
    let served_from = response.url().to_string();
    let status = response.status();
    let body = read_body(&url, response).await?;
    if !status.is_success() {
        return Err(ClientError::BadCard {
            url,
            reason: format!("HTTP {}: {}", status.as_u16(), error::excerpt(&body)),
        });
    }
    let json: Value = serde_json::from_str(&body).map_err(|e| ClientError::BadCard {
        url: url.clone(),
        reason: format!("not JSON ({e}): {}", error::excerpt(&body)),
    })?;
    let mut card = AgentCard::parse(&url, json)?;
    card.served_from = served_from;
    Ok(card)
}

impl Client {
    /// A client for one interface.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when no HTTP client can be built (no TLS roots).
    pub fn new(
        interface: Interface,
        credential: Option<Credential>,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let http = http_client(&interface.url)?;
        Ok(Client { http, interface, credential, options, next_id: AtomicU64::new(1) })
    }

    /// The interface this client talks to.
    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    /// SendMessage: blocks until the task ends or is interrupted, unless the request's
    /// configuration says `returnImmediately`.
    ///
    /// # Errors
    ///
    /// Every [`ClientError`] but the card's.
    pub async fn send(
        &self,
        request: &a2a::SendMessageRequest,
    ) -> Result<a2a::SendMessageResponse, ClientError> {
        self.call(Op::Send(request), Shape::Event, None).await
    }

    /// SendStreamingMessage: the task (or message) and its events as they happen.
    ///
    /// # Errors
    ///
    /// Errors before the first event; later ones are items of the stream.
    pub async fn send_stream(
        &self,
        request: &a2a::SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        self.stream(Op::Stream(request)).await
    }

    /// GetTask.
    ///
    /// # Errors
    ///
    /// [`ClientError::Agent`] with TaskNotFound for an unknown task, and the others.
    pub async fn get_task(
        &self,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<a2a::Task, ClientError> {
        self.call(Op::GetTask { id, history_length }, Shape::Task, Some(CALL_TIMEOUT)).await
    }

    /// ListTasks (1.0 only).
    ///
    /// # Errors
    ///
    /// [`ClientError::NotInVersion`] on a 0.3 interface, and the others.
    pub async fn list_tasks(
        &self,
        request: &a2a::ListTasksRequest,
    ) -> Result<a2a::ListTasksResponse, ClientError> {
        self.call(Op::ListTasks(request), Shape::TaskList, Some(CALL_TIMEOUT)).await
    }

    /// CancelTask.
    ///
    /// # Errors
    ///
    /// TaskNotFound, TaskNotCancelable (a task that has ended), and the others.
    pub async fn cancel_task(&self, id: &str) -> Result<a2a::Task, ClientError> {
        self.call(Op::Cancel { id }, Shape::Task, Some(CALL_TIMEOUT)).await
    }

    /// SubscribeToTask (0.3: `tasks/resubscribe`): the task, then its events until it ends.
    ///
    /// # Errors
    ///
    /// Errors before the first event; later ones are items of the stream.
    pub async fn subscribe(&self, id: &str) -> Result<EventStream, ClientError> {
        self.stream(Op::Subscribe { id }).await
    }

    /// CreateTaskPushNotificationConfig (`config.task_id` names the task).
    ///
    /// # Errors
    ///
    /// PushNotificationNotSupported, TaskNotFound, and the others.
    pub async fn create_push_config(
        &self,
        config: &a2a::TaskPushNotificationConfig,
    ) -> Result<a2a::TaskPushNotificationConfig, ClientError> {
        self.call(Op::CreatePush(config), Shape::PushConfig, Some(CALL_TIMEOUT)).await
    }

    /// GetTaskPushNotificationConfig.
    ///
    /// # Errors
    ///
    /// TaskNotFound for an unknown task or config, and the others.
    pub async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> Result<a2a::TaskPushNotificationConfig, ClientError> {
        self.call(Op::GetPush { task_id, id }, Shape::PushConfig, Some(CALL_TIMEOUT)).await
    }

    /// ListTaskPushNotificationConfigs.
    ///
    /// # Errors
    ///
    /// TaskNotFound, and the others.
    pub async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> Result<a2a::ListTaskPushNotificationConfigsResponse, ClientError> {
        self.call(Op::ListPush { task_id }, Shape::PushConfigList, Some(CALL_TIMEOUT)).await
    }

    /// DeleteTaskPushNotificationConfig.
    ///
    /// # Errors
    ///
    /// TaskNotFound, and the others.
    pub async fn delete_push_config(&self, task_id: &str, id: &str) -> Result<(), ClientError> {
        let op = Op::DeletePush { task_id, id };
        self.call::<Value>(op, Shape::Empty, Some(CALL_TIMEOUT)).await.map(drop)
    }

    /// GetExtendedAgentCard (0.3: `agent/getAuthenticatedExtendedCard`), as the agent sent it.
    ///
    /// # Errors
    ///
    /// UnsupportedOperation or ExtendedAgentCardNotConfigured, and the others.
    pub async fn extended_card(&self) -> Result<Value, ClientError> {
        self.call(Op::ExtendedCard, Shape::Card, Some(CALL_TIMEOUT)).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        op: Op<'_>,
        shape: Shape,
        timeout: Option<Duration>,
    ) -> Result<T, ClientError> {
        let (url, builder) = self.request(op, "application/json")?;
        let builder = match timeout {
            Some(timeout) => builder.timeout(timeout),
            None => builder,
        };
        let response = self.execute(&url, builder).await?;
        let status = response.status();
        let body = read_body(&url, response).await?;
        let value = self.answer(&url, status, &body)?;
        self.decode(&url, value, shape)
    }

    async fn stream(&self, op: Op<'_>) -> Result<EventStream, ClientError> {
        let (url, builder) = self.request(op, "text/event-stream")?;
        let response = self.execute(&url, builder).await?;
        let status = response.status();
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse || !status.is_success() {
            // An early error as plain JSON (A2A 1.0.1 §9.5, §11.6), or an agent that answered
            // the whole result at once.
            let body = read_body(&url, response).await?;
            let value = self.answer(&url, status, &body)?;
            let event = self.decode(&url, value, Shape::Event);
            return Ok(Box::pin(futures_util::stream::iter([event])));
        }
        let binding = self.interface.binding;
        let version = self.interface.version;
        let events = events::data(url.clone(), response.bytes_stream(), self.options.events);
        let stream = futures_util::stream::unfold(Some(events), move |events| {
            let url = url.clone();
            async move {
                let mut events = events?;
                loop {
                    let data = match events.next().await? {
                        Ok(data) => data,
                        Err(error) => return Some((Err(error), None)),
                    };
                    if data.trim().is_empty() {
                        continue;
                    }
                    let item = stream_item(&url, &data, binding, version);
                    let next = if item.is_err() { None } else { Some(events) };
                    return Some((item, next));
                }
            }
        });
        Ok(Box::pin(stream))
    }

    /// Sends a call, following the redirects the options allow; the key stays on the
    /// interface's origin.
    async fn execute(
        &self,
        url: &str,
        builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let request = builder.build().map_err(|e| unreachable_at(url, &e))?;
        let credential = self.credential.as_ref().map(|c| &c.header);
        redirect::send_following(
            &self.http,
            request,
            credential,
            self.options.redirects,
            CONNECT_TIMEOUT,
        )
        .await
    }

    fn request(
        &self,
        op: Op<'_>,
        accept: &'static str,
    ) -> Result<(String, reqwest::RequestBuilder), ClientError> {
        let Interface { url, binding, version } = &self.interface;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let Call { verb, path, query, body } = wire::encode(op, *binding, *version, id)?;
        let mut url = format!("{}{path}", url.trim_end_matches('/'));
        if !query.is_empty() {
            let mut pairs = url::form_urlencoded::Serializer::new(String::new());
            pairs.extend_pairs(query.iter().map(|(name, value)| (*name, value.as_str())));
            url = format!("{url}?{}", pairs.finish());
        }
        let mut builder = match verb {
            Verb::Get => self.http.get(&url),
            Verb::Post => self.http.post(&url),
            Verb::Delete => self.http.delete(&url),
        };
        builder = builder.header(ACCEPT, accept);
        // 0.3 JSON-RPC clients send no version (A2A 1.0.1 §3.6.1); 0.3 REST sends it, since
        // the same paths serve both versions.
        if !(*version == Version::V0_3 && *binding == Binding::JsonRpc) {
            builder = builder.header(a2a::SVC_PARAM_VERSION, version.as_str());
        }
        if let Some(credential) = &self.credential {
            builder = builder.header(credential.header.clone(), credential.value.clone());
        }
        if let Some(body) = body {
            builder = builder.header(CONTENT_TYPE, "application/json").body(body.to_string());
        }
        Ok((url, builder))
    }

    /// The result in an answer: HTTP errors, JSON-RPC envelopes and REST error bodies are
    /// turned into [`ClientError`]s here.
    fn answer(
        &self,
        url: &str,
        status: reqwest::StatusCode,
        body: &str,
    ) -> Result<Value, ClientError> {
        if matches!(status.as_u16(), 401 | 403) {
            let sent_key = self.credential.is_some();
            return Err(ClientError::Unauthorized {
                url: url.to_owned(),
                status: status.as_u16(),
                sent_key,
            });
        }
        let json: Option<Value> = if body.trim().is_empty() && status.is_success() {
            Some(Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str(body).ok()
        };
        if let Some((code, message)) = json.as_ref().and_then(wire::agent_error) {
            return Err(ClientError::Agent { code, message });
        }
        if !status.is_success() {
            let excerpt = error::excerpt(body);
            return Err(ClientError::Http {
                url: url.to_owned(),
                status: status.as_u16(),
                excerpt,
            });
        }
        let json = json.ok_or_else(|| ClientError::BadResponse {
            url: url.to_owned(),
            reason: format!("not JSON: {}", error::excerpt(body)),
        })?;
        match self.interface.binding {
            Binding::JsonRpc => envelope_result(url, json),
            Binding::Rest => Ok(json),
        }
    }

    fn decode<T: DeserializeOwned>(
        &self,
        url: &str,
        value: Value,
        shape: Shape,
    ) -> Result<T, ClientError> {
        let Interface { binding, version, .. } = &self.interface;
        wire::decode(value, shape, *binding, *version)
            .map_err(|reason| ClientError::BadResponse { url: url.to_owned(), reason })
    }
}

/// One SSE event's data: a JSON-RPC response holding a StreamResponse, or a REST StreamResponse
/// or `{"error": …}` Status (A2A 1.0.1 §9.4.2, §11.7).
fn stream_item(
    url: &str,
    data: &str,
    binding: Binding,
    version: Version,
) -> Result<a2a::StreamResponse, ClientError> {
    let bad = |reason: String| ClientError::BadResponse { url: url.to_owned(), reason };
    let json: Value =
        serde_json::from_str(data).map_err(|e| bad(format!("an event is not JSON ({e})")))?;
    if let Some((code, message)) = wire::agent_error(&json) {
        return Err(ClientError::Agent { code, message });
    }
    let value = match binding {
        Binding::JsonRpc => envelope_result(url, json)?,
        Binding::Rest => json,
    };
    if value.get("error").is_some() {
        return Err(bad(format!("the stream ended with an error: {}", error::excerpt(data))));
    }
    wire::decode(value, Shape::Event, binding, version).map_err(bad)
}

/// The `result` of a JSON-RPC response ([`Client::answer`] has taken out errors). A response
/// without one is read as `null`: the Python SDK leaves out a `null` result (0.3 push config
/// deletion).
fn envelope_result(url: &str, mut json: Value) -> Result<Value, ClientError> {
    let is_jsonrpc = json.get("jsonrpc").is_some();
    match json.get_mut("result") {
        Some(result) => Ok(result.take()),
        None if is_jsonrpc => Ok(Value::Null),
        None => Err(ClientError::BadResponse {
            url: url.to_owned(),
            reason: "not a JSON-RPC response (no `jsonrpc`, `result` or `error`)".into(),
        }),
    }
}

/// The whole body of `response`, at most [`MAX_ANSWER_BYTES`].
async fn read_body(url: &str, mut response: reqwest::Response) -> Result<String, ClientError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| unreachable_at(url, &e))? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(ClientError::BadResponse {
                url: url.to_owned(),
                reason: format!("the answer is larger than {MAX_ANSWER_BYTES} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_debug_hides_the_key() {
        let key = "k_never_shown_0001";
        for credential in [Credential::api_key(key).unwrap(), Credential::bearer(key).unwrap()] {
            assert!(!format!("{credential:?}").contains(key));
        }
        assert_eq!(Credential::api_key("a\nb").unwrap_err(), InvalidKey);
    }
}
