//! `volcanic telegram`: the Telegram bot (one workspace and main session per allowed chat), and
//! the A2A server over those workspaces when `A2A__Enabled` is true.
//!
//! With A2A enabled it prints `volcanic: listening on http://HOST:PORT` on stdout once the
//! listener is bound; with it disabled there is no HTTP listener at all. SIGTERM or SIGINT stop
//! polling, abort runs, and exit 0.

#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use volcanic_telegram::TelegramHost;

use crate::{Exit, Failure, config};

/// Where the A2A server listens when neither `--listen` nor `A2A__Listen` says.
const DEFAULT_LISTEN: &str = "0.0.0.0:8080";

#[derive(Args)]
pub struct TelegramArgs {
    /// A TOML config file; default: volcanic.toml in the current folder, if present.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where the A2A server listens when A2A__Enabled=true; default: A2A__Listen, else 0.0.0.0:8080.
    #[arg(long)]
    listen: Option<String>,
    /// Use the offline, scripted Faux provider instead of a model.
    #[arg(long)]
    faux: bool,
    /// A Faux script file.
    #[arg(long)]
    faux_script: Option<PathBuf>,
    /// Where session journals and the update offset are kept; default: Agent__StateDir, else
    /// ~/.local/state/volcanic.
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

pub async fn run(args: TelegramArgs) -> Result<Exit, Failure> {
    let env = super::host_env();
    let cwd = super::workspace(None)?;
    let settings = config::load(args.config.as_deref(), &cwd, &env)?;
    let state_dir = super::state_dir(args.state_dir.as_deref(), &settings, &env)?;
    let telegram = settings.telegram.to_config(&state_dir)?;
    let a2a_options = if settings.a2a.enabled { Some(settings.a2a.to_options()?) } else { None };
    let mut built =
        crate::provider::build(args.faux, args.faux_script.as_deref(), &settings.provider, &env)?;
    // The token must never reach a journal or a tool's output.
    // Its secret part alone too: with the public bot id in front it is the whole token again.
    built.secrets.extend(telegram.token.secrets().into_iter().map(|s| (s.name, s.value)));
    std::fs::create_dir_all(&telegram.workspace_root).map_err(|e| {
        Failure::usage(format!(
            "Telegram__WorkspaceRoot {}: {e}",
            telegram.workspace_root.display()
        ))
    })?;

    let caller_env = super::caller_env(&settings, &built.secrets, &env)?;
    let shutdown = CancellationToken::new();
    let factory = Arc::new(super::factory_with_shutdown(
        built.provider,
        built.secrets,
        &state_dir,
        &settings,
        &env,
        shutdown.clone(),
    ));
    if let Some(options) = &a2a_options {
        super::check_prices(options, &factory.model())?;
    }
    let config_file = args.config.clone().unwrap_or_else(|| cwd.join("volcanic.toml"));
    let owner = super::owner_confinement(&settings, Some(&config_file)).await?;
    let mut builder = TelegramHost::builder(telegram, factory)
        .shutdown(shutdown.clone())
        .owner_confinement(owner);
    if let Some(options) = a2a_options {
        let containment = super::containment(&settings.a2a.sandbox, Some(&config_file)).await?;
        builder = builder.containment(containment).caller_env(caller_env);
        let listen = args
            .listen
            .or_else(|| settings.a2a.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| Failure::usage(format!("A2A__Listen {listen}: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| Failure { code: Exit::Failed, message: format!("listener: {e}") })?;
        println!("volcanic: listening on http://{address}");
        // The line above is the readiness signal; a closed stdout must not stop the bot.
        let _ = std::io::stdout().flush();
        builder = builder.a2a(options, listener);
    }
    let host = builder.build().map_err(|e| match e {
        volcanic_telegram::Error::A2aBuild(err) => super::a2a_build_failure(&err),
        other => Failure { code: Exit::Failed, message: other.to_string() },
    })?;

    let mut sigterm = signal(SignalKind::terminate())
        .map_err(|e| Failure { code: Exit::Failed, message: format!("signals: {e}") })?;
    let mut sigint = signal(SignalKind::interrupt())
        .map_err(|e| Failure { code: Exit::Failed, message: format!("signals: {e}") })?;
    // The signal watch runs beside the host in this task, not on a task of its own, so nothing
    // outlives the command; it ends with the shutdown, whoever started it.
    let stop = shutdown.clone();
    let on_signal = async move {
        tokio::select! {
            _ = sigterm.recv() => {}
            _ = sigint.recv() => {}
            () = stop.cancelled() => return,
        }
        tracing::info!("shutting down");
        stop.cancel();
    };
    let running = async {
        let ran = host.run().await;
        // The host cancels the token when it stops; this covers an early return too.
        shutdown.cancel();
        ran
    };
    let (ran, ()) = tokio::join!(running, on_signal);
    match ran {
        Ok(()) => Ok(Exit::Success),
        Err(err @ volcanic_telegram::Error::TokenRejected(_)) => {
            Err(Failure::usage(err.to_string()))
        }
        Err(err) => Err(Failure { code: Exit::Failed, message: err.to_string() }),
    }
}
