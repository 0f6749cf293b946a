//! `volcanic chat`: one prompt, or an interactive loop, against a workspace's assistant.
//!
//! Answers stream to stdout; tool use, retries and errors go to stderr, one line each, so stdout
//! holds only what the assistant said. Ctrl-C aborts the current run, not the program.
//! Interactively, `/compact [what to keep]` compacts the conversation now.

use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{Signal, SignalKind, signal};
use volcanic_core::escape::{one_line, printable};
use volcanic_core::session::is_valid_scope;
use volcanic_core::{EventKind, RunOutcome, Session, SessionOptions};

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
    let mut options = SessionOptions::new(scope, &workspace);
    options.confinement = super::owner_confinement(&settings, Some(&config_file))
        .await?
        .map(|owner| owner.for_workspace(&workspace, []));
    let session = factory
        .open(options)
        .await
        .map_err(|e| Failure { code: Exit::Failed, message: e.to_string() })?;

    let mut signals = Signals::new()?;
    let code = match args.prompt {
        Some(prompt) => one_run(&session, prompt, &mut signals).await?,
        None => interactive(&session, &mut signals).await?,
    };
    // A run may still be settling after a quit (second Ctrl-C, SIGTERM); give it a moment.
    if tokio::time::timeout(QUIT_GRACE, factory.close_runs()).await.is_err() {
        note("volcanic: the run did not stop in time; exiting anyway");
    }
    if let Err(err) = session.close() {
        note(&format!("volcanic: {err}"));
    }
    Ok(code)
}

/// How long a quitting chat waits for an aborted run to settle (its tools to be killed).
const QUIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

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

/// Writes a status line to stderr; a closed stderr is not worth failing over.
fn note(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// How a printed run ended.
enum Ended {
    Done,
    Failed,
    Aborted,
    /// The program should exit with this code now.
    Quit(Exit),
}

async fn one_run(
    session: &Session,
    prompt: String,
    signals: &mut Signals,
) -> Result<Exit, Failure> {
    Ok(match print_run(session, start(session.prompt(prompt))?, signals).await? {
        Ended::Done => Exit::Success,
        Ended::Failed => Exit::Failed,
        Ended::Aborted => Exit::Interrupted,
        Ended::Quit(exit) => exit,
    })
}

async fn interactive(session: &Session, signals: &mut Signals) -> Result<Exit, Failure> {
    note(&format!(
        "volcanic chat: session {} in {}. Ctrl-C stops a run; /compact [what to keep] makes room; Ctrl-D or /exit quits.",
        session.scope(),
        session.cwd().display()
    ));
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
        if text == "/exit" || text == "/quit" {
            return Ok(Exit::Success);
        }
        let handle = match compact_command(text) {
            Some(instruction) => start(session.compact(instruction))?,
            None => start(session.prompt(text.to_string()))?,
        };
        if let Ended::Quit(code) = print_run(session, handle, signals).await? {
            return Ok(code);
        }
    }
}

/// `/compact` or `/compact WHAT TO KEEP` typed at the prompt: the instruction, if any.
fn compact_command(text: &str) -> Option<Option<String>> {
    let rest = text.strip_prefix("/compact")?;
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    let rest = rest.trim();
    Some((!rest.is_empty()).then(|| rest.to_string()))
}

/// A started run, or the failure to report.
fn start(
    handle: volcanic_core::Result<volcanic_core::RunHandle>,
) -> Result<volcanic_core::RunHandle, Failure> {
    handle.map_err(|e| Failure { code: Exit::Failed, message: e.to_string() })
}

/// Follows one run, printing the answer as it streams.
async fn print_run(
    session: &Session,
    mut handle: volcanic_core::RunHandle,
    signals: &mut Signals,
) -> Result<Ended, Failure> {
    let mut at_line_start = true;
    let mut interrupted = false;
    loop {
        let event = tokio::select! {
            event = handle.events().recv() => event,
            asked = signals.next() => {
                session.abort();
                match asked {
                    Asked::Interrupt if !interrupted => {
                        interrupted = true;
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
                if !say(&printable(text)) {
                    // Whoever read our output is gone (a closed pipe): stop quietly, like `rg`.
                    session.abort();
                    return Ok(Ended::Quit(Exit::Success));
                }
                at_line_start = text.ends_with('\n');
            }
            EventKind::ToolStart { name, args, .. } => {
                if !at_line_start {
                    say("\n");
                    at_line_start = true;
                }
                note(&format!("· {} {}", one_line(name), summarize(args)));
            }
            EventKind::ToolEnd { name, result, .. } => {
                if result.is_error {
                    let last = result.content.lines().last().unwrap_or("");
                    note(&format!("· {} failed: {}", one_line(name), clip(&printable(last), 120)));
                }
            }
            EventKind::Compacted(compacted) => {
                if !at_line_start {
                    say("\n");
                    at_line_start = true;
                }
                note(&format!("· {}", printable(&compacted.to_string())));
            }
            EventKind::Retry { attempt, max, delay, error, .. } => {
                note(&format!(
                    "· model call failed ({}), retry {attempt}/{max} in {:.1}s",
                    clip(&printable(error), 120),
                    delay.as_secs_f32()
                ));
            }
            EventKind::Settled(settled) => {
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
                        note(&format!(
                            "volcanic: the run failed: {}",
                            printable(&error.to_string())
                        ));
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
