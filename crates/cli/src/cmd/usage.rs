//! `volcanic usage`: today's usage of a workspace's A2A callers against their caps
//! (docs/a2a.md, "Spend caps and rate limits"). It reads the day's file the server keeps in its
//! state folder (written within a second of each change), so it works with or without a server
//! running.

#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use clap::Args;
use volcanic_a2a::auth::callers::{callers_path, parse_callers};
use volcanic_a2a::usage::Limits;
use volcanic_a2a::usage::ledger::{self, WorkspaceReport};

use crate::{Exit, Failure, config};

#[derive(Args)]
pub struct UsageArgs {
    /// The assistant's workspace; default: the current folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The server's state folder; default: Agent__StateDir, else ~/.local/state/volcanic.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// A TOML config file; default: volcanic.toml in the workspace, if present.
    #[arg(long)]
    config: Option<PathBuf>,
    /// One JSON value instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: UsageArgs) -> Result<Exit, Failure> {
    let env = super::host_env();
    let workspace = super::workspace(args.workspace.as_deref())?;
    let settings = config::load(args.config.as_deref(), &workspace, &env)?;
    // Read only: a state folder that does not exist has counted nothing.
    let state_dir = super::state_dir_path(args.state_dir.as_deref(), &settings, &env)?;
    let options = settings.a2a.to_options()?.usage;
    let (date, _) = ledger::day_of(chrono::Utc::now(), options.time_zone);
    let day = ledger::read(&state_dir, date).map_err(|err| Failure {
        code: Exit::Failed,
        message: format!("cannot read {}: {err}", ledger::path(&state_dir, date).display()),
    })?;
    let path = callers_path(&workspace);
    let recorded = day.as_ref().and_then(|day| day.workspace(&workspace)).is_some();
    if !recorded && std::fs::symlink_metadata(&path).is_err() {
        // Nothing to report is not zero usage: most likely the wrong folder.
        return Err(Failure::usage(format!(
            "{} is not an A2A workspace: it has no .volcanic/a2a/callers.json and no usage today; run this in the workspace `volcanic serve` serves, or pass --workspace (a Telegram chat's workspace is Telegram__WorkspaceRoot/CHAT_ID)",
            workspace.display()
        )));
    }
    let callers: Vec<(String, Limits)> =
        match volcanic_core::safe_file::read_config(&path, 1024 * 1024) {
            Ok(Some(bytes)) => parse_callers(&path, &String::from_utf8_lossy(&bytes))
                .iter()
                .map(|entry| (entry.name.clone(), entry.limits))
                .collect(),
            Ok(None) => Vec::new(),
            Err(err) => {
                return Err(Failure {
                    code: Exit::Failed,
                    message: format!("{}: {err}", path.display()),
                });
            }
        };
    let report = WorkspaceReport::new(
        &date.to_string(),
        options.zone_name(),
        day.as_ref().and_then(|day| day.workspace(&workspace)),
        &callers,
        options.workspace,
    );
    let disk = volcanic_a2a::retention::disk_use(
        &workspace,
        &state_dir,
        &scope_prefix(&workspace, &settings),
    );
    if args.json {
        let mut json = report.to_json();
        json["disk"] = serde_json::json!({
            "tasks": disk.tasks,
            "taskBytes": disk.task_bytes,
            "sessions": disk.sessions,
            "sessionBytes": disk.session_bytes,
            "inboxFiles": disk.inbox_files,
            "inboxBytes": disk.inbox_bytes,
        });
        println!("{json}");
    } else {
        // Caller names come from the state folder's day file: shown, never sent to the terminal.
        for line in report.lines() {
            println!("{}", volcanic_core::escape::one_line(&line));
        }
        println!(
            "A2A records: {} tasks ({}), {} caller sessions ({}), {} inbox files ({})",
            disk.tasks,
            megabytes(disk.task_bytes),
            disk.sessions,
            megabytes(disk.session_bytes),
            disk.inbox_files,
            megabytes(disk.inbox_bytes),
        );
    }
    Ok(Exit::Success)
}

/// The scope prefix of the workspace's callers' sessions: `telegram-<chatId>` for a chat's
/// workspace under `Telegram__WorkspaceRoot`, else `serve` (`volcanic serve`'s).
fn scope_prefix(workspace: &std::path::Path, settings: &config::Settings) -> String {
    let chat = settings.telegram.workspace_root.as_ref().and_then(|root| {
        let root = std::fs::canonicalize(root).ok()?;
        let workspace = std::fs::canonicalize(workspace).ok()?;
        (workspace.parent()? == root).then_some(())?;
        workspace.file_name()?.to_str()?.parse::<i64>().ok()
    });
    match chat {
        Some(chat_id) => volcanic_telegram::TelegramConfig::scope(chat_id),
        None => "serve".to_string(),
    }
}

/// Bytes as megabytes with one decimal (`12.3 MB`).
fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}
