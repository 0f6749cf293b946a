//! One module per subcommand, plus the wiring they share.

pub mod a2a;
pub mod approvals;
pub mod callers;
pub mod chat;
pub mod completions;
pub mod serve;
mod spinner;
pub mod telegram;
pub mod usage;

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;
use volcanic_core::SessionFactory;
use volcanic_core::exec::ExecEnv;
use volcanic_core::provider::Provider;

use crate::config::Settings;
use crate::{Exit, Failure};

/// The secrets the process was started with and moved out of its environment (`seal`).
static SEALED_ENV: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// Records the secrets read back after the re-execution without them.
pub fn set_sealed_env(overlay: Vec<(String, String)>) {
    let _ = SEALED_ENV.set(overlay);
}

/// The process environment as it was started: the variables it has, plus the secrets moved out
/// of it at start-up.
pub fn host_env() -> Vec<(String, String)> {
    let sealed = SEALED_ENV.get().map(Vec::as_slice).unwrap_or_default();
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !crate::seal::is_internal(k) && !sealed.iter().any(|(s, _)| s == k))
        .collect();
    env.extend(sealed.iter().cloned());
    env
}

/// A workspace spending cap needs the price of the model the sessions call.
///
/// # Errors
/// Exit 2 naming both keys when `A2A__Limits__UsdPerDay` is set and `A2A__Prices` has no price
/// for `model`.
pub fn check_prices(options: &volcanic_a2a::A2aOptions, model: &str) -> Result<(), Failure> {
    if options.usage.workspace.usd_per_day.is_some() && !options.usage.prices.contains_key(model) {
        return Err(Failure::usage(format!(
            "A2A__Limits__UsdPerDay is set but A2A__Prices has no price for the model {model:?}: add one (docs/configuration.md, \"Spend caps and prices\")"
        )));
    }
    Ok(())
}

/// The workspace folder: the given one (must exist) or the current folder.
pub fn workspace(dir: Option<&Path>) -> Result<PathBuf, Failure> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| Failure::usage(format!("cannot read the current folder: {e}")))?,
    };
    if !dir.is_dir() {
        return Err(Failure::usage(format!("--workspace {}: not a folder", dir.display())));
    }
    dir.canonicalize().map_err(|e| Failure::usage(format!("--workspace {}: {e}", dir.display())))
}

/// The state folder (see [`state_dir_path`]), created when missing: for the commands that keep
/// state in it (`serve`, `telegram`, `chat`).
pub fn state_dir(
    flag: Option<&Path>,
    settings: &Settings,
    env: &[(String, String)],
) -> Result<PathBuf, Failure> {
    let dir = state_dir_path(flag, settings, env)?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::usage(format!("state folder {}: {e}", dir.display())))?;
    Ok(dir)
}

/// The state folder, as it is named: flag, then `Agent__StateDir`, then
/// `$XDG_STATE_HOME/volcanic`, then `~/.local/state/volcanic`. Nothing is created: the commands
/// that only read a server's state (`approvals`, `usage`) must not make a folder of a typo.
pub fn state_dir_path(
    flag: Option<&Path>,
    settings: &Settings,
    env: &[(String, String)],
) -> Result<PathBuf, Failure> {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let dir = flag
        .map(Path::to_path_buf)
        .or_else(|| settings.agent.state_dir.clone())
        .or_else(|| {
            var("XDG_STATE_HOME")
                .filter(|v| !v.is_empty())
                .map(|v| PathBuf::from(v).join("volcanic"))
        })
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/state/volcanic")))
        .ok_or_else(|| {
            Failure::usage("cannot pick a state folder: pass --state-dir or set HOME")
        })?;
    Ok(dir)
}

/// The session factory every command uses.
pub fn factory(
    provider: std::sync::Arc<dyn Provider>,
    provider_secrets: Vec<(String, String)>,
    state_dir: &Path,
    settings: &Settings,
    env: &[(String, String)],
) -> SessionFactory {
    factory_with_shutdown(
        provider,
        provider_secrets,
        state_dir,
        settings,
        env,
        CancellationToken::new(),
    )
}

/// The session factory, with the host's stop signal (cancelling it aborts every run).
pub fn factory_with_shutdown(
    provider: std::sync::Arc<dyn Provider>,
    provider_secrets: Vec<(String, String)>,
    state_dir: &Path,
    settings: &Settings,
    env: &[(String, String)],
    shutdown: CancellationToken,
) -> SessionFactory {
    // The process's own secrets never reach a tool, even when the owner lets variables with
    // such names through for their sessions.
    let own_secret = |value: &str| {
        provider_secrets.iter().any(|(_, secret)| !secret.is_empty() && secret == value)
    };
    let exec = ExecEnv::from_host(
        env.iter().filter(|(_, value)| !own_secret(value)).cloned(),
        &settings.agent.allow_env,
        crate::config::ENV_PREFIXES,
    );
    let mut builder = SessionFactory::builder(provider, state_dir)
        .config(settings.agent.to_core(&settings.provider))
        .exec_env(exec)
        .shutdown(shutdown);
    for (name, value) in provider_secrets {
        builder = builder.secret(name, value);
    }
    builder.build()
}

/// The environment of A2A callers' tools: `PATH`, `LANG`, `TZ`, `HOME`, `TERM` and the variables
/// `A2A__Sandbox__AllowEnv` names, those only when their values hold no credential (a warning
/// names each one left out). The process's own secrets are never among them.
///
/// # Errors
/// Exit 2 when `A2A__Sandbox__AllowEnv` names a variable whose name looks like a credential's.
pub fn caller_env(
    settings: &Settings,
    provider_secrets: &[(String, String)],
    env: &[(String, String)],
) -> Result<ExecEnv, Failure> {
    let named = &settings.a2a.sandbox.allow_env;
    if let Some(name) = named.iter().find(|name| volcanic_core::exec::is_credential_name(name)) {
        return Err(Failure::usage(format!(
            "A2A__Sandbox__AllowEnv names {name}, which looks like a credential: callers' sessions never get credentials (docs/security.md)"
        )));
    }
    let own_secret = |value: &str| {
        provider_secrets.iter().any(|(_, secret)| !secret.is_empty() && secret == value)
    };
    let exec =
        ExecEnv::for_callers(env.iter().filter(|(_, value)| !own_secret(value)).cloned(), named);
    for name in named {
        let set = env.iter().any(|(k, _)| k == name);
        if set && !exec.vars().any(|(k, _)| k == name) {
            tracing::warn!(
                variable = %name,
                "A2A__Sandbox__AllowEnv names a variable whose value looks like a credential: callers' tools do not get it"
            );
        }
    }
    Ok(exec)
}

/// How the owner's own sessions' tools are contained, from `[agent.sandbox]`: `None` when they
/// run unconfined (the owner's opt-out, or `auto` where no sandbox can be had, with a warning).
/// The config file and the state folder are hidden from them; the host hides more per session.
pub async fn owner_confinement(
    settings: &crate::config::Settings,
    config_file: Option<&Path>,
) -> Result<Option<volcanic_core::sandbox::OwnerConfinement>, Failure> {
    use crate::config::OwnerSandboxMode;
    use volcanic_core::sandbox::{OwnerConfinement, Sandbox, ViewBase};
    let own = &settings.agent.sandbox;
    if own.mode == OwnerSandboxMode::Off {
        tracing::warn!("Agent__Sandbox__Mode=off: the owner's sessions run their tools unconfined");
        return Ok(None);
    }
    let exe = std::env::current_exe().map_err(|e| Failure {
        code: Exit::Failed,
        message: format!("cannot find this program: {e}"),
    })?;
    let configured = own.bwrap.as_deref().or(settings.a2a.sandbox.bwrap.as_deref());
    let probed = match resolve_bwrap(configured, &host_env(), "the owner's sessions") {
        Ok(bwrap) => {
            let sandbox = std::sync::Arc::new(Sandbox::new(bwrap, exe));
            sandbox.probe(ViewBase::Host).await.map(|()| sandbox)
        }
        Err(reason) => Err(reason),
    };
    let sandbox = match probed {
        Ok(sandbox) => sandbox,
        Err(reason) => {
            if own.mode == OwnerSandboxMode::On {
                return Err(Failure::usage(format!(
                    "Agent__Sandbox__Mode=on but no sandbox can be started here: {reason}"
                )));
            }
            tracing::warn!(
                %reason,
                "no sandbox for the owner's sessions: their tools run unconfined, and can read the config file and, when the server runs as root, the server's memory (set Agent__Sandbox__Mode=on to refuse, or off to silence this)"
            );
            return Ok(None);
        }
    };
    let mut hide: Vec<PathBuf> = own.hide.iter().map(PathBuf::from).collect();
    hide.extend(config_file.map(absolute));
    // The A2A server's records in a workspace (callers' keys, tasks, push tokens).
    let records = vec![PathBuf::from(".volcanic/a2a")];
    Ok(Some(OwnerConfinement { sandbox, hide, records }))
}

/// The bubblewrap program every sandbox of `whose` sessions starts, as an absolute path: the
/// configured one (`Agent__Sandbox__Bwrap`, `A2A__Sandbox__Bwrap`), else `bwrap`; a bare name is
/// looked up in this process's `PATH`, once. The start-up check and every session then run the
/// same program, whatever `PATH` a session's tools get (the check used to run with no `PATH`
/// at all, and so could find another bwrap than the sessions did, or none).
///
/// # Errors
/// Why no program can be found, for the start-up check's message.
fn resolve_bwrap(
    configured: Option<&Path>,
    env: &[(String, String)],
    whose: &str,
) -> Result<PathBuf, String> {
    let wanted = configured.unwrap_or_else(|| Path::new("bwrap"));
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))?;
    let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str()).unwrap_or_default();
    let found = if wanted.components().count() > 1 {
        // A path, not a name: PATH plays no part.
        let absolute = cwd.join(wanted);
        absolute
            .is_file()
            .then_some(absolute)
            .ok_or_else(|| format!("the bubblewrap program {} does not exist", wanted.display()))?
    } else {
        which::which_in(wanted, Some(path), &cwd).map_err(|_| {
            format!(
                "{} is not installed (not found in PATH {path:?}); install bubblewrap, or set the program's path in A2A__Sandbox__Bwrap",
                wanted.display()
            )
        })?
    };
    tracing::info!(bwrap = %found.display(), "sandboxes of {whose} start with");
    Ok(found)
}

/// `path` made absolute against the current folder (a hidden path must not depend on the
/// session's working folder).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// How callers' tools are contained, from `[a2a.sandbox]`: a sandbox when one can be had here
/// (checked by starting one), tier chat for every caller when not, or the owner's opt-out.
/// `config_file` is hidden from callers when it lies in their workspace.
pub async fn containment(
    settings: &crate::config::SandboxSettings,
    config_file: Option<&Path>,
) -> Result<volcanic_a2a::Containment, Failure> {
    use volcanic_a2a::{Containment, ViewPolicy};
    if settings.mode == crate::config::SandboxMode::Off {
        return Ok(Containment::Off);
    }
    let exe = std::env::current_exe().map_err(|e| Failure {
        code: Exit::Failed,
        message: format!("cannot find this program: {e}"),
    })?;
    let bwrap = match resolve_bwrap(settings.bwrap.as_deref(), &host_env(), "A2A callers' sessions")
    {
        Ok(bwrap) => bwrap,
        Err(reason) => return Ok(Containment::Unavailable { reason }),
    };
    let sandbox = std::sync::Arc::new(
        volcanic_core::sandbox::Sandbox::new(bwrap, exe)
            .read_only_paths(settings.read_only_paths.iter().map(PathBuf::from).collect())
            .tmp_bytes(settings.tmp_bytes.unwrap_or(volcanic_core::sandbox::DEFAULT_TMP_BYTES))
            .process_limits(volcanic_core::sandbox::ProcessLimits {
                max_processes: settings
                    .max_processes
                    .unwrap_or(volcanic_core::sandbox::DEFAULT_MAX_PROCESSES),
                memory_bytes: settings
                    .memory_bytes
                    .unwrap_or(volcanic_core::sandbox::DEFAULT_MEMORY_BYTES),
            }),
    );
    if let Some(mechanism) = sandbox.mechanism() {
        match mechanism {
            volcanic_core::sandbox::Mechanism::Unbounded { .. } => tracing::warn!(
                bound = %mechanism.describe(),
                "A2A callers' sandboxes have no process limit here: one caller can take every \
                 PID of the host (docs/security.md, \"Processes and memory\")"
            ),
            _ => {
                tracing::info!(bound = %mechanism.describe(), "A2A callers' sandboxes: processes bounded by")
            }
        }
    }
    if !volcanic_core::sandbox::seccomp_available() {
        tracing::warn!(
            arch = std::env::consts::ARCH,
            "no seccomp filter for A2A callers' sandboxes on this architecture: io_uring, the \
             keyrings and ptrace stay callable in them (docs/security.md)"
        );
    }
    if let Err(reason) = sandbox.probe(volcanic_core::sandbox::ViewBase::Workspace).await {
        return Ok(Containment::Unavailable { reason });
    }
    let mut hide: Vec<PathBuf> = settings.hide.iter().map(PathBuf::from).collect();
    hide.extend(config_file.map(Path::to_path_buf));
    Ok(Containment::Sandbox {
        sandbox,
        policy: ViewPolicy { hide, writable_context: settings.writable_context },
    })
}

/// The exit of an A2A server that cannot be built, the same for every host: an unusable
/// card-signing key is the owner's configuration (exit 2, the error names the setting);
/// anything else is a failure of the machine (exit 1).
pub fn a2a_build_failure(err: &volcanic_a2a::BuildError) -> Failure {
    use volcanic_a2a::BuildError;
    let code = match err {
        BuildError::CardKey(_) => Exit::Usage,
        BuildError::Client(_)
        | BuildError::ExtraCaRead { .. }
        | BuildError::ExtraCa { .. }
        | BuildError::Outbox { .. }
        | BuildError::Approvals { .. } => Exit::Failed,
    };
    Failure { code, message: format!("cannot build the A2A server: {err}") }
}

/// The callers the server serves from `workspace` as its callers.json says now: none when the
/// file is missing or cannot be used (the server says why on the first request, and
/// `volcanic callers list` does at once).
pub fn current_callers(workspace: &Path) -> Vec<volcanic_a2a::auth::CallerEntry> {
    use volcanic_a2a::auth::callers::{callers_path, read_callers};
    let path = callers_path(workspace);
    match volcanic_core::safe_file::read_config(&path, volcanic_core::safe_file::CONFIG_FILE_CAP) {
        Ok(Some(bytes)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| read_callers(text).ok())
            .map(|file| file.entries)
            .unwrap_or_default(),
        Ok(None) | Err(_) => Vec::new(),
    }
}

/// Warns when a listener other machines can reach (not loopback) serves callers whose keys
/// callers.json holds in plain text (`"key"`), naming them per workspace: whoever reads the file
/// (a backup, a synced folder, a shared machine) can then call the assistant as they do.
pub fn warn_plain_keys_when_reachable(
    address: std::net::SocketAddr,
    workspaces: &[(PathBuf, Vec<volcanic_a2a::auth::CallerEntry>)],
) {
    if address.ip().is_loopback() {
        return;
    }
    for (workspace, callers) in workspaces {
        let plain: Vec<&str> = callers
            .iter()
            .filter(|entry| matches!(entry.key, volcanic_a2a::auth::CallerKey::Plain(_)))
            .map(|entry| entry.name.as_str())
            .collect();
        if plain.is_empty() {
            continue;
        }
        tracing::warn!(
            listen = %address,
            workspace = %workspace.display(),
            callers = %plain.join(", "),
            "callers with plain keys in callers.json are served on an address other machines can reach: whoever reads the file can call as them; give each a new key with `volcanic callers add NAME` (it stores only the key's hash) and remove the old entry (docs/a2a.md, \"volcanic callers\")"
        );
    }
}
