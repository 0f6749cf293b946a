//! The `volcanic` binary: parses arguments, sets up logging, wires the libraries, and turns errors
//! into exit codes in one place (0 ok, 1 the run failed, 2 bad usage or configuration,
//! 130 interrupted). It decides nothing itself.

mod cmd;
mod config;
mod logging;
mod provider;
mod sched;

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
}

/// Threads of the async runtime's blocking pool (file I/O).
const MAX_BLOCKING_THREADS: usize = 32;

/// A failure with the exit code it should produce.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Bad usage or configuration (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { code: 2, message: message.into() }
    }
}

impl From<config::ConfigError> for Failure {
    fn from(err: config::ConfigError) -> Self {
        Failure::usage(format!("bad configuration: {}", err.0))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server logs its lifecycle and owner notifications; chat keeps the terminal quiet.
    logging::init(match cli.command {
        Command::Chat(_) | Command::Callers(_) => "warn",
        Command::Serve(_) | Command::Telegram(_) => "info",
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
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            report(&failure.message);
            ExitCode::from(failure.code)
        }
    }
}

#[allow(clippy::print_stderr)]
fn report(message: &str) {
    eprintln!("volcanic: {message}");
}
