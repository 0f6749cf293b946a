//! What a sandbox is started from: the spec the server hands the launcher ([`LaunchSpec`]), the
//! view as the launcher opened it ([`Opened`]), and what the tool host checks inside
//! ([`Expect`]). Plain values shared by the launcher (`launch.rs`) and the bwrap command line
//! (`bwrap.rs`).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::beneath::{Identity, Kind};
use super::{SandboxView, limits};

/// What the launcher needs to start one sandbox (sent as JSON on its command line: paths and
/// numbers, never a secret).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LaunchSpec {
    pub bwrap: PathBuf,
    pub tool_host: PathBuf,
    pub tool_host_args: Vec<String>,
    pub read_only_paths: Vec<PathBuf>,
    pub tmp_bytes: u64,
    pub view: SandboxView,
    pub spill_dir: PathBuf,
    pub limits: limits::Applied,
}

impl LaunchSpec {
    /// The spec of a sandbox for `confinement` with its spill folder and applied limits.
    pub(crate) fn new(
        confinement: &super::Confinement,
        spill_dir: &Path,
        limits: limits::Applied,
    ) -> Self {
        let sandbox = &confinement.sandbox;
        LaunchSpec {
            bwrap: sandbox.bwrap.clone(),
            tool_host: sandbox.tool_host.clone(),
            tool_host_args: sandbox.tool_host_args.clone(),
            read_only_paths: sandbox.read_only_paths.clone(),
            tmp_bytes: sandbox.tmp_bytes,
            view: confinement.view.clone(),
            // Inside the sandbox the working folder is the workspace: a relative state folder
            // (`--state-dir state`) must be made absolute here.
            spill_dir: super::normalize_path(
                &std::path::absolute(spill_dir).unwrap_or_else(|_| spill_dir.to_path_buf()),
            ),
            limits,
        }
    }
}

/// A folder or file the launcher opened, and where the sandbox sees it.
#[derive(Debug)]
pub(crate) struct Bound {
    pub fd: i32,
    pub path: PathBuf,
}

/// What the tool host checks inside the sandbox before it serves: every bound path is the file
/// the launcher opened (`same`), and every hidden one is covered (`covered`). A mismatch means a
/// name changed between the launcher's walk and bwrap's mounts; the host then refuses to run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expect {
    pub same: Vec<(PathBuf, Identity)>,
    pub covered: Vec<PathBuf>,
}

/// The view as the launcher opened it: descriptors (kept open until `exec`) and where each goes.
#[derive(Debug)]
pub(crate) struct Opened {
    pub workspace: i32,
    pub pins: Vec<Bound>,
    pub hidden: Vec<(PathBuf, Kind)>,
    pub protected: Vec<Bound>,
    pub exposed: Vec<Bound>,
    pub read_only: Vec<Bound>,
    pub spill: Bound,
    /// The tool host's request and reply pipes, off stdin and stdout.
    pub pipes: (i32, i32),
    pub seccomp: Option<i32>,
    pub expect: Expect,
    /// Every descriptor above, owned, so none closes before `exec`.
    pub fds: Vec<OwnedFd>,
}

impl Opened {
    /// The descriptors passed to bwrap besides the pipes (the shell that starts the tool host
    /// closes them).
    pub fn passed(&self) -> impl Iterator<Item = i32> + '_ {
        let (input, output) = self.pipes;
        self.fds.iter().map(AsRawFd::as_raw_fd).filter(move |fd| *fd != input && *fd != output)
    }
}
