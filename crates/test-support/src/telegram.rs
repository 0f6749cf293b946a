//! A fake Telegram Bot API for tests: the real wire format (`{"ok":true,"result":…}` and
//! `{"ok":false,"error_code":…,"description":…,"parameters":{"retry_after":N}}`), methods at
//! `/bot<token>/<method>` (JSON or multipart bodies), files at `/file/bot<token>/<path>`.
//!
//! It long-polls `getUpdates` with Telegram's offset semantics (an offset confirms every update
//! below it), checks message texts the way Telegram does (empty or longer than 4096 UTF-16 units
//! is refused, an edit to the same text is "message is not modified"), records every call, and
//! can fail the next calls of a method on request.
//!
//! Inline keyboards: a message keeps the callback buttons of its `reply_markup` (an edit
//! without one removes them, as Telegram does), [`FakeBotApi::push_callback_query`] presses one,
//! and `answerCallbackQuery` is recorded; a query can be answered once. `getUpdates` delivers
//! only the kinds of update its `allowed_updates` names (all kinds when it names none).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Telegram's limit on a message text, in UTF-16 code units.
pub const MESSAGE_LIMIT: usize = 4096;

/// One recorded call: the method and its parameters (multipart file fields are left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    pub params: Value,
}

/// A message the bot sent, with its latest text.
#[derive(Debug, Clone, PartialEq)]
pub struct SentMessage {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    /// How many edits changed it.
    pub edits: usize,
    /// Its inline keyboard: rows of (text, callback data); empty when it has none.
    pub buttons: Vec<Vec<(String, String)>>,
}

/// An `answerCallbackQuery` the bot made.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackAnswer {
    pub callback_query_id: String,
    pub text: Option<String>,
    pub show_alert: bool,
}

/// The fake bot's own user (what `getMe` answers).
pub const BOT_USER_ID: i64 = 4242;

/// Telegram's answer to a second answer of a callback query, or one of an unknown id.
pub const QUERY_TOO_OLD: &str =
    "Bad Request: query is too old and response timeout expired or query ID is invalid";

/// A document the bot sent.
#[derive(Debug, Clone, PartialEq)]
pub struct SentDocument {
    pub chat_id: i64,
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub caption: Option<String>,
}

/// A failure to answer the next call of a method with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Injected {
    /// This HTTP status with a Bot API error body (`500`, `502`, `400`, …).
    Status(u16),
    /// 429 with `parameters.retry_after` in seconds.
    TooManyRequests { retry_after: u64 },
}

/// A fault that goes beyond an error answer: the call may be handled and still fail for the
/// client, the way a real network or a proxy in front of Telegram can fail it.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The call is handled as usual (a message is really sent), then the connection breaks
    /// before the answer's body: the client cannot know the call succeeded.
    AcceptThenDrop,
    /// The call is handled as usual, and answered only after this delay (longer than the
    /// client's timeout, the client gives up on a call that succeeded).
    AcceptThenDelay(Duration),
    /// A Bot API refusal with this status and description (e.g. 400 "Bad Request: message to
    /// edit not found"); the call is not handled.
    Refuse { status: u16, description: String },
    /// A 404 whose description echoes the request path as received (the token in it) and its
    /// percent-encoded form, like some proxies' error pages; the call is not handled.
    EchoPath,
}

#[derive(Default)]
struct Inner {
    next_update_id: i64,
    next_message_id: i64,
    updates: Vec<Value>,
    /// Every update ever queued, for [`FakeBotApi::redeliver_all`].
    history: Vec<Value>,
    calls: Vec<Call>,
    messages: Vec<SentMessage>,
    documents: Vec<SentDocument>,
    files: HashMap<String, (String, Vec<u8>)>,
    failures: VecDeque<(String, Injected)>,
    /// The `entities` of sent messages, by (chat id, message id).
    entities: HashMap<(i64, i64), Vec<Value>>,
    faults: VecDeque<(String, Fault)>,
    next_callback_id: u64,
    /// Callback queries pushed and not yet answered.
    open_callbacks: Vec<String>,
    callback_answers: Vec<CallbackAnswer>,
}

struct Shared {
    token: String,
    inner: Mutex<Inner>,
    /// Bumped on every change, so waiters wake up.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// A running fake Bot API; stops when dropped.
pub struct FakeBotApi {
    /// The API base URL, e.g. `http://127.0.0.1:4711` (what `Telegram__ApiUrl` takes).
    pub url: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeBotApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeBotApi {
    /// Starts on a free port of 127.0.0.1, accepting `token` only.
    pub async fn start(token: &str) -> FakeBotApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        FakeBotApi::start_on(listener, token)
    }

    /// Starts on a listener the test bound (and perhaps misused) first.
    pub fn start_on(listener: TcpListener, token: &str) -> FakeBotApi {
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            token: token.to_string(),
            inner: Mutex::new(Inner {
                next_update_id: 100,
                next_message_id: 1,
                ..Inner::default()
            }),
            changed: watch::channel(0).0,
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(method).get(method))
            .route("/file/{bot}/{*path}", get(file))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeBotApi { url, shared, server }
    }

    /// Queues an update with this message (`message_id`, `date` and `chat.type` are filled in
    /// when missing); returns its update id.
    pub fn push_message(&self, mut message: Value) -> i64 {
        let id = {
            let mut inner = self.shared.lock();
            let id = inner.next_update_id;
            inner.next_update_id += 1;
            let message_id = inner.next_message_id;
            inner.next_message_id += 1;
            let object = message.as_object_mut().unwrap();
            object.entry("message_id").or_insert(json!(message_id));
            object.entry("date").or_insert(json!(1_700_000_000));
            if let Some(chat) = object.get_mut("chat").and_then(Value::as_object_mut) {
                chat.entry("type").or_insert(json!("private"));
            }
            let update = json!({"update_id": id, "message": message});
            inner.history.push(update.clone());
            inner.updates.push(update);
            id
        };
        self.shared.bump();
        id
    }

    /// Queues a text message from user `chat_id` in their private chat.
    pub fn push_text(&self, chat_id: i64, text: &str) -> i64 {
        self.push_message(json!({
            "chat": {"id": chat_id},
            "from": {"id": chat_id, "is_bot": false, "first_name": "Tester"},
            "text": text,
        }))
    }

    /// Makes a file downloadable and returns its file id.
    pub fn add_file(&self, file_path: &str, bytes: &[u8]) -> String {
        let mut inner = self.shared.lock();
        let id = format!("file-{}", inner.files.len() + 1);
        inner.files.insert(id.clone(), (file_path.to_string(), bytes.to_vec()));
        id
    }

    /// Queues a document message (the file is made downloadable).
    pub fn push_document(
        &self,
        chat_id: i64,
        file_name: &str,
        bytes: &[u8],
        caption: Option<&str>,
    ) -> i64 {
        // Telegram picks its own storage paths; the user's file name is only metadata.
        let stored = format!("documents/file_{}", self.shared.lock().files.len());
        let file_id = self.add_file(&stored, bytes);
        let mut message = json!({
            "chat": {"id": chat_id},
            "from": {"id": chat_id, "is_bot": false, "first_name": "Tester"},
            "document": {
                "file_id": file_id, "file_unique_id": format!("u{file_id}"),
                "file_name": file_name, "mime_type": "application/octet-stream",
                "file_size": bytes.len(),
            },
        });
        if let Some(caption) = caption {
            message["caption"] = json!(caption);
        }
        self.push_message(message)
    }

    /// Queues a photo message in two sizes; only the larger one holds `bytes`.
    pub fn push_photo(&self, chat_id: i64, bytes: &[u8], caption: Option<&str>) -> i64 {
        let small = self.add_file("photos/file_small.jpg", b"small");
        let large = self.add_file("photos/file_large.jpg", bytes);
        let mut message = json!({
            "chat": {"id": chat_id},
            "from": {"id": chat_id, "is_bot": false, "first_name": "Tester"},
            "photo": [
                {"file_id": small, "file_unique_id": "us", "width": 90, "height": 60, "file_size": 5},
                {"file_id": large, "file_unique_id": "ul", "width": 1280, "height": 960,
                 "file_size": bytes.len()},
            ],
        });
        if let Some(caption) = caption {
            message["caption"] = json!(caption);
        }
        self.push_message(message)
    }

    /// Fails the next call of `method` with `failure` (queued failures apply in order).
    pub fn fail_next(&self, method: &str, failure: Injected) {
        self.shared.lock().failures.push_back((method.to_string(), failure));
    }

    /// Applies `fault` to the next call of `method` (queued faults apply in order; a queued
    /// [`Injected`] failure of the same call comes first).
    pub fn fault_next(&self, method: &str, fault: Fault) {
        self.shared.lock().faults.push_back((method.to_string(), fault));
    }

    /// Drops every queued failure and fault: Telegram is back.
    pub fn clear_failures(&self) {
        let mut inner = self.shared.lock();
        inner.failures.clear();
        inner.faults.clear();
    }

    /// Deletes a message the bot sent, as its user can; returns the text it had. Edits of it are
    /// then refused with "message to edit not found", as Telegram does.
    pub fn delete_message(&self, chat_id: i64, message_id: i64) -> Option<String> {
        let mut inner = self.shared.lock();
        let at = inner
            .messages
            .iter()
            .position(|m| m.chat_id == chat_id && m.message_id == message_id)?;
        let removed = inner.messages.remove(at);
        drop(inner);
        self.shared.bump();
        Some(removed.text)
    }

    /// Queues a press of a button on the bot's message `message_id` in `chat_id` by user
    /// `from_user_id`, with `data` as its callback data (whether or not the message has such a
    /// button: a client can send any data); returns the callback query's id. The update carries
    /// the message as stored (buttons included), or none when the message is gone.
    pub fn push_callback_query(
        &self,
        chat_id: i64,
        from_user_id: i64,
        message_id: i64,
        data: &str,
    ) -> String {
        let query_id = {
            let mut inner = self.shared.lock();
            let id = inner.next_update_id;
            inner.next_update_id += 1;
            inner.next_callback_id += 1;
            let query_id = format!("cbq-{}", inner.next_callback_id);
            let message = inner
                .messages
                .iter()
                .find(|m| m.chat_id == chat_id && m.message_id == message_id)
                .map(|m| message_json(m, inner.entities.get(&(chat_id, message_id))));
            let mut query = json!({
                "id": query_id,
                "from": {"id": from_user_id, "is_bot": false, "first_name": "Presser"},
                "chat_instance": format!("ci-{chat_id}"),
                "data": data,
            });
            if let Some(message) = message {
                query["message"] = message;
            }
            let update = json!({"update_id": id, "callback_query": query});
            inner.history.push(update.clone());
            inner.updates.push(update);
            inner.open_callbacks.push(query_id.clone());
            query_id
        };
        self.shared.bump();
        query_id
    }

    /// Queues again every update ever queued, confirmed or not, as Telegram does when a bot's
    /// acknowledgement never reached it (the bot stopped before its next getUpdates): only the
    /// bot's own record of its offset keeps it from handling them twice.
    pub fn redeliver_all(&self) {
        {
            let mut inner = self.shared.lock();
            let history = inner.history.clone();
            inner.updates = history;
        }
        self.shared.bump();
    }

    /// The callback queries answered so far, in order.
    pub fn callback_answers(&self) -> Vec<CallbackAnswer> {
        self.shared.lock().callback_answers.clone()
    }

    /// Waits until the callback query `id` is answered; returns the answer.
    pub async fn wait_for_callback_answer(&self, id: &str, timeout: Duration) -> CallbackAnswer {
        self.wait_for("a callback answer", timeout, |api| {
            api.callback_answers().into_iter().find(|a| a.callback_query_id == id)
        })
        .await
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// The calls of one method so far.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method == method).collect()
    }

    /// The messages sent to `chat_id`, oldest first, with their latest texts.
    pub fn messages(&self, chat_id: i64) -> Vec<SentMessage> {
        self.shared.lock().messages.iter().filter(|m| m.chat_id == chat_id).cloned().collect()
    }

    /// The documents sent so far.
    pub fn documents(&self) -> Vec<SentDocument> {
        self.shared.lock().documents.clone()
    }

    /// Updates not yet confirmed by an offset.
    pub fn pending_updates(&self) -> usize {
        self.shared.lock().updates.len()
    }

    /// Waits until `check` returns something, re-checking on every change; panics with `what`
    /// after `timeout`.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&FakeBotApi) -> Option<T>,
    ) -> T {
        let mut changes = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changes.mark_unchanged();
            if let Some(found) = check(self) {
                return found;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    if let Some(found) = check(self) {
                        return found;
                    }
                    let methods: Vec<String> = self.calls().into_iter().map(|c| c.method).collect();
                    panic!("timed out waiting for {what}; calls: {methods:?}");
                }
            }
        }
    }

    /// Waits until a message to `chat_id` satisfies `check`; returns it.
    pub async fn wait_for_message(
        &self,
        chat_id: i64,
        timeout: Duration,
        check: impl Fn(&SentMessage) -> bool,
    ) -> SentMessage {
        self.wait_for("a message", timeout, |api| {
            api.messages(chat_id).into_iter().find(|m| check(m))
        })
        .await
    }
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn error(status: u16, description: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap();
    (code, axum::Json(json!({"ok": false, "error_code": status, "description": description})))
        .into_response()
}

fn injected(failure: Injected) -> Response {
    match failure {
        Injected::Status(status) => error(status, "Internal Server Error: injected"),
        Injected::TooManyRequests { retry_after } => (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({
                "ok": false, "error_code": 429,
                "description": format!("Too Many Requests: retry after {retry_after}"),
                "parameters": {"retry_after": retry_after},
            })),
        )
            .into_response(),
    }
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

fn chat_id(params: &Value) -> Option<i64> {
    match &params["chat_id"] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn check_text(text: &str) -> Option<Response> {
    if text.trim().is_empty() {
        return Some(error(400, "Bad Request: message text is empty"));
    }
    if utf16_len(text) > MESSAGE_LIMIT {
        return Some(error(400, "Bad Request: message is too long"));
    }
    None
}

async fn method(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    request: Request,
) -> Response {
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        return error(401, "Unauthorized");
    }
    let raw_path = request.uri().path().to_string();
    let is_multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let mut upload = None;
    let params = if is_multipart {
        let mut multipart = Multipart::from_request(request, &()).await.unwrap();
        let mut params = serde_json::Map::new();
        while let Some(field) = multipart.next_field().await.unwrap() {
            let name = field.name().unwrap_or_default().to_string();
            match field.file_name().map(str::to_string) {
                Some(file_name) => {
                    upload = Some((file_name, field.bytes().await.unwrap().to_vec()))
                }
                None => {
                    params.insert(name, json!(field.text().await.unwrap()));
                }
            }
        }
        Value::Object(params)
    } else {
        let bytes = axum::body::to_bytes(request.into_body(), 1 << 20).await.unwrap();
        if bytes.is_empty() { json!({}) } else { serde_json::from_slice(&bytes).unwrap() }
    };

    let failure = {
        let mut inner = shared.lock();
        inner.calls.push(Call { method: method.clone(), params: params.clone() });
        let at = inner.failures.iter().position(|(m, _)| *m == method);
        at.and_then(|i| inner.failures.remove(i)).map(|(_, f)| f)
    };
    shared.bump();
    if let Some(failure) = failure {
        return injected(failure);
    }
    let fault = take_fault(&shared, &method);
    if let Some(refusal) = fault.as_ref().and_then(|fault| refused(fault, &raw_path)) {
        return refusal;
    }

    let response = match method.as_str() {
        "getMe" => ok(
            json!({"id": BOT_USER_ID, "is_bot": true, "first_name": "Fake", "username": "fake_bot"}),
        ),
        "getUpdates" => return get_updates(&shared, &params).await,
        "setMyCommands" | "sendChatAction" => ok(json!(true)),
        "answerCallbackQuery" => answer_callback_query(&shared, &params),
        "sendMessage" => send_message(&shared, &params),
        "editMessageText" => edit_message(&shared, &params),
        "sendDocument" => send_document(&shared, &params, upload),
        "getFile" => get_file(&shared, &params),
        _ => error(404, "Not Found: method not found"),
    };
    shared.bump();
    match fault {
        Some(fault) => after_handling(fault, response).await,
        None => response,
    }
}

fn take_fault(shared: &Shared, method: &str) -> Option<Fault> {
    let mut inner = shared.lock();
    let at = inner.faults.iter().position(|(m, _)| m == method)?;
    inner.faults.remove(at).map(|(_, fault)| fault)
}

/// The answer of a fault that refuses the call before it is handled.
fn refused(fault: &Fault, raw_path: &str) -> Option<Response> {
    match fault {
        Fault::Refuse { status, description } => Some(error(*status, description)),
        Fault::EchoPath => {
            let encoded: String = raw_path
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                        char::from(b).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect();
            Some(error(404, &format!("Not Found: no route for POST {raw_path} ({encoded})")))
        }
        Fault::AcceptThenDrop | Fault::AcceptThenDelay(_) => None,
    }
}

/// The answer of a fault that lets the call be handled first.
async fn after_handling(fault: Fault, response: Response) -> Response {
    match fault {
        Fault::AcceptThenDrop => {
            // Headers go out, then the body fails: hyper aborts the connection mid-answer.
            let broken = futures_util::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped"))
            });
            let (parts, _) = response.into_parts();
            Response::from_parts(parts, axum::body::Body::from_stream(broken))
        }
        Fault::AcceptThenDelay(delay) => {
            tokio::time::sleep(delay).await;
            response
        }
        Fault::Refuse { .. } | Fault::EchoPath => response,
    }
}

async fn get_updates(shared: &Arc<Shared>, params: &Value) -> Response {
    let offset = params["offset"].as_i64();
    let allowed: Option<Vec<String>> = match &params["allowed_updates"] {
        Value::Array(kinds) => {
            Some(kinds.iter().filter_map(Value::as_str).map(str::to_string).collect())
        }
        // Query and multipart forms send it as a JSON string.
        Value::String(s) => serde_json::from_str(s).ok(),
        _ => None,
    };
    // Telegram treats an empty list as "all kinds" (except a few that must be asked for).
    let allowed = allowed.filter(|kinds| !kinds.is_empty());
    let timeout = Duration::from_secs(params["timeout"].as_u64().unwrap_or(0).min(50));
    let mut changes = shared.changed.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        changes.mark_unchanged();
        let found: Vec<Value> = {
            let mut inner = shared.lock();
            if let Some(offset) = offset {
                inner.updates.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            }
            // An update of a kind not asked for is never delivered: Telegram drops it.
            if let Some(allowed) = &allowed {
                inner.updates.retain(|u| is_allowed_update(u, allowed));
            }
            inner.updates.iter().take(100).cloned().collect()
        };
        if !found.is_empty() {
            return ok(Value::Array(found));
        }
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            return ok(json!([]));
        }
    }
}

fn send_message(shared: &Shared, params: &Value) -> Response {
    let Some(chat_id) = chat_id(params) else {
        return error(400, "Bad Request: chat_id is empty");
    };
    let text = params["text"].as_str().unwrap_or_default().to_string();
    if let Some(refused) = check_text(&text) {
        return refused;
    }
    let entities = match message_entities(&text, params) {
        Ok(entities) => entities,
        Err(description) => return error(400, description),
    };
    let buttons = match inline_keyboard(params) {
        Ok(buttons) => buttons,
        Err(description) => return error(400, description),
    };
    let mut inner = shared.lock();
    let message_id = inner.next_message_id;
    inner.next_message_id += 1;
    let message = SentMessage { chat_id, message_id, text, edits: 0, buttons };
    if !entities.is_empty() {
        inner.entities.insert((chat_id, message_id), entities);
    }
    let sent = message_json(&message, inner.entities.get(&(chat_id, message_id)));
    inner.messages.push(message);
    ok(sent)
}

fn edit_message(shared: &Shared, params: &Value) -> Response {
    let (Some(chat_id), Some(message_id)) = (chat_id(params), params["message_id"].as_i64()) else {
        return error(400, "Bad Request: message identifier is not specified");
    };
    let text = params["text"].as_str().unwrap_or_default().to_string();
    if let Some(refused) = check_text(&text) {
        return refused;
    }
    let entities = match message_entities(&text, params) {
        Ok(entities) => entities,
        Err(description) => return error(400, description),
    };
    // Without a reply_markup the edited message has no inline keyboard any more.
    let buttons = match inline_keyboard(params) {
        Ok(buttons) => buttons,
        Err(description) => return error(400, description),
    };
    let mut inner = shared.lock();
    let Some(message) =
        inner.messages.iter_mut().find(|m| m.chat_id == chat_id && m.message_id == message_id)
    else {
        return error(400, "Bad Request: message to edit not found");
    };
    if message.text == text && message.buttons == buttons {
        return error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    }
    message.text = text;
    message.buttons = buttons;
    message.edits += 1;
    // An edit drops the entities it does not give again.
    let message = message.clone();
    if entities.is_empty() {
        inner.entities.remove(&(chat_id, message_id));
    } else {
        inner.entities.insert((chat_id, message_id), entities);
    }
    ok(message_json(&message, inner.entities.get(&(chat_id, message_id))))
}

fn answer_callback_query(shared: &Shared, params: &Value) -> Response {
    let id = params["callback_query_id"].as_str().unwrap_or_default().to_string();
    let mut inner = shared.lock();
    let Some(at) = inner.open_callbacks.iter().position(|open| *open == id) else {
        return error(400, QUERY_TOO_OLD);
    };
    inner.open_callbacks.remove(at);
    inner.callback_answers.push(CallbackAnswer {
        callback_query_id: id,
        text: params["text"].as_str().map(str::to_string),
        show_alert: params["show_alert"].as_bool().unwrap_or(false),
    });
    ok(json!(true))
}

/// A stored message as the Bot API shows it: sent by the bot, with its buttons as
/// `reply_markup` when it has any.
fn message_json(message: &SentMessage, entities: Option<&Vec<Value>>) -> Value {
    // Groups have negative ids; this fake's groups are supergroups.
    let kind = if message.chat_id < 0 { "supergroup" } else { "private" };
    let mut value = json!({
        "message_id": message.message_id, "date": 1_700_000_000,
        "from": {"id": BOT_USER_ID, "is_bot": true, "first_name": "Fake", "username": "fake_bot"},
        "chat": {"id": message.chat_id, "type": kind}, "text": message.text,
    });
    if let Some(entities) = entities.filter(|e| !e.is_empty()) {
        value["entities"] = json!(entities);
    }
    if !message.buttons.is_empty() {
        let rows: Vec<Value> = message
            .buttons
            .iter()
            .map(|row| {
                row.iter()
                    .map(|(text, data)| json!({"text": text, "callback_data": data}))
                    .collect()
            })
            .collect();
        value["reply_markup"] = json!({"inline_keyboard": rows});
    }
    value
}

/// Whether `update` is of a kind in `allowed` (its one field besides `update_id`).
fn is_allowed_update(update: &Value, allowed: &[String]) -> bool {
    update
        .as_object()
        .is_some_and(|fields| fields.keys().any(|k| k != "update_id" && allowed.contains(k)))
}

/// The callback buttons of a call's `reply_markup`, checked as Telegram does: an
/// `inline_keyboard` of rows of buttons, each with a text and 1 to 64 bytes of callback data.
/// No reply_markup is no buttons.
fn inline_keyboard(params: &Value) -> Result<Vec<Vec<(String, String)>>, &'static str> {
    let markup = match &params["reply_markup"] {
        Value::Null => return Ok(Vec::new()),
        // Multipart and query forms send it as a JSON string.
        Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or(Value::Null),
        other => other.clone(),
    };
    let Some(rows) = markup["inline_keyboard"].as_array() else {
        return Err("Bad Request: can't parse reply keyboard markup JSON object");
    };
    let mut buttons = Vec::new();
    for row in rows {
        let Some(row) = row.as_array() else {
            return Err(
                "Bad Request: can't parse inline keyboard button: InlineKeyboardButton must be an Object",
            );
        };
        let mut parsed = Vec::new();
        for button in row {
            let Some(text) = button["text"].as_str().filter(|t| !t.is_empty()) else {
                return Err(
                    "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
                );
            };
            let Some(data) = button["callback_data"].as_str() else {
                return Err(
                    "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
                );
            };
            if data.is_empty() || data.len() > 64 {
                return Err("Bad Request: BUTTON_DATA_INVALID");
            }
            parsed.push((text.to_string(), data.to_string()));
        }
        buttons.push(parsed);
    }
    Ok(buttons)
}

fn send_document(shared: &Shared, params: &Value, upload: Option<(String, Vec<u8>)>) -> Response {
    let Some(chat_id) = chat_id(params) else {
        return error(400, "Bad Request: chat_id is empty");
    };
    let Some((file_name, bytes)) = upload else {
        return error(400, "Bad Request: there is no document in the request");
    };
    let caption = params["caption"].as_str().map(str::to_string);
    let mut inner = shared.lock();
    let message_id = inner.next_message_id;
    inner.next_message_id += 1;
    inner.documents.push(SentDocument {
        chat_id,
        file_name: file_name.clone(),
        bytes: bytes.clone(),
        caption,
    });
    ok(json!({
        "message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": chat_id, "type": "private"},
        "document": {"file_id": format!("sent-{message_id}"), "file_unique_id": "x",
                     "file_name": file_name, "file_size": bytes.len()},
    }))
}

fn get_file(shared: &Shared, params: &Value) -> Response {
    let file_id = params["file_id"].as_str().unwrap_or_default();
    match shared.lock().files.get(file_id) {
        Some((path, bytes)) => ok(json!({
            "file_id": file_id, "file_unique_id": format!("u{file_id}"),
            "file_size": bytes.len(), "file_path": path,
        })),
        None => error(400, "Bad Request: invalid file_id"),
    }
}

async fn file(
    State(shared): State<Arc<Shared>>,
    Path((bot, path)): Path<(String, String)>,
) -> Response {
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        return error(401, "Unauthorized");
    }
    let found = shared.lock().files.values().find(|(p, _)| *p == path).map(|(_, b)| b.clone());
    shared.lock().calls.push(Call { method: "file".into(), params: json!({"path": path}) });
    shared.bump();
    match found {
        Some(bytes) => (StatusCode::OK, Bytes::from(bytes)).into_response(),
        None => error(404, "Not Found"),
    }
}

/// Ids Telegram uses for the fake senders of messages sent on behalf of a chat.
pub const GROUP_ANONYMOUS_BOT: i64 = 1_087_968_824;

/// Groups, forwarded messages, stickers and message entities.
impl FakeBotApi {
    /// Queues a text message from user `from` in the supergroup `group_id` (a negative id).
    pub fn push_group_text(&self, group_id: i64, from: i64, text: &str) -> i64 {
        self.push_message(json!({
            "chat": {"id": group_id, "type": "supergroup", "title": "Test group"},
            "from": {"id": from, "is_bot": false, "first_name": "Member"},
            "text": text,
        }))
    }

    /// Queues a message an anonymous admin sent in `group_id`: Telegram gives it the chat as
    /// `sender_chat` and a placeholder bot as `from`.
    pub fn push_anonymous_admin_text(&self, group_id: i64, text: &str) -> i64 {
        self.push_message(json!({
            "chat": {"id": group_id, "type": "supergroup", "title": "Test group"},
            "sender_chat": {"id": group_id, "type": "supergroup", "title": "Test group"},
            "from": {"id": GROUP_ANONYMOUS_BOT, "is_bot": true, "first_name": "Group",
                     "username": "GroupAnonymousBot"},
            "text": text,
        }))
    }

    /// Queues a text message that `chat_id`'s user forwarded: `origin` is the Bot API's
    /// `forward_origin` object (or `null`), `legacy` the older fields (`forward_from`,
    /// `forward_from_chat`, `forward_sender_name`, …) merged into the message.
    pub fn push_forwarded_text(
        &self,
        chat_id: i64,
        text: &str,
        origin: Value,
        legacy: Value,
    ) -> i64 {
        let mut message = json!({
            "chat": {"id": chat_id},
            "from": {"id": chat_id, "is_bot": false, "first_name": "Tester"},
            "text": text,
        });
        if !origin.is_null() {
            message["forward_origin"] = origin;
            message["forward_date"] = json!(1_699_999_000);
        }
        if let Some(fields) = legacy.as_object() {
            for (key, value) in fields {
                message[key.as_str()] = value.clone();
            }
        }
        self.push_message(message)
    }

    /// Queues a sticker from user `chat_id` in their private chat.
    pub fn push_sticker(&self, chat_id: i64) -> i64 {
        let file_id = self.add_file("stickers/file_0.webp", b"RIFF-sticker");
        self.push_message(json!({
            "chat": {"id": chat_id},
            "from": {"id": chat_id, "is_bot": false, "first_name": "Tester"},
            "sticker": {"file_id": file_id, "file_unique_id": "usticker", "type": "regular",
                        "width": 512, "height": 512, "is_animated": false, "is_video": false,
                        "emoji": "🌋"},
        }))
    }

    /// The `entities` a sent message carries (empty when it has none).
    pub fn entities(&self, chat_id: i64, message_id: i64) -> Vec<Value> {
        self.shared.lock().entities.get(&(chat_id, message_id)).cloned().unwrap_or_default()
    }
}

/// The `entities` parameter of a send, checked as Telegram does: each needs a known type and an
/// offset and length in UTF-16 units inside the text; otherwise the send is refused with the
/// returned description.
fn message_entities(text: &str, params: &Value) -> Result<Vec<Value>, &'static str> {
    let entities = match &params["entities"] {
        Value::Null => return Ok(Vec::new()),
        // Multipart and query forms send it as a JSON string.
        Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or(Value::Null),
        other => other.clone(),
    };
    let Some(list) = entities.as_array() else {
        return Err("Bad Request: can't parse entities: array expected");
    };
    let units = utf16_len(text) as u64;
    for entity in list {
        let known = matches!(
            entity["type"].as_str(),
            Some(
                "bold"
                    | "italic"
                    | "underline"
                    | "strikethrough"
                    | "code"
                    | "spoiler"
                    | "blockquote"
                    | "expandable_blockquote"
            )
        );
        let (Some(offset), Some(length)) = (entity["offset"].as_u64(), entity["length"].as_u64())
        else {
            return Err("Bad Request: can't parse entities: offset and length expected");
        };
        if !known || length == 0 || offset + length > units {
            return Err("Bad Request: can't parse entities: entity out of the text");
        }
    }
    Ok(list.clone())
}
