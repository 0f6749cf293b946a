//! A thin Telegram Bot API client over reqwest: methods at `<ApiUrl>/bot<token>/<method>`, files
//! at `<ApiUrl>/file/bot<token>/<file_path>`, JSON bodies (multipart for `sendDocument`).
//!
//! Failures are typed ([`ApiError`]); network errors and 5xx are retried with exponential
//! backoff, a 429 waits exactly its `parameters.retry_after`, other 4xx are not retried. Sends
//! get a bounded number of attempts; [`BotApi::get_updates`] retries for as long as it takes.
//!
//! Calls that post something (`sendMessage`, `sendDocument`) are retried only when Telegram
//! certainly did not handle them: the connection could not be made, or Telegram answered with a
//! Bot API error (a 429 or 5xx with an `ok: false` body). A call whose request went out and whose
//! answer never came (a broken connection, a timeout, a gateway's error page) may have been
//! delivered, so it is not sent again: it fails with an error for which
//! [`ApiError::is_maybe_delivered`] holds. Reading calls and edits (an edit to the same text is
//! harmless) are retried on any retryable failure.
//!
//! Invariant: the token is part of every URL, so a URL never leaves this module: reqwest errors
//! are stripped of theirs (`without_url`), and every error text (reqwest's, the Bot API's
//! descriptions, which can echo the request path) is redacted of the token, its secret part and
//! their encoded forms before it becomes an [`ApiError`]. Log lines name the method only.

mod error;
mod types;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use volcanic_core::redact::Redactor;

pub use error::ApiError;
use error::network_error;
pub use types::{
    Button, CallbackQuery, Chat, ChatKind, Document, Entity, EntityKind, File,
    InlineKeyboardButton, InlineKeyboardMarkup, Message, MessageOrigin, PhotoSize, Update, User,
};

use crate::config::{Backoff, TelegramConfig};

/// Longest a file download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Largest file `sendDocument` takes (the Bot API's upload limit).
pub const UPLOAD_LIMIT: u64 = 50 * 1024 * 1024;

/// The Bot API's answer envelope.
#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// The `reply_markup` of an inline keyboard of callback buttons.
fn inline_keyboard(buttons: &[Vec<Button>]) -> Value {
    let rows: Vec<Value> = buttons
        .iter()
        .map(|row| {
            row.iter()
                .map(|button| json!({"text": button.text, "callback_data": button.data}))
                .collect()
        })
        .collect();
    json!({"inline_keyboard": rows})
}

/// What a call sends.
enum Body {
    Json(Value),
    Document { chat_id: i64, name: String, bytes: Vec<u8>, caption: Option<String> },
}

/// Whether a call may be repeated after a failure that may have reached Telegram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    /// Reading calls, edits, chat actions: doing them twice is harmless.
    Safe,
    /// Sends: repeated only when the failure proves Telegram did not handle the call.
    IfUnhandled,
}

/// How many times a call is tried.
#[derive(Debug, Clone, Copy)]
enum Attempts {
    Once,
    AtMost(u32),
    /// Until it succeeds, is refused, or the host stops.
    Unbounded,
}

/// The Bot API client. Cheap to clone.
#[derive(Clone)]
pub struct BotApi {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// `<ApiUrl>/bot<token>`: secret.
    methods: String,
    /// `<ApiUrl>/file/bot<token>`: secret.
    files: String,
    backoff: Backoff,
    send_attempts: u32,
    poll_timeout: Duration,
    call_timeout: Duration,
    /// The token's values, for every error text.
    redactor: Redactor,
    /// Bumped after every call Telegram answered: a sign that it is reachable again.
    answered: watch::Sender<u64>,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi").finish_non_exhaustive()
    }
}

impl BotApi {
    /// A client for the configured API URL, token, retries and timeouts.
    ///
    /// # Errors
    /// The HTTP client cannot be built (no TLS backend).
    pub fn new(config: &TelegramConfig) -> Result<Self, ApiError> {
        let redactor = Redactor::new(config.token.secrets());
        let http = reqwest::Client::builder()
            // A redirect would be followed to a URL built from ours; there is no reason for one.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10).min(config.call_timeout))
            .build()
            .map_err(|e| network_error(e, &redactor))?;
        let base = config.api_url.trim_end_matches('/');
        let token = config.token.expose();
        Ok(BotApi {
            inner: Arc::new(Inner {
                http,
                methods: format!("{base}/bot{token}"),
                files: format!("{base}/file/bot{token}"),
                backoff: config.backoff,
                send_attempts: config.send_attempts.max(1),
                poll_timeout: config.poll_timeout,
                call_timeout: config.call_timeout,
                redactor,
                answered: watch::channel(0).0,
            }),
        })
    }

    /// Changes whenever Telegram answers a call (getUpdates answers at least once per poll
    /// timeout): what waits for Telegram to come back waits for this.
    pub fn answered(&self) -> watch::Receiver<u64> {
        self.inner.answered.subscribe()
    }

    /// `text` without the token (any of its forms): for texts about Bot API failures built
    /// outside this module.
    pub fn redact<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        self.inner.redactor.redact(text)
    }

    fn network_error(&self, err: reqwest::Error) -> ApiError {
        network_error(err, &self.inner.redactor)
    }

    /// A description from the Bot API, which can echo the request (and so the token).
    fn described(&self, text: &str) -> String {
        self.inner.redactor.redact(text).into_owned()
    }

    /// One attempt of `method`.
    async fn call_once<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Body,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let url = format!("{}/{method}", self.inner.methods);
        let request = self.inner.http.post(url).timeout(timeout);
        let request = match body {
            Body::Json(value) => request.json(value),
            Body::Document { chat_id, name, bytes, caption } => {
                let part = reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone());
                let mut form = reqwest::multipart::Form::new()
                    .text("chat_id", chat_id.to_string())
                    .part("document", part);
                if let Some(caption) = caption {
                    form = form.text("caption", caption.clone());
                }
                request.multipart(form)
            }
        };
        tracing::debug!(method, "bot api call");
        let response = request.send().await.map_err(|e| self.network_error(e))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| self.network_error(e))?;
        let envelope: Envelope = match serde_json::from_slice(&bytes) {
            Ok(envelope) => envelope,
            Err(_) if status >= 500 => return Err(ApiError::Gateway { status }),
            Err(err) => {
                return Err(ApiError::Malformed(
                    self.described(&format!("status {status}: {err}")),
                ));
            }
        };
        // Telegram answered (even a refusal is an answer): it is reachable.
        self.inner.answered.send_modify(|n| *n = n.wrapping_add(1));
        if envelope.ok {
            let result = envelope.result.unwrap_or(Value::Null);
            return serde_json::from_value(result)
                .map_err(|err| ApiError::Malformed(self.described(&format!("{method}: {err}"))));
        }
        let code = envelope.error_code.unwrap_or(status);
        let description = self.described(&envelope.description.unwrap_or_default());
        Err(match code {
            429 => ApiError::TooManyRequests {
                retry_after: Duration::from_secs(
                    envelope.parameters.and_then(|p| p.retry_after).unwrap_or(1),
                ),
            },
            500.. => ApiError::Server { status: code, description },
            _ => ApiError::Rejected { status: code, description },
        })
    }

    /// `method` with retries: retryable failures wait (backoff, or a 429's `retry_after`) and
    /// try again until `attempts` run out; anything else returns at once, and so does a failure
    /// that may have reached Telegram when the call is not [`Repeat::Safe`].
    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: Body,
        (attempts, repeat): (Attempts, Repeat),
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<T, ApiError> {
        let mut attempt = 0u32;
        loop {
            let result = tokio::select! {
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                result = self.call_once(method, &body, timeout) => result,
            };
            let err = match result {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            let exhausted = match attempts {
                Attempts::Once => true,
                Attempts::AtMost(n) => attempt + 1 >= n,
                Attempts::Unbounded => false,
            };
            if !err.is_retryable() || exhausted {
                return Err(err);
            }
            if repeat == Repeat::IfUnhandled && err.is_maybe_delivered() {
                tracing::warn!(method, error = %err, "Bot API call failed after it may have been handled; not repeating it");
                return Err(err);
            }
            let wait = err.wait(&self.inner.backoff, attempt);
            tracing::warn!(method, error = %err, wait_ms = wait.as_millis() as u64, "Bot API call failed, retrying");
            tokio::select! {
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                () = tokio::time::sleep(wait) => {}
            }
            attempt = attempt.saturating_add(1);
        }
    }

    /// A send: bounded attempts, repeated only when certainly not handled.
    fn sends(&self) -> (Attempts, Repeat) {
        (Attempts::AtMost(self.inner.send_attempts), Repeat::IfUnhandled)
    }

    /// A call that is harmless to repeat, with bounded attempts.
    fn safe(&self) -> (Attempts, Repeat) {
        (Attempts::AtMost(self.inner.send_attempts), Repeat::Safe)
    }

    /// `getMe`, retried while the API is unreachable.
    ///
    /// # Errors
    /// A refusal (a bad token is 401 or 404), or [`ApiError::Cancelled`].
    pub async fn get_me(&self, cancel: &CancellationToken) -> Result<User, ApiError> {
        let timeout = self.inner.call_timeout;
        self.call(
            "getMe",
            Body::Json(json!({})),
            (Attempts::Unbounded, Repeat::Safe),
            timeout,
            cancel,
        )
        .await
    }

    /// One long poll for updates after `offset`: waits up to the poll timeout. Every failure,
    /// even a refusal (another instance polling the same bot is a 409), is retried with backoff:
    /// polling never gives up.
    ///
    /// # Errors
    /// Only [`ApiError::Cancelled`].
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Update>, ApiError> {
        let mut body = json!({
            "timeout": self.inner.poll_timeout.as_secs(),
            "allowed_updates": ["message", "callback_query"],
        });
        if let Some(offset) = offset {
            body["offset"] = json!(offset);
        }
        let timeout = self.inner.poll_timeout + self.inner.call_timeout;
        let body = Body::Json(body);
        let mut attempt = 0u32;
        loop {
            let result = tokio::select! {
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                result = self.call_once::<Vec<Update>>("getUpdates", &body, timeout) => result,
            };
            let err = match result {
                Ok(updates) => return Ok(updates),
                Err(err) => err,
            };
            let wait = err.wait(&self.inner.backoff, attempt);
            if err.is_retryable() {
                tracing::warn!(error = %err, wait_ms = wait.as_millis() as u64, "getUpdates failed, retrying");
            } else {
                tracing::error!(error = %err, wait_ms = wait.as_millis() as u64, "getUpdates refused, retrying");
            }
            tokio::select! {
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                () = tokio::time::sleep(wait) => {}
            }
            attempt = attempt.saturating_add(1);
        }
    }

    /// `sendMessage` with plain text (no `parse_mode`, so no entity parsing can refuse it).
    ///
    /// # Errors
    /// The last failure once attempts run out, or a refusal.
    pub async fn send_message(
        &self,
        chat_id: i64,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<Message, ApiError> {
        let body = Body::Json(json!({"chat_id": chat_id, "text": text}));
        self.call("sendMessage", body, self.sends(), self.inner.call_timeout, cancel).await
    }

    /// `sendMessage` with plain text marked by `entities` (an `entities` parameter, never a
    /// parse mode, so nothing in the text can mark itself).
    ///
    /// # Errors
    /// The last failure once attempts run out, or a refusal.
    pub async fn send_message_with_entities(
        &self,
        chat_id: i64,
        text: &str,
        entities: &[Entity],
        cancel: &CancellationToken,
    ) -> Result<Message, ApiError> {
        let body = Body::Json(json!({"chat_id": chat_id, "text": text, "entities": entities}));
        self.call("sendMessage", body, self.sends(), self.inner.call_timeout, cancel).await
    }

    /// `editMessageText`; "message is not modified" counts as success. An inline keyboard the
    /// message had is removed (an edit without `reply_markup` has none).
    ///
    /// # Errors
    /// The last failure once attempts run out, or a refusal.
    pub async fn edit_message(
        &self,
        chat_id: i64,
        message_id: i64,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<(), ApiError> {
        self.edit_message_text_with_buttons(chat_id, message_id, text, &[], &[], cancel).await
    }

    /// `sendMessage` with plain text marked by `entities` and an inline keyboard of callback
    /// buttons (rows of [`Button`]s), like [`BotApi::send_message_with_entities`] otherwise.
    ///
    /// # Errors
    /// The last failure once attempts run out, or a refusal (callback data that is empty or
    /// over 64 bytes is refused with `BUTTON_DATA_INVALID`).
    pub async fn send_message_with_buttons(
        &self,
        chat_id: i64,
        text: &str,
        entities: &[Entity],
        buttons: &[Vec<Button>],
        cancel: &CancellationToken,
    ) -> Result<Message, ApiError> {
        let mut body = json!({
            "chat_id": chat_id, "text": text, "reply_markup": inline_keyboard(buttons),
        });
        if !entities.is_empty() {
            body["entities"] = json!(entities);
        }
        let body = Body::Json(body);
        self.call("sendMessage", body, self.sends(), self.inner.call_timeout, cancel).await
    }

    /// `editMessageText` that also sets the message's marks and inline keyboard: `entities` and
    /// `buttons` replace the ones it had (an edit keeps no mark it does not give again), and no
    /// buttons remove them. "message is not modified" counts as success.
    ///
    /// # Errors
    /// The last failure once attempts run out, or a refusal.
    pub async fn edit_message_text_with_buttons(
        &self,
        chat_id: i64,
        message_id: i64,
        text: &str,
        entities: &[Entity],
        buttons: &[Vec<Button>],
        cancel: &CancellationToken,
    ) -> Result<(), ApiError> {
        let mut body = json!({"chat_id": chat_id, "message_id": message_id, "text": text});
        if !entities.is_empty() {
            body["entities"] = json!(entities);
        }
        if !buttons.is_empty() {
            body["reply_markup"] = inline_keyboard(buttons);
        }
        let body = Body::Json(body);
        let timeout = self.inner.call_timeout;
        match self.call::<Value>("editMessageText", body, self.safe(), timeout, cancel).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_not_modified() => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// `answerCallbackQuery`: ends the press's spinner in the user's client, showing `text` as
    /// a short notice when given. Tried at most twice, and again only when Telegram certainly
    /// did not handle it: Telegram refuses an answer after about 15 seconds, and a second
    /// answer of a query it did handle ("query is too old … or query ID is invalid").
    ///
    /// # Errors
    /// The failure (a refusal once the query expired).
    pub async fn answer_callback_query(
        &self,
        callback_query_id: &str,
        text: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<(), ApiError> {
        let mut body = json!({"callback_query_id": callback_query_id});
        if let Some(text) = text {
            body["text"] = json!(text);
        }
        let policy = (Attempts::AtMost(2), Repeat::IfUnhandled);
        let timeout = self.inner.call_timeout;
        self.call::<Value>("answerCallbackQuery", Body::Json(body), policy, timeout, cancel)
            .await?;
        Ok(())
    }

    /// `sendChatAction` `typing`, tried once (it is renewed every few seconds anyway).
    ///
    /// # Errors
    /// The failure.
    pub async fn send_typing(
        &self,
        chat_id: i64,
        cancel: &CancellationToken,
    ) -> Result<(), ApiError> {
        let body = Body::Json(json!({"chat_id": chat_id, "action": "typing"}));
        let once = (Attempts::Once, Repeat::Safe);
        self.call::<Value>("sendChatAction", body, once, self.inner.call_timeout, cancel).await?;
        Ok(())
    }

    /// `sendDocument` (multipart upload) of a file given as its name and bytes, with an
    /// optional caption.
    ///
    /// # Errors
    /// [`ApiError::TooLarge`] over [`UPLOAD_LIMIT`], else the last failure once attempts run
    /// out, or a refusal.
    pub async fn send_document(
        &self,
        chat_id: i64,
        name: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Message, ApiError> {
        let size = bytes.len() as u64;
        if size > UPLOAD_LIMIT {
            return Err(ApiError::TooLarge { size, limit: UPLOAD_LIMIT });
        }
        let body = Body::Document {
            chat_id,
            name: name.to_string(),
            bytes,
            caption: caption.map(str::to_string),
        };
        self.call("sendDocument", body, self.sends(), DOWNLOAD_TIMEOUT, cancel).await
    }

    /// `setMyCommands`, tried once (the command menu is a convenience).
    ///
    /// # Errors
    /// The failure.
    pub async fn set_my_commands(
        &self,
        commands: &[(&str, &str)],
        cancel: &CancellationToken,
    ) -> Result<(), ApiError> {
        let commands: Vec<Value> = commands
            .iter()
            .map(|(command, description)| json!({"command": command, "description": description}))
            .collect();
        let body = Body::Json(json!({"commands": commands}));
        let once = (Attempts::Once, Repeat::Safe);
        self.call::<Value>("setMyCommands", body, once, self.inner.call_timeout, cancel).await?;
        Ok(())
    }

    /// Downloads a file by id (`getFile`, then the file URL), refusing anything over `limit`
    /// bytes (by its declared size, and while streaming).
    ///
    /// # Errors
    /// [`ApiError::TooLarge`], a refusal (the file is gone), or the last failure.
    pub async fn download(
        &self,
        file_id: &str,
        limit: u64,
        cancel: &CancellationToken,
    ) -> Result<(File, Vec<u8>), ApiError> {
        let body = Body::Json(json!({"file_id": file_id}));
        let timeout = self.inner.call_timeout;
        let file: File = self.call("getFile", body, self.safe(), timeout, cancel).await?;
        if let Some(size) = file.file_size.filter(|size| *size > limit) {
            return Err(ApiError::TooLarge { size, limit });
        }
        let Some(file_path) = file.file_path.clone() else {
            return Err(ApiError::Rejected {
                status: 400,
                description: "the file is not available for download".into(),
            });
        };
        let mut attempt = 0u32;
        loop {
            let result = tokio::select! {
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                result = self.fetch(&file_path, limit) => result,
            };
            let err = match result {
                Ok(bytes) => return Ok((file, bytes)),
                Err(err) => err,
            };
            if !err.is_retryable() || attempt + 1 >= self.inner.send_attempts {
                return Err(err);
            }
            let wait = err.wait(&self.inner.backoff, attempt);
            tracing::warn!(error = %err, "file download failed, retrying");
            tokio::select! {
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                () = tokio::time::sleep(wait) => {}
            }
            attempt += 1;
        }
    }

    async fn fetch(&self, file_path: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
        let url = format!("{}/{file_path}", self.inner.files);
        tracing::debug!("bot api file download");
        let response = self
            .inner
            .http
            .get(url)
            .timeout(DOWNLOAD_TIMEOUT)
            .send()
            .await
            .map_err(|e| self.network_error(e))?;
        let status = response.status().as_u16();
        if status >= 500 {
            return Err(ApiError::Gateway { status });
        }
        if status != 200 {
            return Err(ApiError::Rejected { status, description: "file download refused".into() });
        }
        let mut bytes = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.network_error(e))?;
            let size = (bytes.len() + chunk.len()) as u64;
            if size > limit {
                return Err(ApiError::TooLarge { size, limit });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}
