//! The bubblewrap command line for a session's sandbox.
//!
//! bubblewrap (`bwrap`) builds the namespaces: a user namespace with every capability dropped
//! and no further user namespaces allowed (so `mount`, `umount` and `chroot` cannot undo the
//! view, whether the server runs as root or not), no_new_privs (bwrap always sets it), a new
//! mount namespace holding only the view, a network namespace with nothing but its own loopback,
//! a PID namespace (the server and every other process are out of sight, `/proc` is the
//! sandbox's own, and when the tool host ends every process it left ends with it), and new IPC,
//! UTS and cgroup namespaces.
//!
//! The view, mounted in this order (later mounts cover earlier ones):
//! 1. the system folders read-only (`/usr` and the merged-usr links, a few files of `/etc`, and
//!    the host's extra read-only paths), a private `/tmp` and `/dev/shm` of at most `tmp_bytes`
//!    each (they are memory), a minimal read-only `/dev`, a fresh `/proc`;
//! 2. the workspace at its own path, writable or read-only;
//! 3. each hidden path covered: a folder by an empty tmpfs, a file by `/dev/null`;
//! 4. each protected path bound read-only onto itself;
//! 5. each exposed path (inside a hidden one) bound again, then the hiding tmpfs made read-only;
//! 6. the session's spill folder, writable (before the remount, see 5);
//! 7. the tool host binary, read-only, at [`TOOL_HOST_PATH`];
//! 8. `/dev` and the sandbox's root folder made read-only, so no memory-backed folder but the
//!    two capped ones can be written.
//!
//! The owner's view ([`ViewBase::Host`]) replaces step 1 by the host's root bound as it is, keeps
//! the host's network and `/tmp`, and skips steps 7 and 8; the namespaces other than network,
//! the dropped capabilities, the fresh `/proc` and steps 3 to 6 are the same.

use std::ffi::OsString;
use std::path::Path;

use super::beneath::Kind;
use super::spec::{LaunchSpec, Opened};
use super::{SandboxView, ViewBase};

/// Where the tool host binary appears inside the sandbox.
pub(crate) const TOOL_HOST_PATH: &str = "/run/volcanic/tool-host";

/// The home folder of sandboxed processes: private to the sandbox and gone when it ends.
pub(crate) const SANDBOX_HOME: &str = "/tmp";

/// System folders that are bound read-only when they are folders, or recreated as the same
/// symlink when they are links (merged /usr).
const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Files and folders of `/etc` that programs need and that hold no secret: the dynamic loader's
/// cache, user and group names, name-service and time-zone setup, Debian's alternatives links.
const ETC_ENTRIES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/mime.types",
    "/etc/bash.bashrc",
];

/// The arguments of `bwrap` (without the program) that start the tool host in `view`, from the
/// folders and files the launcher opened for it ([`Opened`]).
pub(crate) fn arguments(spec: &LaunchSpec, opened: &Opened) -> Vec<OsString> {
    match spec.view.base {
        ViewBase::Workspace => workspace_arguments(spec, opened),
        ViewBase::Host => host_arguments(spec, opened),
    }
}

/// A caller's sandbox: only the system folders, the workspace and the spill folder, no network.
fn workspace_arguments(spec: &LaunchSpec, opened: &Opened) -> Vec<OsString> {
    let view = &spec.view;
    let mut args = Args::default();
    args.flags(&[
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        // No init of bwrap's own: the tool host is pid 1. bwrap's init would be a dumpable
        // process of the caller's own user, whose memory (`/proc/1/mem`) the caller's processes
        // could write to run code that outlives every call; as pid 1, the (non-dumpable) tool host
        // also cannot be stopped or killed from inside, and it reaps what it kills.
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
    ]);
    if let Some(fd) = opened.seccomp {
        args.flags(&["--seccomp", &fd.to_string()]);
    }
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    args.pair("--symlink", &target, path);
                }
            }
            Ok(meta) if meta.is_dir() => args.pair("--ro-bind", path, path),
            Ok(_) | Err(_) => {}
        }
    }
    for entry in ETC_ENTRIES {
        args.pair("--ro-bind-try", Path::new(entry), Path::new(entry));
    }
    // /dev and the root are tmpfs that bwrap makes; both turn read-only at the end, and the two
    // writable memory-backed folders, /tmp and /dev/shm, are capped.
    let tmp_bytes = spec.tmp_bytes.to_string();
    args.flags(&["--proc", "/proc", "--dev", "/dev", "--size", &tmp_bytes, "--tmpfs", "/dev/shm"]);
    args.flags(&["--size", &tmp_bytes, "--tmpfs", "/tmp"]);
    // After the private /tmp, so that an extra read-only path under /tmp is not covered by it.
    for path in &spec.read_only_paths {
        if !path.starts_with(&view.workspace) {
            args.pair("--ro-bind-try", path, path);
        }
    }

    let workspace = &view.workspace;
    args.fd(if view.writable { "--bind-fd" } else { "--ro-bind-fd" }, opened.workspace, workspace);
    view_mounts(&mut args, view, opened);
    args.pair("--ro-bind", &spec.tool_host, Path::new(TOOL_HOST_PATH));
    args.flags(&["--remount-ro", "/dev", "--remount-ro", "/"]);
    args.one("--chdir", workspace);
    args.flags(&["--clearenv", "--"]);
    tool_host_command(&mut args, spec, opened, Path::new(TOOL_HOST_PATH));
    args.0
}

/// An owner's sandbox: the host's root as it is and the host's network, but a PID namespace of
/// its own (the server and its `/proc` entries are out of sight), no capability (so `umount`
/// cannot uncover the host's `/proc`, and root loses its power over other users' files), a
/// minimal `/dev`, and the view's hidden paths covered.
fn host_arguments(spec: &LaunchSpec, opened: &Opened) -> Vec<OsString> {
    let view = &spec.view;
    let mut args = Args::default();
    args.flags(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]);
    args.pair("--bind", Path::new("/"), Path::new("/"));
    let tmp_bytes = spec.tmp_bytes.to_string();
    args.flags(&["--proc", "/proc", "--dev", "/dev", "--size", &tmp_bytes, "--tmpfs", "/dev/shm"]);
    let workspace = &view.workspace;
    if !view.writable {
        args.fd("--ro-bind-fd", opened.workspace, workspace);
    }
    view_mounts(&mut args, view, opened);
    // The tool host runs from where it lies: the root is the host's, and a mount point made
    // for it elsewhere would be made on the host.
    args.one("--chdir", workspace);
    args.flags(&["--clearenv", "--"]);
    tool_host_command(&mut args, spec, opened, &spec.tool_host);
    args.0
}

/// The command bwrap runs: a shell that moves the tool host's pipes from the descriptors the
/// launcher put them on to its stdin and stdout, closes every other descriptor the launcher
/// passed (the opened folders), and becomes the tool host. bwrap's own init (pid 1 of the
/// sandbox) keeps only /dev/null as stdin and stdout, so no process of the sandbox can reach the
/// pipes through `/proc/1/fd`; the tool host itself is not dumpable.
fn tool_host_command(args: &mut Args, spec: &LaunchSpec, opened: &Opened, program: &Path) {
    let (input, output) = opened.pipes;
    let script = format!("exec \"$0\" \"$@\" <&{input} >&{output} {input}<&- {output}<&-");
    let _ = opened.passed();
    args.flags(&["/bin/sh", "-c", &script]);
    args.0.push(program.into());
    args.0.extend(spec.tool_host_args.iter().map(OsString::from));
    let check = serde_json::to_string(&opened.expect).unwrap_or_default();
    args.flags(&["--expect", &check]);
    if spec.view.base == ViewBase::Workspace {
        args.flags(&["--sweep"]);
    }
}

/// The view's own mounts over the base, in this order: every folder on the way to a path the
/// view treats specially bound onto itself (a mount point cannot be renamed or removed, so no
/// process of the sandbox can move a hidden path out from under its cover or swap a folder of
/// the way for a link before the next sandbox starts); hidden paths covered; protected files
/// read-only; exposed folders and the spill folder bound again; then the hiding folders made
/// read-only. Every source is a descriptor the launcher opened without following a link.
fn view_mounts(args: &mut Args, view: &SandboxView, opened: &Opened) {
    let bind = if view.writable { "--bind-fd" } else { "--ro-bind-fd" };
    for pin in &opened.pins {
        args.fd(bind, pin.fd, &pin.path);
    }
    let mut hidden_dirs = Vec::new();
    for (path, kind) in &opened.hidden {
        match kind {
            Kind::Dir => {
                // Only mount points for the exposed paths are made in it before it turns
                // read-only.
                args.flags(&["--size", "65536"]);
                args.one("--tmpfs", path);
                hidden_dirs.push(path);
            }
            Kind::File | Kind::Link | Kind::Other => {
                args.pair("--ro-bind", Path::new("/dev/null"), path)
            }
        }
    }
    for protected in &opened.protected {
        args.fd("--ro-bind-fd", protected.fd, &protected.path);
    }
    for exposed in &opened.exposed {
        args.fd(bind, exposed.fd, &exposed.path);
    }
    for read_only in &opened.read_only {
        args.fd("--ro-bind-fd", read_only.fd, &read_only.path);
    }
    args.fd("--bind-fd", opened.spill.fd, &opened.spill.path);
    // Read-only only now: the exposed paths (and the spill folder, when the state folder is in
    // the workspace) needed their mount points made in these tmpfs.
    for dir in hidden_dirs {
        args.one("--remount-ro", dir);
    }
}

/// Argument list builder.
#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn one(&mut self, flag: &str, path: &Path) {
        self.0.push(flag.into());
        self.0.push(path.into());
    }

    fn fd(&mut self, flag: &str, fd: i32, to: &Path) {
        self.0.push(flag.into());
        self.0.push(fd.to_string().into());
        self.0.push(to.into());
    }

    fn pair(&mut self, flag: &str, from: &Path, to: &Path) {
        self.0.push(flag.into());
        self.0.push(from.into());
        self.0.push(to.into());
    }
}
