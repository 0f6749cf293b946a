//! The session's side of a tool host: starting it in its sandbox, sending it calls, and the
//! [`RemoteTool`]s that stand in for the built-in tools of a contained session.
//!
//! The host starts at the first call and lives as long as the session (dropping the
//! [`ToolHost`] kills it, and with it every process in its sandbox). A host that died is started
//! again at the next call. Everything the host says is untrusted (processes the caller controls
//! run beside it): replies are capped lines, unknown ids are ignored, and updates are redacted
//! here before anyone sees them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::host::VIEW_CHANGED;
use base64::Engine;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::Confinement;
use super::bwrap;
use super::protocol::{Reply, Request, to_line};
use crate::config::ToolLimits;
use crate::provider::ToolSpec;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Longest wait for a new host's first answer.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Bytes of bwrap's own error output kept for the message when a start fails.
const MAX_STDERR_BYTES: usize = 4096;
/// How much longer than the longest bash timeout the session waits for a call's reply before it
/// stops the sandbox: the host enforces its calls' timeouts itself, so only a host that can no
/// longer run (stopped, starved) goes past it.
const CALL_GRACE: Duration = Duration::from_secs(30);
/// Longest wait for the pipe tasks of a stopped host to end (aborted, they end at once).
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A contained session's tool host (started on first use).
pub(crate) struct ToolHost {
    confinement: Arc<Confinement>,
    spill_dir: PathBuf,
    limits: Arc<ToolLimits>,
    env: Vec<(String, String)>,
    running: tokio::sync::Mutex<Option<Arc<Running>>>,
    next_id: AtomicU64,
}

/// A started host: its process, the pipe tasks, the calls waiting for replies.
///
/// Invariant: its pipe tasks (writer, reader, and bwrap's error output) run on its own
/// tracker and go with it: aborted when it is dropped, and stopped and awaited before a host
/// that died is replaced, so none outlives its sandbox.
struct Running {
    /// Killed when dropped (`kill_on_drop`); bwrap's `--die-with-parent` takes the sandbox along.
    child: tokio::process::Child,
    /// The sandbox's cgroups, removed after the child (fields drop in order).
    _cgroups: Option<super::limits::SandboxCgroups>,
    requests: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Reply>>>>,
    tracker: TaskTracker,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.tracker.close();
    }
}

impl Running {
    /// Aborts the pipe tasks and waits until they have ended.
    async fn stop(&self) {
        for task in &self.tasks {
            task.abort();
        }
        self.tracker.close();
        if tokio::time::timeout(STOP_GRACE, self.tracker.wait()).await.is_err() {
            tracing::warn!("a stopped sandbox's pipe tasks did not end");
        }
    }

    /// Kills the sandbox (bwrap, and with it every process in it) at once.
    fn kill(&self) {
        let pid = self.child.id().and_then(|id| i32::try_from(id).ok());
        if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    fn is_alive(&self) -> bool {
        !self.requests.is_closed() && self.tasks.iter().all(|t| !t.is_finished())
    }

    fn send(&self, request: &Request) -> Result<(), ToolError> {
        self.requests
            .send(to_line(request))
            .map_err(|_| ToolError("the sandbox's tool host has stopped".into()))
    }
}

impl ToolHost {
    /// A host for one session: its sandbox, spill folder, tool limits and child environment.
    pub(crate) fn new(
        confinement: Arc<Confinement>,
        spill_dir: PathBuf,
        limits: Arc<ToolLimits>,
        env: Vec<(String, String)>,
    ) -> Self {
        ToolHost {
            confinement,
            spill_dir,
            limits,
            env,
            running: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    /// Starts the host unless it runs already.
    ///
    /// # Errors
    /// Why the sandbox could not start.
    pub(crate) async fn ensure_started(&self) -> Result<(), String> {
        self.running().await.map(drop)
    }

    /// The running host, started (again) if needed. The lock spans the start, so concurrent
    /// first calls start one host.
    async fn running(&self) -> Result<Arc<Running>, String> {
        let mut slot = self.running.lock().await;
        if let Some(running) = slot.as_ref().filter(|r| r.is_alive()) {
            return Ok(running.clone());
        }
        if let Some(dead) = slot.take() {
            dead.stop().await;
        }
        let running = Arc::new(self.start().await.inspect_err(|reason| {
            // The session's tool call fails with the reason too; the owner reads it here.
            tracing::warn!(
                workspace = %self.confinement.view.workspace.display(),
                reason = %reason,
                "a sandbox could not start"
            );
        })?);
        *slot = Some(running.clone());
        Ok(running)
    }

    async fn start(&self) -> Result<Running, String> {
        let sandbox = &self.confinement.sandbox;
        let (applied, cgroups) = match &sandbox.limits {
            Some((limits, mechanism)) => mechanism
                .for_sandbox(*limits)
                .map_err(|e| format!("cannot bound the sandbox's processes: {e}"))?,
            None => (super::limits::Applied::default(), None),
        };
        let spec = super::spec::LaunchSpec::new(&self.confinement, &self.spill_dir, applied);
        let spec = serde_json::to_string(&spec)
            .map_err(|e| format!("cannot describe the sandbox: {e}"))?;

        // The launcher, bwrap and everything they start get only the child environment (never
        // the server's), so even the sandbox's init process holds no secret in its environment.
        let mut child = tokio::process::Command::new(&sandbox.launcher)
            .args(&sandbox.launcher_args)
            .arg(spec)
            .env_clear()
            .envs(self.sandbox_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!("cannot start the sandbox ({}): {e}", sandbox.launcher.display())
            })?;
        let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("bwrap started without its pipes".into());
        };

        let tracker = TaskTracker::new();
        let stderr_text = Arc::new(Mutex::new(Vec::new()));
        let errors = stderr_text.clone();
        let workspace = self.confinement.view.workspace.clone();
        let stderr_task = tracker.spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                if chunk[..n].windows(VIEW_CHANGED.len()).any(|w| w == VIEW_CHANGED.as_bytes()) {
                    tracing::warn!(
                        workspace = %workspace.display(),
                        "a sandbox was stopped: a hidden or protected path of its view was \
                         replaced or removed on the host (an editor or a command that saves by \
                         renaming a new file over the old one does this, and so can a caller's \
                         session that sees the path because it did not exist when that \
                         session's sandbox started; the assistant's own write and edit tools \
                         save in place). A tool call running in it failed; the next one starts \
                         a new sandbox. Check the file if you did not save it (docs/security.md)"
                    );
                }
                let mut kept = errors.lock().unwrap_or_else(PoisonError::into_inner);
                let room = MAX_STDERR_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        });

        let (requests, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tracker.spawn(async move {
            while let Some(line) = queue.recv().await {
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });

        let pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Reply>>>> = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let reader = tracker.spawn(read_replies(stdout, pending.clone(), ready_tx));

        let mut stderr_task = stderr_task;
        let mut running = Running {
            child,
            _cgroups: cgroups,
            requests,
            pending,
            tracker,
            tasks: vec![reader, writer],
        };
        running
            .send(&Request::Init {
                cwd: self.confinement.view.workspace.display().to_string(),
                spill_dir: self.spill_dir.display().to_string(),
                limits: (*self.limits).clone(),
                env: self.sandbox_env(),
            })
            .map_err(|e| e.0)?;
        match tokio::time::timeout(START_TIMEOUT, ready_rx).await {
            Ok(Ok(())) => {
                tracing::debug!(workspace = %self.confinement.view.workspace.display(), "sandbox started");
                running.tasks.push(stderr_task);
                Ok(running)
            }
            Ok(Err(_)) | Err(_) => {
                drop(running);
                // bwrap has exited or been killed: its error output ends soon.
                if tokio::time::timeout(Duration::from_secs(1), &mut stderr_task).await.is_err() {
                    stderr_task.abort();
                }
                let said = stderr_text.lock().unwrap_or_else(PoisonError::into_inner).clone();
                let said = String::from_utf8_lossy(&said).trim().to_string();
                Err(if said.is_empty() {
                    "the sandbox's tool host did not start".to_string()
                } else {
                    format!("the sandbox's tool host did not start: {said}")
                })
            }
        }
    }

    /// The environment of the sandbox's processes. The owner's view keeps the session's child
    /// environment as it is (the owner chose what it holds). A caller's loses every
    /// secret-looking variable the owner let through for their own sessions, and gets a `HOME`
    /// inside the sandbox.
    fn sandbox_env(&self) -> Vec<(String, String)> {
        if self.confinement.view.base == super::ViewBase::Host {
            return self.env.clone();
        }
        let mut env: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(name, _)| !crate::exec::is_secret_name(name) && name != "HOME")
            .cloned()
            .collect();
        env.push(("HOME".into(), bwrap::SANDBOX_HOME.into()));
        env
    }

    /// Stops `running` (killing its sandbox) if it is still this session's host; the next call
    /// starts a new one.
    async fn stop_if_current(&self, running: &Arc<Running>) {
        let mut slot = self.running.lock().await;
        if slot.as_ref().is_some_and(|current| Arc::ptr_eq(current, running))
            && let Some(stopped) = slot.take()
        {
            stopped.stop().await;
            // Killed now, not when the last call holding it lets go.
            stopped.kill();
        }
    }

    /// Runs one built-in tool call in the host.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let running = self
            .running()
            .await
            .map_err(|e| ToolError(format!("the sandbox could not start: {e}")))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut replies = register(&running, id);
        running.send(&Request::Call {
            id,
            tool: tool.to_string(),
            call_id: ctx.call_id.clone(),
            args,
        })?;
        let mut cancel = CancelOnDrop { running: &running, id, armed: true };
        let mut cancel_sent = false;
        let deadline = tokio::time::sleep(self.limits.bash_max_timeout + CALL_GRACE);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => {
                    cancel.armed = false;
                    self.stop_if_current(&running).await;
                    return Err(ToolError(format!(
                        "the sandbox did not answer within {:?}; it was stopped",
                        self.limits.bash_max_timeout + CALL_GRACE
                    )));
                }
                reply = replies.recv() => match reply {
                    Some(Reply::Update { text, .. }) => {
                        ctx.update(ctx.redactor.redact(&text).into_owned());
                    }
                    Some(Reply::Done { content, is_error, details, .. }) => {
                        cancel.armed = false;
                        return Ok(ToolOutput { content, is_error, details, ..ToolOutput::text("") });
                    }
                    Some(Reply::Failed { message, .. }) => {
                        cancel.armed = false;
                        return Err(ToolError(message));
                    }
                    Some(Reply::Ready | Reply::File { .. }) => {}
                    None => {
                        cancel.armed = false;
                        return Err(ToolError("the sandbox's tool host stopped during the call".into()));
                    }
                },
                () = ctx.cancel.cancelled(), if !cancel_sent => {
                    cancel_sent = true;
                    // The host answers with the aborted result; a failed send means it is gone.
                    let _ = running.send(&Request::Cancel { id });
                }
            }
        }
    }

    /// Reads a file for `send` inside the sandbox: `(name, shown path, bytes)`.
    pub(crate) async fn read_file(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<(String, String, Vec<u8>), ToolError> {
        let running = self
            .running()
            .await
            .map_err(|e| ToolError(format!("the sandbox could not start: {e}")))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut replies = register(&running, id);
        running.send(&Request::ReadFile { id, path: path.to_string(), max_bytes })?;
        loop {
            match replies.recv().await {
                Some(Reply::File { name, shown, bytes, .. }) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(bytes)
                        .map_err(|_| ToolError("the sandbox sent a malformed file".into()))?;
                    if bytes.len() as u64 > max_bytes {
                        return Err(ToolError(format!("the file is over {max_bytes} bytes")));
                    }
                    return Ok((name, shown, bytes));
                }
                Some(Reply::Failed { message, .. }) => return Err(ToolError(message)),
                Some(Reply::Ready | Reply::Update { .. } | Reply::Done { .. }) => {}
                None => return Err(ToolError("the sandbox's tool host stopped".into())),
            }
        }
    }
}

/// Registers a call's reply queue.
fn register(running: &Running, id: u64) -> mpsc::UnboundedReceiver<Reply> {
    let (tx, rx) = mpsc::unbounded_channel();
    running.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id, tx);
    rx
}

/// Tells the host to stop a call whose caller went away (the run loop dropped the future).
struct CancelOnDrop<'a> {
    running: &'a Running,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        self.running.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        if self.armed {
            // Nothing to do when the host is gone already.
            let _ = self.running.send(&Request::Cancel { id: self.id });
        }
    }
}

/// Reads replies until the host's stdout ends, handing each to its call. At the end every
/// waiting call is woken (its queue closes).
async fn read_replies(
    stdout: tokio::process::ChildStdout,
    pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Reply>>>>,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match super::host::read_line(&mut reader, &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(reply) = serde_json::from_slice::<Reply>(&line) else {
            tracing::warn!("a sandbox's tool host sent a malformed line; stopping it");
            break;
        };
        let Some(id) = reply.id() else {
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            continue;
        };
        let ends_call = !matches!(reply, Reply::Update { .. });
        let mut calls = pending.lock().unwrap_or_else(PoisonError::into_inner);
        let target = if ends_call { calls.remove(&id) } else { calls.get(&id).cloned() };
        drop(calls);
        if let Some(target) = target {
            // The call may have gone away meanwhile (aborted); its reply is not needed then.
            let _ = target.send(reply);
        }
    }
    pending.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

/// A built-in tool of a contained session: same name and spec, run by the session's tool host.
pub(crate) struct RemoteTool {
    /// One of the process-wide built-in specs: a session's stand-ins share them instead of
    /// building (and dropping) a copy of each JSON Schema per session.
    pub spec: &'static ToolSpec,
    pub host: Arc<ToolHost>,
}

#[async_trait::async_trait]
impl Tool for RemoteTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.host.call(&self.spec.name, args, &ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Sandbox, SandboxView};

    /// A tool host whose launcher is a shell that says it is ready and then reads its input
    /// until the session goes (no sandbox: this tests the session's side of the pipes).
    fn tool_host(workspace: &std::path::Path) -> ToolHost {
        // cat keeps a copy of stdout (fd 3), so the pipe stays open as long as the "host" runs.
        let script = r#"echo '{"t":"ready"}'; exec /bin/cat 3>&1 > /dev/null"#;
        let sandbox = Sandbox::new("bwrap", "/bin/false")
            .with_launcher("/bin/sh", vec!["-c".into(), script.into()]);
        let confinement =
            Confinement { sandbox: Arc::new(sandbox), view: SandboxView::new(workspace) };
        ToolHost::new(
            Arc::new(confinement),
            workspace.join(".spill"),
            Arc::new(ToolLimits::default()),
            Vec::new(),
        )
    }

    /// Dropping the tool host (the session went) ends the pipe tasks of its sandbox: they are
    /// on the started host's tracker, which they leave only by ending.
    #[tokio::test]
    async fn dropped_tool_host_leaves_no_pipe_task_behind() {
        let workspace = tempfile::tempdir().unwrap();
        let host = tool_host(workspace.path());
        host.ensure_started().await.unwrap();
        let tasks = host.running.lock().await.as_ref().map(|r| r.tracker.clone()).unwrap();
        assert_eq!(tasks.len(), 3, "reader, writer and stderr are tracked");

        drop(host);
        tokio::time::timeout(Duration::from_secs(20), tasks.wait())
            .await
            .expect("the pipe tasks end within 20 s");
        assert!(tasks.is_empty());
    }
}
