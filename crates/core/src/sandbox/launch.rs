//! The launcher: the short-lived process between the server and bubblewrap.
//!
//! The server does not start bwrap itself. It starts the launcher (the `volcanic` binary's hidden
//! `sandbox-launch` command) with a [`LaunchSpec`], and the launcher, still outside the sandbox
//! and as the server's user:
//! 1. joins the sandbox's own cgroups and takes its process limit ([`super::limits`]), so that
//!    bwrap and everything started in the sandbox are counted from their first fork;
//! 2. prepares and opens every path of the view that lies in the workspace without following a
//!    single link ([`super::beneath`]): the folders that must exist are made, and each folder on
//!    the way to a hidden, protected or exposed path is kept open to be bound onto itself;
//! 3. moves the tool host's pipes off stdin and stdout (bwrap's init keeps its stdio for as long
//!    as the sandbox lives, and it is visible to the sandbox's processes as `/proc/1`);
//! 4. becomes bwrap (`exec`), passing the open folders by descriptor (`--bind-fd`).
//!
//! Nothing the caller can write decides what the sandbox binds, hides or loads: a link anywhere
//! on a view's path stops the start with an error naming it, and what is bound is the folder the
//! launcher opened, whatever its name points at by the time bwrap mounts it. The tool host then
//! checks from inside that each bound path is the folder that was opened ([`Expect`]).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::beneath::{self, Identity, Kind};
use super::spec::{Bound, Expect, LaunchSpec, Opened};
use super::{SandboxView, ViewBase, bwrap};

/// Runs the launcher: returns only when it failed (on success the process has become bwrap).
pub fn run_launcher(spec: &str) -> io::Error {
    match launch(spec) {
        Ok(never) => match never {},
        Err(err) => err,
    }
}

fn launch(spec: &str) -> io::Result<std::convert::Infallible> {
    let spec: LaunchSpec = serde_json::from_str(spec).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("bad launch spec: {e}"))
    })?;
    spec.limits.enter()?;
    // First, so the pipes get the lowest free descriptors (the shell that starts the tool host
    // names them with one digit).
    let pipes = move_pipes()?;
    let mut opened = open_view(&spec)?;
    opened.pipes = (pipes.0.as_raw_fd(), pipes.1.as_raw_fd());
    opened.fds.push(pipes.0);
    opened.fds.push(pipes.1);
    if spec.view.base == ViewBase::Workspace
        && let Some(filter) = super::seccomp::program_fd()?
    {
        opened.seccomp = Some(filter.as_raw_fd());
        opened.fds.push(filter);
    }
    for fd in &opened.fds {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
    }
    // Whatever else the server inherited from its own parent without close-on-exec (a service
    // manager's socket, a terminal's descriptors) must not reach the sandbox: only the pipes and
    // the opened view pass to bwrap, which closes the latter once bound.
    let mut keep: Vec<i32> = opened.fds.iter().map(AsRawFd::as_raw_fd).collect();
    keep.sort_unstable();
    close_fds::set_fds_cloexec(3, &keep);
    let args = bwrap::arguments(&spec, &opened);
    let err = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(&spec.bwrap).args(args),
    );
    Err(io::Error::new(err.kind(), format!("cannot start bwrap ({}): {err}", spec.bwrap.display())))
}

/// The tool host's pipes, stdin and stdout now, go to new descriptors; stdin and stdout become
/// /dev/null, which is all bwrap's init (pid 1 in the sandbox) then holds.
fn move_pipes() -> io::Result<(OwnedFd, OwnedFd)> {
    let input = rustix::io::dup(std::io::stdin().as_fd())?;
    let output = rustix::io::dup(std::io::stdout().as_fd())?;
    if input.as_raw_fd() > 9 || output.as_raw_fd() > 9 {
        return Err(io::Error::other("the launcher started with too many descriptors open"));
    }
    let null = std::fs::File::options().read(true).write(true).open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(&null)?;
    Ok((input, output))
}

/// Where a path of the view is walked from: the workspace for paths in it (a caller can write
/// there), the file system's root for the owner's paths elsewhere. `None`: outside the workspace
/// in a caller's view, where it is not shown at all.
fn start_of<'a>(
    view: &SandboxView,
    roots: &'a Roots,
    path: &'a Path,
) -> Option<(&'a OwnedFd, PathBuf, PathBuf)> {
    if let Ok(rel) = path.strip_prefix(&view.workspace) {
        if rel.as_os_str().is_empty() {
            return None;
        }
        return Some((&roots.workspace, view.workspace.clone(), rel.to_path_buf()));
    }
    let Some(slash) = &roots.slash else { return None };
    // The owner's own paths elsewhere (the config file, the state folder, other chats'
    // workspaces) may lie behind links the host has always had (`/home` → `/var/home`): they are
    // resolved here, where no session can have planted one on them since they are pinned in
    // every owner sandbox, and walked without following links from there on.
    let resolved = resolve_existing(path);
    match resolved.strip_prefix("/") {
        Ok(rel) if !rel.as_os_str().is_empty() => {
            Some((slash, PathBuf::from("/"), rel.to_path_buf()))
        }
        _ => None,
    }
}

/// `path` with links resolved as far as it exists (a missing last part is kept as it is).
fn resolve_existing(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolve_existing(parent).join(name),
        _ => path.to_path_buf(),
    }
}

struct Roots {
    workspace: OwnedFd,
    /// The file system's root, for the owner's view only.
    slash: Option<OwnedFd>,
}

/// Prepares and opens the view (see the module docs). Blocking.
///
/// # Errors
/// A link or a file where a folder of the view belongs, or an I/O error; the message names the
/// path.
pub(crate) fn open_view(spec: &LaunchSpec) -> io::Result<Opened> {
    let view = &spec.view;
    let roots = Roots {
        workspace: beneath::open_root(&view.workspace)?,
        slash: (view.base == ViewBase::Host)
            .then(|| beneath::open_root(Path::new("/")))
            .transpose()?,
    };
    let mut fds: Vec<OwnedFd> = Vec::new();
    let keep = |fd: OwnedFd, fds: &mut Vec<OwnedFd>| {
        let raw = fd.as_raw_fd();
        fds.push(fd);
        raw
    };
    let workspace_fd = keep(beneath::open_root(&view.workspace)?, &mut fds);
    let mut expect = Expect::default();
    expect.same.push((view.workspace.clone(), Identity::of(&roots.workspace)?));

    // Folders on the way, by absolute path (parents sort before their children).
    let mut ways: BTreeMap<PathBuf, OwnedFd> = BTreeMap::new();
    let remember_way =
        |base: &Path, walked: Vec<(PathBuf, OwnedFd)>, ways: &mut BTreeMap<PathBuf, OwnedFd>| {
            for (rel, fd) in walked {
                ways.entry(base.join(rel)).or_insert(fd);
            }
        };

    // Hidden folders that must be covered whether or not they exist: made first.
    let mut hidden: Vec<(PathBuf, Kind)> = Vec::new();
    for dir in &view.always_hidden {
        let Some((root, base, rel)) = start_of(view, &roots, dir) else { continue };
        let mut walked = beneath::open_dir(root, &rel, true)?;
        walked.pop();
        remember_way(&base, walked, &mut ways);
        hidden.push((dir.clone(), Kind::Dir));
    }
    for file in &view.always_hidden_files {
        let Some((root, base, rel)) = start_of(view, &roots, file) else { continue };
        beneath::create_file(root, &rel)?;
        let (kind, walked) = open_with_way(root, &rel)?;
        remember_way(&base, walked, &mut ways);
        if kind != Kind::Link {
            hidden.push((file.clone(), kind));
        }
    }
    for path in &view.hidden {
        let Some((root, base, rel)) = start_of(view, &roots, path) else { continue };
        match open_with_way(root, &rel) {
            Ok((kind, walked)) => {
                remember_way(&base, walked, &mut ways);
                // A link hides nothing (its target is what the view shows elsewhere).
                if kind != Kind::Link {
                    hidden.push((path.clone(), kind));
                }
            }
            // Not there when the sandbox starts: nothing to hide (docs/security.md). Nor when
            // a link stands on its way: the path is not a file of the workspace then, and what
            // the link points at is shown or hidden as itself. Refusing to start would let any
            // caller that plants such a link take every caller's tools away.
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) if is_link_error(&err) => {}
            Err(err) => return Err(err),
        }
    }

    let mut protected = Vec::new();
    for file in &view.protected {
        let Some((root, base, rel)) = start_of(view, &roots, file) else { continue };
        beneath::create_file(root, &rel)?;
        let Some((fd, kind)) = beneath::open_any(root, &rel)? else { continue };
        if kind != Kind::File {
            return Err(io::Error::other(format!(
                "{} is not a regular file: a protected file of a sandbox's view must be one (a \
                 symbolic link cannot be protected, since a mount cannot sit on it: put the file \
                 itself in its place)",
                file.display()
            )));
        }
        let parent = rel.parent().unwrap_or(Path::new(""));
        remember_way(&base, beneath::open_dir(root, parent, false)?, &mut ways);
        expect.same.push((file.clone(), Identity::of(&fd)?));
        protected.push(Bound { fd: keep(fd, &mut fds), path: file.clone() });
    }

    let mut exposed = Vec::new();
    for dir in &view.exposed {
        let Some((root, base, rel)) = start_of(view, &roots, dir) else { continue };
        let mut walked = beneath::open_dir(root, &rel, true)?;
        let Some((_, fd)) = walked.pop() else { continue };
        remember_way(&base, walked, &mut ways);
        expect.same.push((dir.clone(), Identity::of(&fd)?));
        exposed.push(Bound { fd: keep(fd, &mut fds), path: dir.clone() });
    }

    // The owner's extra read-only paths that lie in the workspace are walked like the rest (a
    // caller could have replaced one by a link); those elsewhere are bound by bwrap as they are.
    let mut read_only = Vec::new();
    if view.base == ViewBase::Workspace {
        for path in &spec.read_only_paths {
            let Some((root, base, rel)) = start_of(view, &roots, path) else { continue };
            if let Some((fd, Kind::Dir | Kind::File)) = beneath::open_any(root, &rel)? {
                let parent = rel.parent().unwrap_or(Path::new(""));
                remember_way(&base, beneath::open_dir(root, parent, false)?, &mut ways);
                expect.same.push((path.clone(), Identity::of(&fd)?));
                read_only.push(Bound { fd: keep(fd, &mut fds), path: path.clone() });
            }
        }
    }

    let spill = match start_of(view, &roots, &spec.spill_dir) {
        Some((root, _, rel)) if spec.spill_dir.starts_with(&view.workspace) => {
            let mut walked = beneath::open_dir(root, &rel, true)?;
            walked.pop().map(|(_, fd)| fd).ok_or_else(|| io::Error::other("an empty spill path"))?
        }
        _ => {
            std::fs::create_dir_all(&spec.spill_dir)?;
            beneath::open_root(&spec.spill_dir)?
        }
    };
    expect.same.push((spec.spill_dir.clone(), Identity::of(&spill)?));
    let spill = Bound { fd: keep(spill, &mut fds), path: spec.spill_dir.clone() };

    // A folder on the way that is hidden itself, or lies in a hidden folder, is covered anyway:
    // binding it would only be covered again (or, placed after, uncover it).
    let covered_dirs: Vec<&PathBuf> =
        hidden.iter().filter(|(_, kind)| *kind == Kind::Dir).map(|(path, _)| path).collect();
    let mut pins = Vec::new();
    for (path, fd) in ways {
        if covered_dirs.iter().any(|dir| path.starts_with(dir)) {
            continue;
        }
        expect.same.push((path.clone(), Identity::of(&fd)?));
        pins.push(Bound { fd: keep(fd, &mut fds), path });
    }
    expect.covered = hidden.iter().map(|(path, _)| path.clone()).collect();
    Ok(Opened {
        workspace: workspace_fd,
        pins,
        hidden,
        protected,
        exposed,
        read_only,
        spill,
        pipes: (-1, -1),
        seccomp: None,
        expect,
        fds,
    })
}

/// Whether `err` is the walk's refusal of a link (or of a file where a folder belongs).
fn is_link_error(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotADirectory
}

/// Opens `rel` below `root` and the folders on its way (without `root`), saying what it is.
fn open_with_way(root: &OwnedFd, rel: &Path) -> io::Result<(Kind, Vec<(PathBuf, OwnedFd)>)> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let walked = beneath::open_dir(root, parent, false)?;
    match beneath::open_any(root, rel)? {
        Some((_, kind)) => Ok((kind, walked)),
        None => {
            Err(io::Error::new(io::ErrorKind::NotFound, format!("{} is missing", rel.display())))
        }
    }
}

/// Checks, inside the sandbox, that the view is what the launcher opened (see [`Expect`]).
///
/// # Errors
/// The first path that is not what was opened, or not covered.
pub fn check_view(expect: &Expect) -> io::Result<()> {
    for (path, identity) in &expect.same {
        let found = Identity::of_path(path).map_err(|e| {
            io::Error::other(format!("the view's {} cannot be checked: {e}", path.display()))
        })?;
        if found != *identity {
            return Err(io::Error::other(format!(
                "the view's {} is not the folder or file that was opened for it (it changed while \
                 the sandbox started); refusing to run",
                path.display()
            )));
        }
    }
    for path in &expect.covered {
        let covered = covered(path).unwrap_or(false);
        if !covered {
            return Err(io::Error::other(format!(
                "the view's hidden {} is not covered; refusing to run",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Whether `path` shows as a cover: an empty folder on a file system other than its parent's
/// (the tmpfs), or /dev/null.
fn covered(path: &Path) -> io::Result<bool> {
    use rustix::fs::{AtFlags, FileType};
    let stat = rustix::fs::statat(rustix::fs::CWD, path, AtFlags::SYMLINK_NOFOLLOW)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::CharacterDevice => {
            let null = rustix::fs::stat("/dev/null")?;
            Ok(stat.st_rdev == null.st_rdev)
        }
        FileType::Directory => {
            let parent = path.parent().unwrap_or(Path::new("/"));
            let above = rustix::fs::stat(parent)?;
            Ok(above.st_dev != stat.st_dev)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(workspace: &Path, spill: &Path) -> LaunchSpec {
        LaunchSpec {
            bwrap: "bwrap".into(),
            tool_host: "/usr/bin/volcanic".into(),
            tool_host_args: vec!["sandbox-tool-host".into()],
            read_only_paths: Vec::new(),
            tmp_bytes: super::super::DEFAULT_TMP_BYTES,
            view: SandboxView::new(workspace),
            spill_dir: spill.to_path_buf(),
            limits: super::super::limits::Applied::default(),
        }
    }

    #[test]
    fn the_view_is_opened_with_every_folder_on_the_way_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("private/deep")).unwrap();
        std::fs::write(ws.join("private/deep/secret.txt"), "s").unwrap();
        let mut spec = spec(&ws, &dir.path().join("spill"));
        spec.view.always_hidden = vec![ws.join(".volcanic"), ws.join("inbox/a2a")];
        spec.view.always_hidden_files = vec![ws.join("volcanic.toml")];
        spec.view.hidden = vec![ws.join("private/deep/secret.txt"), ws.join("absent")];
        spec.view.protected = vec![ws.join("PERSONA.md")];
        spec.view.exposed = vec![ws.join("inbox/a2a/peer")];
        let opened = open_view(&spec).unwrap();

        let pins: Vec<&Path> = opened.pins.iter().map(|b| b.path.as_path()).collect();
        let expected_pins = [ws.join("inbox"), ws.join("private"), ws.join("private/deep")];
        assert_eq!(pins, expected_pins.iter().map(PathBuf::as_path).collect::<Vec<_>>());
        assert_eq!(
            opened.hidden,
            vec![
                (ws.join(".volcanic"), Kind::Dir),
                (ws.join("inbox/a2a"), Kind::Dir),
                (ws.join("volcanic.toml"), Kind::File),
                (ws.join("private/deep/secret.txt"), Kind::File),
            ]
        );
        // What must exist to be covered or bound was made, empty.
        assert_eq!(std::fs::read(ws.join("volcanic.toml")).unwrap(), b"");
        assert_eq!(std::fs::read(ws.join("PERSONA.md")).unwrap(), b"");
        assert!(ws.join("inbox/a2a/peer").is_dir());
        let exposed = Identity::of_path(&ws.join("inbox/a2a/peer")).unwrap();
        assert!(opened.expect.same.contains(&(ws.join("inbox/a2a/peer"), exposed)));
    }

    #[test]
    fn a_link_on_any_path_of_the_view_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(elsewhere.join("a2a")).unwrap();
        std::os::unix::fs::symlink("/", elsewhere.join("a2a/peer")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join("inbox")).unwrap();
        let mut first = spec(&ws, &dir.path().join("spill"));
        first.view.always_hidden = vec![ws.join("inbox/a2a")];
        first.view.exposed = vec![ws.join("inbox/a2a/peer")];
        let err = open_view(&first).unwrap_err();
        assert!(err.to_string().contains("inbox is a symbolic link"), "{err}");

        // A planted config file in place of the covered one is a link: never followed, and a
        // link covers nothing the view shows (its target is what it is elsewhere).
        let ws2 = dir.path().join("ws2");
        std::fs::create_dir_all(&ws2).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", ws2.join("volcanic.toml")).unwrap();
        let mut second = spec(&ws2, &dir.path().join("spill2"));
        second.view.always_hidden_files = vec![ws2.join("volcanic.toml")];
        let opened = open_view(&second).unwrap();
        assert!(opened.hidden.is_empty());
    }
}
