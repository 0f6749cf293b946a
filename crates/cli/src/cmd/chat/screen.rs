//! What `volcanic chat` shows on stderr: status lines, tool progress, errors.
//!
//! On a terminal ("live"), what is transient (the model thinking, the tool running, a retry
//! under way) shares one updating line with a spinner (indicatif), erased before the answer's
//! words go to stdout; what lasts (a tool that failed, a compaction, an error) is printed as a
//! line of its own. Not on a terminal, every status is one line, exactly as before, so that logs
//! and pipes read the same. Colour (console) only where stderr is a colour terminal and
//! `NO_COLOR` is unset.

use std::borrow::Cow;
use std::io::{IsTerminal as _, Write as _};

use console::Style;
use indicatif::ProgressBar;

/// The stderr side of a chat.
pub struct Screen {
    live: bool,
    /// The updating status line, while one is shown.
    status: Option<ProgressBar>,
}

impl Screen {
    /// A screen that updates one status line when stderr is a terminal.
    pub fn new() -> Screen {
        Screen { live: std::io::stderr().is_terminal(), status: None }
    }

    /// Whether transient statuses share one updating line.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Shows `text` as the transient status (with a spinner) on a terminal; elsewhere prints
    /// `plain` as a line, or nothing when it is `None`.
    pub fn status(&mut self, text: impl Into<Cow<'static, str>>, plain: Option<&str>) {
        if !self.live {
            if let Some(line) = plain {
                note(line);
            }
            return;
        }
        let text = text.into();
        match &self.status {
            Some(bar) => bar.set_message(text),
            None => self.status = Some(crate::cmd::spinner::start(text)),
        }
    }

    /// Erases the status line, if one is shown.
    pub fn clear(&mut self) {
        if let Some(bar) = self.status.take() {
            bar.finish_and_clear();
        }
    }

    /// A line that stays: above the status line on a terminal, which goes on under it.
    pub fn line(&mut self, text: &str) {
        match &self.status {
            Some(bar) => bar.suspend(|| note(text)),
            None => note(text),
        }
    }

    /// A lasting line in the colour of errors.
    pub fn error(&mut self, text: &str) {
        self.line(&paint(text, &Style::new().red().for_stderr()));
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.clear();
    }
}

/// `text` in `style` when stderr takes colour (console checks the terminal, `NO_COLOR`,
/// `CLICOLOR`), else as it is.
pub fn paint(text: &str, style: &Style) -> String {
    style.apply_to(text).to_string()
}

/// Dimmed, for what is secondary (tool lines).
pub fn dim(text: &str) -> String {
    paint(text, &Style::new().dim().for_stderr())
}

/// Bold, for what the user types at (commands, keys).
pub fn bold(text: &str) -> String {
    paint(text, &Style::new().bold().for_stderr())
}

/// Writes a status line to stderr; a closed stderr is not worth failing over.
pub fn note(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
