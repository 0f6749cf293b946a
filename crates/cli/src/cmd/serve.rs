//! `volcanic serve`: the A2A server over one workspace (the design's sample host).
//!
//! Prints `volcanic: listening on http://HOST:PORT` on stdout once it accepts connections (tests
//! wait for that line), logs owner notifications, and on SIGTERM or SIGINT stops accepting,
//! lets aborted runs settle as canceled, and exits 0.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use volcanic_a2a::auth::{A2aWorkspace, Caller, WorkspaceCallerDirectory};
use volcanic_a2a::{A2aServer, OwnerNotifier};

use crate::{Exit, Failure, config};

#[derive(Args)]
pub struct ServeArgs {
    /// The assistant's workspace; default: the current folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Where to listen; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Use the offline, scripted Faux provider instead of a model.
    #[arg(long)]
    faux: bool,
    /// A Faux script file.
    #[arg(long)]
    faux_script: Option<PathBuf>,
    /// Where session journals are kept; default: Agent__StateDir, else ~/.local/state/volcanic.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// A TOML config file; default: volcanic.toml in the workspace, if present.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Owner notifications of the sample host go to the log. The text is the caller's: on one line,
/// with its control characters shown, so that it cannot start or rewrite a line of the log.
struct LogNotifier;

#[async_trait::async_trait]
impl OwnerNotifier for LogNotifier {
    async fn notify(&self, caller: &Caller, text: &str) -> Result<(), String> {
        let text = volcanic_core::escape::one_line(text);
        tracing::info!(caller = %caller.name, owner = %caller.workspace.owner_id, text = %text, "owner notification");
        Ok(())
    }
}

pub async fn run(args: ServeArgs) -> Result<Exit, Failure> {
    let env = super::host_env();
    let workspace = super::workspace(args.workspace.as_deref())?;
    let settings = config::load(args.config.as_deref(), &workspace, &env)?;
    let options = settings.a2a.to_options()?;
    let built =
        crate::provider::build(args.faux, args.faux_script.as_deref(), &settings.provider, &env)?;
    let state_dir = super::state_dir(args.state_dir.as_deref(), &settings, &env)?;

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
    super::check_prices(&options, &factory.model())?;
    let ws = A2aWorkspace {
        path: workspace.clone(),
        scope_prefix: "serve".into(),
        owner_id: "owner".into(),
    };
    let directory = Arc::new(WorkspaceCallerDirectory::new(Arc::new(move || vec![ws.clone()])));
    let config_file = args.config.clone().unwrap_or_else(|| workspace.join("volcanic.toml"));
    let containment = super::containment(&settings.a2a.sandbox, Some(&config_file)).await?;
    let server = A2aServer::builder(factory, directory)
        .options(options)
        .notifier(Arc::new(LogNotifier))
        .containment(containment)
        .caller_env(caller_env)
        .build()
        .map_err(|e| super::a2a_build_failure(&e))?;

    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| Failure::usage(format!("--listen {}: {e}", args.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|e| Failure { code: Exit::Failed, message: format!("listener: {e}") })?;
    println!("volcanic: listening on http://{address}");
    // The line above is the readiness signal; a closed stdout must not stop the server.
    let _ = std::io::stdout().flush();
    eprintln!(
        "volcanic: workspace {}; callers in .volcanic/a2a/callers.json. Try:\n  curl http://{address}/.well-known/agent-card.json",
        workspace.display()
    );

    let mut sigterm = signal(SignalKind::terminate())
        .map_err(|e| Failure { code: Exit::Failed, message: format!("signals: {e}") })?;
    let mut sigint = signal(SignalKind::interrupt())
        .map_err(|e| Failure { code: Exit::Failed, message: format!("signals: {e}") })?;
    // The signal watch runs beside the server in this task, not on a task of its own, so
    // nothing outlives the command; it ends with the shutdown, whoever started it.
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
    let serving = async {
        let served = server.serve(listener, shutdown.clone()).await;
        // The server also stops when its listener fails: the signal watch ends with it.
        shutdown.cancel();
        served
    };
    let (served, ()) = tokio::join!(serving, on_signal);
    served.map_err(|e| Failure { code: Exit::Failed, message: format!("server: {e}") })?;
    Ok(Exit::Success)
}
