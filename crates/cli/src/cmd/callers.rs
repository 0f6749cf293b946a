//! `volcanic callers`: add a caller with a freshly minted key, or list a workspace's callers.
//!
//! `add` prints the new key once and stores only its SHA-256 (`keyHash`), so the owner's
//! workspace never holds the key in plain text. It keeps every other entry of callers.json as it
//! was (unknown fields included) and replaces the file atomically.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use volcanic_a2a::auth::callers::{callers_path, is_valid_caller_name, parse_callers};
use volcanic_a2a::auth::{CallerTier, KeyHash};

use crate::{Exit, Failure};

/// Random bytes in a minted key (printed as 64 hex digits after `vk_`).
const KEY_BYTES: usize = 32;

#[derive(clap::Args)]
pub struct CallersArgs {
    #[command(subcommand)]
    command: CallersCommand,
}

#[derive(clap::Subcommand)]
enum CallersCommand {
    /// Add a caller: mints a key, prints it once, stores only its hash in callers.json.
    Add(AddArgs),
    /// List the callers of a workspace (names, tiers, modes, masked keys).
    List(ListArgs),
}

#[derive(clap::Args)]
struct AddArgs {
    /// The caller's name: 1-40 of a-z, 0-9 and `-`, unique in the workspace.
    name: String,
    /// What the caller's sessions may do: chat, read or workspace.
    #[arg(long, default_value = "workspace")]
    tier: String,
    /// The assistant's workspace; default: the current folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A note for the owner (who the caller is).
    #[arg(long)]
    note: Option<String>,
}

#[derive(clap::Args)]
struct ListArgs {
    /// The assistant's workspace; default: the current folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
}

/// Runs `volcanic callers …`; returns the exit code.
///
/// # Errors
/// A usage [`Failure`] (exit 2) for a bad name or tier, a duplicate name or a malformed
/// callers.json; exit 1 when the file cannot be read or written.
pub fn run(args: CallersArgs) -> Result<Exit, Failure> {
    match args.command {
        CallersCommand::Add(args) => add(args),
        CallersCommand::List(args) => list(args),
    }
}

fn add(args: AddArgs) -> Result<Exit, Failure> {
    if !is_valid_caller_name(&args.name) {
        return Err(Failure::usage(format!(
            "caller name {:?}: expected 1-40 characters of a-z, 0-9 and -",
            args.name
        )));
    }
    let tier = CallerTier::parse(&args.tier).ok_or_else(|| {
        Failure::usage(format!("--tier {:?}: expected chat, read or workspace", args.tier))
    })?;
    let workspace = super::workspace(args.workspace.as_deref())?;
    let path = callers_path(&workspace);
    let mut entries = read_array(&path)?;
    let taken =
        entries.iter().any(|entry| entry.get("name").and_then(Value::as_str) == Some(&args.name));
    if taken {
        return Err(Failure::usage(format!(
            "{}: a caller named {} already exists",
            path.display(),
            args.name
        )));
    }
    let key = mint_key()?;
    let mut entry = Map::new();
    entry.insert("name".into(), Value::String(args.name.clone()));
    entry.insert("keyHash".into(), Value::String(KeyHash::of(&key).to_text()));
    entry.insert("tier".into(), Value::String(tier.as_str().into()));
    if let Some(note) = args.note {
        entry.insert("note".into(), Value::String(note));
    }
    entries.push(Value::Object(entry));
    let mut text = serde_json::to_string_pretty(&Value::Array(entries)).map_err(|e| Failure {
        code: Exit::Failed,
        message: format!("cannot encode callers.json: {e}"),
    })?;
    text.push('\n');
    volcanic_core::atomic::write_atomic(&path, text.as_bytes())
        .map_err(|e| Failure { code: Exit::Failed, message: format!("{}: {e}", path.display()) })?;
    print_lines(&[
        key.as_str(),
        &format!(
            "This is the key of caller {} (tier {}). It will not be shown again: {} keeps only its hash.",
            args.name,
            tier.as_str(),
            path.display()
        ),
    ]);
    Ok(Exit::Success)
}

fn list(args: ListArgs) -> Result<Exit, Failure> {
    let workspace = super::workspace(args.workspace.as_deref())?;
    let path = callers_path(&workspace);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            print_lines(&[&format!("No callers: {} does not exist.", path.display())]);
            return Ok(Exit::Success);
        }
        Err(err) => {
            return Err(Failure {
                code: Exit::Failed,
                message: format!("{}: {err}", path.display()),
            });
        }
    };
    let entries = parse_callers(&path, &text);
    if entries.is_empty() {
        print_lines(&[&format!("No callers in {}.", path.display())]);
        return Ok(Exit::Success);
    }
    let width = entries.iter().map(|e| e.name.len()).max().unwrap_or(4).max(4);
    let mut lines = vec![format!("{:width$}  {:9}  {:8}  KEY", "NAME", "TIER", "MODE")];
    for entry in entries.iter() {
        let mut line = format!(
            "{:width$}  {:9}  {:8}  {}",
            entry.name,
            entry.tier.as_str(),
            entry.mode.as_str(),
            entry.key.masked()
        );
        if let Some(note) = &entry.note {
            line.push_str("  ");
            line.push_str(note);
        }
        lines.push(line);
    }
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    print_lines(&lines);
    Ok(Exit::Success)
}

/// The entries of the callers.json at `path` as JSON values (an absent file: none).
fn read_array(path: &Path) -> Result<Vec<Value>, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(Failure {
                code: Exit::Failed,
                message: format!("{}: {err}", path.display()),
            });
        }
    };
    // Only the position: serde_json's messages can quote the input, and the input holds keys.
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(entries)) => Ok(entries),
        Ok(_) => Err(Failure::usage(format!(
            "{}: not a JSON array; fix or remove it first",
            path.display()
        ))),
        Err(err) => Err(Failure::usage(format!(
            "{}: malformed JSON at line {} column {}; fix or remove it first",
            path.display(),
            err.line(),
            err.column()
        ))),
    }
}

/// A new key: `vk_` and 64 hex digits from the operating system's CSPRNG.
fn mint_key() -> Result<String, Failure> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| Failure {
        code: Exit::Failed,
        message: format!("cannot read random bytes for a key: {e}"),
    })?;
    let mut key = String::with_capacity(3 + 2 * KEY_BYTES);
    key.push_str("vk_");
    for byte in bytes {
        key.push_str(&format!("{byte:02x}"));
    }
    Ok(key)
}

/// Prints `lines`, each kept on its line: notes and names are text from callers.json, whose
/// control characters are shown rather than sent to the terminal.
#[allow(clippy::print_stdout)]
fn print_lines(lines: &[&str]) {
    for line in lines {
        println!("{}", volcanic_core::escape::one_line(line));
    }
}
