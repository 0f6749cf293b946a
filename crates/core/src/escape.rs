//! Text someone else wrote, made safe to show to a person: on a terminal (`volcanic a2a`,
//! `volcanic approvals`, `volcanic chat`) or in a log line.
//!
//! A caller, another agent or a model chooses such text, and a terminal obeys what it contains:
//! escape sequences retitle it, clear it, move the cursor and rewrite lines already printed; a
//! carriage return writes over the start of a line; a bidirectional override reorders what
//! follows. In a log, a newline starts a line the server never wrote. So every character that
//! does any of that is shown instead of sent, as `\u{1b}`, `\u{d}`, `\u{202e}`: the reader sees
//! that something was there and what, and the text around it is left as it was.
//!
//! [`printable`] keeps newlines and tabs (an answer of several lines stays readable);
//! [`one_line`] shows newlines too, for log fields and for what must stay on one line of a
//! listing. This module knows nothing of where the text goes.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character but newline and tab, and every bidirectional override,
/// embedding and isolate, shown as `\u{…}`.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, Lines::Keep)
}

/// `text` as [`printable`] shows it, with newlines shown as `\u{a}` too: it cannot begin a line
/// of its own.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, Lines::Escape)
}

/// Whether newlines are kept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lines {
    Keep,
    Escape,
}

fn escape(text: &str, lines: Lines) -> Cow<'_, str> {
    if !text.chars().any(|c| is_shown_escaped(c, lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_shown_escaped(c, lines) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1: escape sequences, carriage return, backspace, NEL), the line
/// and paragraph separators, and the bidirectional embeddings, overrides and isolates
/// (U+202A-U+202E, U+2066-U+2069), which reorder the text that follows them. Tab always stays;
/// newline stays when `lines` keeps it.
fn is_shown_escaped(c: char, lines: Lines) -> bool {
    match c {
        '\t' => false,
        '\n' => lines == Lines::Escape,
        '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        c => c.is_control(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_shows_control_characters_instead_of_sending_them() {
        assert_eq!(printable("line one\n\tline two"), "line one\n\tline two");
        assert_eq!(printable("\u{1b}]0;pwned\u{7}red"), "\\u{1b}]0;pwned\\u{7}red");
        assert_eq!(printable("a\rb\u{9b}c\u{7f}"), "a\\u{d}b\\u{9b}c\\u{7f}");
        assert_eq!(printable("\u{1b}[2J\u{1b}[1;1H"), "\\u{1b}[2J\\u{1b}[1;1H");
    }

    #[test]
    fn bidirectional_overrides_are_shown() {
        assert_eq!(printable("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(printable("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        // Right-to-left text itself, and its marks, are left alone.
        assert_eq!(printable("שלום \u{200f}"), "שלום \u{200f}");
    }

    #[test]
    fn one_line_shows_newlines_too() {
        assert_eq!(one_line("ok\nINFO forged"), "ok\\u{a}INFO forged");
        assert_eq!(one_line("a\r\nb\u{2028}c\u{85}d\te"), "a\\u{d}\\u{a}b\\u{2028}c\\u{85}d\te");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in ["", "hello", "émoji 🌋 and ✓", "tab\there"] {
            assert!(matches!(one_line(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(printable(text), Cow::Borrowed(t) if t == text));
        }
        assert!(matches!(printable("two\nlines"), Cow::Borrowed(_)));
    }
}
