//! How many processes (and how much memory) one sandbox may take.
//!
//! Without a bound, one caller's `:(){ :|:& };:` takes every PID of the host: other callers'
//! sandboxes, and anything else on the machine, can no longer start a process. The mechanism
//! depends on what the server may do here, decided once when the sandbox is set up
//! ([`Mechanism::detect`]):
//! - **cgroups** (v2 where the server's own cgroup is delegated to its user, as systemd does for
//!   services with `Delegate=yes` and for user sessions; v1 where the `pids` hierarchy is
//!   writable, as for root on hosts that still mount v1): every sandbox gets its own cgroup with
//!   `pids.max` and, where the memory controller can be used, a memory limit. The launcher joins
//!   it before it becomes bwrap, so every process of the sandbox is counted from its first fork,
//!   and one caller's sandbox cannot take another's share.
//! - **`RLIMIT_NPROC`** (an unprivileged server without a cgroup of its own): the kernel counts
//!   every process of the server's user, so the launcher allows the processes the user has now
//!   plus the sandbox's share. This bounds what a caller can take from the machine, but the
//!   sandboxes of one server share that budget while they run (the processes of a tool call end
//!   with it, see the tool host).
//! - **nothing** (root without a writable cgroup, as in a default Docker container: root is exempt
//!   from `RLIMIT_NPROC`): the server says so at start; the container's own `pids_limit` is then
//!   the bound (docs/security.md).
//!
//! cgroups are handled by a few file writes here rather than a cgroup crate: the crates manage
//! whole container hierarchies, and a sandbox needs one folder, two limits and a join.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Default most processes (and threads) in one caller's sandbox.
pub const DEFAULT_MAX_PROCESSES: u64 = 256;

/// Default most memory of one caller's sandbox, where a memory cgroup can be had: 1 GiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 1024 * 1024 * 1024;

/// The bounds of each sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Most processes and threads at once.
    pub max_processes: u64,
    /// Most memory (charged to the sandbox's cgroup: its processes and its tmpfs files).
    pub memory_bytes: u64,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits { max_processes: DEFAULT_MAX_PROCESSES, memory_bytes: DEFAULT_MEMORY_BYTES }
    }
}

/// What a launcher applies to itself before it becomes bwrap.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Applied {
    /// The sandbox's cgroup folders to join (v2: one; v1: one per hierarchy).
    pub cgroups: Vec<PathBuf>,
    /// The sandbox's share of `RLIMIT_NPROC`, on top of the processes the user has now.
    pub nproc: Option<u64>,
}

impl Applied {
    /// Joins the cgroups and sets the process limit, in the launcher (before bwrap).
    ///
    /// # Errors
    /// A cgroup cannot be joined or the limit set.
    pub(crate) fn enter(&self) -> io::Result<()> {
        let pid = std::process::id().to_string();
        for dir in &self.cgroups {
            std::fs::write(dir.join("cgroup.procs"), &pid).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot join the cgroup {}: {e}", dir.display()))
            })?;
        }
        if let Some(share) = self.nproc {
            let limit = user_tasks().saturating_add(share);
            let limit = rustix::process::Rlimit { current: Some(limit), maximum: Some(limit) };
            rustix::process::setrlimit(rustix::process::Resource::Nproc, limit)?;
        }
        Ok(())
    }
}

/// The tasks (processes and threads) of this process's real user now: what `RLIMIT_NPROC` is
/// compared with.
fn user_tasks() -> u64 {
    let uid = rustix::process::getuid().as_raw().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut tasks = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let real_uid = status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|rest| rest.split_whitespace().next());
        if real_uid != Some(uid.as_str()) {
            continue;
        }
        let threads = status
            .lines()
            .find_map(|line| line.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(1);
        tasks = tasks.saturating_add(threads);
    }
    tasks
}

/// How sandboxes are bounded on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// Each sandbox gets cgroups below these folders.
    Cgroups(Cgroups),
    /// `RLIMIT_NPROC` (an unprivileged server without cgroups).
    Rlimit,
    /// Nothing bounds them here; the reason says why.
    Unbounded { reason: String },
}

/// Where sandboxes' cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    /// Parent folders, one per hierarchy, with what each limits.
    parents: Vec<(PathBuf, Controllers)>,
}

/// The limits a hierarchy's cgroups take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controllers {
    /// cgroup v2 with `pids`, and `memory` when it could be enabled.
    V2 { memory: bool },
    /// cgroup v1 `pids`.
    V1Pids,
    /// cgroup v1 `memory`.
    V1Memory,
}

/// The folder below the server's own cgroup that holds its sandboxes' cgroups.
const PARENT: &str = "volcanic-sandboxes";

impl Mechanism {
    /// Finds the best mechanism this process may use.
    pub fn detect() -> Mechanism {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut reasons = Vec::new();
        // A hierarchy counts only when a sandbox's cgroup can really be made and limited there
        // (another user may own the folder an earlier server made).
        let usable =
            |found: Cgroups| found.make(ProcessLimits::default()).map(drop).map(|()| found);
        match v2(&cgroup, &mountinfo).and_then(|found| found.map(usable).transpose()) {
            Ok(Some(found)) => return Mechanism::Cgroups(found),
            Ok(None) => {}
            Err(err) => reasons.push(format!("cgroup v2: {err}")),
        }
        match v1(&cgroup, &mountinfo).and_then(|found| found.map(usable).transpose()) {
            Ok(Some(found)) => return Mechanism::Cgroups(found),
            Ok(None) => {}
            Err(err) => reasons.push(format!("cgroup v1: {err}")),
        }
        if !rustix::process::getuid().is_root() {
            return Mechanism::Rlimit;
        }
        if reasons.is_empty() {
            reasons.push("no cgroup hierarchy with the pids controller is mounted".into());
        }
        Mechanism::Unbounded {
            reason: format!(
                "the server runs as root (exempt from RLIMIT_NPROC) and cannot make cgroups: {}",
                reasons.join("; ")
            ),
        }
    }

    /// What a new sandbox's launcher applies, and the cgroups to remove when it ends.
    ///
    /// # Errors
    /// A cgroup cannot be made or limited.
    pub(crate) fn for_sandbox(
        &self,
        limits: ProcessLimits,
    ) -> io::Result<(Applied, Option<SandboxCgroups>)> {
        match self {
            Mechanism::Cgroups(cgroups) => {
                let made = cgroups.make(limits)?;
                Ok((Applied { cgroups: made.dirs.clone(), nproc: None }, Some(made)))
            }
            Mechanism::Rlimit => {
                Ok((Applied { cgroups: Vec::new(), nproc: Some(limits.max_processes) }, None))
            }
            Mechanism::Unbounded { .. } => Ok((Applied::default(), None)),
        }
    }

    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        match self {
            Mechanism::Cgroups(cgroups) => {
                let dirs: Vec<String> =
                    cgroups.parents.iter().map(|(d, _)| d.display().to_string()).collect();
                format!("cgroups ({})", dirs.join(", "))
            }
            Mechanism::Rlimit => "RLIMIT_NPROC (shared by the server's user)".into(),
            Mechanism::Unbounded { reason } => format!("none: {reason}"),
        }
    }
}

/// A sandbox's cgroups: removed (their processes killed first) when dropped.
#[derive(Debug)]
pub(crate) struct SandboxCgroups {
    name: String,
    dirs: Vec<PathBuf>,
}

impl Drop for SandboxCgroups {
    fn drop(&mut self) {
        for dir in &self.dirs {
            remove_cgroup(dir);
        }
        live().retain(|name| name != &self.name);
    }
}

/// Kills what is left in `dir` and removes it; a folder still busy is left for the next
/// [`Cgroups::make`] to collect.
fn remove_cgroup(dir: &Path) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

static NEXT: AtomicU64 = AtomicU64::new(1);

impl Cgroups {
    fn make(&self, limits: ProcessLimits) -> io::Result<SandboxCgroups> {
        let name = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        live().push(name.clone());
        let mut made = SandboxCgroups { name, dirs: Vec::new() };
        for (parent, controllers) in &self.parents {
            collect_leftovers(parent);
            let dir = parent.join(&made.name);
            std::fs::create_dir(&dir).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot make the cgroup {}: {e}", dir.display()))
            })?;
            made.dirs.push(dir.clone());
            let write = |file: &str, value: String| {
                std::fs::write(dir.join(file), value).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot set {}/{file}: {e}", dir.display()))
                })
            };
            match controllers {
                Controllers::V2 { memory } => {
                    write("pids.max", limits.max_processes.to_string())?;
                    if *memory {
                        write("memory.max", limits.memory_bytes.to_string())?;
                        // Beyond the limit the sandbox's processes are killed, not swapped out.
                        let _ = write("memory.swap.max", "0".into());
                    }
                }
                Controllers::V1Pids => write("pids.max", limits.max_processes.to_string())?,
                Controllers::V1Memory => {
                    write("memory.limit_in_bytes", limits.memory_bytes.to_string())?
                }
            }
        }
        Ok(made)
    }
}

/// The names of this process's sandbox cgroups in use (made and not yet dropped).
static LIVE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<String>> {
    LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes the cgroups earlier sandboxes left: this process's that are no longer in use, and
/// those of servers that have exited (`<pid>-<n>` with no such process). Another running
/// server's are left alone, even empty: it may be about to join one. A busy one refuses to go.
fn collect_leftovers(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let own = std::process::id().to_string();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, _)) = name.split_once('-') else { continue };
        let stale = if pid == own {
            !live().contains(&name)
        } else {
            !Path::new("/proc").join(pid).exists()
        };
        if stale && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// One line of /proc/self/mountinfo: (mount root, mount point, file system type, super options).
fn mounts(mountinfo: &str) -> impl Iterator<Item = (&str, &str, &str, &str)> {
    mountinfo.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut fields = before.split(' ');
        let root = fields.nth(3)?;
        let point = fields.next()?;
        let mut after = after.split(' ');
        let fstype = after.next()?;
        let _source = after.next();
        let options = after.next().unwrap_or("");
        Some((root, point, fstype, options))
    })
}

/// Where the cgroup `path` (as /proc/self/cgroup names it) lies under a mount of `root` at
/// `point`.
fn under_mount(root: &str, point: &str, path: &str) -> Option<PathBuf> {
    let rel = if root == "/" { path } else { path.strip_prefix(root)? };
    Some(Path::new(point).join(rel.trim_start_matches('/')))
}

fn v2(cgroup: &str, mountinfo: &str) -> io::Result<Option<Cgroups>> {
    let Some(path) = cgroup.lines().find_map(|line| line.strip_prefix("0::")) else {
        return Ok(None);
    };
    let Some(own) = mounts(mountinfo)
        .filter(|(_, _, fstype, _)| *fstype == "cgroup2")
        .find_map(|(root, point, _, _)| under_mount(root, point, path))
    else {
        return Ok(None);
    };
    let available = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "pids") {
        return Ok(None);
    }
    // pids may be enabled for the children of a cgroup that holds processes (it is a threaded
    // controller); memory may not, so it is only used where it can be.
    std::fs::write(own.join("cgroup.subtree_control"), "+pids")?;
    let memory = available.split_whitespace().any(|c| c == "memory")
        && std::fs::write(own.join("cgroup.subtree_control"), "+memory").is_ok();
    let parent = own.join(PARENT);
    match std::fs::create_dir(&parent) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let enable = if memory { "+pids +memory" } else { "+pids" };
    std::fs::write(parent.join("cgroup.subtree_control"), enable)?;
    Ok(Some(Cgroups { parents: vec![(parent, Controllers::V2 { memory })] }))
}

fn v1(cgroup: &str, mountinfo: &str) -> io::Result<Option<Cgroups>> {
    let hierarchy = |controller: &str| -> Option<PathBuf> {
        let path = cgroup.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == controller).then_some(path)
        })?;
        mounts(mountinfo)
            .filter(|(_, _, fstype, options)| {
                *fstype == "cgroup" && options.split(',').any(|o| o == controller)
            })
            .find_map(|(root, point, _, _)| under_mount(root, point, path))
    };
    let Some(pids) = hierarchy("pids") else { return Ok(None) };
    let make_parent = |own: &Path| -> io::Result<PathBuf> {
        let parent = own.join(PARENT);
        match std::fs::create_dir(&parent) {
            Ok(()) => Ok(parent),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(parent),
            Err(err) => Err(err),
        }
    };
    let mut parents = vec![(make_parent(&pids)?, Controllers::V1Pids)];
    if let Some(memory) = hierarchy("memory").and_then(|own| make_parent(&own).ok()) {
        parents.push((memory, Controllers::V1Memory));
    }
    Ok(Some(Cgroups { parents }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_folders_are_found_from_proc_files() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/pids rw,relatime shared:12 - cgroup cgroup rw,pids
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:14 - cgroup2 cgroup2 rw
33 25 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu";
        let found: Vec<_> = mounts(mountinfo).collect();
        assert_eq!(found[0], ("/", "/sys/fs/cgroup/pids", "cgroup", "rw,pids"));
        assert_eq!(found[3].0, "/docker/abc");
        assert_eq!(
            under_mount("/", "/sys/fs/cgroup/pids", "/user.slice/a"),
            Some(PathBuf::from("/sys/fs/cgroup/pids/user.slice/a"))
        );
        assert_eq!(
            under_mount("/docker/abc", "/sys/fs/cgroup/cpu", "/docker/abc/x"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu/x"))
        );
        assert_eq!(under_mount("/docker/abc", "/m", "/other"), None);
    }
}
