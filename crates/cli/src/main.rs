//! The `volcanic` binary: parses arguments, sets up logging, wires the libraries, and turns errors
//! into exit codes in one place ([`Exit`]: 0 ok, 1 the run failed, 2 bad usage or configuration,
//! 130 interrupted, 143 terminated). It decides nothing itself.

mod cmd;
mod config;
mod logging;
mod provider;
mod sched;
mod seal;
mod state_lock;

use std::process::ExitCode;

/// jemalloc instead of glibc's malloc: measured side by side (docs/performance.md, "Memory"),
/// it leaves 10–20 MiB less resident after bursts of concurrent requests (glibc keeps freed memory
/// in up to 16 per-thread arenas) and takes about a fifth less CPU per GetTask and ListTasks.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The first line of `volcanic --help`: every command, by what it is for.
const ABOUT: &str = "Volcanic: a personal assistant in a workspace folder. Run it (serve, chat, \
telegram), talk to any A2A agent (a2a), decide who may call yours (callers, approvals, approve, \
deny, usage), and set up your shell (completions).";

const EXAMPLES: &str = "\
Examples:
  volcanic serve --faux --workspace examples/workspace --listen 127.0.0.1:8080
  volcanic chat --workspace examples/workspace \"what is in my notes?\"
  volcanic a2a card http://127.0.0.1:8080

Run `volcanic <command> --help` for a command's options and examples. Docs: docs/cli.md.";

#[derive(Parser)]
#[command(name = "volcanic", version, about = ABOUT, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `volcanic --help` lists the commands in these groups, in this order (clap itself has one
/// heading for all of them); a test checks that every visible command is in exactly one.
const GROUPS: &[(&str, &[&str])] = &[
    ("Run your assistant", &["serve", "chat", "telegram"]),
    ("Talk to any A2A agent", &["a2a"]),
    ("Decide who may call your assistant", &["callers", "approvals", "approve", "deny", "usage"]),
    ("Set up", &["completions", "help"]),
];

/// The parser of the whole command line, with the grouped command list in its help.
pub fn cli_command() -> clap::Command {
    // Built first, so that the `help` command clap adds is there to list; named first, so that
    // the commands' usage lines say `volcanic <command>` whatever the binary was called.
    let mut command = Cli::command().bin_name("volcanic");
    command.build();
    let heading = *command.get_styles().get_header();
    let literal = *command.get_styles().get_literal();
    let width = GROUPS.iter().flat_map(|(_, names)| names.iter()).map(|n| n.len()).max();
    let width = width.unwrap_or(0);
    let mut list = String::new();
    for (group, names) in GROUPS {
        list.push_str(&format!("{heading}{group}:{heading:#}\n"));
        for name in *names {
            let about = command
                .find_subcommand(name)
                .and_then(|sub| sub.get_about())
                .map(ToString::to_string)
                .unwrap_or_default();
            list.push_str(&format!("  {literal}{name:<width$}{literal:#}  {about}\n"));
        }
        list.push('\n');
    }
    command.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{list}\
{heading}Options:{heading:#}\n{{options}}{{after-help}}"
    ))
}

/// The commands, in the order `volcanic --help` shows them ([`GROUPS`]).
#[derive(Subcommand)]
enum Command {
    /// Serve a workspace's assistant to other agents over A2A.
    #[command(after_help = "\
Examples:
  volcanic serve --faux --workspace examples/workspace --listen 127.0.0.1:8080
  ANTHROPIC_API_KEY=sk-ant-... volcanic serve --workspace ~/assistant

It prints `volcanic: listening on http://ADDRESS` when ready; Ctrl-C or SIGTERM stops it.
Callers and their keys: `volcanic callers --help`. Docs: docs/a2a.md.")]
    Serve(cmd::serve::ServeArgs),
    /// Talk to a workspace's assistant from the terminal.
    #[command(after_help = "\
Examples:
  volcanic chat --workspace ~/assistant                 # interactive; Ctrl-D or /exit quits
  volcanic chat --faux --workspace examples/workspace \"hello\"
  volcanic chat --session trip \"where were we?\"         # resumes the conversation `trip`

Docs: docs/chat.md.")]
    Chat(cmd::chat::ChatArgs),
    /// Run the Telegram bot: an assistant per allowed chat, A2A if enabled.
    #[command(after_help = "\
Examples:
  Telegram__BotToken=123456789:AAE... Telegram__AllowedUserIds=<your user id> \\
  Telegram__WorkspaceRoot=$HOME/volcanic-chats volcanic telegram
  volcanic telegram --config /etc/volcanic/volcanic.toml

The settings (token, users, workspace root) come from the environment or the config file
([telegram]). Docs: docs/telegram-bot.md.")]
    Telegram(cmd::telegram::TelegramArgs),
    /// Talk to any A2A agent: its card, messages, tasks and webhooks.
    #[command(after_help = "\
Examples:
  volcanic a2a card http://127.0.0.1:8080
  VOLCANIC_A2A_KEY=<key> volcanic a2a send http://127.0.0.1:8080 --stream \"hello\"
  volcanic a2a list http://127.0.0.1:8080 --status input-required --json

Docs: docs/a2a-client.md.")]
    A2a(cmd::a2a::A2aArgs),
    /// Manage who may call a workspace's assistant (callers.json).
    #[command(after_help = "\
Examples:
  volcanic callers add travel-bot --tier read --workspace ~/assistant
  volcanic callers list --workspace ~/assistant

Docs: docs/a2a.md (\"volcanic callers\").")]
    Callers(cmd::callers::CallersArgs),
    /// List the callers' requests waiting for your approval.
    #[command(after_help = "\
Examples:
  volcanic approvals --workspace ~/assistant
  volcanic approvals --json

Give the same --workspace and --state-dir (or config) as the running server.
Decide with `volcanic approve ID` or `volcanic deny ID`. Docs: docs/a2a.md (\"Owner approval\").")]
    Approvals(cmd::approvals::ListArgs),
    /// Approve a waiting request: its task's run starts.
    #[command(after_help = "\
Examples:
  volcanic approve 3f1c09ab
  volcanic approve 3f1c09ab --workspace ~/assistant --state-dir /var/lib/volcanic

Needs the server running. Docs: docs/a2a.md (\"Owner approval\").")]
    Approve(cmd::approvals::ApproveArgs),
    /// Deny a waiting request: its task is rejected, with your reason.
    #[command(after_help = "\
Examples:
  volcanic deny 3f1c09ab --reason \"not this week\"
  volcanic deny 3f1c09ab --workspace ~/assistant

Needs the server running. Docs: docs/a2a.md (\"Owner approval\").")]
    Deny(cmd::approvals::DenyArgs),
    /// Today's usage of each A2A caller against its caps.
    #[command(after_help = "\
Examples:
  volcanic usage --workspace ~/assistant
  volcanic usage --json

Works with or without a server running. Docs: docs/a2a.md (\"Spend caps and rate limits\").")]
    Usage(cmd::usage::UsageArgs),
    /// Print the completion script of a shell.
    #[command(after_help = "\
Examples:
  volcanic completions bash > ~/.local/share/bash-completion/completions/volcanic
  volcanic completions zsh > ~/.zfunc/_volcanic      # with fpath+=(~/.zfunc) in ~/.zshrc
  volcanic completions fish > ~/.config/fish/completions/volcanic.fish

Docs: docs/cli.md (\"Shell completions\").")]
    Completions(cmd::completions::CompletionsArgs),
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
    let cli = match Cli::from_arg_matches(&cli_command().get_matches()) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
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
        // Chat shows each retried model call itself (a status line), so not its log line too
        // (`volcanic_core::session::RETRY_LOG_TARGET`).
        Command::Chat(_) => "warn,volcanic_core::retry=off",
        Command::A2a(_)
        | Command::Callers(_)
        | Command::Approvals(_)
        | Command::Approve(_)
        | Command::Deny(_)
        | Command::Usage(_)
        | Command::Completions(_) => "warn",
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
            Command::Completions(args) => cmd::completions::run(args),
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

#[cfg(test)]
mod tests {
    use super::{GROUPS, cli_command};

    #[test]
    fn the_command_line_is_well_formed() {
        // clap's own checks: no two options with one name, defaults that parse, and so on.
        cli_command().debug_assert();
    }

    #[test]
    fn every_visible_command_is_in_exactly_one_group_of_the_help() {
        let command = cli_command();
        let mut visible: Vec<&str> = command
            .get_subcommands()
            .filter(|sub| !sub.is_hide_set())
            .map(|sub| sub.get_name())
            .collect();
        let mut grouped: Vec<&str> =
            GROUPS.iter().flat_map(|(_, names)| names.iter().copied()).collect();
        visible.sort_unstable();
        grouped.sort_unstable();
        assert_eq!(visible, grouped);
    }

    /// Every visible command and subcommand has a one-line description and examples, and every
    /// argument and option a description.
    #[test]
    fn every_command_argument_and_option_is_described() {
        fn check(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() {
                    missing.push(format!("{path} {id}: no description"));
                }
            }
            for sub in command.get_subcommands() {
                if sub.is_hide_set() || sub.get_name() == "help" {
                    continue;
                }
                let path = format!("{path} {}", sub.get_name());
                if sub.get_about().is_none() {
                    missing.push(format!("{path}: no description"));
                }
                let examples = sub.get_after_help().map(ToString::to_string).unwrap_or_default();
                if !examples.contains("volcanic ") {
                    missing.push(format!("{path}: no example"));
                }
                check(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        check(&cli_command(), "volcanic", &mut missing);
        assert!(missing.is_empty(), "{missing:#?}");
    }
}
