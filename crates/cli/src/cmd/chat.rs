//! `volcanic chat`: one prompt, or an interactive loop, against a workspace's assistant.
//!
//! Answers stream to stdout; tool use, retries and errors go to stderr, one line each, so stdout
//! holds only what the assistant said. Ctrl-C aborts the current run, not the program.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{Signal, SignalKind, signal};
use volcanic_core::session::is_valid_scope;
use volcanic_core::{EventKind, RunOutcome, Session, SessionOptions};

use crate::{Failure, config};

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
pub async fn run(args: ChatArgs) -> Result<u8, Failure> {
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
    let session = factory
        .open(SessionOptions::new(scope, &workspace))
        .await
        .map_err(|e| Failure { code: 1, message: e.to_string() })?;

    // One listener for the whole program: a Ctrl-C between two events is not lost.
    let mut sigint = signal(SignalKind::interrupt())
        .map_err(|e| Failure { code: 1, message: format!("cannot listen for Ctrl-C: {e}") })?;
    let code = match args.prompt {
        Some(prompt) => one_run(&session, prompt, &mut sigint).await?,
        None => interactive(&session, &mut sigint).await?,
    };
    if let Err(err) = session.close() {
        eprintln!("volcanic: {err}");
    }
    Ok(code)
}

/// How a printed run ended.
enum Ended {
    Done,
    Failed,
    Aborted,
}

async fn one_run(session: &Session, prompt: String, sigint: &mut Signal) -> Result<u8, Failure> {
    Ok(match print_run(session, prompt, sigint).await? {
        Ended::Done => 0,
        Ended::Failed => 1,
        Ended::Aborted => 130,
    })
}

async fn interactive(session: &Session, sigint: &mut Signal) -> Result<u8, Failure> {
    eprintln!(
        "volcanic chat: session {} in {}. Ctrl-C stops a run; Ctrl-D or /exit quits.",
        session.scope(),
        session.cwd().display()
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        eprint!("> ");
        let line = tokio::select! {
            line = lines.next_line() => line,
            _ = sigint.recv() => {
                eprintln!();
                return Ok(130);
            }
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => {
                eprintln!();
                return Ok(0);
            }
            Err(err) => return Err(Failure { code: 1, message: format!("reading input: {err}") }),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/exit" || text == "/quit" {
            return Ok(0);
        }
        print_run(session, text.to_string(), sigint).await?;
    }
}

/// Runs one prompt, printing the answer as it streams.
async fn print_run(
    session: &Session,
    prompt: String,
    sigint: &mut Signal,
) -> Result<Ended, Failure> {
    let mut handle =
        session.prompt(prompt).map_err(|e| Failure { code: 1, message: e.to_string() })?;
    let mut stdout = std::io::stdout();
    let mut at_line_start = true;
    let mut interrupted = false;
    loop {
        let event = tokio::select! {
            event = handle.events().recv() => event,
            _ = sigint.recv(), if !interrupted => {
                interrupted = true;
                session.abort();
                continue;
            }
        };
        let Some(event) = event else { break };
        match &event.kind {
            EventKind::TextDelta { text, .. } => {
                print!("{text}");
                // A closed stdout (a pipe that went away) is not worth failing the run over.
                let _ = stdout.flush();
                at_line_start = text.ends_with('\n');
            }
            EventKind::ToolStart { name, args, .. } => {
                if !at_line_start {
                    println!();
                    at_line_start = true;
                }
                eprintln!("· {name} {}", summarize(args));
            }
            EventKind::ToolEnd { name, result, .. } => {
                if result.is_error {
                    let last = result.content.lines().last().unwrap_or("");
                    eprintln!("· {name} failed: {}", clip(last, 120));
                }
            }
            EventKind::Retry { attempt, max, delay, error, .. } => {
                eprintln!(
                    "· model call failed ({}), retry {attempt}/{max} in {:.1}s",
                    clip(error, 120),
                    delay.as_secs_f32()
                );
            }
            EventKind::Settled(settled) => {
                if !at_line_start {
                    println!();
                }
                return Ok(match &settled.outcome {
                    RunOutcome::Completed | RunOutcome::StoppedByTool { .. } => Ended::Done,
                    RunOutcome::MaxTurns => {
                        eprintln!(
                            "volcanic: stopped after {} model calls (Agent__MaxTurns)",
                            settled.turns
                        );
                        Ended::Done
                    }
                    RunOutcome::Aborted => {
                        eprintln!("(aborted)");
                        Ended::Aborted
                    }
                    RunOutcome::Failed { error } => {
                        eprintln!("volcanic: the run failed: {error}");
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
    Err(Failure { code: 1, message: "the run ended without settling".into() })
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
    clip(&text, 100)
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((index, _)) => format!("{}…", &text[..index]),
        None => text.to_string(),
    }
}
