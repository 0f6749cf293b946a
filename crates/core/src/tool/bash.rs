//! The `bash` tool: runs a command with `bash -c` in the session's folder.
//!
//! The command gets its own process group, the scrubbed environment of [`ExecEnv`], no stdin, and
//! one pipe for both stdout and stderr (so their lines interleave as they were written). On a
//! timeout or an abort the whole group gets SIGTERM, then SIGKILL after [`KILL_GRACE`]; the pipe
//! is drained for at most that long, because background grandchildren can keep it open.
//!
//! Output is read to the end so the command never blocks on a full pipe, but only a bounded part
//! is kept: the start (up to the spill budget) and a window at the end. It is cleaned (invalid
//! UTF-8 replaced, ANSI escapes stripped, `\r\n` → `\n`), redacted, and only then capped and
//! spilled, so neither the model nor the spill file ever sees a known secret.
//!
//! Partial-output updates follow the same order: a wider window at the end is cleaned and
//! redacted first, and only then cut back to whole lines, so an update never starts inside a
//! secret that the redactor could no longer recognise.
//!
//! [`ExecEnv`]: crate::exec::ExecEnv

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep_until};

use super::output::{Keep, cap_output};
use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, parse_args};
use crate::config::ToolLimits;
use crate::provider::ToolSpec;
use crate::redact::Redactor;

/// Time between SIGTERM and SIGKILL, and the longest wait for the pipe to close once the shell
/// has ended or been stopped.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// Shortest time between two partial-output updates.
const UPDATE_INTERVAL: Duration = Duration::from_millis(250);
/// Bytes from the end of the output that an update shows.
const UPDATE_TAIL_BYTES: usize = 2048;
/// Bytes before the update window that are redacted with it, so a secret (or a multi-line key)
/// that begins before the window is still recognised whole.
const UPDATE_CONTEXT_BYTES: usize = 16 * 1024;
/// What an update shows when the last line alone is longer than [`UPDATE_TAIL_BYTES`].
const UPDATE_LONG_LINE: &str = "[… output continues]";
/// Bytes read from the pipe at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Runs a shell command: `bash {command, timeout_secs?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

#[derive(Deserialize)]
struct BashArgs {
    command: String,
    timeout_secs: Option<u64>,
}

/// Why the command was stopped before it ended on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    TimedOut,
    Aborted,
}

/// How a run ended.
struct Ended {
    status: Option<ExitStatus>,
    stop: Option<Stop>,
}

#[async_trait::async_trait]
impl Tool for BashTool {
    fn spec(&self) -> ToolSpec {
        let limits = ToolLimits::default();
        ToolSpec {
            name: "bash".to_string(),
            description: format!(
                "Run a command with bash -c in the working folder (stdin is empty; stdout and \
                 stderr are merged). The timeout is {} s unless timeout_secs says otherwise, at \
                 most {} s. Long output is cut to {} lines or {} KiB, keeping the start and the \
                 end; the full output is saved to a file named in the output, which you can read \
                 with the read tool. The result ends with the exit code. Redirect the output of \
                 background processes (cmd > log 2>&1 &), or the call waits up to {} s for them. \
                 A timeout or abort stops the command's whole process group, but processes that \
                 leave it (setsid, double-forked daemons) keep running, so do not start \
                 long-lived background daemons.",
                limits.bash_default_timeout.as_secs(),
                limits.bash_max_timeout.as_secs(),
                limits.max_output_lines,
                limits.max_output_bytes / 1024,
                KILL_GRACE.as_secs()
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to run"},
                    "timeout_secs": {
                        "type": "integer",
                        "minimum": 1,
                        "description": format!(
                            "Seconds before the command is stopped (default {}, at most {})",
                            limits.bash_default_timeout.as_secs(),
                            limits.bash_max_timeout.as_secs()
                        )
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: BashArgs = parse_args("bash", args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError("command is empty".to_string()));
        }
        let timeout = timeout_for(args.timeout_secs, &ctx.limits)?;
        let started = Instant::now();

        let (reader, writer) = std::io::pipe()?;
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(&args.command)
            .current_dir(&ctx.cwd)
            .env_clear()
            .envs(ctx.exec.vars())
            .stdin(Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer)
            .process_group(0)
            .kill_on_drop(true);
        let spawned = command.spawn();
        // The command holds our copies of the pipe's write end; without dropping it the pipe
        // would never report its end.
        drop(command);
        let mut child = spawned.map_err(|err| ToolError(format!("could not start bash: {err}")))?;
        let mut guard = GroupGuard::new(&child);
        let mut reader = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;

        let mut output = Collected::new(&ctx.limits);
        let ended = drive(&mut child, &mut reader, &mut guard, &mut output, timeout, &ctx).await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

        let text = ctx.redactor.redact(&clean(&output.into_bytes())).into_owned();
        let spill = ctx.spill_path();
        let limits = ctx.limits.clone();
        let capped = blocking("bash", move || {
            Ok(cap_output(&text, &limits, Keep::HeadAndTail, Some(&spill)))
        })
        .await?;

        let exit_code = ended.status.and_then(|s| s.code().or(s.signal().map(|sig| 128 + sig)));
        let last_line = match (ended.stop, exit_code) {
            (Some(Stop::TimedOut), _) => format!("timed out after {}s", timeout.as_secs()),
            (Some(Stop::Aborted), _) => "aborted".to_string(),
            (None, Some(code)) => format!("exit code: {code}"),
            (None, None) => "exit code: unknown".to_string(),
        };
        let body = capped.text.trim_end_matches('\n');
        let body = if body.is_empty() { "(no output)" } else { body };
        let details = json!({
            "exit_code": exit_code,
            "timed_out": ended.stop == Some(Stop::TimedOut),
            "aborted": ended.stop == Some(Stop::Aborted),
            "truncated": capped.truncated,
            "spill_path": capped.spill_path.map(|p| p.display().to_string()),
            "duration_ms": duration_ms,
        });
        let output = ToolOutput::text(format!("{body}\n\n{last_line}")).with_details(details);
        Ok(if ended.stop.is_some() || exit_code != Some(0) {
            ToolOutput { is_error: true, ..output }
        } else {
            output
        })
    }
}

/// The timeout a call gets: its own (at least a second) or the default, at most the maximum.
fn timeout_for(requested: Option<u64>, limits: &ToolLimits) -> Result<Duration, ToolError> {
    let timeout = match requested {
        Some(0) => return Err(ToolError("timeout_secs must be at least 1".to_string())),
        Some(secs) => Duration::from_secs(secs),
        None => limits.bash_default_timeout,
    };
    Ok(timeout.min(limits.bash_max_timeout))
}

/// Reads the output until the pipe closes and the shell has ended, stopping the command on
/// timeout or abort and sending throttled updates on the way.
async fn drive(
    child: &mut Child,
    reader: &mut pipe::Receiver,
    guard: &mut GroupGuard,
    output: &mut Collected,
    timeout: Duration,
    ctx: &ToolContext,
) -> Ended {
    let deadline = Instant::now() + timeout;
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut reading = true;
    let mut exited = false;
    let mut status = None;
    let mut stop = None;
    let mut killed = false;
    // When set: the latest moment to give up on the pipe (and, when stopping, to send SIGKILL).
    let mut drain_until: Option<Instant> = None;
    let mut last_update = Instant::now();
    let mut update_pending = false;

    while reading || !exited {
        tokio::select! {
            read = reader.read(&mut chunk), if reading => match read {
                Ok(0) | Err(_) => reading = false,
                Ok(n) => {
                    output.push(&chunk[..n]);
                    update_pending = true;
                }
            },
            waited = child.wait(), if !exited => {
                exited = true;
                status = waited.ok();
                guard.shell_ended();
                drain_until.get_or_insert(Instant::now() + KILL_GRACE);
            },
            () = sleep_until(deadline), if stop.is_none() && !exited => {
                stop = Some(Stop::TimedOut);
                guard.signal(Signal::TERM);
                drain_until = Some(Instant::now() + KILL_GRACE);
            },
            () = ctx.cancel.cancelled(), if stop.is_none() && !exited => {
                stop = Some(Stop::Aborted);
                guard.signal(Signal::TERM);
                drain_until = Some(Instant::now() + KILL_GRACE);
            },
            () = sleep_until(last_update + UPDATE_INTERVAL), if update_pending => {
                ctx.update(update_text(output, &ctx.redactor));
                last_update = Instant::now();
                update_pending = false;
            },
            () = sleep_until(drain_until.unwrap_or(deadline)), if drain_until.is_some() => {
                reading = false;
                if killed {
                    // Not even SIGKILL ended it (a process stuck in the kernel): give up waiting.
                    break;
                }
                if stop.is_some() {
                    killed = true;
                    guard.signal(Signal::KILL);
                    drain_until = Some(Instant::now() + KILL_GRACE);
                } else {
                    drain_until = None;
                }
            },
        }
    }
    if stop.is_some() && !killed {
        // Grandchildren that outlived the shell's SIGTERM are still in the group.
        guard.signal(Signal::KILL);
    }
    Ended { status, stop }
}

/// What an update shows: the whole lines at the end of the output that fit in
/// [`UPDATE_TAIL_BYTES`], or [`UPDATE_LONG_LINE`] when the last line alone is longer.
fn update_text(output: &Collected, redactor: &Redactor) -> String {
    let (raw, at_line_start) = output.last_bytes(UPDATE_TAIL_BYTES + UPDATE_CONTEXT_BYTES);
    let cleaned = clean(&raw);
    let text = redactor.redact(&cleaned);
    tail_lines(&text, UPDATE_TAIL_BYTES, at_line_start).unwrap_or(UPDATE_LONG_LINE).to_string()
}

/// The whole lines at the end of `text` that fit in `max` bytes, or `None` when the last line
/// alone does not fit. `at_line_start` says whether `text` itself begins at a line start.
fn tail_lines(text: &str, max: usize, at_line_start: bool) -> Option<&str> {
    let from = text.len().saturating_sub(max);
    let bytes = text.as_bytes();
    let starts_line = match from.checked_sub(1) {
        None => at_line_start,
        Some(before) => bytes.get(before) == Some(&b'\n'),
    };
    if starts_line {
        return text.get(from..);
    }
    let newline = bytes.get(from..)?.iter().position(|&b| b == b'\n')?;
    text.get(from + newline + 1..).filter(|rest| !rest.is_empty())
}

/// Invalid UTF-8 replaced, ANSI escape sequences removed, `\r\n` turned into `\n`.
fn clean(bytes: &[u8]) -> String {
    strip_ansi(&String::from_utf8_lossy(bytes)).replace("\r\n", "\n")
}

/// Removes CSI (`ESC [ … final`), OSC (`ESC ] … BEL` or `ESC ] … ESC \`) and the other escape
/// sequences.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('[') => {
                chars.next();
                // Parameter and intermediate bytes, then one final byte in `@`..=`~`.
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                while let Some(n) = chars.next() {
                    if n == '\x07' {
                        break;
                    }
                    if n == '\x1b' {
                        chars.next_if_eq(&'\\');
                        break;
                    }
                }
            }
            Some(' '..='/') => {
                // Intermediate bytes (character set selection and the like), then a final byte.
                while chars.next_if(|n| (' '..='/').contains(n)).is_some() {}
                chars.next();
            }
            Some('0'..='~') => {
                chars.next();
            }
            _ => {}
        }
    }
    out
}

/// The process group of a command. Dropped while the shell still runs (the loop gives up on a
/// tool that outlives its abort grace period), it kills the whole group.
struct GroupGuard {
    group: Option<Pid>,
    kill_on_drop: bool,
}

impl GroupGuard {
    fn new(child: &Child) -> Self {
        let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
        GroupGuard { group, kill_on_drop: true }
    }

    /// Signals every process in the group. Still right after the shell was reaped: the kernel does
    /// not hand out a group's id again while any member lives.
    fn signal(&self, signal: Signal) {
        if let Some(group) = self.group {
            // The group may already be gone (ESRCH); there is nothing left to stop then.
            let _ = kill_process_group(group, signal);
        }
    }

    /// The shell ended: background processes it left are not killed when the call ends normally.
    fn shell_ended(&mut self) {
        self.kill_on_drop = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.kill_on_drop {
            self.signal(Signal::KILL);
        }
    }
}

/// Output kept in memory while a command runs: its start, up to the spill budget, and a window at
/// its end large enough for the tail the model sees. What falls between is only counted.
struct Collected {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    dropped: u64,
}

impl Collected {
    fn new(limits: &ToolLimits) -> Self {
        let spill = usize::try_from(limits.max_spill_bytes).unwrap_or(usize::MAX);
        // Twice the cap, because cleaning can shrink the raw bytes (escape sequences).
        let tail_cap = limits.max_output_bytes.saturating_mul(2).max(1);
        Collected {
            head: Vec::new(),
            head_cap: spill.max(limits.max_output_bytes),
            tail: VecDeque::new(),
            tail_cap,
            dropped: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.head_cap - self.head.len();
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        if self.head.capacity() - self.head.len() < to_head.len() {
            // Grow by doubling as usual, but never past the cap.
            let want =
                (self.head.capacity() * 2).clamp(self.head.len() + to_head.len(), self.head_cap);
            self.head.reserve_exact(want - self.head.len());
        }
        self.head.extend_from_slice(to_head);
        self.tail.extend(rest);
        let over = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..over);
        self.dropped += over as u64;
    }

    /// The last `max` bytes of the output (fewer when less is kept), and whether they begin at
    /// a line start. The window never reaches back across bytes that were not kept.
    fn last_bytes(&self, max: usize) -> (Vec<u8>, bool) {
        // With bytes dropped between head and tail, the end of the output is the tail alone, and
        // whatever came before the tail's first byte is unknown.
        let head: &[u8] = if self.dropped > 0 { &[] } else { &self.head };
        let skip = (head.len() + self.tail.len()).saturating_sub(max);
        let before = skip.checked_sub(1).and_then(|at| match head.get(at) {
            Some(&byte) => Some(byte),
            None => self.tail.get(at - head.len()).copied(),
        });
        let at_line_start = before.map_or(self.dropped == 0, |byte| byte == b'\n');
        let mut window = Vec::with_capacity(max.min(head.len() + self.tail.len()));
        if let Some(head) = head.get(skip..) {
            window.extend_from_slice(head);
            window.extend(&self.tail);
        } else {
            window.extend(self.tail.range(skip - head.len()..));
        }
        (window, at_line_start)
    }

    fn into_bytes(self) -> Vec<u8> {
        let mut bytes = self.head;
        if self.dropped > 0 {
            bytes.extend_from_slice(
                format!("\n[… {} bytes of output not kept …]\n", self.dropped).as_bytes(),
            );
        }
        bytes.extend(self.tail);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::exec::ExecEnv;
    use crate::redact::Redactor;
    use crate::tool::test_context;

    async fn bash(dir: &Path, args: Value) -> ToolOutput {
        BashTool.execute(args, test_context(dir)).await.unwrap()
    }

    /// The details without the one field that differs from run to run.
    fn steady(details: &Value) -> Value {
        let mut details = details.clone();
        details.as_object_mut().unwrap().remove("duration_ms");
        details
    }

    /// Polls `check` until it gives a value, failing the test after `within`.
    async fn wait_for<T>(within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(value) = check() {
                return value;
            }
            assert!(Instant::now() < deadline, "condition not met within {within:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn bash_echo_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), json!({"command": "echo hello"})).await;
        assert_eq!(out.content, "hello\n\nexit code: 0");
        assert!(!out.is_error);
        assert_eq!(
            steady(&out.details),
            json!({
                "exit_code": 0, "timed_out": false, "aborted": false, "truncated": false,
                "spill_path": null
            })
        );
    }

    #[tokio::test]
    async fn bash_runs_in_the_session_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker.txt"), "here").unwrap();
        let out = bash(dir.path(), json!({"command": "cat marker.txt"})).await;
        assert_eq!(out.content, "here\n\nexit code: 0");
    }

    #[tokio::test]
    async fn bash_nonzero_exit_is_an_error_result() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), json!({"command": "echo oops >&2; exit 3"})).await;
        assert_eq!(out.content, "oops\n\nexit code: 3");
        assert!(out.is_error);
        assert_eq!(out.details["exit_code"], 3);
    }

    #[tokio::test]
    async fn bash_merges_stdout_and_stderr_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), json!({"command": "echo a; echo b >&2; echo c"})).await;
        assert_eq!(out.content, "a\nb\nc\n\nexit code: 0");
    }

    #[tokio::test]
    async fn bash_output_is_cleaned_of_escapes_and_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let command = r"printf '\033[1;31mred\033[0m\r\n\033]0;title\007plain\n\377'";
        let out = bash(dir.path(), json!({"command": command})).await;
        assert_eq!(out.content, "red\nplain\n\u{fffd}\n\nexit code: 0");
    }

    #[tokio::test]
    async fn bash_secrets_stay_out_of_the_env_and_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let env = ExecEnv::from_host(
            [
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
                ("HOME", "/nonexistent"),
                ("MY_API_TOKEN", "planted-secret-value-42"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
            &[],
            &[],
        );
        let mut ctx = test_context(dir.path());
        ctx.redactor = Arc::new(Redactor::new(env.secrets().to_vec()));
        ctx.exec = Arc::new(env);

        let listed = BashTool.execute(json!({"command": "env"}), ctx.clone()).await.unwrap();
        assert!(!listed.content.contains("MY_API_TOKEN"), "env output: {}", listed.content);
        assert!(!listed.content.contains("planted-secret-value-42"));

        let echoed = BashTool
            .execute(json!({"command": "echo planted-secret-value-42"}), ctx)
            .await
            .unwrap();
        assert_eq!(echoed.content, "[REDACTED:MY_API_TOKEN]\n\nexit code: 0");
    }

    #[tokio::test]
    async fn bash_big_output_keeps_head_and_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let spill = ctx.spill_path();
        let out = BashTool.execute(json!({"command": "seq 1 100000"}), ctx).await.unwrap();

        let head: String = (1..=400).map(|i| format!("{i}\n")).collect();
        let tail: Vec<String> = (98_401..=100_000).map(|i| i.to_string()).collect();
        let omitted: usize = (401..=98_400).map(|i: usize| i.to_string().len() + 1).sum();
        assert_eq!(
            out.content,
            format!(
                "{head}[… 98000 lines ({omitted} bytes) omitted; full output: {}]\n{}\n\nexit code: 0",
                spill.display(),
                tail.join("\n")
            )
        );
        assert_eq!(
            steady(&out.details),
            json!({
                "exit_code": 0, "timed_out": false, "aborted": false, "truncated": true,
                "spill_path": spill.display().to_string()
            })
        );
        let all: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
        assert_eq!(std::fs::read_to_string(&spill).unwrap(), all);
    }

    #[tokio::test]
    async fn bash_background_child_holding_the_pipe_does_not_hold_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let out = bash(dir.path(), json!({"command": "(sleep 5; echo late) & echo early"})).await;
        assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
        assert_eq!(out.content, "early\n\nexit code: 0");
    }

    #[tokio::test]
    async fn bash_timeout_stops_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let out = bash(dir.path(), json!({"command": "sleep 30", "timeout_secs": 1})).await;
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        assert_eq!(out.content, "(no output)\n\ntimed out after 1s");
        assert!(out.is_error);
        assert_eq!(
            steady(&out.details),
            json!({
                "exit_code": 143, "timed_out": true, "aborted": false, "truncated": false,
                "spill_path": null
            })
        );
    }

    #[tokio::test]
    async fn bash_abort_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let cancel = ctx.cancel.clone();
        let command = "sleep 30 & echo $! > pid; sleep 30";
        let run = tokio::spawn(BashTool.execute(json!({"command": command}), ctx));

        let pid_file = dir.path().join("pid");
        let pid: u32 = wait_for(Duration::from_secs(10), || {
            let text = std::fs::read_to_string(&pid_file).ok()?;
            text.strip_suffix('\n')?.parse().ok()
        })
        .await;
        cancel.cancel();
        let out = tokio::time::timeout(Duration::from_secs(3), run)
            .await
            .expect("bash returns within 3 s of the abort")
            .unwrap()
            .unwrap();
        assert_eq!(out.content, "(no output)\n\naborted");
        assert!(out.is_error);
        assert_eq!(out.details["aborted"], true);

        let stat = format!("/proc/{pid}/stat");
        wait_for(Duration::from_secs(3), || {
            let gone = match std::fs::read_to_string(&stat) {
                Err(_) => true,
                // The state follows the parenthesised command name; `Z` is a zombie.
                Ok(text) => text.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
            };
            gone.then_some(())
        })
        .await;
    }

    #[tokio::test]
    async fn bash_sends_partial_output_as_updates() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut ctx = test_context(dir.path());
        let sink = seen.clone();
        ctx.updates = Arc::new(move |partial| sink.lock().unwrap().push(partial));
        let command = "echo first; sleep 0.6";
        BashTool.execute(json!({"command": command}), ctx).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), vec!["first\n".to_string()]);
    }

    #[tokio::test]
    async fn bash_update_window_cutting_a_secret_shows_no_fragment_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "planted-secret-value-42";
        let env = ExecEnv::from_host(
            [
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
                ("HOME", "/nonexistent"),
                ("MY_API_TOKEN", secret),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
            &[],
            &[],
        );
        // The line ends 2035 bytes after the secret, so the last 2 KiB start 12 bytes into it.
        let line = format!("{}{secret}{}\n", "A".repeat(3000), "B".repeat(2035));
        std::fs::write(dir.path().join("line.txt"), line).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut ctx = test_context(dir.path());
        ctx.redactor = Arc::new(Redactor::new(env.secrets().to_vec()));
        ctx.exec = Arc::new(env);
        let (sink, folder) = (seen.clone(), dir.path().to_path_buf());
        // Each update lets the command go on, so every state of the output is shown once.
        ctx.updates = Arc::new(move |partial: String| {
            let step = if partial == "more\n" { "done" } else { "next" };
            std::fs::write(folder.join(step), "").unwrap();
            sink.lock().unwrap().push(partial);
        });
        // `cat` writes the whole line at once, so no update sees only part of it.
        let command = "cat line.txt; until [ -e next ]; do sleep 0.01; done; \
                       echo more; until [ -e done ]; do sleep 0.01; done";
        let args = json!({"command": command, "timeout_secs": 10});
        let out = BashTool.execute(args, ctx).await.unwrap();
        assert_eq!(out.details["exit_code"], 0);

        let seen = seen.lock().unwrap();
        let fragments: Vec<&str> = (0..=secret.len() - 6).map(|at| &secret[at..at + 6]).collect();
        let leaks: Vec<&String> =
            seen.iter().filter(|u| fragments.iter().any(|f| u.contains(f))).collect();
        assert_eq!(leaks, Vec::<&String>::new());
        assert_eq!(*seen, vec![UPDATE_LONG_LINE.to_string(), "more\n".to_string()]);
    }

    #[test]
    fn bash_spec_warns_that_detached_daemons_escape_the_group_kill() {
        let description = BashTool.spec().description;
        let warning = "A timeout or abort stops the command's whole process group, but processes \
                       that leave it (setsid, double-forked daemons) keep running, so do not \
                       start long-lived background daemons.";
        assert!(description.ends_with(warning), "description: {description}");
    }

    #[test]
    fn timeout_for_uses_default_and_caps_at_the_maximum() {
        let limits = ToolLimits::default();
        assert_eq!(timeout_for(None, &limits), Ok(Duration::from_secs(120)));
        assert_eq!(timeout_for(Some(5), &limits), Ok(Duration::from_secs(5)));
        assert_eq!(timeout_for(Some(9999), &limits), Ok(Duration::from_secs(600)));
        assert_eq!(
            timeout_for(Some(0), &limits),
            Err(ToolError("timeout_secs must be at least 1".to_string()))
        );
    }

    #[test]
    fn collected_output_keeps_head_and_tail_within_bounds() {
        let limits =
            ToolLimits { max_output_bytes: 4, max_spill_bytes: 6, ..ToolLimits::default() };
        let mut output = Collected::new(&limits);
        output.push(b"abcdefgh");
        output.push(b"ijklmnopqrst");
        assert_eq!(output.last_bytes(5), (b"pqrst".to_vec(), false));
        assert_eq!(output.last_bytes(100), (b"mnopqrst".to_vec(), false));
        assert_eq!(
            String::from_utf8(output.into_bytes()).unwrap(),
            "abcdef\n[… 6 bytes of output not kept …]\nmnopqrst"
        );
    }

    #[test]
    fn collected_output_window_says_whether_it_starts_a_line() {
        let mut output = Collected::new(&ToolLimits::default());
        output.push(b"ab\ncd\n");
        assert_eq!(output.last_bytes(100), (b"ab\ncd\n".to_vec(), true));
        assert_eq!(output.last_bytes(3), (b"cd\n".to_vec(), true));
        assert_eq!(output.last_bytes(4), (b"\ncd\n".to_vec(), false));
    }

    #[test]
    fn tail_lines_keeps_only_whole_lines() {
        let cases = [
            ("one\ntwo\n", 100, true, Some("one\ntwo\n")),
            ("one\ntwo\n", 100, false, Some("two\n")),
            ("one\ntwo\n", 4, true, Some("two\n")),
            ("one\ntwo\n", 6, true, Some("two\n")),
            ("one\ntwo", 5, true, Some("two")),
            ("a-very-long-line\n", 5, true, None),
            ("a-very-long-line", 5, true, None),
            ("", 5, true, Some("")),
        ];
        for (text, max, at_line_start, want) in cases {
            assert_eq!(tail_lines(text, max, at_line_start), want, "text: {text:?}, max: {max}");
        }
    }

    #[test]
    fn strip_ansi_removes_escape_sequences() {
        let cases = [
            ("\x1b[31mred\x1b[0m", "red"),
            ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
            ("\x1b(Bplain", "plain"),
            ("a\x1b=b", "ab"),
            ("no escapes", "no escapes"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_ansi(input), want, "input: {input:?}");
        }
    }
}
