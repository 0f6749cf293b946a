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
    if args.json {
        println!("{}", report.to_json());
    } else {
        // Caller names come from the state folder's day file: shown, never sent to the terminal.
        for line in report.lines() {
            println!("{}", volcanic_core::escape::one_line(&line));
        }
    }
    Ok(Exit::Success)
}
