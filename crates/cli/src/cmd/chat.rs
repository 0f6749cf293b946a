//! `volcanic chat`: one prompt, or an interactive loop, against a workspace's assistant.
//!
//! Answers stream to stdout; tool use, retries and errors go to stderr, one line each, so stdout
//! holds only what the assistant said. Ctrl-C aborts the current run, not the program.
//! Interactively, `/help`, `/new`, `/compact [what to keep]` and `/exit` are done here and never
//! reach the model. On a terminal, input goes through a line editor (`editor`) and transient
//! statuses share one updating line (`screen`); piped, everything reads as plain lines.

mod editor;
mod screen;

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{Signal, SignalKind, signal};
use volcanic_core::escape::{one_line, printable};
use volcanic_core::sandbox::Confinement;
use volcanic_core::session::is_valid_scope;
use volcanic_core::{EventKind, RunOutcome, Session, SessionFactory, SessionOptions};

use self::screen::{Screen, bold, dim, note};
use crate::{Exit, Failure, config};

#[derive(Args)]
pub struct ChatArgs {
    /// The workspace folder (PERSONA.md, AGENTS.md, MEMORY.md); default: the current folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Where session journals are kept; default: Agent__StateDir, else ~/.local/state/volcanic.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// The session to resume or start (its scope is chat-NAME).
    #[arg(long, default_value = "main")]
    session: String,
    /// Use the offline, scripted Faux provider instead of a model.
    #[arg(long)]
    faux: bool,
    /// A Faux script file (rules matched against your messages).
    #[arg(long)]
    faux_script: Option<PathBuf>,
    /// A TOML config file; default: volcanic.toml in the workspace, if present.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Send this one message, print the answer and exit; without it, chat interactively.
    prompt: Option<String>,
}

/// Runs the command; the exit code on success.
pub async fn run(args: ChatArgs) -> Result<Exit, Failure> {
    check_args(&args)?;
    let env = super::host_env();
    let workspace = super::workspace(args.workspace.as_deref())?;
    let settings = config::load(args.config.as_deref(), &workspace, &env)?;
    let built =
        crate::provider::build(args.faux, args.faux_script.as_deref(), &settings.provider, &env)?;
    let state_dir = super::state_dir(args.state_dir.as_deref(), &settings, &env)?;
    let scope = format!("chat-{}", args.session);
    if !is_valid_scope(&scope) {
        return Err(Failure::usage(format!(
            "--session {:?}: use letters, digits, '.', '_' and '-'",
            args.session
        )));
    }
    let factory = super::factory(built.provider, built.secrets, &state_dir, &settings, &env);
    let config_file = args.config.clone().unwrap_or_else(|| workspace.join("volcanic.toml"));
    let confinement = super::owner_confinement(&settings, Some(&config_file))
        .await?
        .map(|owner| owner.for_workspace(&workspace, []));
    let session = open(&factory, &scope, &workspace, confinement.as_ref()).await?;
    let mut chat = Chat {
        factory,
        scope,
        workspace,
        confinement,
        session,
        base_url: built.base_url,
        screen: Screen::new(),
        stdout_tty: std::io::stdout().is_terminal(),
    };

    let mut signals = Signals::new()?;
    let code = match args.prompt {
        Some(prompt) => chat.one_run(prompt, &mut signals).await?,
        None if std::io::stdin().is_terminal() => {
            chat.on_terminal(&state_dir.join(editor::HISTORY_FILE), &mut signals).await?
        }
        None => chat.interactive(&mut signals).await?,
    };
    chat.screen.clear();
    // A run may still be settling after a quit (second Ctrl-C, SIGTERM); give it a moment.
    if tokio::time::timeout(QUIT_GRACE, chat.factory.close_runs()).await.is_err() {
        note("volcanic: the run did not stop in time; exiting anyway");
    }
    if let Err(err) = chat.session.close() {
        note(&format!("volcanic: {err}"));
    }
    Ok(code)
}

/// Opens the chat's session.
async fn open(
    factory: &SessionFactory,
    scope: &str,
    workspace: &Path,
    confinement: Option<&Confinement>,
) -> Result<Session, Failure> {
    let mut options = SessionOptions::new(scope, workspace);
    options.confinement = confinement.cloned();
    factory.open(options).await.map_err(|e| Failure { code: Exit::Failed, message: e.to_string() })
}

/// Refuses what would be accepted silently and do nothing useful: an empty session name (the
/// scope `chat-`) and a one-shot prompt with nothing in it.
fn check_args(args: &ChatArgs) -> Result<(), Failure> {
    if args.session.trim().is_empty() {
        return Err(Failure::usage(
            "--session is empty: name the session (letters, digits, '.', '_' and '-'), or leave the option out for the session main",
        ));
    }
    if args.prompt.as_deref().is_some_and(|prompt| prompt.trim().is_empty()) {
        return Err(Failure::usage(
            "the message is empty: give the text to send, or no message at all to chat interactively",
        ));
    }
    Ok(())
}

/// How long a quitting chat waits for an aborted run to settle (its tools to be killed).
const QUIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The commands done here, never sent to the model, with what they do (`/help` lists them).
const COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list"),
    ("/new", "start a fresh conversation (the current one is archived, not deleted)"),
    ("/compact", "[what to keep] summarise the conversation now, to make room"),
    ("/exit", "quit (also /quit and Ctrl-D)"),
];

/// The keys of the line editor, for `/help` on a terminal.
const KEYS: &str = "Enter sends. A line ending in \\ (or Alt-Enter) continues on the next; a \
paste is one message.\nUp/Down and Ctrl-R search the history; Tab completes a command; Ctrl-C \
stops a run, clears the line at the prompt, and quits when pressed twice there.";

/// The signals chat reacts to. One listener each for the whole program, so a signal arriving
/// between two events is not lost.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

/// What the user (or the system) asked for.
enum Asked {
    /// Ctrl-C: stop the run (twice: quit).
    Interrupt,
    /// SIGTERM or SIGHUP: stop the run and quit.
    Quit,
}

impl Signals {
    fn new() -> Result<Self, Failure> {
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|e| Failure {
                code: Exit::Failed,
                message: format!("cannot listen for signals: {e}"),
            })
        };
        Ok(Signals {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
            hangup: listen(SignalKind::hangup())?,
        })
    }

    /// # Cancel safety
    /// Cancel safe: a signal not taken stays pending for the next call.
    async fn next(&mut self) -> Asked {
        tokio::select! {
            _ = self.interrupt.recv() => Asked::Interrupt,
            _ = self.terminate.recv() => Asked::Quit,
            _ = self.hangup.recv() => Asked::Quit,
        }
    }
}

/// Writes the assistant's words to stdout. `false` when stdout is gone (a closed pipe).
fn say(text: &str) -> bool {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_ok()
}

/// How a printed run ended.
enum Ended {
    Done,
    Failed,
    Aborted,
    /// The program should exit with this code now.
    Quit(Exit),
}

/// What a line typed at the prompt asks for.
#[derive(Debug, PartialEq, Eq)]
enum Typed {
    /// A message for the model.
    Message(String),
    Help,
    New,
    /// `/compact`, with what to keep in particular.
    Compact(Option<String>),
    Exit,
    /// `/word` that is no command: not sent, in case it was a typo.
    Unknown(String),
}

impl Typed {
    /// A command is `/` and a word of letters at the start; `//` sends the rest as a message
    /// that begins with `/`, and `/etc/hosts …` (no command shape) is a message as it is.
    fn parse(text: &str) -> Typed {
        if let Some(rest) = text.strip_prefix("//") {
            return Typed::Message(format!("/{rest}"));
        }
        let Some(after) = text.strip_prefix('/') else {
            return Typed::Message(text.to_string());
        };
        let (word, rest) = after.split_once(char::is_whitespace).unwrap_or((after, ""));
        if word.is_empty() || !word.chars().all(|c| c.is_ascii_alphabetic()) {
            return Typed::Message(text.to_string());
        }
        let rest = rest.trim();
        match word {
            "help" => Typed::Help,
            "new" => Typed::New,
            "exit" | "quit" => Typed::Exit,
            "compact" => Typed::Compact((!rest.is_empty()).then(|| rest.to_string())),
            _ => Typed::Unknown(format!("/{word}")),
        }
    }
}

/// A chat: its session (replaced by `/new`) and how to show it.
struct Chat {
    factory: SessionFactory,
    scope: String,
    workspace: PathBuf,
    confinement: Option<Confinement>,
    session: Session,
    /// The model server's URL, named when it cannot be reached.
    base_url: Option<String>,
    screen: Screen,
    stdout_tty: bool,
}

impl Chat {
    async fn one_run(&mut self, prompt: String, signals: &mut Signals) -> Result<Exit, Failure> {
        let handle = start(self.session.prompt(prompt))?;
        Ok(match self.print_run(handle, "thinking…", signals).await? {
            Ended::Done => Exit::Success,
            Ended::Failed => Exit::Failed,
            Ended::Aborted => Exit::Interrupted,
            Ended::Quit(exit) => exit,
        })
    }

    fn greet(&self) {
        note(&format!(
            "volcanic chat: session {} in {}. Ctrl-C stops a run; /help lists the commands; Ctrl-D or /exit quits.",
            self.session.scope(),
            self.session.cwd().display()
        ));
    }

    /// Reads one message per line from a pipe or file, until its end or `/exit`.
    async fn interactive(&mut self, signals: &mut Signals) -> Result<Exit, Failure> {
        self.greet();
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        loop {
            let _ = write!(std::io::stderr().lock(), "> ");
            let line = tokio::select! {
                line = lines.next_line() => line,
                asked = signals.next() => {
                    note("");
                    return Ok(match asked {
                        Asked::Interrupt => Exit::Interrupted,
                        Asked::Quit => Exit::Terminated,
                    });
                }
            };
            let line = match line {
                Ok(Some(line)) => line,
                Ok(None) => {
                    note("");
                    return Ok(Exit::Success);
                }
                Err(err) => {
                    return Err(Failure {
                        code: Exit::Failed,
                        message: format!("reading input: {err}"),
                    });
                }
            };
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            if let Some(code) = self.act(text, signals).await? {
                return Ok(code);
            }
        }
    }

    /// The interactive chat on a terminal: the line editor, with its history in `history`.
    async fn on_terminal(
        &mut self,
        history: &Path,
        signals: &mut Signals,
    ) -> Result<Exit, Failure> {
        let saved = editor::SavedTerminal::now();
        let editor = editor::Editor::new(history)
            .map_err(|message| Failure { code: Exit::Failed, message })?;
        self.greet();
        let mut editor = Some(editor);
        let mut interrupted = false;
        loop {
            let Some(mut taken) = editor.take() else {
                return Err(Failure {
                    code: Exit::Failed,
                    message: "the line editor is gone".into(),
                });
            };
            let reading = tokio::task::spawn_blocking(move || {
                let read = taken.read();
                (taken, read)
            });
            let (back, read) = tokio::select! {
                joined = reading => joined.map_err(|e| Failure {
                    code: Exit::Failed,
                    message: format!("the line editor failed: {e}"),
                })?,
                // Ctrl-C at the prompt is a key the editor reads; these come from outside.
                asked = signals.next() => {
                    if let Some(saved) = &saved {
                        saved.restore();
                    }
                    note("");
                    return Ok(match asked {
                        Asked::Interrupt => Exit::Interrupted,
                        Asked::Quit => Exit::Terminated,
                    });
                }
            };
            editor = Some(back);
            let read = read.map_err(|message| Failure { code: Exit::Failed, message })?;
            let text = match read {
                editor::Read::Line(text) => text,
                editor::Read::Interrupted if interrupted => return Ok(Exit::Interrupted),
                editor::Read::Interrupted => {
                    interrupted = true;
                    note(&dim("(Ctrl-C again or Ctrl-D quits)"));
                    continue;
                }
                editor::Read::Eof => return Ok(Exit::Success),
            };
            interrupted = false;
            if let Some(code) = self.act(text.trim(), signals).await? {
                return Ok(code);
            }
        }
    }

    /// Does what `text` asks: a local command, or a run. `Some` when the chat should end.
    async fn act(&mut self, text: &str, signals: &mut Signals) -> Result<Option<Exit>, Failure> {
        let (handle, label) = match Typed::parse(text) {
            Typed::Message(message) => (start(self.session.prompt(message))?, "thinking…"),
            Typed::Compact(instruction) => {
                (start(self.session.compact(instruction))?, "compacting…")
            }
            Typed::Exit => return Ok(Some(Exit::Success)),
            Typed::Help => {
                self.help();
                return Ok(None);
            }
            Typed::New => {
                self.renew().await?;
                return Ok(None);
            }
            Typed::Unknown(word) => {
                self.screen.error(&format!(
                    "volcanic: {word} is not a command; /help lists them (start with // to send a message that begins with /)"
                ));
                return Ok(None);
            }
        };
        Ok(match self.print_run(handle, label, signals).await? {
            Ended::Quit(code) => Some(code),
            Ended::Done | Ended::Failed | Ended::Aborted => None,
        })
    }

    fn help(&mut self) {
        note("Commands (done here, never sent to the model):");
        for (name, what) in COMMANDS {
            let (what, args) = match what.strip_prefix('[') {
                Some(rest) => rest.split_once("] ").map_or((*what, ""), |(a, w)| (w, a)),
                None => (*what, ""),
            };
            let usage =
                if args.is_empty() { (*name).to_string() } else { format!("{name} [{args}]") };
            let pad = " ".repeat(24usize.saturating_sub(usage.chars().count()));
            note(&format!("  {}{pad}{what}", bold(&usage)));
        }
        if self.screen.is_live() {
            note(KEYS);
        }
    }

    /// `/new`: archives the conversation and opens the session afresh.
    async fn renew(&mut self) -> Result<(), Failure> {
        if let Err(err) = self.session.close() {
            self.screen.error(&format!("volcanic: cannot start afresh: {err}"));
            return Ok(());
        }
        let archived = self.factory.archive(&self.scope).await;
        self.session =
            open(&self.factory, &self.scope, &self.workspace, self.confinement.as_ref()).await?;
        match archived {
            Ok(Some(file)) => self.screen.line(&format!(
                "· Fresh conversation started; the previous one is kept in {}",
                file.display()
            )),
            Ok(None) => self.screen.line("· Fresh conversation started"),
            Err(err) => self
                .screen
                .error(&format!("volcanic: cannot archive the conversation, so it goes on: {err}")),
        }
        Ok(())
    }

    /// Shows a transient status on a terminal (ending the answer's open line first, when the
    /// answer and the status share the terminal); `plain` is printed as a line elsewhere.
    fn status(&mut self, at_line_start: &mut bool, text: String, plain: Option<&str>) {
        if self.screen.is_live() && self.stdout_tty && !*at_line_start {
            say("\n");
            *at_line_start = true;
        }
        self.screen.status(text, plain);
    }

    /// Follows one run, printing the answer as it streams; `label` is the status shown until
    /// something happens.
    async fn print_run(
        &mut self,
        mut handle: volcanic_core::RunHandle,
        label: &'static str,
        signals: &mut Signals,
    ) -> Result<Ended, Failure> {
        let mut at_line_start = true;
        let mut interrupted = false;
        self.screen.status(label, None);
        loop {
            let event = tokio::select! {
                event = handle.events().recv() => event,
                asked = signals.next() => {
                    self.session.abort();
                    match asked {
                        Asked::Interrupt if !interrupted => {
                            interrupted = true;
                            self.screen.status("stopping…", None);
                            continue;
                        }
                        Asked::Interrupt => return Ok(Ended::Quit(Exit::Interrupted)),
                        Asked::Quit => return Ok(Ended::Quit(Exit::Terminated)),
                    }
                }
            };
            let Some(event) = event else { break };
            match &event.kind {
                EventKind::TextDelta { text, .. } => {
                    self.screen.clear();
                    if !say(&printable(text)) {
                        // Whoever read our output is gone (a closed pipe): stop quietly, like `rg`.
                        self.session.abort();
                        return Ok(Ended::Quit(Exit::Success));
                    }
                    at_line_start = text.ends_with('\n');
                }
                EventKind::ToolStart { name, args, .. } => {
                    if !at_line_start {
                        say("\n");
                        at_line_start = true;
                    }
                    let shown = format!("{} {}", one_line(name), summarize(args));
                    let plain = format!("· {shown}");
                    self.status(&mut at_line_start, shown, Some(&plain));
                }
                EventKind::ToolEnd { name, result, .. } => {
                    if result.is_error {
                        let last = result.content.lines().last().unwrap_or("");
                        self.screen.line(&dim(&format!(
                            "· {} failed: {}",
                            one_line(name),
                            clip(&printable(last), 120)
                        )));
                    }
                }
                EventKind::Compacted(compacted) => {
                    if !at_line_start {
                        say("\n");
                        at_line_start = true;
                    }
                    self.screen.line(&format!("· {}", printable(&compacted.to_string())));
                }
                EventKind::Retry { attempt, max, delay, error, .. } => {
                    let line = format!(
                        "model call failed ({}), retry {attempt}/{max} in {:.1}s",
                        clip(&printable(error), 120),
                        delay.as_secs_f32()
                    );
                    let plain = format!("· {line}");
                    self.status(&mut at_line_start, line, Some(&plain));
                }
                EventKind::TurnStart { .. } if at_line_start => {
                    self.screen.status("thinking…", None);
                }
                EventKind::Settled(settled) => {
                    self.screen.clear();
                    if !at_line_start {
                        say("\n");
                    }
                    return Ok(match &settled.outcome {
                        RunOutcome::Completed | RunOutcome::StoppedByTool { .. } => Ended::Done,
                        RunOutcome::MaxTurns => {
                            note(&format!(
                                "volcanic: stopped after {} model calls (Agent__MaxTurns)",
                                settled.turns
                            ));
                            Ended::Done
                        }
                        RunOutcome::Aborted => {
                            note("(aborted)");
                            Ended::Aborted
                        }
                        RunOutcome::Failed { error } => {
                            let error = printable(&error.to_string()).into_owned();
                            self.screen.error(&format!("volcanic: the run failed: {error}"));
                            if let Some(url) =
                                self.base_url.as_deref().filter(|_| unreachable(&error))
                            {
                                note(&format!(
                                    "  is {url} running? (the model server Provider__BaseUrl names)"
                                ));
                            }
                            Ended::Failed
                        }
                    });
                }
                EventKind::RunStart
                | EventKind::TurnStart { .. }
                | EventKind::MessageStart { .. }
                | EventKind::ThinkingDelta { .. }
                | EventKind::MessageEnd { .. }
                | EventKind::ToolUpdate { .. } => {}
            }
        }
        Err(Failure { code: Exit::Failed, message: "the run ended without settling".into() })
    }
}

/// Whether a failed model call never reached the model server: the HTTP request itself failed
/// (refused, no route, name not found, TLS), as the providers word it.
fn unreachable(error: &str) -> bool {
    error.contains(": request failed: ")
}

/// A started run, or the failure to report.
fn start(
    handle: volcanic_core::Result<volcanic_core::RunHandle>,
) -> Result<volcanic_core::RunHandle, Failure> {
    handle.map_err(|e| Failure { code: Exit::Failed, message: e.to_string() })
}

/// One short line for a tool call's arguments: the command, path or pattern if there is one.
fn summarize(args: &Value) -> String {
    let main = ["command", "path", "pattern", "text", "question"]
        .iter()
        .find_map(|key| args.get(*key).and_then(Value::as_str));
    let text = match main {
        Some(text) => text.replace('\n', " "),
        None => args.to_string(),
    };
    let text = printable(&text);
    clip(&text, 100)
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((index, _)) => format!("{}…", &text[..index]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_lines_table() {
        let cases = [
            ("hello", Typed::Message("hello".into())),
            ("/help", Typed::Help),
            ("/new", Typed::New),
            ("/exit", Typed::Exit),
            ("/quit", Typed::Exit),
            ("/compact", Typed::Compact(None)),
            ("/compact  the cat ", Typed::Compact(Some("the cat".into()))),
            ("/compactly", Typed::Unknown("/compactly".into())),
            ("/hlep me", Typed::Unknown("/hlep".into())),
            ("//help", Typed::Message("/help".into())),
            ("/etc/hosts is odd", Typed::Message("/etc/hosts is odd".into())),
            ("/", Typed::Message("/".into())),
        ];
        for (text, want) in cases {
            assert_eq!(Typed::parse(text), want, "{text:?}");
        }
    }
}
