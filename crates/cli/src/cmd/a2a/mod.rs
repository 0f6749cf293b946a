//! `volcanic a2a …`: a command-line A2A client for any agent (docs/a2a-client.md), on
//! `volcanic_a2a::client`. This module reads the arguments, picks the interface through the
//! client's card reading, calls it, and turns the client's errors into messages that say what to
//! do and into exit codes; `show` prints what came back, for people or (`--json`) for scripts.

mod show;

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use futures_util::StreamExt;
use serde_json::{Value, json};
use volcanic_a2a::client::redirect::Refusal;
use volcanic_a2a::client::{
    self, AgentCard, Binding, Client, ClientError, ClientOptions, Credential, EventLimits,
    Redirects, Version,
};

use self::show::{Printer, Verdict};
use crate::{Exit, Failure};

/// The environment variable the key is read from when `--key` is not given.
pub const KEY_VAR: &str = "VOLCANIC_A2A_KEY";

/// The folder files in artifacts are saved to without `--out`.
const DEFAULT_OUT: &str = "a2a-files";

#[derive(Args)]
pub struct A2aArgs {
    #[command(subcommand)]
    command: A2aCommand,
    #[command(flatten)]
    connection: Connection,
}

/// How to reach the agent; every subcommand takes these.
#[derive(Args)]
struct Connection {
    /// The caller key the agent gave you (sent as X-API-Key; never printed). Default: the
    /// environment variable VOLCANIC_A2A_KEY.
    #[arg(long, global = true, env = KEY_VAR, hide_env_values = true)]
    key: Option<String>,
    /// Send the key as `Authorization: Bearer <key>` instead of X-API-Key.
    #[arg(long, global = true)]
    bearer: bool,
    /// Use this binding (default: the card's first one this client speaks).
    #[arg(long, global = true, value_enum)]
    binding: Option<BindingArg>,
    /// Use this A2A protocol version (default: the card's first one this client speaks).
    #[arg(long = "version", global = true, value_enum, value_name = "VERSION")]
    protocol: Option<VersionArg>,
    /// One JSON value per line (1.0 shapes, whatever the agent speaks), one per event when
    /// streaming, instead of text for people.
    #[arg(long, global = true)]
    json: bool,
    /// Follow redirects to other origins too (never with your key, never to link-local or
    /// cloud metadata addresses). Without it only redirects within the origin are followed.
    #[arg(long, global = true)]
    follow_redirects: bool,
    /// Give up a stream when an event has begun and less than 64 KiB more of it arrives in this
    /// many seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    stall_timeout: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum BindingArg {
    Jsonrpc,
    Rest,
}

#[derive(Clone, Copy, ValueEnum)]
enum VersionArg {
    #[value(name = "1.0")]
    V1_0,
    #[value(name = "0.3")]
    V0_3,
}

#[derive(Subcommand)]
enum A2aCommand {
    /// Show an agent's card: who it is, its interfaces, skills and how to authenticate.
    Card {
        /// The agent's base URL (the card is at URL/.well-known/agent-card.json) or its card's URL.
        url: String,
        /// The extended card, for your key (GetExtendedAgentCard).
        #[arg(long)]
        extended: bool,
    },
    /// Send a message and wait for the answer (or stream it with --stream).
    Send(SendArgs),
    /// Show a task: its state, its question if it waits for input, its artifacts.
    Get {
        url: String,
        task: String,
        /// At most this many messages of the task's history.
        #[arg(long)]
        history: Option<i32>,
        /// The folder files in artifacts are saved to [default: a2a-files]
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List your tasks, newest first (A2A 1.0).
    List(ListArgs),
    /// Cancel a task.
    Cancel { url: String, task: String },
    /// Follow a task's events until it ends or waits for input.
    Subscribe {
        url: String,
        task: String,
        /// The folder files in artifacts are saved to [default: a2a-files]
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Manage a task's push notification configs (webhooks).
    #[command(subcommand)]
    Push(PushCommand),
}

#[derive(Args)]
struct SendArgs {
    /// The agent's base URL or its card's URL.
    url: String,
    /// The message.
    text: String,
    /// Print the answer as it arrives, with a line per status change and tool use.
    #[arg(long)]
    stream: bool,
    /// Attach a file (repeatable).
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
    /// Continue this conversation (context id).
    #[arg(long)]
    context: Option<String>,
    /// Continue this task (answer its question).
    #[arg(long)]
    task: Option<String>,
    /// Return as soon as the task exists instead of waiting for it to end.
    #[arg(long, conflicts_with = "stream")]
    no_wait: bool,
    /// The folder files in artifacts are saved to [default: a2a-files]
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct ListArgs {
    url: String,
    /// Only tasks of this context.
    #[arg(long)]
    context: Option<String>,
    /// Only tasks in this state.
    #[arg(long, value_enum)]
    status: Option<StateArg>,
    /// Tasks per page (1-100).
    #[arg(long)]
    page_size: Option<i32>,
    /// The page after the one that gave this token.
    #[arg(long)]
    page_token: Option<String>,
    /// At most this many messages of history per task.
    #[arg(long)]
    history: Option<i32>,
    /// Only tasks whose status changed at or after this time (RFC 3339, e.g. 2026-05-01T00:00:00Z).
    #[arg(long)]
    after: Option<String>,
    /// Include the tasks' artifacts.
    #[arg(long)]
    artifacts: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum StateArg {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
    Rejected,
    AuthRequired,
}

impl StateArg {
    fn wire(self) -> &'static str {
        match self {
            StateArg::Submitted => "TASK_STATE_SUBMITTED",
            StateArg::Working => "TASK_STATE_WORKING",
            StateArg::Completed => "TASK_STATE_COMPLETED",
            StateArg::Failed => "TASK_STATE_FAILED",
            StateArg::Canceled => "TASK_STATE_CANCELED",
            StateArg::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            StateArg::Rejected => "TASK_STATE_REJECTED",
            StateArg::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }
}

#[derive(Subcommand)]
enum PushCommand {
    /// Register a webhook for a task's updates.
    Set {
        url: String,
        task: String,
        /// Where the agent POSTs the updates.
        webhook: String,
        /// The config's id (default: the agent picks one).
        #[arg(long)]
        id: Option<String>,
        /// A token the agent sends back with each update (X-A2A-Notification-Token).
        #[arg(long)]
        token: Option<String>,
        /// How the agent authenticates to the webhook, e.g. Bearer.
        #[arg(long, requires = "credentials")]
        auth_scheme: Option<String>,
        /// The credentials for --auth-scheme.
        #[arg(long, requires = "auth_scheme")]
        credentials: Option<String>,
    },
    /// Show one push config.
    Get { url: String, task: String, id: String },
    /// List a task's push configs.
    List { url: String, task: String },
    /// Delete a push config.
    Delete { url: String, task: String, id: String },
}

/// What every subcommand needs to reach the agent and print its answers.
struct Setup {
    credential: Option<Credential>,
    binding: Option<Binding>,
    version: Option<Version>,
    json: bool,
    options: ClientOptions,
    /// The connection flags an answer to the agent's question repeats (never the key itself).
    answer_flags: String,
}

impl Setup {
    async fn connect(&self, url: &str) -> Result<Client, Failure> {
        check_url(url)?;
        let card = self.card(url).await?;
        self.for_card(&card)
    }

    async fn card(&self, url: &str) -> Result<AgentCard, Failure> {
        client::fetch_card(url, self.options.redirects).await.map_err(failure)
    }

    fn for_card(&self, card: &AgentCard) -> Result<Client, Failure> {
        let interface = card.choose(self.binding, self.version).map_err(failure)?;
        if self.credential.is_some() {
            card.check_key_goes_to(&interface).map_err(failure)?;
        }
        Client::new(interface, self.credential.clone(), self.options).map_err(failure)
    }

    fn printer(&self, url: &str, out: Option<PathBuf>) -> Printer {
        Printer::new(self.json, url, out, &self.answer_flags)
    }
}

/// Runs one `volcanic a2a` subcommand; the exit code says how it went (0 done, 1 a failure it
/// reports, 2 bad usage).
pub async fn run(args: A2aArgs) -> Result<Exit, Failure> {
    let connection = args.connection;
    let setup = Setup {
        credential: credential(&connection)?,
        binding: connection.binding.map(|b| match b {
            BindingArg::Jsonrpc => Binding::JsonRpc,
            BindingArg::Rest => Binding::Rest,
        }),
        version: connection.protocol.map(|v| match v {
            VersionArg::V1_0 => Version::V1_0,
            VersionArg::V0_3 => Version::V0_3,
        }),
        json: connection.json,
        options: ClientOptions {
            redirects: if connection.follow_redirects {
                Redirects::AnyOrigin
            } else {
                Redirects::SameOrigin
            },
            events: EventLimits {
                max_bytes: client::MAX_EVENT_BYTES,
                stall: std::time::Duration::from_secs(connection.stall_timeout),
            },
        },
        answer_flags: answer_flags(&connection),
    };
    match args.command {
        A2aCommand::Card { url, extended } => {
            check_url(&url)?;
            let card = setup.card(&url).await?;
            if extended {
                let extended = setup.for_card(&card)?.extended_card().await.map_err(failure)?;
                setup.printer(&url, None).card(&extended, None);
            } else {
                let chosen = card.choose(setup.binding, setup.version).ok();
                setup
                    .printer(&url, None)
                    .card(&card.json, Some((&card.interfaces, chosen.as_ref())));
            }
            Ok(Exit::Success)
        }
        A2aCommand::Send(send) => {
            let request = send_request(&send)?;
            let client = setup.connect(&send.url).await?;
            let mut printer = setup.printer(&send.url, Some(out_dir(send.out.as_deref())));
            if send.stream {
                let events = client.send_stream(&request).await.map_err(failure)?;
                follow(&mut printer, events).await
            } else {
                let response = client.send(&request).await.map_err(failure)?;
                Ok(printer.send_response(&response).exit())
            }
        }
        A2aCommand::Get { url, task, history, out } => {
            let client = setup.connect(&url).await?;
            let task = client.get_task(&task, history).await.map_err(failure)?;
            setup.printer(&url, Some(out_dir(out.as_deref()))).task(&task);
            Ok(Exit::Success)
        }
        A2aCommand::List(list) => {
            let request = list_request(&list)?;
            let client = setup.connect(&list.url).await?;
            let page = client.list_tasks(&request).await.map_err(failure)?;
            setup.printer(&list.url, None).task_list(&page);
            Ok(Exit::Success)
        }
        A2aCommand::Cancel { url, task } => {
            let client = setup.connect(&url).await?;
            let task = client.cancel_task(&task).await.map_err(failure)?;
            setup.printer(&url, None).task(&task);
            Ok(Exit::Success)
        }
        A2aCommand::Subscribe { url, task, out } => {
            let client = setup.connect(&url).await?;
            let events = client.subscribe(&task).await.map_err(failure)?;
            follow(&mut setup.printer(&url, Some(out_dir(out.as_deref()))), events).await
        }
        A2aCommand::Push(push) => run_push(push, &setup).await,
    }
}

async fn run_push(push: PushCommand, setup: &Setup) -> Result<Exit, Failure> {
    match push {
        PushCommand::Set { url, task, webhook, id, token, auth_scheme, credentials } => {
            let client = setup.connect(&url).await?;
            let mut config = json!({"taskId": task, "url": webhook});
            if let Some(id) = id {
                config["id"] = json!(id);
            }
            if let Some(token) = token {
                config["token"] = json!(token);
            }
            if let (Some(scheme), Some(credentials)) = (auth_scheme, credentials) {
                config["authentication"] = json!({"scheme": scheme, "credentials": credentials});
            }
            let config: a2a::TaskPushNotificationConfig = serde_json::from_value(config)
                .map_err(|e| Failure::usage(format!("push config: {e}")))?;
            let created = client.create_push_config(&config).await.map_err(failure)?;
            setup.printer(&url, None).push_config(&created);
        }
        PushCommand::Get { url, task, id } => {
            let client = setup.connect(&url).await?;
            let config = client.get_push_config(&task, &id).await.map_err(failure)?;
            setup.printer(&url, None).push_config(&config);
        }
        PushCommand::List { url, task } => {
            let client = setup.connect(&url).await?;
            let list = client.list_push_configs(&task).await.map_err(failure)?;
            setup.printer(&url, None).push_configs(&list);
        }
        PushCommand::Delete { url, task, id } => {
            let client = setup.connect(&url).await?;
            client.delete_push_config(&task, &id).await.map_err(failure)?;
            setup.printer(&url, None).deleted(&task, &id);
        }
    }
    Ok(Exit::Success)
}

/// Prints a stream's events as they come; the exit code follows the last state.
async fn follow(printer: &mut Printer, mut events: client::EventStream) -> Result<Exit, Failure> {
    let mut verdict = Verdict::Done;
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => verdict = printer.event(&event),
            Err(error) => {
                printer.end_line();
                return Err(failure(error));
            }
        }
    }
    printer.end_line();
    Ok(verdict.exit())
}

/// The flags of this call that the command answering a question needs again: the interface if it
/// was forced, `--key <your key>` (a placeholder) when the key came from the flag rather than
/// the environment, `--bearer` and `--follow-redirects`.
fn answer_flags(connection: &Connection) -> String {
    let mut flags = String::new();
    if let Some(binding) = connection.binding {
        flags.push_str(match binding {
            BindingArg::Jsonrpc => " --binding jsonrpc",
            BindingArg::Rest => " --binding rest",
        });
    }
    if let Some(version) = connection.protocol {
        flags.push_str(match version {
            VersionArg::V1_0 => " --version 1.0",
            VersionArg::V0_3 => " --version 0.3",
        });
    }
    if connection.key.is_some() && std::env::var_os(KEY_VAR).is_none() {
        flags.push_str(" --key <your key>");
    }
    if connection.bearer {
        flags.push_str(" --bearer");
    }
    if connection.follow_redirects {
        flags.push_str(" --follow-redirects");
    }
    flags
}

fn credential(connection: &Connection) -> Result<Option<Credential>, Failure> {
    let Some(key) = connection.key.as_deref().filter(|key| !key.is_empty()) else {
        return Ok(None);
    };
    let credential =
        if connection.bearer { Credential::bearer(key) } else { Credential::api_key(key) };
    credential.map(Some).map_err(|e| Failure::usage(format!("--key / {KEY_VAR}: {e}")))
}

fn check_url(url: &str) -> Result<(), Failure> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(Failure::usage(format!(
            "{url}: expected the agent's http:// or https:// URL (e.g. http://127.0.0.1:8080)"
        )))
    }
}

fn out_dir(out: Option<&Path>) -> PathBuf {
    out.map_or_else(|| PathBuf::from(DEFAULT_OUT), Path::to_path_buf)
}

fn send_request(send: &SendArgs) -> Result<a2a::SendMessageRequest, Failure> {
    let mut parts = vec![a2a::Part::text(send.text.clone())];
    for path in &send.files {
        let bytes = std::fs::read(path)
            .map_err(|e| Failure::usage(format!("--file {}: {e}", path.display())))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let media_type = mime_guess::from_path(path).first_or_octet_stream().to_string();
        parts.push(a2a::Part::raw(bytes).with_filename(name).with_media_type(media_type));
    }
    let mut message = a2a::Message::new(a2a::Role::User, parts);
    message.context_id = send.context.clone();
    message.task_id = send.task.clone();
    let configuration = send.no_wait.then_some(a2a::SendMessageConfiguration {
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
        return_immediately: Some(true),
    });
    Ok(a2a::SendMessageRequest { message, configuration, metadata: None, tenant: None })
}

fn list_request(list: &ListArgs) -> Result<a2a::ListTasksRequest, Failure> {
    let mut request = serde_json::Map::new();
    let mut put = |name: &str, value: Option<Value>| {
        if let Some(value) = value {
            request.insert(name.into(), value);
        }
    };
    put("contextId", list.context.clone().map(Value::from));
    put("status", list.status.map(|s| Value::from(s.wire())));
    put("pageSize", list.page_size.map(Value::from));
    put("pageToken", list.page_token.clone().map(Value::from));
    put("historyLength", list.history.map(Value::from));
    put("statusTimestampAfter", list.after.clone().map(Value::from));
    put("includeArtifacts", list.artifacts.then_some(Value::Bool(true)));
    serde_json::from_value(Value::Object(request)).map_err(|e| {
        Failure::usage(format!(
            "--after: expected an RFC 3339 time such as 2026-05-01T00:00:00Z ({e})"
        ))
    })
}

/// A client error as the message the user sees, with what to do about it. A card or interface
/// the user's own flags rule out is bad usage (2); everything else is a failure reported (1).
fn failure(error: ClientError) -> Failure {
    let hint = match &error {
        ClientError::Unreachable { .. } => {
            "is the agent running, and is the URL right (scheme, host and port)?".to_owned()
        }
        ClientError::Unauthorized { sent_key: false, .. } => {
            format!("pass the key the agent's owner gave you with --key or {KEY_VAR}")
        }
        ClientError::Unauthorized { sent_key: true, .. } => {
            "check the key; add --bearer if the agent wants `Authorization: Bearer`".to_owned()
        }
        ClientError::Agent { code: a2a::error_code::TASK_NOT_FOUND, .. } => {
            "check the task id; an agent shows a task only to the key that created it".to_owned()
        }
        ClientError::Agent { code: a2a::error_code::VERSION_NOT_SUPPORTED, .. } => {
            "pick another version with --version 1.0 or --version 0.3 (see `volcanic a2a card URL`)"
                .to_owned()
        }
        ClientError::Agent { .. } | ClientError::Http { .. } | ClientError::BadResponse { .. } => {
            String::new()
        }
        ClientError::BadCard { .. } => {
            "is this an A2A agent? give its base URL or the URL of its agent card".to_owned()
        }
        ClientError::NoInterface { .. } => {
            "drop --binding / --version, or pick one the card offers".to_owned()
        }
        ClientError::NotInVersion { .. } => {
            "use a 1.0 interface (--version 1.0) if the agent offers one".to_owned()
        }
        ClientError::Redirected { why: Refusal::OtherOrigin, .. } => {
            "pass --follow-redirects to follow it (your key is never sent to another origin)"
                .to_owned()
        }
        ClientError::Redirected {
            why: Refusal::LinkLocal | Refusal::NotHttp | Refusal::Userinfo | Refusal::TooMany,
            ..
        } => String::new(),
        ClientError::KeyWithheld { .. } => {
            "if you trust that agent with your key, call it by its own URL".to_owned()
        }
    };
    let code =
        if matches!(error, ClientError::NoInterface { .. }) { Exit::Usage } else { Exit::Failed };
    let message = if hint.is_empty() { error.to_string() } else { format!("{error}\n  {hint}") };
    Failure { code, message }
}
