//! The line editor of an interactive `volcanic chat` on a terminal (rustyline): Emacs-style
//! editing, a history kept across chats, bracketed paste (a pasted paragraph is one message),
//! and two ways to a new line: a trailing `\` or Alt-Enter. Tab completes the `/` commands.
//!
//! rustyline is blocking: each [`Editor::read`] runs on the blocking pool, and the editor moves
//! there and back.

use std::path::{Path, PathBuf};

use rustyline::completion::Completer;
use rustyline::config::{Behavior, Config};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Cmd, EventHandler, KeyCode, KeyEvent, Modifiers};

use super::COMMANDS;

/// How many messages the history keeps.
const HISTORY_SIZE: usize = 1000;

/// The file the history is kept in, in the state folder.
pub const HISTORY_FILE: &str = "chat-history";

/// What one read gave.
pub enum Read {
    /// A message or command (continuation `\`s removed), not empty.
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D on an empty line.
    Eof,
}

/// The terminal's settings from before the editor changed them. The chat puts them back when it
/// is told to stop (SIGTERM, SIGHUP) while the editor reads: that blocking read cannot be
/// interrupted, so the editor never gets to restore them itself, and the shell would be left in
/// raw mode.
pub struct SavedTerminal {
    tty: std::fs::File,
    termios: rustix::termios::Termios,
}

impl SavedTerminal {
    /// The settings of the controlling terminal now; `None` when there is none to read.
    pub fn now() -> Option<SavedTerminal> {
        let tty = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").ok()?;
        let termios = rustix::termios::tcgetattr(&tty).ok()?;
        Some(SavedTerminal { tty, termios })
    }

    /// Puts them back, and turns bracketed paste off as the editor would on its way out.
    pub fn restore(&self) {
        use std::io::Write;
        let _ = rustix::termios::tcsetattr(
            &self.tty,
            rustix::termios::OptionalActions::Now,
            &self.termios,
        );
        let _ = (&self.tty).write_all(b"\x1b[?2004l");
    }
}

/// The editor and where its history is saved.
pub struct Editor {
    inner: rustyline::Editor<Helper, FileHistory>,
    history: PathBuf,
    prompt: Prompt,
}

impl Editor {
    /// An editor that reads and writes the terminal (even when stdout is redirected, so that
    /// stdout keeps only the answers), with the history of `history` (a missing file is an
    /// empty history).
    ///
    /// # Errors
    /// The terminal cannot be set up.
    pub fn new(history: &Path) -> Result<Editor, String> {
        let config = Config::builder()
            .behavior(Behavior::PreferTerm)
            .max_history_size(HISTORY_SIZE)
            .and_then(|c| c.history_ignore_dups(true))
            .map_err(|e| e.to_string())?
            .history_ignore_space(true)
            .bracketed_paste(true)
            .auto_add_history(false)
            .build();
        let mut inner = rustyline::Editor::<Helper, FileHistory>::with_config(config)
            .map_err(|e| format!("cannot set up the terminal: {e}"))?;
        inner.set_helper(Some(Helper));
        inner.bind_sequence(
            KeyEvent(KeyCode::Enter, Modifiers::ALT),
            EventHandler::Simple(Cmd::Newline),
        );
        match inner.load_history(history) {
            Ok(()) => {}
            Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %history.display(), error = %e, "cannot read the chat history")
            }
        }
        let prompt = Prompt {
            styled: super::screen::paint("> ", &console::Style::new().green().bold().for_stderr()),
        };
        Ok(Editor { inner, history: history.to_path_buf(), prompt })
    }

    /// Reads one message (blocking).
    ///
    /// # Errors
    /// The terminal failed.
    pub fn read(&mut self) -> Result<Read, String> {
        loop {
            match self.inner.readline(&self.prompt) {
                Ok(text) => {
                    let text = join_continued(&text);
                    if text.trim().is_empty() {
                        continue;
                    }
                    self.remember(&text);
                    return Ok(Read::Line(text));
                }
                Err(ReadlineError::Interrupted) => return Ok(Read::Interrupted),
                Err(ReadlineError::Eof) => return Ok(Read::Eof),
                Err(e) => return Err(format!("reading input: {e}")),
            }
        }
    }

    /// Adds `text` to the history and saves it, readable by the owner only (messages can be
    /// private). A history that cannot be saved is logged, not fatal.
    fn remember(&mut self, text: &str) {
        if let Err(e) = self.inner.add_history_entry(text) {
            tracing::warn!(error = %e, "cannot add to the chat history");
            return;
        }
        if let Err(e) = self.save() {
            tracing::warn!(file = %self.history.display(), error = %e, "cannot save the chat history");
        }
    }

    fn save(&mut self) -> Result<(), String> {
        if !self.history.exists() {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&self.history) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        self.inner.append_history(&self.history).map_err(|e| e.to_string())
    }
}

/// The text as sent: a line ending in `\` continues on the next, without the `\`.
fn join_continued(text: &str) -> String {
    text.replace("\\\n", "\n")
}

/// The prompt, green when stderr takes colour.
struct Prompt {
    styled: String,
}

impl rustyline::Prompt for Prompt {
    fn raw(&self) -> &str {
        "> "
    }

    fn styled(&self) -> &str {
        &self.styled
    }
}

/// Continuation lines and command completion.
struct Helper;

impl rustyline::Helper for Helper {}

impl Validator for Helper {
    /// A line that ends in `\` is not finished: Enter starts a new line.
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for Helper {
    type Candidate = String;

    /// `/c` → `/compact`: the local commands, at the start of the message.
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let typed = &line[..pos];
        if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
            return Ok((0, Vec::new()));
        }
        let found = COMMANDS
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| name.starts_with(typed))
            .map(str::to_owned)
            .collect();
        Ok((0, found))
    }
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_backslash_joins_lines_without_it() {
        assert_eq!(join_continued("one \\\ntwo\\\nthree"), "one \ntwo\nthree");
        assert_eq!(join_continued("a\\b"), "a\\b");
        assert_eq!(join_continued("pasted\nlines"), "pasted\nlines");
    }
}
