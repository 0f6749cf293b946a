//! The tool host: the process inside a session's sandbox that runs its built-in tools.
//!
//! Every file tool (read, write, edit, ls, grep, find, and the file reads of `send`) and every
//! bash command of a contained session runs here, so they all see exactly the sandbox's view of
//! the host: a symlink or hard link planted by bash cannot take a file tool anywhere bash cannot
//! go itself, because the file tools resolve paths in the same mount namespace.
//!
//! The host holds no secret: its environment is the scrubbed child environment, and redaction
//! happens outside, in the session (the run loop redacts every result; updates are redacted
//! when they arrive). It marks itself non-dumpable, so the processes it starts cannot read its
//! memory or write into its pipes through `/proc`.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::protocol::{MAX_LINE_BYTES, Reply, Request, to_line};
use crate::exec::ExecEnv;
use crate::redact::Redactor;
use crate::tool::{Tool, ToolContext, ToolError, builtin_tools};

/// Runs the tool host on stdin and stdout until stdin closes. The CLI's hidden
/// `sandbox-tool-host` command calls this inside the sandbox with what the launcher passed:
/// `expect`, the view to check before serving (JSON of [`super::spec::Expect`]), and
/// `sweep`, whether every process a tool call left behind is killed when no call runs any more
/// (callers' sandboxes).
///
/// # Errors
/// The view is not what the launcher opened, the runtime cannot start, or the pipe fails.
pub fn run_tool_host(expect: Option<&str>, sweep: bool) -> io::Result<()> {
    // Processes the host starts run as the same user: without this they could read the host's
    // memory or open its pipes through /proc/<pid>/.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(io::Error::from)?;
    let expect = match expect {
        Some(expect) => {
            let expect: super::spec::Expect = serde_json::from_str(expect).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("--expect: {e}"))
            })?;
            super::launch::check_view(&expect)?;
            Some(Arc::new(expect))
        }
        None => None,
    };
    if sweep {
        watch_mounts()?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve_with(tokio::io::stdin(), tokio::io::stdout(), Guard { sweep, expect }))
}

/// Kills every process of the sandbox but its init and this host: what the tool calls left
/// (background jobs, `setsid` children, a fork bomb's survivors). `kill(-1)` reaches exactly
/// that in the sandbox's own PID namespace, in one pass the kernel makes without letting a new
/// process appear meanwhile.
fn sweep_processes() {
    // It fails only when nothing is left to kill (ESRCH): the host may signal every process of
    // its sandbox, all of them its own user's.
    let _ = rustix::process::kill_process_group(
        rustix::process::Pid::INIT,
        rustix::process::Signal::KILL,
    );
    reap_orphans();
}

/// Waits for the processes a sweep killed: in a caller's sandbox the host is pid 1, so every
/// orphan of the sandbox is its child, and an unreaped one would keep a PID of the sandbox's
/// limit. Bounded: a process stuck in the kernel is left for the next sweep.
fn reap_orphans() {
    use rustix::process::{WaitOptions, waitpid};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match waitpid(None, WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            // Nothing has ended yet: killed processes are on their way out.
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // No child left (ECHILD), or out of time.
            Ok(None) | Err(_) => return,
        }
    }
}

/// The line the tool host writes to its error output (which only the server reads) when it ends
/// the sandbox because the mount table changed.
pub(super) const VIEW_CHANGED: &str = "volcanic-tool-host: the view changed on the host";

/// Watches the sandbox's mount table from a thread of its own and ends the sandbox when it
/// changes. No process of a caller's sandbox can mount or unmount (no capability), so a change
/// comes from outside: the kernel detaches a cover or a pin when the path under it is removed or
/// replaced on the host (the owner saving `MEMORY.md` or `.env` by writing a new file and
/// renaming it over the old one). The sandbox then no longer shows what its view promised: every
/// process in it is killed and the host exits, and the next call starts a sandbox with a fresh
/// view. The kernel wakes `poll` on the change itself, so the gap is the time to wake a thread.
fn watch_mounts() -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    // The kernel notes the mount table's generation when the file is opened and flags the file
    // (POLLPRI, POLLERR) once it moves on; nothing needs to be read or compared.
    let file = std::fs::File::open("/proc/self/mountinfo")?;
    std::thread::Builder::new().name("mount-watch".into()).spawn(move || {
        loop {
            let mut fds = [PollFd::new(&file, PollFlags::PRI | PollFlags::ERR)];
            match poll(&mut fds, None) {
                // A signal for another thread interrupted the wait (SIGCHLD): nothing changed.
                Err(rustix::io::Errno::INTR) => continue,
                Ok(_) if fds[0].revents().is_empty() => continue,
                Ok(_) | Err(_) => {}
            }
            // Not one instant longer: kill first, say why and leave after.
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::INIT,
                rustix::process::Signal::KILL,
            );
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("{VIEW_CHANGED}\n").as_bytes(),
            );
            std::process::exit(3);
        }
    })?;
    Ok(())
}

/// What every call of this host shares, from the init line.
struct Setup {
    cwd: PathBuf,
    spill_dir: PathBuf,
    limits: Arc<crate::config::ToolLimits>,
    exec: Arc<ExecEnv>,
    redactor: Arc<Redactor>,
    tools: Vec<Arc<dyn Tool>>,
}

/// The running calls, each with the token that stops it.
type Calls = Arc<Mutex<HashMap<u64, CancellationToken>>>;

/// Serves requests from `input` until it closes; replies go to `output`. Returns once the
/// writer and every call have ended (calls still running when `input` ends or breaks are
/// stopped first): they all run on one tracker, so none outlives the host.
#[cfg(test)]
pub(crate) async fn serve<R, W>(input: R, output: W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(input, output, Guard::default()).await
}

/// What a caller's tool host does around each call: `sweep` kills what the calls left whenever
/// the last running call ends; `expect` is the view checked again before each call starts.
#[derive(Default, Clone)]
struct Guard {
    sweep: bool,
    expect: Option<Arc<super::spec::Expect>>,
}

/// [`serve`] with a [`Guard`].
async fn serve_with<R, W>(input: R, output: W, guard: Guard) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
    let tasks = TaskTracker::new();
    tasks.spawn(async move {
        let mut output = output;
        while let Some(reply) = rx.recv().await {
            if output.write_all(&to_line(&reply)).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let calls = Calls::default();
    let served = read_requests(input, &tx, &calls, &tasks, guard).await;
    // Stdin closed (the session is gone) or broke: running calls are stopped (bash kills its
    // group).
    for cancel in lock(&calls).values() {
        cancel.cancel();
    }
    drop(tx);
    // The writer ends when every call has sent its reply (or the pipe broke).
    tasks.close();
    tasks.wait().await;
    served
}

/// Reads requests until `input` ends, starting each call on `tasks`.
async fn read_requests<R: AsyncRead + Unpin>(
    input: R,
    tx: &mpsc::UnboundedSender<Reply>,
    calls: &Calls,
    tasks: &TaskTracker,
    guard: Guard,
) -> io::Result<()> {
    let sweep = guard.sweep;
    let mut lines = BufReader::new(input);
    let mut setup: Option<Arc<Setup>> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = read_line(&mut lines, &mut line).await?;
        if read == 0 {
            break;
        }
        let request: Request = match serde_json::from_slice(&line) {
            Ok(request) => request,
            Err(err) => return Err(io::Error::new(io::ErrorKind::InvalidData, err)),
        };
        match request {
            Request::Init { cwd, spill_dir, limits, env } => {
                setup = Some(Arc::new(Setup {
                    cwd: PathBuf::from(cwd),
                    spill_dir: PathBuf::from(spill_dir),
                    limits: Arc::new(limits),
                    exec: Arc::new(ExecEnv::from_host(env, &[], &[])),
                    redactor: Arc::new(Redactor::default()),
                    tools: builtin_tools(),
                }));
                // The receiver only goes away when the writer failed: stdout is gone.
                let _ = tx.send(Reply::Ready);
            }
            Request::Call { id, tool, call_id, args } => {
                let Some(setup) = setup.clone() else {
                    let _ = tx.send(Reply::Failed { id, message: "tool host not ready".into() });
                    continue;
                };
                // The view may have changed since the start (see `watch_mounts`): a call never
                // runs in a sandbox that no longer shows what it promised.
                if let Some(expect) = &guard.expect
                    && let Err(err) = super::launch::check_view(expect)
                {
                    sweep_processes();
                    return Err(err);
                }
                let cancel = CancellationToken::new();
                lock(calls).insert(id, cancel.clone());
                let (tx, calls) = (tx.clone(), calls.clone());
                tasks.spawn(async move {
                    let reply = run_call(&setup, id, &tool, call_id, args, cancel, &tx).await;
                    let mut running = lock(&calls);
                    running.remove(&id);
                    // Under the lock: no call starts while the sandbox is swept, and none runs.
                    if sweep && running.is_empty() {
                        sweep_processes();
                    }
                    drop(running);
                    let _ = tx.send(reply);
                });
            }
            Request::ReadFile { id, path, max_bytes } => {
                let Some(setup) = setup.clone() else {
                    let _ = tx.send(Reply::Failed { id, message: "tool host not ready".into() });
                    continue;
                };
                let tx = tx.clone();
                tasks.spawn(async move {
                    let reply = match read_for_send(&setup.cwd, &path, max_bytes).await {
                        Ok((name, shown, bytes)) => Reply::File {
                            id,
                            name,
                            shown,
                            bytes: base64::engine::general_purpose::STANDARD.encode(bytes),
                        },
                        Err(err) => Reply::Failed { id, message: err.0 },
                    };
                    let _ = tx.send(reply);
                });
            }
            Request::Cancel { id } => {
                if let Some(cancel) = lock(calls).get(&id) {
                    cancel.cancel();
                }
            }
        }
    }
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads one line (without its newline) of at most [`MAX_LINE_BYTES`]; 0 at the end.
pub(crate) async fn read_line<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> io::Result<usize> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(line.len());
        }
        let (taken, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let content = if done { &buffer[..taken - 1] } else { buffer };
        if line.len() + content.len() > MAX_LINE_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
        line.extend_from_slice(content);
        reader.consume(taken);
        if done {
            // An empty line still counts as read.
            return Ok(line.len().max(1));
        }
    }
}

async fn run_call(
    setup: &Setup,
    id: u64,
    tool: &str,
    call_id: String,
    args: serde_json::Value,
    cancel: CancellationToken,
    tx: &mpsc::UnboundedSender<Reply>,
) -> Reply {
    let Some(found) = setup.tools.iter().find(|t| t.spec().name == tool) else {
        return Reply::Failed { id, message: format!("unknown tool: {tool}") };
    };
    let updates = tx.clone();
    let ctx = ToolContext {
        call_id,
        cwd: setup.cwd.clone(),
        cancel,
        limits: setup.limits.clone(),
        exec: setup.exec.clone(),
        redactor: setup.redactor.clone(),
        spill_dir: setup.spill_dir.clone(),
        channel: None,
        updates: Arc::new(move |text| {
            let _ = updates.send(Reply::Update { id, text });
        }),
    };
    match found.execute(args, ctx).await {
        Ok(output) => Reply::Done {
            id,
            content: output.content,
            is_error: output.is_error,
            details: output.details,
        },
        Err(ToolError(message)) => Reply::Failed { id, message },
    }
}

/// The file `send` asked for: a regular file inside `cwd` (symlinks resolved, in the sandbox's
/// view), at most `max_bytes`. Returns its name, the path as shown to the model, and its bytes.
async fn read_for_send(
    cwd: &Path,
    path: &str,
    max_bytes: u64,
) -> Result<(String, String, Vec<u8>), ToolError> {
    let (cwd, path) = (cwd.to_path_buf(), path.to_string());
    crate::tool::blocking("send", move || {
        let requested = cwd.join(path.strip_prefix('@').unwrap_or(&path));
        let shown = match requested.strip_prefix(&cwd) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => requested.display().to_string(),
        };
        let absolute = std::fs::canonicalize(&requested).map_err(|err| match err.kind() {
            io::ErrorKind::NotFound => ToolError(format!("file not found: {shown}")),
            _ => ToolError(format!("could not read {shown}: {err}")),
        })?;
        let workspace = std::fs::canonicalize(&cwd)
            .map_err(|err| ToolError(format!("could not resolve the working folder: {err}")))?;
        if !absolute.starts_with(&workspace) {
            return Err(ToolError("can only send files inside the workspace".into()));
        }
        // Non-blocking, so a FIFO planted under the name is refused below instead of hanging.
        let nonblocking = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nonblocking)
            .open(&absolute)
            .map_err(|err| ToolError(format!("could not read {shown}: {err}")))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(ToolError(format!("{shown} is not a regular file")));
        }
        if meta.len() > max_bytes {
            return Err(ToolError(format!(
                "the file is {} bytes; the limit is {max_bytes}",
                meta.len()
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        io::Read::read_to_end(&mut io::Read::take(file, max_bytes.saturating_add(1)), &mut bytes)?;
        if bytes.len() as u64 > max_bytes {
            return Err(ToolError(format!("{shown} grew past the limit of {max_bytes} bytes")));
        }
        let name = absolute
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        Ok((name, shown, bytes))
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::config::ToolLimits;

    /// A host on in-memory pipes: what the test writes, and the replies as lines.
    struct Pipes {
        input: tokio::io::DuplexStream,
        output: tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
    }

    fn start() -> Pipes {
        let (input, host_in) = tokio::io::duplex(1 << 20);
        let (host_out, output) = tokio::io::duplex(1 << 20);
        tokio::spawn(serve(host_in, host_out));
        Pipes { input, output: BufReader::new(output).lines() }
    }

    impl Pipes {
        async fn send(&mut self, request: &Request) {
            self.input.write_all(&to_line(request)).await.unwrap();
        }

        async fn reply(&mut self) -> Reply {
            let line =
                tokio::time::timeout(std::time::Duration::from_secs(20), self.output.next_line())
                    .await
                    .expect("a reply within 20 s")
                    .unwrap()
                    .expect("the host is still running");
            serde_json::from_str(&line).unwrap()
        }

        async fn init(&mut self, dir: &Path) {
            self.send(&Request::Init {
                cwd: dir.display().to_string(),
                spill_dir: dir.join(".spill").display().to_string(),
                limits: ToolLimits::default(),
                env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            })
            .await;
            assert!(matches!(self.reply().await, Reply::Ready));
        }
    }

    #[tokio::test]
    async fn host_runs_a_call_and_answers_with_its_result() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let mut host = start();
        host.init(dir.path()).await;
        let args = json!({"command": "cat a.txt"});
        host.send(&Request::Call { id: 1, tool: "bash".into(), call_id: "c".into(), args }).await;
        match host.reply().await {
            Reply::Done { id, content, is_error, .. } => {
                assert_eq!((id, content.as_str(), is_error), (1, "hello\n\nexit code: 0", false));
            }
            other => panic!("unexpected reply: {other:?}"),
        }
    }

    #[tokio::test]
    async fn host_cancel_stops_a_running_bash_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = start();
        host.init(dir.path()).await;
        let args = json!({"command": "echo started; sleep 30"});
        host.send(&Request::Call { id: 4, tool: "bash".into(), call_id: "c".into(), args }).await;
        assert!(matches!(host.reply().await, Reply::Update { id: 4, .. }));
        host.send(&Request::Cancel { id: 4 }).await;
        match host.reply().await {
            Reply::Done { id, content, is_error, .. } => {
                assert_eq!((id, content.as_str(), is_error), (4, "started\n\naborted", true));
            }
            other => panic!("unexpected reply: {other:?}"),
        }
    }

    /// A host whose input breaks stops its running calls and returns only once they have
    /// answered and its writer is done: nothing it started outlives it (it used to return at
    /// once and leave the call running).
    #[tokio::test]
    async fn host_with_a_broken_input_stops_its_calls_before_returning() {
        let dir = tempfile::tempdir().unwrap();
        let (input, host_in) = tokio::io::duplex(1 << 20);
        let (host_out, output) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn(serve(host_in, host_out));
        let mut host = Pipes { input, output: BufReader::new(output).lines() };
        host.init(dir.path()).await;
        let args = json!({"command": "echo started; sleep 600"});
        host.send(&Request::Call { id: 7, tool: "bash".into(), call_id: "c".into(), args }).await;
        assert!(matches!(host.reply().await, Reply::Update { id: 7, .. }));

        host.input.write_all(b"not a request\n").await.unwrap();
        let result = tokio::time::timeout(std::time::Duration::from_secs(20), served)
            .await
            .expect("the host returns within 20 s")
            .unwrap();
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidData);

        match host.reply().await {
            Reply::Done { id, content, is_error, .. } => {
                assert_eq!((id, content.as_str(), is_error), (7, "started\n\naborted", true));
            }
            other => panic!("unexpected reply: {other:?}"),
        }
        let rest =
            tokio::time::timeout(std::time::Duration::from_secs(20), host.output.next_line())
                .await
                .expect("the output ends within 20 s")
                .unwrap();
        assert_eq!(rest, None, "the writer ended with the host");
    }

    #[tokio::test]
    async fn host_reads_files_for_send_only_inside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("r.txt"), "report").unwrap();
        std::fs::write(outside.path().join("s.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("s.txt"), dir.path().join("link")).unwrap();
        let mut host = start();
        host.init(dir.path()).await;

        host.send(&Request::ReadFile { id: 1, path: "r.txt".into(), max_bytes: 100 }).await;
        match host.reply().await {
            Reply::File { id, name, shown, bytes } => {
                assert_eq!((id, name.as_str(), shown.as_str()), (1, "r.txt", "r.txt"));
                assert_eq!(
                    base64::engine::general_purpose::STANDARD.decode(bytes).unwrap(),
                    b"report"
                );
            }
            other => panic!("unexpected reply: {other:?}"),
        }
        host.send(&Request::ReadFile { id: 2, path: "link".into(), max_bytes: 100 }).await;
        match host.reply().await {
            Reply::Failed { id, message } => {
                assert_eq!((id, message.as_str()), (2, "can only send files inside the workspace"));
            }
            other => panic!("unexpected reply: {other:?}"),
        }
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        host.send(&Request::ReadFile { id: 4, path: "fifo".into(), max_bytes: 100 }).await;
        match host.reply().await {
            Reply::Failed { id, message } => {
                assert_eq!((id, message.as_str()), (4, "fifo is not a regular file"));
            }
            other => panic!("unexpected reply: {other:?}"),
        }
        host.send(&Request::ReadFile { id: 3, path: "r.txt".into(), max_bytes: 3 }).await;
        match host.reply().await {
            Reply::Failed { id, message } => {
                assert_eq!((id, message.as_str()), (3, "the file is 6 bytes; the limit is 3"));
            }
            other => panic!("unexpected reply: {other:?}"),
        }
    }

    #[tokio::test]
    async fn host_refuses_an_oversized_line() {
        let (mut input, host_in) = tokio::io::duplex(1 << 16);
        let (host_out, _output) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve(host_in, host_out));
        let chunk = vec![b'x'; 1 << 20];
        let writer = tokio::spawn(async move {
            for _ in 0..(MAX_LINE_BYTES / chunk.len() + 2) {
                if input.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        let result = tokio::time::timeout(std::time::Duration::from_secs(60), served)
            .await
            .expect("the host gives up within 60 s")
            .unwrap();
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidData);
        writer.abort();
    }
}
