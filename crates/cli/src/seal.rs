//! Keeps the server's own secrets (provider keys, the bot token, any secret-looking variable it
//! was started with) out of other processes' reach, before anything else runs.
//!
//! Two steps, both before the async runtime starts threads:
//! 1. **Re-execution without them** (`serve` and `telegram`): `/proc/<pid>/environ` shows a
//!    process's start-up environment for its whole life, whatever it later removes. So the
//!    process moves every secret-looking variable into a sealed in-memory file, then replaces
//!    itself with a fresh run of the same program whose environment lacks them and whose stdin
//!    is that file. The new run reads the secrets from stdin, points stdin at `/dev/null`, and
//!    hands them to the settings as if they were still in the environment. `volcanic chat`
//!    keeps its environment: its stdin is the terminal.
//! 2. **Non-dumpable**: the kernel then refuses other processes of the same user (not root) the
//!    process's `/proc/<pid>/{environ,mem,…}`, ptrace, and core dumps.
//!
//! Neither step stops root on the same machine; the owner's and callers' tools are kept from the
//! server by the sandbox (own PID namespace, no capabilities), see docs/security.md.

use std::ffi::OsString;
use std::io::{Read, Seek, Write};
use std::os::unix::process::CommandExt;

use volcanic_core::exec::looks_like_credential;

/// Set in the re-executed process's environment: its stdin holds the secrets.
const SEALED_VAR: &str = "VOLCANIC_SEALED_STDIN";

/// Whether `name` is this module's own marker (not part of the environment's view).
pub fn is_internal(name: &str) -> bool {
    name == SEALED_VAR
}

/// Largest secrets file read back (a sanity bound: a real one is a few hundred bytes).
const MAX_SEALED_BYTES: u64 = 1024 * 1024;

/// The secrets taken out of the environment, to be read as if they were still in it.
pub type Overlay = Vec<(String, String)>;

/// Re-executes the process without its secret-looking variables (once), or, in the re-executed
/// process, reads them back. Returns the variables to add to the environment's view.
///
/// # Errors
/// The re-executed process cannot read its secrets back (then it must not run: its settings
/// would be incomplete).
pub fn reexec_without_secrets() -> Result<Overlay, String> {
    if std::env::var_os(SEALED_VAR).is_some() {
        return read_back();
    }
    let (secret, kept): (Vec<_>, Vec<_>) =
        std::env::vars_os().partition(|(name, value)| match (name.to_str(), value.to_str()) {
            (Some(name), Some(value)) => looks_like_credential(name, value),
            _ => false,
        });
    let secret: Overlay = secret
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    if secret.is_empty() {
        return Ok(Vec::new());
    }
    match reexec(&secret, kept) {
        // exec only returns on failure: keep going with the environment as it is.
        Err(err) => {
            report(&format!(
                "cannot restart without the secrets in the environment ({err}); \
/proc/<pid>/environ still shows them to root"
            ));
            Ok(Vec::new())
        }
    }
}

/// Writes the secrets into a sealed memory file and execs this program with it as stdin.
fn reexec(
    secret: &Overlay,
    kept: Vec<(OsString, OsString)>,
) -> Result<std::convert::Infallible, String> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        "volcanic-secrets",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .map_err(|e| format!("memfd: {e}"))?;
    let mut file = std::fs::File::from(fd);
    let json = serde_json::to_vec(secret).map_err(|e| e.to_string())?;
    file.write_all(&json).map_err(|e| e.to_string())?;
    file.rewind().map_err(|e| e.to_string())?;
    rustix::fs::fcntl_add_seals(
        &file,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )
    .map_err(|e| format!("seal: {e}"))?;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "volcanic".into());
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .env_clear()
        .envs(kept)
        .env(SEALED_VAR, "1")
        .stdin(file)
        .exec();
    Err(err.to_string())
}

/// In the re-executed process: the secrets from stdin, then stdin pointed at `/dev/null`.
fn read_back() -> Result<Overlay, String> {
    let stdin = std::io::stdin();
    let stat = rustix::fs::fstat(&stdin).map_err(|e| format!("stdin: {e}"))?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(format!("{SEALED_VAR} is set but stdin is not the secrets file"));
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_SEALED_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the secrets back: {e}"))?;
    let overlay: Overlay =
        serde_json::from_slice(&bytes).map_err(|e| format!("malformed secrets file: {e}"))?;
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    rustix::stdio::dup2_stdin(&null).map_err(|e| format!("stdin: {e}"))?;
    Ok(overlay)
}

/// Marks the process non-dumpable (see the module's comment). A failure is reported, not fatal:
/// the sandbox still keeps tools away from the process.
pub fn make_non_dumpable() {
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        report(&format!("cannot mark the process non-dumpable: {err}"));
    }
}

#[allow(clippy::print_stderr)]
fn report(message: &str) {
    eprintln!("volcanic: warning: {message}");
}
