//! The A2A server's options (`A2A__*`). Every default is written once, in the `Default` impl.

use std::time::Duration;

/// How many file artifacts at `A2A__MaxFileBytes` a task file has room for
/// ([`A2aOptions::max_task_file_bytes`]).
pub const TASK_FILE_FILES: u64 = 8;

/// Options of the A2A server.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aOptions {
    /// External base URL (`https://bot.example.com`) for the card's interface URLs; unset = built
    /// from the request's Host header.
    pub public_url: Option<String>,
    /// Largest `volcanic.hops` accepted; above it the task fails with "hop limit reached". Default 3.
    pub max_hops: u32,
    /// Idle server sessions are closed after this long (they stay resumable). Default 30 min.
    pub session_idle_timeout: Duration,
    /// Most sessions open at once, over all callers; a new context over it closes the least
    /// recently used idle session (it stays resumable), or is refused when all are busy.
    /// Default 256.
    pub max_open_sessions: usize,
    /// Most sessions one caller may have open at once, with the same eviction. Default 32.
    pub max_sessions_per_caller: usize,
    /// Cap per file part, in and out; request bodies are capped at this plus base64 overhead.
    /// Default 10 MiB.
    pub max_file_bytes: u64,
    /// Allow webhook and file-part URLs on loopback and private ranges (tests, tailnets), and
    /// plain http for webhooks (file parts are https whatever this says). Default false.
    pub allow_private_push_urls: bool,
    /// A PEM file of certificate authorities to trust for outbound https (file downloads and
    /// webhooks), on top of the system's: a private CA. Nothing turns certificate checks off.
    /// Default none.
    pub extra_ca_certificates: Option<std::path::PathBuf>,
    /// Name on the public card and the fallback extended card. Default "Volcanic assistant".
    pub card_name: String,
    /// Description on the public card and the last fallback. Default a generic sentence.
    pub card_description: String,
    /// Sign the 1.0 cards (the strict public card and the extended card) with an Ed25519 key and
    /// serve its public key at `/.well-known/jwks.json` (A2A 1.0.1 §8.4; docs/a2a.md, "Signed
    /// card"). Default true.
    pub card_signing: bool,
    /// The signing key, an Ed25519 private key in PKCS#8 PEM that must exist; unset, the key is
    /// `<state dir>/a2a/card-signing-key.pem`, created on first start. Default none.
    pub card_signing_key_file: Option<std::path::PathBuf>,
    /// How long a client has to send a complete request head (request line and headers),
    /// counted from when the connection is ready for a request: accepted, or the previous
    /// response sent. Slower clients are disconnected (slowloris). Default 30 s.
    pub header_read_timeout: Duration,
    /// How long a client has to send a whole request body; a slower body is answered 408 and
    /// the connection closed. Default 2 min.
    pub body_read_timeout: Duration,
    /// A connection with no request in progress that receives nothing for this long is closed.
    /// Default 20 s. (A kept-alive connection also counts as waiting for a request head, so it is
    /// closed after `header_read_timeout` at the latest.)
    pub idle_connection_timeout: Duration,
    /// A connection whose client takes none of the response bytes for this long (its receive
    /// window stays full) is closed; the run it was streaming goes on. Default 60 s.
    pub write_stall_timeout: Duration,
    /// Largest request head (request line plus headers) in bytes; a bigger one is answered 431
    /// and the connection closed. Default 64 KiB. (The number of header fields is capped at 100.)
    pub max_header_bytes: usize,
    /// Most connections served at once; further clients wait in the listen backlog until one
    /// closes. Default 512.
    pub max_connections: usize,
    /// Most connections from one peer address (IP) that have not yet carried a request with a
    /// valid key; over it a new connection from that address is answered 429 with `Retry-After`
    /// and closed before any request is read. A connection stops counting once a request on it
    /// authenticates, so a caller's kept-alive connections never count; a client that only
    /// fetches the public card is served and counts until it closes. Default 128 (a quarter of
    /// `max_connections`, and twice a 64-connection benchmark client).
    pub max_unauthenticated_connections_per_peer: usize,
    /// Most requests one caller may have in progress at once, streams included (counted from
    /// authentication until the reply is built or the stream ends); over it a request is
    /// answered 429 with `Retry-After`. Default 256 (half of `max_connections`).
    pub max_requests_per_caller: usize,
    /// Most SSE streams (SendStreamingMessage, SubscribeToTask, in both bindings and versions)
    /// one caller may have open at once; over it a stream is answered 429 with `Retry-After`
    /// and no run starts. Default 128.
    pub max_streams_per_caller: usize,
    /// Most connections one caller may hold open at once. A connection counts against the
    /// caller of the first request on it that authenticates (unless that request asks to close
    /// the connection, `Connection: close`), until it closes, idle or not; a request that would
    /// make it count over the cap is answered 429 with `Retry-After` and its connection closed.
    /// A connection later used by another caller still counts for the first one only. Default
    /// 128 (a quarter of `max_connections`, twice a 64-connection benchmark client).
    pub max_connections_per_caller: usize,
    /// Most bytes of A2A files in each workspace's inbox, counted over the regular files in
    /// `inbox/a2a/` and its caller folders plus the flat `inbox/a2a-*` files of earlier versions
    /// (symlinks not counted), so the owner frees room by deleting them; a file part that would
    /// go over fails its task with the reason. Default 1 GiB.
    pub max_inbox_bytes: u64,
    /// Most bytes of one caller's own folder `inbox/a2a/<caller>/`, which also counts for at
    /// most this much towards `max_inbox_bytes`: what a caller's session puts in its folder fills
    /// its own share, never the others' room. Default 256 MiB (a quarter of `max_inbox_bytes`).
    pub max_inbox_bytes_per_caller: u64,
    /// Most task files per workspace; beyond it a new task is refused (continuing an existing
    /// task still works). Retention removes old settled tasks (`retention`). Default 100,000.
    pub max_tasks: usize,
    /// Bytes of settled tasks' JSON kept in memory so GetTask and ListTasks answer them without
    /// reading their files (each still costs a `stat`); 0 turns the cache off. Default 12 MiB.
    pub task_cache_bytes: usize,
    /// Most attempts of one push delivery in one run of the server (a restart counts again from
    /// one; `push_max_age` bounds it across restarts). Default 10.
    pub push_max_attempts: u32,
    /// A push delivery still failing this long after its state change is dropped with a
    /// warning, across restarts. Default 24 h.
    pub push_max_age: Duration,
    /// Most push deliveries pending for one webhook (URL and config id); a notification over
    /// it is dropped with a warning. Default 1,024.
    pub push_max_pending_per_webhook: usize,
    /// Most bytes of push deliveries pending in all (bodies, URLs, tokens; on disk in the
    /// outbox and in memory); a notification over it is dropped with a warning. Default 64 MiB.
    pub push_max_pending_bytes: u64,
    /// How long a caller's accepted `messageId` is remembered: within it, a SendMessage that
    /// repeats the message returns the first send's task and starts no run (docs/a2a.md, "Safe
    /// retries"). Zero remembers nothing. Default 24 h.
    pub retry_window: Duration,
    /// Most accepted messages remembered per caller (the oldest are forgotten first), whatever
    /// the window says. Default 10,000.
    pub retry_records_per_caller: usize,
    /// Longest a GetTask with `currentGeneration` (the task-generation extension) waits for
    /// the task to move before answering with the task as it is. Zero answers at once.
    /// Default 30 s.
    pub max_generation_wait: Duration,
    /// How long a task waits for the owner's approval (callers.json `"approval"`) before it is
    /// rejected with that reason. Default 24 h.
    pub approval_timeout: Duration,
    /// Most bytes of messages kept for requests waiting for the owner's approval, over all
    /// callers (each is kept whole, file parts included, in the state folder until decided);
    /// a message that needs approval and would go over is refused. Default 256 MiB.
    pub max_pending_approval_bytes: u64,
    /// Caps over all callers of a workspace, the model price table and the day's time zone
    /// (`A2A__Limits__*`, `A2A__Prices`; docs/configuration.md). Default: no caps, no prices,
    /// UTC.
    pub usage: crate::usage::UsageOptions,
    /// What is removed, and when (`A2A__Retention__*`; docs/a2a.md, "Retention"). Default: on,
    /// settled tasks kept 90 days, callers' sessions and inbox files capped at 2 GiB per
    /// workspace, a round at start and every hour.
    pub retention: crate::retention::RetentionOptions,
}

impl Default for A2aOptions {
    fn default() -> Self {
        A2aOptions {
            public_url: None,
            max_hops: 3,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_open_sessions: 256,
            max_sessions_per_caller: 32,
            max_file_bytes: 10 * 1024 * 1024,
            allow_private_push_urls: false,
            extra_ca_certificates: None,
            card_name: "Volcanic assistant".into(),
            card_description: "A personal assistant that other agents can talk to over A2A.".into(),
            card_signing: true,
            card_signing_key_file: None,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(120),
            idle_connection_timeout: Duration::from_secs(20),
            write_stall_timeout: Duration::from_secs(60),
            max_header_bytes: 64 * 1024,
            max_connections: 512,
            max_unauthenticated_connections_per_peer: 128,
            max_requests_per_caller: 256,
            max_streams_per_caller: 128,
            max_connections_per_caller: 128,
            max_inbox_bytes: 1024 * 1024 * 1024,
            max_inbox_bytes_per_caller: 256 * 1024 * 1024,
            max_tasks: 100_000,
            task_cache_bytes: 12 * 1024 * 1024,
            push_max_attempts: 10,
            push_max_age: Duration::from_secs(24 * 60 * 60),
            push_max_pending_per_webhook: 1024,
            push_max_pending_bytes: 64 * 1024 * 1024,
            retry_window: Duration::from_secs(24 * 60 * 60),
            retry_records_per_caller: 10_000,
            max_generation_wait: Duration::from_secs(30),
            approval_timeout: Duration::from_secs(24 * 60 * 60),
            max_pending_approval_bytes: 256 * 1024 * 1024,
            usage: crate::usage::UsageOptions::default(),
            retention: crate::retention::RetentionOptions::default(),
        }
    }
}

impl A2aOptions {
    /// The largest request body accepted: a file part's base64 (4/3 of its bytes) plus 1 MiB of
    /// JSON around it.
    pub fn max_body_bytes(&self) -> usize {
        let file = usize::try_from(self.max_file_bytes).unwrap_or(usize::MAX);
        file.saturating_mul(4).div_ceil(3).saturating_add(1024 * 1024)
    }

    /// The largest task file the server reads: room for [`TASK_FILE_FILES`] file artifacts at
    /// `max_file_bytes`, as base64 (4/3 of their bytes), plus 1 MiB of JSON around them (107.7
    /// MiB for the default 10 MiB). A task's file bytes are only ever the files the assistant
    /// sends (received files are saved to `inbox/`, the history keeps a note), and the cap keeps
    /// a planted or runaway file from being read into memory whole; a bigger task file reads as
    /// missing, with a warning naming it and the cap.
    pub fn max_task_file_bytes(&self) -> u64 {
        let file = self.max_file_bytes.saturating_mul(4).div_ceil(3);
        file.saturating_mul(TASK_FILE_FILES).saturating_add(1024 * 1024)
    }
}
