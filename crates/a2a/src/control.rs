//! The owner's control socket, `<state dir>/a2a/control.sock`: how `volcanic approvals`,
//! `volcanic approve` and `volcanic deny` reach a running server (docs/a2a.md, "Owner
//! approval").
//!
//! Why only a human can use it: the socket lives in the state folder, which no session can see
//! (callers' sandboxes do not contain it, the owner's sandbox hides it: docs/security.md), it is
//! created with mode 0600 in a folder of mode 0700, and a connection whose peer is another user
//! is refused (`SO_PEERCRED`), and so is a peer in other user or PID namespaces than the server's:
//! every sandbox has its own, so a sandboxed process is refused even if the socket were reachable
//! from one. So the owner, at their own shell, can decide; no tool of any session (a caller's or
//! the owner's own, either of which a prompt can steer) can.
//!
//! The protocol is one JSON request line ([`ControlRequest`]) and one JSON answer line
//! ([`ControlAnswer`]) per connection: `{"op":"list"}` → `{"ok":true,"approvals":[…]}`;
//! `{"op":"approve","id":"…"}` and `{"op":"deny","id":"…","reason":"…"?}` →
//! `{"ok":true,"decided":{"taskId","caller","state"}}`; any failure →
//! `{"ok":false,"error":"…"}`. Both ends use these types, so the CLI reads an answer as a value,
//! never by key. It knows nothing of tasks: it calls [`A2aServer::pending_approvals`] and
//! [`A2aServer::decide_approval`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::approval::{DecideError, Decided, Decision, PendingApproval, is_valid_id};

/// What the socket serves: the server's waiting requests and its decisions
/// ([`crate::A2aServer`] is one; the socket knows nothing else of it).
#[async_trait::async_trait]
pub trait Decider: Send + Sync {
    /// The requests waiting, oldest first.
    fn pending(&self) -> Vec<PendingApproval>;

    /// Applies the owner's decision on request `id`.
    ///
    /// # Errors
    /// See [`DecideError`].
    async fn decide(&self, id: &str, decision: Decision) -> Result<Decided, DecideError>;
}

/// The socket's path under a state folder.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("a2a").join("control.sock")
}

/// The longest request line read.
const MAX_LINE: u64 = 16 * 1024;

/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; more wait for the listener.
const MAX_CONNECTIONS: usize = 8;

/// A request on the socket.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum ControlRequest {
    List,
    Approve {
        id: String,
    },
    Deny {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// The server's answer to one [`ControlRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "AnswerLine", try_from = "AnswerLine")]
pub enum ControlAnswer {
    /// To [`ControlRequest::List`]: the requests waiting, oldest first.
    Approvals(Vec<PendingApproval>),
    /// To a decision: what it did.
    Decided(Decided),
    /// Refused or failed: why, for the owner.
    Refused(String),
}

/// [`ControlAnswer`] as it crosses the socket: `ok`, and the one field that goes with it.
#[derive(Serialize, Deserialize)]
struct AnswerLine {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approvals: Option<Vec<PendingApproval>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decided: Option<Decided>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<ControlAnswer> for AnswerLine {
    fn from(answer: ControlAnswer) -> Self {
        let line = AnswerLine { ok: true, approvals: None, decided: None, error: None };
        match answer {
            ControlAnswer::Approvals(approvals) => {
                AnswerLine { approvals: Some(approvals), ..line }
            }
            ControlAnswer::Decided(decided) => AnswerLine { decided: Some(decided), ..line },
            ControlAnswer::Refused(error) => AnswerLine { ok: false, error: Some(error), ..line },
        }
    }
}

impl TryFrom<AnswerLine> for ControlAnswer {
    type Error = &'static str;

    fn try_from(line: AnswerLine) -> Result<Self, Self::Error> {
        match line {
            AnswerLine { ok: false, error, .. } => {
                Ok(ControlAnswer::Refused(error.unwrap_or_else(|| "the server refused".into())))
            }
            AnswerLine { approvals: Some(approvals), decided: None, .. } => {
                Ok(ControlAnswer::Approvals(approvals))
            }
            AnswerLine { approvals: None, decided: Some(decided), .. } => {
                Ok(ControlAnswer::Decided(decided))
            }
            AnswerLine { .. } => Err("an answer has either approvals or a decision"),
        }
    }
}

/// Serves `listener` (bound by [`bind`] at `path`) until `shutdown`, one request per connection;
/// removes the socket file at the end.
///
/// # Errors
/// When the listener cannot be handed to the runtime.
pub async fn serve(
    server: Arc<dyn Decider>,
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
    shutdown: CancellationToken,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    tracing::info!(path = %path.display(), "owner control socket ready (volcanic approvals, approve, deny)");
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let tracker = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "control socket: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        let (server, path) = (server.clone(), path.clone());
        tracker.spawn(async move {
            if let Err(err) = answer(server.as_ref(), stream, &path).await {
                tracing::debug!(error = %err, "control socket: a connection failed");
            }
            drop(slot);
        });
    }
    tracker.close();
    let _ = tokio::time::timeout(Duration::from_secs(5), tracker.wait()).await;
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// Binds the socket at `path` (mode 0600, its folder 0700), replacing a stale socket file; done
/// when the server is built, so the socket exists before the server says it listens.
///
/// # Errors
/// When the folder or the socket cannot be made, or `path` exists and is not a socket.
pub fn bind(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    if let Some(parent) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) => {
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

async fn answer(server: &dyn Decider, stream: UnixStream, path: &Path) -> io::Result<()> {
    let peer = stream.peer_cred()?;
    // The socket file is the server's own: its owner is the user the server runs as.
    let own_uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(path)?);
    let (read, mut write) = stream.into_split();
    // The request line is read (bounded) before anything is answered, also from a peer that is
    // refused: closing on a request not yet read would break its write, and it would report an
    // unreachable server instead of the refusal.
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(MAX_LINE));
    let received = tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line)).await;
    let reply = if peer.uid() != own_uid {
        tracing::warn!(
            peer_uid = peer.uid(),
            "control socket: a connection from another user was refused"
        );
        refused("refused: only the user the server runs as may decide")
    } else if let Err(why) = outside_every_sandbox(peer.pid()) {
        tracing::warn!(peer_pid = ?peer.pid(), %why, "control socket: a connection from a sandbox was refused");
        refused("refused: a sandboxed process cannot decide approvals")
    } else {
        match received {
            Ok(Ok(_)) => match serde_json::from_str::<ControlRequest>(line.trim()) {
                Ok(request) => handle(server, request).await,
                Err(err) => ControlAnswer::Refused(format!("bad request: {err}")),
            },
            Ok(Err(err)) => return Err(err),
            Err(_) => refused("no request within 10 s"),
        }
    };
    let mut bytes = serde_json::to_vec(&reply).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write.write_all(&bytes).await?;
    write.shutdown().await
}

/// Whether the peer `pid` runs in the server's own user and PID namespaces. Every sandbox (a
/// caller's or the owner's) has both of its own, and runs as the server's user, so the user check
/// alone would let a sandboxed process decide if the socket ever became reachable from one. A
/// peer whose namespaces cannot be read (gone, or not dumpable) is refused too. The mount
/// namespace is not compared: a server run by systemd with `PrivateTmp=` has its own, and the
/// owner's shell must still reach it.
///
/// The check reads `/proc/<pid>/ns/*` after the connection was made; a peer that exits in
/// between and whose PID is taken at once by a process of the server's namespaces would pass,
/// which a sandboxed process cannot arrange (it sees no PID of the host, and its own processes
/// are bounded).
fn outside_every_sandbox(pid: Option<i32>) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let pid = pid.filter(|pid| *pid > 0).ok_or("the peer's process is not visible")?;
    for ns in ["user", "pid"] {
        let own = std::fs::metadata(format!("/proc/self/ns/{ns}"))
            .map_err(|e| format!("own {ns} namespace: {e}"))?;
        let theirs = std::fs::metadata(format!("/proc/{pid}/ns/{ns}"))
            .map_err(|e| format!("the peer's {ns} namespace cannot be read: {e}"))?;
        if (own.dev(), own.ino()) != (theirs.dev(), theirs.ino()) {
            return Err(format!("the peer runs in another {ns} namespace"));
        }
    }
    Ok(())
}

fn refused(why: &str) -> ControlAnswer {
    ControlAnswer::Refused(why.to_string())
}

async fn handle(server: &dyn Decider, request: ControlRequest) -> ControlAnswer {
    let (id, decision) = match request {
        ControlRequest::List => return ControlAnswer::Approvals(server.pending()),
        ControlRequest::Approve { id } => (id, Decision::Approve),
        ControlRequest::Deny { id, reason } => (id, Decision::Deny { reason }),
    };
    if !is_valid_id(&id) {
        return refused("an approval id is 8 hex digits (see volcanic approvals)");
    }
    match server.decide(&id, decision).await {
        Ok(decided) => ControlAnswer::Decided(decided),
        Err(err) => ControlAnswer::Refused(err.to_string()),
    }
}

/// One request to the socket at `path`, as `volcanic approve` sends it: the server's answer.
///
/// # Errors
/// When no server listens there, or the answer is not one.
pub async fn request(path: &Path, request: &ControlRequest) -> io::Result<ControlAnswer> {
    let mut stream = UnixStream::connect(path).await?;
    let mut bytes = serde_json::to_vec(request).map_err(io::Error::other)?;
    bytes.push(b'\n');
    stream.write_all(&bytes).await?;
    let mut line = String::new();
    let mut reader = BufReader::new(stream.take(16 * 1024 * 1024));
    tokio::time::timeout(Duration::from_secs(30), reader.read_line(&mut line)).await.map_err(
        |_| io::Error::new(io::ErrorKind::TimedOut, "the server did not answer within 30 s"),
    )??;
    serde_json::from_str(line.trim()).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::DecidedState;
    use serde_json::json;

    #[test]
    fn answers_cross_the_socket_in_the_protocols_shape_and_read_back_whole() {
        let decided = Decided {
            task_id: "t1".into(),
            caller: "alice".into(),
            state: DecidedState::WorkingCallRefused,
        };
        let table = [
            (ControlAnswer::Approvals(Vec::new()), json!({"ok": true, "approvals": []})),
            (
                ControlAnswer::Decided(decided),
                json!({"ok": true, "decided": {"taskId": "t1", "caller": "alice",
                    "state": "working (the call was refused)"}}),
            ),
            (ControlAnswer::Refused("no".into()), json!({"ok": false, "error": "no"})),
        ];
        for (answer, wire) in table {
            assert_eq!(serde_json::to_value(&answer).unwrap(), wire);
            assert_eq!(serde_json::from_value::<ControlAnswer>(wire).unwrap(), answer);
        }
        let neither = serde_json::from_value::<ControlAnswer>(json!({"ok": true}));
        assert!(neither.is_err(), "{neither:?}");
    }
}
