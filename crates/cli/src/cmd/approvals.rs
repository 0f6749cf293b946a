//! `volcanic approvals`, `volcanic approve ID`, `volcanic deny ID [--reason TEXT]`: the owner's
//! decisions on what callers ask (docs/a2a.md, "Owner approval"), sent to the running server
//! through its control socket in the state folder (`volcanic_a2a::control`). No session can
//! reach that socket, so only the owner at their own shell decides.

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use clap::Args;
use volcanic_a2a::approval::PendingApproval;
use volcanic_a2a::control::{self, ControlAnswer, ControlRequest};
use volcanic_core::escape::{one_line, printable};

use crate::{Exit, Failure, config};

/// Where the server runs: the folders `volcanic serve` (or `volcanic telegram`) was given.
#[derive(Args)]
pub struct ServerArgs {
    /// The assistant's workspace; default: the current folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The server's state folder; default: Agent__StateDir, else ~/.local/state/volcanic.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// A TOML config file; default: volcanic.toml in the workspace, if present.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// One JSON value per request instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ApproveArgs {
    /// The request's id, as `volcanic approvals` lists it.
    id: String,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct DenyArgs {
    /// The request's id, as `volcanic approvals` lists it.
    id: String,
    /// Why: the caller sees it in the rejected task's status.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    server: ServerArgs,
}

/// `volcanic approvals`: the requests waiting, oldest first.
pub async fn list(args: ListArgs) -> Result<Exit, Failure> {
    let state_dir = state_dir(&args.server)?;
    let socket = control::socket_path(&state_dir);
    // From the running server; with none, from the records in the state folder (a listing
    // needs no server; a decision does).
    let (approvals, running) = match control::request(&socket, &ControlRequest::List).await {
        Ok(ControlAnswer::Approvals(approvals)) => (approvals, true),
        Ok(other) => return Err(refusal(other)),
        Err(_) => (recorded(&state_dir)?, false),
    };
    if args.json {
        for approval in &approvals {
            let line = serde_json::to_string(approval).map_err(|err| Failure {
                code: Exit::Failed,
                message: format!("approvals: {err}"),
            })?;
            println!("{line}");
        }
        return Ok(Exit::Success);
    }
    if approvals.is_empty() {
        println!("No request waits for your approval.");
    }
    for approval in &approvals {
        // The header line is the server's; the question and the request below it are the
        // caller's, every line of them indented and none of it able to move the cursor or
        // rewrite a line.
        let what = match (&approval.tool, &approval.question) {
            (Some(tool), _) => format!("a call of {} in task", one_line(tool)),
            (None, Some(_)) => "a reply in task".to_string(),
            (None, None) => "task".to_string(),
        };
        println!(
            "{}  {}  {what} {}  (expires in {})",
            one_line(&approval.id),
            one_line(&approval.caller),
            one_line(&approval.task_id),
            remaining(approval.expires_at),
        );
        if let Some(question) = &approval.question {
            println!("    the task asked: {}", printable(question).replace('\n', "\n    "));
            println!("    the caller answers:");
        }
        println!("    {}", printable(&approval.request).replace('\n', "\n    "));
    }
    if !running {
        println!(
            "\n(No server is running with this state folder: these are its records. Start it to decide.)"
        );
    } else if !approvals.is_empty() {
        println!("\nDecide with: volcanic approve ID, or volcanic deny ID --reason TEXT");
    }
    Ok(Exit::Success)
}

/// The waiting requests as the state folder records them (no server running).
fn recorded(state_dir: &Path) -> Result<Vec<PendingApproval>, Failure> {
    if !state_dir.join("a2a").join("approvals").is_dir() {
        return Ok(Vec::new());
    }
    let approvals = volcanic_a2a::approval::Approvals::open(state_dir).map_err(|err| Failure {
        code: Exit::Failed,
        message: format!("cannot read the approval records in {}: {err}", state_dir.display()),
    })?;
    Ok(approvals.list())
}

/// `volcanic approve ID`: the task's run starts.
pub async fn approve(args: ApproveArgs) -> Result<Exit, Failure> {
    decide(&args.server, ControlRequest::Approve { id: args.id }).await
}

/// `volcanic deny ID`: the task is rejected with the reason.
pub async fn deny(args: DenyArgs) -> Result<Exit, Failure> {
    decide(&args.server, ControlRequest::Deny { id: args.id, reason: args.reason }).await
}

async fn decide(server: &ServerArgs, request: ControlRequest) -> Result<Exit, Failure> {
    let socket = socket(server)?;
    let decided = match ask(&socket, &request).await? {
        ControlAnswer::Decided(decided) => decided,
        other => return Err(refusal(other)),
    };
    println!(
        "Task {} of {} is {} now.",
        one_line(&decided.task_id),
        one_line(&decided.caller),
        decided.state
    );
    Ok(Exit::Success)
}

fn socket(args: &ServerArgs) -> Result<PathBuf, Failure> {
    Ok(control::socket_path(&state_dir(args)?))
}

fn state_dir(args: &ServerArgs) -> Result<PathBuf, Failure> {
    let env = super::host_env();
    let workspace = super::workspace(args.workspace.as_deref())?;
    let settings = config::load(args.config.as_deref(), &workspace, &env)?;
    super::state_dir(args.state_dir.as_deref(), &settings, &env)
}

/// One request; an unreachable server is exit 1 with what to do.
async fn ask(socket: &Path, request: &ControlRequest) -> Result<ControlAnswer, Failure> {
    control::request(socket, request).await.map_err(|err| Failure {
        code: Exit::Failed,
        message: format!(
            "cannot reach the server's control socket {} ({err}): is `volcanic serve` (or `volcanic telegram`) running with this workspace and state folder?",
            socket.display()
        ),
    })
}

/// An answer other than the one asked for: the server's refusal, exit 1.
fn refusal(answer: ControlAnswer) -> Failure {
    let message = match answer {
        ControlAnswer::Refused(error) => error,
        ControlAnswer::Approvals(_) | ControlAnswer::Decided(_) => {
            "the server answered something else than was asked".to_string()
        }
    };
    Failure { code: Exit::Failed, message }
}

/// How long until `expires_at` (milliseconds since the epoch), roughly.
fn remaining(expires_at: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let secs = expires_at.saturating_sub(now) / 1000;
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ => format!("{} h", secs / 3600),
    }
}
