//! The `volcanic` binary: parses arguments, sets up logging, wires the libraries, and turns errors
//! into exit codes in one place ([`Exit`]: 0 ok, 1 the run failed, 2 bad usage or configuration,
//! 130 interrupted, 143 terminated). It decides nothing itself.

mod cmd;
mod config;
mod logging;
mod provider;
mod sched;
mod seal;

use std::process::ExitCode;

/// jemalloc instead of glibc's malloc: measured side by side (docs/performance.md, "Memory"),
/// it leaves 10–20 MiB less resident after bursts of concurrent requests (glibc keeps freed memory
/// in up to 16 per-thread arenas) and takes about a fifth less CPU per GetTask and ListTasks.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use clap::{Parser, Subcommand};

/// A personal-assistant runtime whose assistants other agents can reach over A2A.
#[derive(Parser)]
#[command(name = "volcanic", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Talk to the assistant of a workspace from the terminal.
    Chat(cmd::chat::ChatArgs),
    /// Serve a workspace's assistant to other agents over A2A.
    Serve(cmd::serve::ServeArgs),
    /// Run the Telegram bot: one assistant per allowed chat, and A2A when enabled.
    Telegram(cmd::telegram::TelegramArgs),
    /// Manage who may call a workspace's assistant (callers.json).
    Callers(cmd::callers::CallersArgs),
    /// List the callers' requests waiting for your approval on a running server.
    Approvals(cmd::approvals::ListArgs),
    /// Talk to any A2A agent: read its card, send messages, follow and manage tasks.
    A2a(cmd::a2a::A2aArgs),
    /// Approve a waiting request: its task's run starts.
    Approve(cmd::approvals::ApproveArgs),
    /// Deny a waiting request: its task is rejected, with your reason.
    Deny(cmd::approvals::DenyArgs),
    /// Today's usage of each A2A caller against its caps (tokens, spending, requests).
    Usage(cmd::usage::UsageArgs),
    /// Internal: the tool host a sandboxed session's tools run in (started by the server inside
    /// bubblewrap; talks JSON lines on stdin and stdout).
    #[command(name = "sandbox-tool-host", hide = true)]
    SandboxToolHost {
        /// The view to check before serving (JSON, from the launcher).
        #[arg(long)]
        expect: Option<String>,
        /// Kill what the calls left whenever no call runs.
        #[arg(long)]
        sweep: bool,
    },
    /// Internal: starts a sandbox for the server (opens its view, then becomes bubblewrap).
    #[command(name = "sandbox-launch", hide = true)]
    SandboxLaunch {
        /// The launch spec (JSON, from the server).
        spec: String,
    },
}

/// Threads of the async runtime's blocking pool (file I/O).
const MAX_BLOCKING_THREADS: usize = 32;

/// How long the exit waits for blocking work left over once the command has finished.
const STRAGGLER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How a command ended: every exit code the binary uses, each with one meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done (for `volcanic a2a`, the task did not fail).
    Success,
    /// 1: the run, the request or the task failed.
    Failed,
    /// 2: bad usage or configuration; the message names the option or key.
    Usage,
    /// 130: interrupted (Ctrl-C, SIGINT), as a shell reports it.
    Interrupted,
    /// 143: told to stop (SIGTERM, SIGHUP) while `volcanic chat` waited.
    Terminated,
}

impl Exit {
    /// The process's exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Interrupted => 130,
            Exit::Terminated => 143,
        }
    }
}

/// A failure with the exit code it should produce.
#[derive(Debug)]
pub struct Failure {
    pub code: Exit,
    pub message: String,
}

impl Failure {
    /// Bad usage or configuration (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { code: Exit::Usage, message: message.into() }
    }
}

impl From<config::ConfigError> for Failure {
    fn from(err: config::ConfigError) -> Self {
        Failure::usage(format!("bad configuration: {}", err.0))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::SandboxToolHost { expect, sweep } = &cli.command {
        // No logging and no multi-threaded runtime: the host is a small pipe server.
        return match volcanic_core::sandbox::run_tool_host(expect.as_deref(), *sweep) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                report(&format!("tool host: {err}"));
                ExitCode::from(1)
            }
        };
    }
    if let Command::SandboxLaunch { spec } = &cli.command {
        // Returns only when the launch failed; otherwise this process is bwrap now.
        let err = volcanic_core::sandbox::run_launcher(spec);
        report(&format!("sandbox: {err}"));
        return ExitCode::from(1);
    }
    // Before anything else runs (and before any thread exists): the servers restart themselves
    // without their secrets in the environment; every command with sessions turns
    // non-dumpable (see `seal`).
    if matches!(cli.command, Command::Serve(_) | Command::Telegram(_)) {
        match seal::reexec_without_secrets() {
            Ok(overlay) => cmd::set_sealed_env(overlay),
            Err(err) => {
                report(&err);
                return ExitCode::from(1);
            }
        }
    }
    if matches!(cli.command, Command::Serve(_) | Command::Telegram(_) | Command::Chat(_)) {
        seal::make_non_dumpable();
    }
    // The server logs its lifecycle and owner notifications; chat keeps the terminal quiet.
    logging::init(match cli.command {
        Command::Chat(_)
        | Command::A2a(_)
        | Command::Callers(_)
        | Command::Approvals(_)
        | Command::Approve(_)
        | Command::Deny(_)
        | Command::Usage(_) => "warn",
        Command::Serve(_)
        | Command::Telegram(_)
        | Command::SandboxToolHost { .. }
        | Command::SandboxLaunch { .. } => "info",
    });
    // The servers' threads yield to each other instead of preempting (see `sched`); before the
    // runtime starts, so that all of its threads inherit it.
    if matches!(cli.command, Command::Serve(_) | Command::Telegram(_)) {
        match sched::prefer_throughput() {
            Ok(sched::Outcome::Batch) => tracing::debug!("threads run under SCHED_BATCH"),
            Ok(sched::Outcome::Kept(policy)) => {
                tracing::info!(%policy, "threads keep the scheduling policy they were started with");
            }
            #[cfg(not(target_os = "linux"))]
            Ok(sched::Outcome::Unsupported) => {}
            Err(reason) => tracing::info!(%reason, "threads may not run under SCHED_BATCH"),
        }
    }
    // File I/O (task files, journals, fsyncs) runs on the blocking pool. Tokio's default of 512
    // threads lets a burst of requests start hundreds of threads, each with its stack and a share
    // of malloc's arenas, that stay resident after the burst; 32 keep enough fsyncs in flight
    // for the file system to group them (docs/performance.md).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            report(&format!("cannot start the async runtime: {err}"));
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Chat(args) => cmd::chat::run(args).await,
            Command::Serve(args) => cmd::serve::run(args).await,
            Command::Telegram(args) => cmd::telegram::run(args).await,
            Command::Callers(args) => cmd::callers::run(args),
            Command::Approvals(args) => cmd::approvals::list(args).await,
            Command::Approve(args) => cmd::approvals::approve(args).await,
            Command::A2a(args) => cmd::a2a::run(args).await,
            Command::Deny(args) => cmd::approvals::deny(args).await,
            Command::Usage(args) => cmd::usage::run(args),
            Command::SandboxToolHost { .. } | Command::SandboxLaunch { .. } => Ok(Exit::Success),
        }
    });
    // The command has finished (serve has persisted its final states); blocking work still
    // running, such as a read stuck on a slow or hostile file, must not hold the exit, which
    // dropping the runtime would (it waits for the blocking pool without end).
    runtime.shutdown_timeout(STRAGGLER_GRACE);
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(failure) => {
            report(&failure.message);
            ExitCode::from(failure.code.code())
        }
    }
}

#[allow(clippy::print_stderr)]
fn report(message: &str) {
    // A message may quote what another agent said (`volcanic a2a`): never its control codes.
    eprintln!("volcanic: {}", volcanic_core::escape::printable(message));
}
