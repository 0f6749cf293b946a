//! How callers' sessions are contained: which tools a caller's tier gives, and the sandbox view
//! of the workspace its tools run in.
//!
//! A caller's session sees the owner's workspace except `.volcanic/` (callers, cards, task files
//! and push configs), the A2A inbox folders of other callers, and the owner's private paths;
//! the files that shape the owner's own sessions (PERSONA.md, MEMORY.md, AGENTS.md, CLAUDE.md)
//! are read-only to it unless the owner allows otherwise. The core's sandbox does the rest
//! (no network, no other process, nothing else of the host).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use volcanic_core::sandbox::{Confinement, Sandbox, SandboxView, ToolSet};

use crate::auth::{Caller, CallerTier};

/// The workspace files that shape the owner's sessions' system prompt: read-only to callers
/// unless [`ViewPolicy::writable_context`].
pub const CONTEXT_FILES: [&str; 4] = ["PERSONA.md", "MEMORY.md", "AGENTS.md", "CLAUDE.md"];

/// The workspace's default config file (`volcanic serve` and `volcanic chat` load it when no
/// `--config` is given).
pub const CONFIG_FILE: &str = "volcanic.toml";

/// How the server contains callers' tools.
#[derive(Debug, Clone)]
pub enum Containment {
    /// Every caller's tools run in a sandbox.
    Sandbox { sandbox: Arc<Sandbox>, policy: ViewPolicy },
    /// No sandbox can be had here (the reason says why): every caller gets tier `chat`.
    Unavailable { reason: String },
    /// The owner's explicit opt-out: tools run unconfined in the server's process (the tier
    /// still decides which tools a caller has).
    Off,
}

impl Default for Containment {
    fn default() -> Self {
        Containment::Unavailable { reason: "no sandbox was configured".into() }
    }
}

/// What the owner hides from callers, and whether callers may change the context files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewPolicy {
    /// Further paths hidden from callers, relative to the workspace (or absolute inside it).
    pub hide: Vec<PathBuf>,
    /// Whether callers may change PERSONA.md, MEMORY.md, AGENTS.md and CLAUDE.md.
    pub writable_context: bool,
}

/// What a caller tier allows, as the core's tool set (the A2A tools `request_input` and
/// `notify_owner` are not built-ins and stay in every tier).
fn tool_set(tier: CallerTier) -> ToolSet {
    match tier {
        CallerTier::Chat => ToolSet::None,
        CallerTier::Read => ToolSet::ReadOnly,
        CallerTier::Workspace => ToolSet::All,
    }
}

/// The folder of a caller's inbound files: `<workspace>/inbox/a2a/<caller>`.
pub fn caller_inbox(workspace: &Path, caller: &str) -> PathBuf {
    crate::inbox::inbox_dir(workspace).join("a2a").join(caller)
}

impl Containment {
    /// The tools and sandbox of `caller`'s session, by its tier.
    pub(crate) fn for_caller(&self, caller: &Caller) -> (ToolSet, Option<Confinement>) {
        let tier = caller.tier;
        match self {
            Containment::Unavailable { .. } => (ToolSet::None, None),
            Containment::Off => (tool_set(tier), None),
            Containment::Sandbox { .. } if tier == CallerTier::Chat => (ToolSet::None, None),
            Containment::Sandbox { sandbox, policy } => {
                let view = view(&caller.workspace.path, &caller.name, tier, policy);
                (tool_set(tier), Some(Confinement { sandbox: sandbox.clone(), view }))
            }
        }
    }

    /// Says once, at start-up, what callers' sessions will get.
    pub(crate) fn log(&self) {
        match self {
            Containment::Sandbox { .. } => {
                tracing::info!("A2A callers' tools run in a sandbox (bubblewrap)");
            }
            Containment::Unavailable { reason } => tracing::error!(
                reason = %reason,
                "A2A callers' tools cannot be sandboxed here: every caller gets tier chat (no \
                 workspace tools). Install bubblewrap and allow user namespaces, or opt out with \
                 A2A__Sandbox__Mode=off (docs/security.md)"
            ),
            Containment::Off => tracing::warn!(
                "A2A__Sandbox__Mode=off: A2A callers' tools run UNCONTAINED. A caller can read \
                 every file and secret this user can (other callers' keys, journals, the \
                 provider key) and reach the network. Use this only with callers you trust \
                 like yourself"
            ),
        }
    }
}

/// The sandbox view of `caller` in `workspace`.
fn view(workspace: &Path, caller: &str, tier: CallerTier, policy: &ViewPolicy) -> SandboxView {
    let mut view = SandboxView::new(workspace);
    let root = view.workspace.clone();
    view.writable = tier == CallerTier::Workspace;
    view.always_hidden = vec![root.join(".volcanic"), crate::inbox::inbox_dir(&root).join("a2a")];
    view.exposed = vec![caller_inbox(&root, caller)];
    // The server and `volcanic chat` load it by default: no caller may ever create or change it.
    view.always_hidden_files = vec![root.join(CONFIG_FILE)];
    view.hidden = policy
        .hide
        .iter()
        .map(|path| volcanic_core::sandbox::normalize_path(&root.join(path)))
        .filter(|path| path.starts_with(&root) && path != &root)
        .collect();
    if !policy.writable_context {
        view.protected = CONTEXT_FILES.iter().map(|name| root.join(name)).collect();
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{A2aWorkspace, CallerMode};

    fn caller(workspace: &Path, tier: CallerTier) -> Caller {
        Caller {
            name: "peer".into(),
            tier,
            approval: Default::default(),
            limits: Default::default(),
            workspace: Arc::new(A2aWorkspace {
                path: workspace.to_path_buf(),
                scope_prefix: "serve".into(),
                owner_id: "owner".into(),
            }),
            mode: CallerMode::Isolated,
        }
    }

    #[test]
    fn caller_view_hides_volcanic_other_inboxes_and_private_paths() {
        let ws = Path::new("/w/ws");
        let policy = ViewPolicy {
            hide: vec!["private".into(), "../outside".into(), "/w/ws/notes/secret.txt".into()],
            writable_context: false,
        };
        let view = view(ws, "peer", CallerTier::Workspace, &policy);
        assert_eq!(
            view,
            SandboxView {
                base: volcanic_core::sandbox::ViewBase::Workspace,
                workspace: ws.into(),
                writable: true,
                always_hidden: vec!["/w/ws/.volcanic".into(), "/w/ws/inbox/a2a".into()],
                always_hidden_files: vec!["/w/ws/volcanic.toml".into()],
                hidden: vec!["/w/ws/private".into(), "/w/ws/notes/secret.txt".into()],
                protected: CONTEXT_FILES.iter().map(|f| ws.join(f)).collect(),
                exposed: vec!["/w/ws/inbox/a2a/peer".into()],
            }
        );
        let open = ViewPolicy { hide: vec![], writable_context: true };
        let read = super::view(ws, "peer", CallerTier::Read, &open);
        assert_eq!((read.writable, read.protected), (false, Vec::<PathBuf>::new()));
    }

    #[test]
    fn containment_gives_each_tier_its_tools() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Containment::Sandbox {
            sandbox: Arc::new(Sandbox::new("bwrap", "/bin/true")),
            policy: ViewPolicy::default(),
        };
        let got = |c: &Containment, tier| {
            let (set, confinement) = c.for_caller(&caller(dir.path(), tier));
            (set, confinement.is_some())
        };
        assert_eq!(got(&sandbox, CallerTier::Workspace), (ToolSet::All, true));
        assert_eq!(got(&sandbox, CallerTier::Read), (ToolSet::ReadOnly, true));
        assert_eq!(got(&sandbox, CallerTier::Chat), (ToolSet::None, false));
        let unavailable = Containment::default();
        assert_eq!(got(&unavailable, CallerTier::Workspace), (ToolSet::None, false));
        assert_eq!(got(&Containment::Off, CallerTier::Workspace), (ToolSet::All, false));
        assert_eq!(got(&Containment::Off, CallerTier::Read), (ToolSet::ReadOnly, false));
        assert_eq!(got(&Containment::Off, CallerTier::Chat), (ToolSet::None, false));
    }
}
