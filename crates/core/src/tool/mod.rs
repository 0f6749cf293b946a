//! The tool seam: the [`Tool`] trait, what a tool gets to work with, and the built-in set.
//!
//! A tool never fails the run: whatever goes wrong comes back to the model as an error result.
//! The run loop redacts every result before the model, the journal or an event sees it.
//!
//! One file per built-in tool; `output` holds the output cap that bash (and hosts' own tools)
//! use to keep results small while the full text stays readable in a spill file.

mod bash;
mod edit;
mod find;
mod grep;
mod ls;
mod output;
mod read;
mod save;
mod send;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::channel::ChatChannel;
use crate::config::ToolLimits;
use crate::exec::ExecEnv;
use crate::provider::ToolSpec;
use crate::redact::Redactor;

pub use bash::BashTool;
pub use edit::EditTool;
pub use find::FindTool;
pub use grep::GrepTool;
pub use ls::LsTool;
pub use output::{CappedOutput, Keep, cap_output};
pub use read::ReadTool;
pub(crate) use send::ContainedSendTool;
pub use send::SendTool;
pub use write::WriteTool;

/// A tool the model can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and argument schema as offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs one call.
    ///
    /// # Errors
    /// A [`ToolError`] whose message goes back to the model as an error result.
    ///
    /// # Cancel safety
    /// When `ctx.cancel` fires the tool should stop promptly (bash kills its process group); the
    /// loop waits a short grace period and then drops the future.
    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError>;
}

/// What a tool call gets to work with.
#[derive(Clone)]
pub struct ToolContext {
    /// The model's id for this call; also names the spill file.
    pub call_id: String,
    /// The session's working folder: relative paths resolve against it.
    pub cwd: PathBuf,
    /// Fires when the run is aborted.
    pub cancel: CancellationToken,
    pub limits: Arc<ToolLimits>,
    /// The scrubbed environment for child processes.
    pub exec: Arc<ExecEnv>,
    pub redactor: Arc<Redactor>,
    /// Where full outputs of truncated calls are kept (`<spill_dir>/<call_id>.log`).
    pub spill_dir: PathBuf,
    /// The session's chat channel, if it has one.
    pub channel: Option<Arc<dyn ChatChannel>>,
    /// Reports partial output while the tool runs (shown as tool update events).
    pub updates: Arc<dyn Fn(String) + Send + Sync>,
}

impl ToolContext {
    /// Resolves a path argument the way every tool does: `@` prefix dropped, `~` expanded to
    /// `$HOME` of the child environment, relative to the session's cwd.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let path = path.strip_prefix('@').unwrap_or(path);
        let home = self.exec.vars().find(|(k, _)| *k == "HOME").map(|(_, v)| PathBuf::from(v));
        let expanded = match (path.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if path == "~" => home.unwrap_or_else(|| PathBuf::from(path)),
            _ => PathBuf::from(path),
        };
        self.cwd.join(expanded)
    }

    /// The spill file for this call (the call id made safe as a file name).
    pub fn spill_path(&self) -> PathBuf {
        let safe: String = self
            .call_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .take(100)
            .collect();
        self.spill_dir.join(format!("{safe}.log"))
    }

    /// Reports partial output.
    pub fn update(&self, partial: String) {
        (self.updates)(partial);
    }

    /// A path as tools show it to the model: relative to the cwd when it lies inside it (so it
    /// can be passed straight back to another tool), absolute otherwise.
    pub(crate) fn display_path(&self, path: &Path) -> String {
        match path.strip_prefix(&self.cwd) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

/// What a tool call returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text for the model.
    pub content: String,
    pub is_error: bool,
    /// Structured data for hosts and the journal (exit code, spill path, …); not sent to the model.
    pub details: Value,
    pub control: ToolControl,
}

impl ToolOutput {
    /// A successful result.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
            details: Value::Null,
            control: ToolControl::Continue,
        }
    }

    /// An error result (the run goes on; the model sees the text).
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput { is_error: true, ..ToolOutput::text(content) }
    }

    /// The same output with structured details.
    pub fn with_details(self, details: Value) -> Self {
        ToolOutput { details, ..self }
    }
}

/// What the run does after this call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolControl {
    /// Go on: the model sees the result in its next call.
    Continue,
    /// Finish the current batch of tool calls, then settle the run as stopped by this tool, for
    /// this reason.
    EndRun(ToolStop),
}

/// Why a tool ends the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolStop {
    /// The run waits for the answer to `question` from the other side of the conversation; the
    /// answer arrives as the next prompt (the A2A `request_input` tool).
    InputRequired { question: String },
}

/// A failed tool call; the message goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

impl From<std::io::Error> for ToolError {
    fn from(err: std::io::Error) -> Self {
        ToolError(err.to_string())
    }
}

/// Parses a call's arguments into the tool's parameter struct.
///
/// # Errors
/// A message naming the tool and what is wrong with the arguments.
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args)
        .map_err(|err| ToolError(format!("invalid arguments for {tool}: {err}")))
}

/// The workspace's context files, read into the system prompt (see `workspace`).
const CONTEXT_FILES: [&str; 4] = ["PERSONA.md", "AGENTS.md", "CLAUDE.md", "MEMORY.md"];

/// Refuses to save through a symbolic link at `path` (what `write` and `edit` change), naming
/// where it points: a caller's session with the `workspace` tier can turn any ordinary file into
/// a link (`notes.md` → `MEMORY.md`), and a save through it would put the owner's text into a
/// file callers may not write, where the owner's next chat reads it as instructions. The one link
/// followed is an owner's between two context files in one folder (`CLAUDE.md` → `AGENTS.md`).
/// Links in the folders above `path` are followed as usual: this check is for paths outside the
/// session's workspace (no caller can write there); a workspace path is resolved without
/// following any link a caller could plant ([`save`]).
///
/// # Errors
/// The refusal, naming the link's target and what to do instead.
pub(crate) fn refuse_link(path: &Path, shown: &str) -> Result<(), ToolError> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
    if !is_link {
        return Ok(());
    }
    let target = std::fs::read_link(path).unwrap_or_default();
    let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    let sibling = target.parent().is_none_or(|parent| parent.as_os_str().is_empty());
    let context = |n: &str| CONTEXT_FILES.contains(&n);
    if sibling && context(&name(path)) && context(&name(&target)) {
        return Ok(());
    }
    Err(ToolError(format!(
        "{shown} is a symbolic link to {}; write and edit do not save through a link (one planted \
         in the workspace could lead the save into another file). Write to the file it points \
         at by its own path if that is what you mean",
        target.display()
    )))
}

/// Opens `path` for reading when it is a regular file or a folder (a link is followed). A FIFO,
/// socket or device is refused without waiting: opening a FIFO waits for a writer and reading it
/// for data, so one planted in the workspace by a caller's session would hang the tool (and the
/// owner's run) for good.
///
/// # Errors
/// The open's error, or [`std::io::ErrorKind::InvalidInput`] for what is not a file or folder.
pub(crate) fn open_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
    let file = std::fs::File::options().read(true).custom_flags(nonblock).open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() && !kind.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, socket or device); only files can be read",
        ));
    }
    // Back to blocking reads (a no-op for files, said for clarity).
    rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())?;
    Ok(file)
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T, F>(tool: &str, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ToolError(format!("{tool} failed: {err}")))?
}

/// The built-in tools every session has: read, write, edit, bash, ls, grep, find.
/// [`SendTool`] is not among them: a session registers it only when it has a chat channel.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadTool),
        Arc::new(WriteTool),
        Arc::new(EditTool),
        Arc::new(BashTool),
        Arc::new(LsTool),
        Arc::new(GrepTool),
        Arc::new(FindTool),
    ]
}

/// The specs of [`builtin_tools`] and of [`SendTool`], in that order: they depend on nothing,
/// so they are built once per process rather than once per session.
pub(crate) fn builtin_specs() -> &'static [ToolSpec] {
    static SPECS: std::sync::OnceLock<Vec<ToolSpec>> = std::sync::OnceLock::new();
    SPECS.get_or_init(|| {
        let mut specs: Vec<ToolSpec> = builtin_tools().iter().map(|t| t.spec()).collect();
        specs.push(SendTool.spec());
        specs
    })
}

/// A context for unit tests: `cwd` as the working folder, default limits, a fixed `PATH`, `HOME`
/// set to `cwd`, no secrets, spill files under `cwd/.spill`, no channel and updates dropped.
#[cfg(test)]
pub(crate) fn test_context(cwd: &Path) -> ToolContext {
    let host = [
        ("PATH".to_string(), "/usr/local/bin:/usr/bin:/bin".to_string()),
        ("HOME".to_string(), cwd.display().to_string()),
    ];
    ToolContext {
        call_id: "call-1".to_string(),
        cwd: cwd.to_path_buf(),
        cancel: CancellationToken::new(),
        limits: Arc::new(ToolLimits::default()),
        exec: Arc::new(ExecEnv::from_host(host, &[], &[])),
        redactor: Arc::new(Redactor::default()),
        spill_dir: cwd.join(".spill"),
        channel: None,
        updates: Arc::new(|_| {}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tools_have_the_contract_names() {
        let names: Vec<String> = builtin_tools().iter().map(|t| t.spec().name).collect();
        assert_eq!(names, vec!["read", "write", "edit", "bash", "ls", "grep", "find"]);
    }

    #[test]
    fn resolve_strips_at_expands_home_and_joins_cwd() {
        let ctx = test_context(Path::new("/work/ws"));
        assert_eq!(ctx.resolve("@src/a.rs"), PathBuf::from("/work/ws/src/a.rs"));
        assert_eq!(ctx.resolve("~/notes.md"), PathBuf::from("/work/ws/notes.md"));
        assert_eq!(ctx.resolve("/etc/hosts"), PathBuf::from("/etc/hosts"));
    }

    #[test]
    fn display_path_is_relative_inside_cwd_and_absolute_outside() {
        let ctx = test_context(Path::new("/work/ws"));
        assert_eq!(ctx.display_path(Path::new("/work/ws/src/a.rs")), "src/a.rs");
        assert_eq!(ctx.display_path(Path::new("/etc/hosts")), "/etc/hosts");
        assert_eq!(ctx.display_path(Path::new("/work/ws/.")), ".");
    }
}
