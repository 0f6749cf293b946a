//! The system calls a caller's sandbox may not make, as a seccomp filter bwrap installs
//! (`--seccomp FD`) on the tool host and everything it starts.
//!
//! The namespaces already take away what these calls would reach for the most part (no
//! capability, no other process, no network); the filter removes the kernel surface that is
//! left and that no tool of a caller needs: `io_uring` (a large, often-exploited interface that
//! also sidesteps other filters), the kernel keyrings (`keyctl`, `add_key`, `request_key`, shared
//! per user across namespaces), `ptrace` and `process_vm_readv`/`writev` (bwrap's init, pid 1 of
//! the sandbox, is otherwise traceable by the caller's processes), `bpf`, `perf_event_open`,
//! `userfaultfd` (a staple of kernel exploits), and loading kernel code. Each fails with `EPERM`.
//!
//! Two more guard the owner's files rather than the kernel. Hard links (`link`, `linkat`): a
//! caller that once got a name for a hidden or protected file's inode (winning the race of an
//! outside save, docs/security.md, or linking a file before the owner hid its name) would keep
//! reading or writing that file through its link for as long as the file lives, and the
//! assistant's saves keep the file. And file leases (`fcntl(F_SETLEASE)`): a caller owning the
//! workspace's files (its processes run as the server's user) could hold a read lease on MEMORY.md
//! and so make every save of the owner's wait or fail. Tools lose little: `ln -s` still works,
//! and programs that try a hard link (git's local clone, `cp -l`) fall back to copying or say why.
//! And the set-user-ID and set-group-ID bits (see [`DENIED_WITH`]): `chmod +x` works, `chmod u+s`
//! fails with `EPERM`.
//!
//! The program is built with `seccompiler` (the filter compiler of Firecracker) for the
//! architecture the server runs on; on one it does not know, no filter is installed and the
//! server says so at start.

use std::collections::BTreeMap;
use std::io::{self, Seek, Write};
use std::os::fd::OwnedFd;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The denied calls.
const DENIED: &[(&str, i64)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("kexec_load", libc::SYS_kexec_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    #[cfg(target_arch = "x86_64")]
    ("link", libc::SYS_link),
    ("linkat", libc::SYS_linkat),
];

/// How a denied call's argument is matched.
#[derive(Clone, Copy)]
enum Arg {
    /// The argument equals this.
    Is(u64),
    /// The argument is a file mode with the set-user-ID or set-group-ID bit (one rule per bit).
    SetId,
    /// As [`Arg::SetId`], when the flags (the argument at this index) hold `O_CREAT`: without
    /// it, `open` ignores its mode, and a program may pass anything there.
    CreatingSetId(u8),
}

/// The set-user-ID and set-group-ID mode bits.
const SET_ID_BITS: [u64; 2] = [0o4000, 0o2000];

/// Calls denied only with one argument: `fcntl(fd, F_SETLEASE, …)`; and every call that sets a
/// file's mode, or creates a file with one, when the mode has the set-user-ID or set-group-ID bit.
/// A caller's processes run as the server's user: under a root server, a `chmod 4755` copy of
/// a shell left in the workspace would be a set-user-ID root program on the host for any local
/// user to run.
const DENIED_WITH: &[(&str, i64, u8, Arg)] = &[
    // A non-negative constant; the cast cannot lose anything.
    ("fcntl(F_SETLEASE)", libc::SYS_fcntl, 1, Arg::Is(libc::F_SETLEASE as u64)),
    #[cfg(target_arch = "x86_64")]
    ("chmod(set-id)", libc::SYS_chmod, 1, Arg::SetId),
    ("fchmod(set-id)", libc::SYS_fchmod, 1, Arg::SetId),
    ("fchmodat(set-id)", libc::SYS_fchmodat, 2, Arg::SetId),
    ("fchmodat2(set-id)", FCHMODAT2, 2, Arg::SetId),
    #[cfg(target_arch = "x86_64")]
    ("open(set-id)", libc::SYS_open, 2, Arg::CreatingSetId(1)),
    #[cfg(target_arch = "x86_64")]
    ("creat(set-id)", libc::SYS_creat, 1, Arg::SetId),
    ("openat(set-id)", libc::SYS_openat, 3, Arg::CreatingSetId(2)),
    #[cfg(target_arch = "x86_64")]
    ("mknod(set-id)", libc::SYS_mknod, 1, Arg::SetId),
    ("mknodat(set-id)", libc::SYS_mknodat, 2, Arg::SetId),
];

/// `fchmodat2` (Linux 6.6), the same number on every architecture; the `libc` crate may not
/// name it yet.
const FCHMODAT2: i64 = 452;

/// `openat2` takes its mode inside a structure a filter cannot read: denied whole. C libraries
/// do not use it for `open`; programs that do fall back to `openat` when it fails.
const DENIED_OPENAT2: (&str, i64) = ("openat2", 437);

/// Whether callers' sandboxes get the filter on this architecture (the server says so at start).
pub fn seccomp_available() -> bool {
    TargetArch::try_from(std::env::consts::ARCH).is_ok()
}

/// The names of the denied calls, for the docs and the tests.
pub fn denied_calls() -> impl Iterator<Item = &'static str> {
    DENIED
        .iter()
        .map(|(name, _)| *name)
        .chain(DENIED_WITH.iter().map(|(name, ..)| *name))
        .chain([DENIED_OPENAT2.0])
}

/// The filter as bwrap reads it (the raw `sock_filter` array), in a memory file positioned at
/// its start; `None` on an architecture `seccompiler` does not know.
///
/// # Errors
/// The filter cannot be built or written.
pub(crate) fn program_fd() -> io::Result<Option<OwnedFd>> {
    let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else { return Ok(None) };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|(_, number)| (*number, Vec::new())).collect();
    rules.insert(DENIED_OPENAT2.1, Vec::new());
    let bits = |arg: u8, bit: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(bit), bit)
    };
    let rule = |conditions: Vec<Result<SeccompCondition, seccompiler::BackendError>>| {
        conditions
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .and_then(SeccompRule::new)
            .map_err(|e| io::Error::other(format!("seccomp filter: {e}")))
    };
    // A non-negative constant; the cast cannot lose anything.
    let creat = libc::O_CREAT as u64;
    for (_, number, arg, matched) in DENIED_WITH {
        let entry = rules.entry(*number).or_default();
        match matched {
            Arg::Is(value) => entry.push(rule(vec![SeccompCondition::new(
                *arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                *value,
            )])?),
            Arg::SetId => {
                for bit in SET_ID_BITS {
                    entry.push(rule(vec![bits(*arg, bit)])?);
                }
            }
            Arg::CreatingSetId(flags) => {
                for bit in SET_ID_BITS {
                    entry.push(rule(vec![bits(*flags, creat), bits(*arg, bit)])?);
                }
            }
        }
    }
    let eperm = u32::try_from(libc::EPERM).unwrap_or(1);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(eperm), arch)
        .map_err(|e| io::Error::other(format!("seccomp filter: {e}")))?;
    let program: BpfProgram =
        filter.try_into().map_err(|e| io::Error::other(format!("seccomp filter: {e:?}")))?;
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in &program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    let fd = rustix::fs::memfd_create("volcanic-seccomp", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&bytes)?;
    file.rewind()?;
    Ok(Some(OwnedFd::from(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_for_this_machine() {
        let fd = program_fd().unwrap().expect("a filter for this architecture");
        let len = rustix::fs::fstat(&fd).unwrap().st_size;
        // Whole `sock_filter`s, and more than one per denied call plus the architecture check.
        assert_eq!(len % 8, 0);
        assert!(len / 8 > DENIED.len() as i64, "{len}");
        assert_eq!(denied_calls().count(), DENIED.len() + DENIED_WITH.len() + 1);
    }
}
