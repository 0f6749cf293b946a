//! Containment of a session's tools: which tools a session gets ([`ToolSet`]) and, for a
//! contained session, the sandbox they run in ([`Confinement`]).
//!
//! A contained session's built-in tools do not run in the server's process. They run in a tool
//! host ([`run_tool_host`]) started inside a bubblewrap sandbox ([`Sandbox`]) the first time the
//! session calls a tool, and kept for the session's life. The host sees only the session's
//! [`SandboxView`] of the machine, holds no secret, and has no network; the session sends it
//! each call over a pipe and redacts what comes back. Because bash and the file tools run in the
//! same namespaces, no file tool can reach what bash cannot.
//!
//! Why bubblewrap and not Landlock alone: Landlock cannot carve a folder such as `.volcanic/`
//! out of an allowed workspace, and cannot hide the server's `/proc` entries from a process of
//! the same user the way a PID namespace does. bubblewrap is a small, audited tool that only
//! builds namespaces; doing the same by hand would need `unsafe` code for `clone` and `mount`.
//! See docs/security.md for the threat model and docs/architecture.md for the decision.
//!
//! The core never finds bwrap or the tool host binary itself: the host passes their paths.

pub mod beneath;
mod bwrap;
mod host;
mod launch;
mod limits;
mod protocol;
mod remote;
mod seccomp;
mod spec;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use host::run_tool_host;
pub use launch::run_launcher;
pub use limits::{DEFAULT_MAX_PROCESSES, DEFAULT_MEMORY_BYTES, Mechanism, ProcessLimits};
pub(crate) use remote::{RemoteTool, ToolHost};
pub use seccomp::{denied_calls, seccomp_available};

/// Which built-in tools a session has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSet {
    /// read, write, edit, bash, ls, grep, find (and `send` with a channel).
    #[default]
    All,
    /// read, ls, grep, find (and `send` with a channel): nothing that changes a file or runs a
    /// program.
    ReadOnly,
    /// No workspace tool at all (extensions' tools stay).
    None,
}

impl ToolSet {
    /// Whether the built-in tool `name` belongs to this set.
    pub fn has(self, name: &str) -> bool {
        match self {
            ToolSet::All => true,
            ToolSet::ReadOnly => matches!(name, "read" | "ls" | "grep" | "find" | "send"),
            ToolSet::None => false,
        }
    }
}

/// The hidden command of the `volcanic` binary that runs the tool host ([`run_tool_host`]).
pub const TOOL_HOST_COMMAND: &str = "sandbox-tool-host";

/// The hidden command of the `volcanic` binary that runs the launcher ([`run_launcher`]).
pub const LAUNCH_COMMAND: &str = "sandbox-launch";

/// A path made clean: `.` parts dropped and `..` parts applied, without touching the file system
/// (bwrap resolves mount destinations inside the sandbox, so views hold clean paths).
pub fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// How to start sandboxes: the launcher, the bwrap program and the tool host binary.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    tool_host: PathBuf,
    tool_host_args: Vec<String>,
    /// The program (and its arguments) that starts bwrap for the server; it gets the launch
    /// spec as its last argument ([`run_launcher`]).
    launcher: PathBuf,
    launcher_args: Vec<String>,
    read_only_paths: Vec<PathBuf>,
    tmp_bytes: u64,
    /// Bounds on each sandbox's processes and memory, with the mechanism that applies them.
    limits: Option<(ProcessLimits, Mechanism)>,
}

/// Default size cap of each of a sandbox's private `/tmp` and `/dev/shm` (tmpfs, so memory):
/// 64 MiB.
pub const DEFAULT_TMP_BYTES: u64 = 64 * 1024 * 1024;

impl Sandbox {
    /// `bwrap` is the bubblewrap program (a bare name is looked up in `PATH`); `volcanic` is
    /// the binary whose hidden commands run the launcher ([`LAUNCH_COMMAND`]) and the tool host
    /// ([`TOOL_HOST_COMMAND`]).
    pub fn new(bwrap: impl Into<PathBuf>, volcanic: impl Into<PathBuf>) -> Self {
        let volcanic = volcanic.into();
        Sandbox {
            bwrap: bwrap.into(),
            tool_host: volcanic.clone(),
            tool_host_args: vec![TOOL_HOST_COMMAND.into()],
            launcher: volcanic,
            launcher_args: vec![LAUNCH_COMMAND.into()],
            read_only_paths: Vec::new(),
            tmp_bytes: DEFAULT_TMP_BYTES,
            limits: None,
        }
    }

    /// Starts `program` with `args` (and the launch spec last) in place of the launcher; for
    /// tests of the session side, which need no real sandbox.
    #[cfg(test)]
    pub(crate) fn with_launcher(mut self, program: impl Into<PathBuf>, args: Vec<String>) -> Self {
        self.launcher = program.into();
        self.launcher_args = args;
        self
    }

    /// Bounds every sandbox's processes and memory (callers' sandboxes), by the best mechanism
    /// this host allows ([`Mechanism::detect`]).
    pub fn process_limits(mut self, limits: ProcessLimits) -> Self {
        self.limits = Some((limits, Mechanism::detect()));
        self
    }

    /// How this host bounds sandboxes' processes, when they are bounded.
    pub fn mechanism(&self) -> Option<&Mechanism> {
        self.limits.as_ref().map(|(_, mechanism)| mechanism)
    }

    /// The size cap of each of a sandbox's private `/tmp` and `/dev/shm` (default
    /// [`DEFAULT_TMP_BYTES`]): they live in memory, so without a cap one caller could fill half
    /// the machine's RAM.
    pub fn tmp_bytes(mut self, bytes: u64) -> Self {
        self.tmp_bytes = bytes;
        self
    }

    /// Host paths every sandbox sees read-only besides the system folders (e.g. `/opt/tools`).
    /// Paths that do not exist are skipped.
    pub fn read_only_paths(mut self, paths: Vec<PathBuf>) -> Self {
        self.read_only_paths = paths;
        self
    }

    /// Starts a sandbox with a `base` view over an empty temporary folder and checks that its
    /// tool host answers, so a host can say at start-up whether sessions can be contained here.
    ///
    /// # Errors
    /// Why the sandbox cannot start (bwrap missing, user namespaces refused, …).
    pub async fn probe(self: &Arc<Self>, base: ViewBase) -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| format!("cannot make a folder: {e}"))?;
        let workspace = dir.path().join("workspace");
        let spill = dir.path().join("spill");
        std::fs::create_dir(&workspace).map_err(|e| format!("cannot make a folder: {e}"))?;
        let view = SandboxView { base, ..SandboxView::new(&workspace) };
        let confinement = Confinement { sandbox: self.clone(), view };
        let host = ToolHost::new(
            Arc::new(confinement),
            spill,
            Arc::new(crate::config::ToolLimits::default()),
            Vec::new(),
        );
        let started = tokio::time::timeout(PROBE_TIMEOUT, host.ensure_started()).await;
        match started {
            Ok(result) => result,
            Err(_) => Err(format!("the sandbox did not start within {PROBE_TIMEOUT:?}")),
        }
    }
}

/// Longest a start-up probe waits.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// What lies beneath a sandbox's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ViewBase {
    /// Only the workspace, the spill folder and the system folders (read-only), a private `/tmp`
    /// and no network: a caller's session.
    #[default]
    Workspace,
    /// The whole host file system as the server sees it, writable as far as the user may, and
    /// the host's network: the owner's own sessions. What the sandbox still takes away is the
    /// server itself (its `/proc` entries, its memory, every capability) and the paths the view
    /// hides (the config file, the state folder, other chats' workspaces).
    Host,
}

/// What a contained session sees of the machine: by default the workspace and the session's
/// spill folder, the system folders read-only, and nothing else ([`ViewBase`]). Paths are
/// absolute.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxView {
    /// What lies beneath the workspace and the hidden paths.
    pub base: ViewBase,
    /// The workspace, mounted at its own path (the session's working folder).
    pub workspace: PathBuf,
    /// Whether the workspace is writable (false: every file tool and program sees it read-only).
    pub writable: bool,
    /// Folders hidden whether or not they exist yet: created empty when absent, then covered by
    /// an empty read-only folder, so nothing can be created under them either (`.volcanic/`).
    pub always_hidden: Vec<PathBuf>,
    /// Files hidden whether or not they exist yet: created empty when absent, then covered, so
    /// that no session can create one (the workspace's `volcanic.toml`, which the server and
    /// `volcanic chat` load by default).
    pub always_hidden_files: Vec<PathBuf>,
    /// Paths hidden if they exist when the sandbox starts (the owner's private paths): a folder
    /// shows empty and read-only, a file empty.
    pub hidden: Vec<PathBuf>,
    /// Files that are read-only in the sandbox. An absent one is created empty first (bwrap
    /// can only cover what exists), so a session cannot create it either.
    pub protected: Vec<PathBuf>,
    /// Folders inside hidden ones that the session sees again (its own inbox), created when
    /// absent; writable when the workspace is.
    pub exposed: Vec<PathBuf>,
}

impl SandboxView {
    /// The whole workspace, writable, nothing hidden, nothing else but the system folders.
    pub fn new(workspace: &Path) -> Self {
        SandboxView {
            base: ViewBase::Workspace,
            workspace: normalize_path(workspace),
            writable: true,
            always_hidden: Vec::new(),
            always_hidden_files: Vec::new(),
            hidden: Vec::new(),
            protected: Vec::new(),
            exposed: Vec::new(),
        }
    }

    /// The owner's view: the whole host as it is, working in `workspace`, nothing hidden yet.
    pub fn host(workspace: &Path) -> Self {
        SandboxView { base: ViewBase::Host, ..SandboxView::new(workspace) }
    }
}

/// A contained session's sandbox: how to start it and what it shows.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub sandbox: Arc<Sandbox>,
    pub view: SandboxView,
}

/// How the owner's own sessions are confined: the sandbox, and what every owner view hides.
///
/// The owner's sandbox shows the whole host ([`ViewBase::Host`]) but the server: its process
/// (own PID namespace, no capability), the config file that holds its keys, its state folder,
/// the workspace's A2A records (callers' keys, push tokens) and what the host adds per session
/// (the other chats' workspaces).
#[derive(Debug, Clone)]
pub struct OwnerConfinement {
    pub sandbox: Arc<Sandbox>,
    /// Hidden in every owner view: absolute, or relative to the session's workspace.
    pub hide: Vec<PathBuf>,
    /// Folders of the session's workspace hidden whether or not they exist yet, so no session
    /// can create them either: the host's records there (the A2A server's callers, tasks and
    /// push configurations), which the host names.
    pub records: Vec<PathBuf>,
}

impl OwnerConfinement {
    /// The confinement of an owner session working in `workspace`, hiding `also_hide` too.
    pub fn for_workspace(
        &self,
        workspace: &Path,
        also_hide: impl IntoIterator<Item = PathBuf>,
    ) -> Confinement {
        let mut view = SandboxView::host(workspace);
        let root = view.workspace.clone();
        let resolve = |path: &Path| normalize_path(&root.join(path));
        view.hidden = self
            .hide
            .iter()
            .map(|path| resolve(path))
            .chain(also_hide.into_iter().map(|path| resolve(&path)))
            .collect();
        view.always_hidden = self.records.iter().map(|path| resolve(path)).collect();
        Confinement { sandbox: self.sandbox.clone(), view }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_view_shows_the_host_but_hides_the_servers_records() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, other) = (dir.path().join("1"), dir.path().join("2"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let config = dir.path().join("volcanic.toml");
        std::fs::write(&config, "").unwrap();
        let owner = OwnerConfinement {
            sandbox: Arc::new(Sandbox::new("bwrap", "/usr/bin/volcanic")),
            hide: vec![config.clone(), ".env".into()],
            records: vec![".volcanic/a2a".into()],
        };
        let confinement = owner.for_workspace(&ws.join("."), [other.clone()]);
        let view = confinement.view.clone();
        assert_eq!((view.base, view.writable), (ViewBase::Host, true));
        assert_eq!(view.workspace, ws);
        assert_eq!(view.hidden, vec![config.clone(), ws.join(".env"), other.clone()]);
        assert_eq!(view.always_hidden, vec![ws.join(".volcanic/a2a")]);

        let spec =
            spec::LaunchSpec::new(&confinement, &dir.path().join("spill"), Default::default());
        let opened = launch::open_view(&spec).unwrap();
        let args: Vec<String> = bwrap::arguments(&spec, &opened)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let has = |run: &[&str]| args.windows(run.len()).any(|w| w == run);
        // The host's root and network, but its own PID namespace and /proc, and no capability.
        assert!(has(&["--bind", "/", "/"]), "{args:?}");
        assert!(
            has(&["--unshare-pid"]) && has(&["--proc", "/proc"]) && has(&["--cap-drop", "ALL"])
        );
        assert!(!args.iter().any(|a| a == "--unshare-all" || a == "--unshare-net"), "{args:?}");
        let config = config.display().to_string();
        assert!(has(&["--ro-bind", "/dev/null", &config]), "{args:?}");
        // The folders on the way to what is hidden are pinned (bound onto themselves).
        let parent = dir.path().display().to_string();
        assert!(args.windows(3).any(|w| w[0] == "--bind-fd" && w[2] == parent), "{args:?}");
        assert!(args.iter().any(|a| a == "/usr/bin/volcanic"), "{args:?}");
        assert!(!args.iter().any(|a| a == "--sweep"), "the owner's processes may outlive a call");
    }

    #[test]
    fn tool_sets_hold_the_tools_their_tier_promises() {
        let names = ["read", "write", "edit", "bash", "ls", "grep", "find", "send"];
        let held = |set: ToolSet| -> Vec<&str> {
            names.iter().copied().filter(|name| set.has(name)).collect()
        };
        assert_eq!(held(ToolSet::All), names.to_vec());
        assert_eq!(held(ToolSet::ReadOnly), vec!["read", "ls", "grep", "find", "send"]);
        assert_eq!(held(ToolSet::None), Vec::<&str>::new());
    }
}
