//! The shared output cap: what a tool result may show the model, and the spill file that keeps
//! the rest.
//!
//! A long output is cut to [`ToolLimits::max_output_lines`] and [`ToolLimits::max_output_bytes`]
//! with a marker line that says how much was left out and where the full text is, so the model can
//! `read` it page by page. The caller passes text that is already redacted: the spill file is
//! written as given and must hold no secrets.

use std::path::{Path, PathBuf};

use crate::config::ToolLimits;

/// Which part of a long output to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The beginning (file contents, listings).
    Head,
    /// About a fifth from the beginning and four fifths from the end (command output, where the
    /// end usually holds the error and the summary).
    HeadAndTail,
}

/// An output cut to the caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedOutput {
    /// What the model sees, with a marker line where text was left out.
    pub text: String,
    /// Whether anything was left out.
    pub truncated: bool,
    /// Lines of the whole output.
    pub total_lines: usize,
    /// Bytes of the whole output.
    pub total_bytes: usize,
    /// Where the whole output was written, when it was truncated and a spill path was given.
    pub spill_path: Option<PathBuf>,
}

/// Cuts `text` to the output caps of `limits`, keeping the part `keep` asks for.
///
/// When text is left out and `spill` is given, the whole text is written there first (parent
/// folders created, at most [`ToolLimits::max_spill_bytes`], with a note where it was cut) and the
/// marker names that path. Kept text never splits a UTF-8 character; the marker line comes on top
/// of the caps. A failed spill write is reported in the marker instead of the path.
pub fn cap_output(
    text: &str,
    limits: &ToolLimits,
    keep: Keep,
    spill: Option<&Path>,
) -> CappedOutput {
    let total_bytes = text.len();
    let total_lines = count_lines(text);
    if total_lines <= limits.max_output_lines && total_bytes <= limits.max_output_bytes {
        return CappedOutput {
            text: text.to_string(),
            truncated: false,
            total_lines,
            total_bytes,
            spill_path: None,
        };
    }

    let (head_lines, head_bytes, tail_lines, tail_bytes) = match keep {
        Keep::Head => (limits.max_output_lines, limits.max_output_bytes, 0, 0),
        Keep::HeadAndTail => {
            let head_lines = limits.max_output_lines / 5;
            let head_bytes = limits.max_output_bytes / 5;
            (
                head_lines,
                head_bytes,
                limits.max_output_lines - head_lines,
                limits.max_output_bytes - head_bytes,
            )
        }
    };
    let head = take_head(text, head_lines, head_bytes);
    let tail = take_tail(&text[head.len()..], tail_lines, tail_bytes);
    let omitted = &text[head.len()..text.len() - tail.len()];

    let (spill_path, location) = match spill {
        Some(path) => match write_spill(path, text, limits.max_spill_bytes) {
            Ok(()) => (Some(path.to_path_buf()), format!("full output: {}", path.display())),
            Err(err) => (None, format!("full output could not be saved: {err}")),
        },
        None => (None, String::new()),
    };

    let mut out = String::with_capacity(head.len() + tail.len() + 120);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    let omitted_lines = count_lines(omitted);
    let noun = if omitted_lines == 1 { "line" } else { "lines" };
    out.push_str(&format!("[… {omitted_lines} {noun} ({} bytes) omitted", omitted.len()));
    if !location.is_empty() {
        out.push_str("; ");
        out.push_str(&location);
    }
    out.push_str("]\n");
    out.push_str(tail);

    CappedOutput { text: out, truncated: true, total_lines, total_bytes, spill_path }
}

/// Lines of `text`: a final line without a newline counts, a trailing newline adds none.
pub(crate) fn count_lines(text: &str) -> usize {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    if text.is_empty() || text.ends_with('\n') { newlines } else { newlines + 1 }
}

/// Whole lines from the start within both caps; a part of the first line if not even it fits.
fn take_head(text: &str, max_lines: usize, max_bytes: usize) -> &str {
    if max_lines == 0 || max_bytes == 0 {
        return "";
    }
    let mut end = 0;
    for (count, line) in text.split_inclusive('\n').enumerate() {
        if count == max_lines || end + line.len() > max_bytes {
            break;
        }
        end += line.len();
    }
    if end == 0 {
        end = text.floor_char_boundary(max_bytes);
    }
    &text[..end]
}

/// Whole lines from the end within both caps; a part of the last line if not even it fits.
fn take_tail(text: &str, max_lines: usize, max_bytes: usize) -> &str {
    if max_lines == 0 || max_bytes == 0 {
        return "";
    }
    let mut start = text.len();
    for (count, line) in text.split_inclusive('\n').rev().enumerate() {
        if count == max_lines || text.len() - start + line.len() > max_bytes {
            break;
        }
        start -= line.len();
    }
    if start == text.len() {
        start = text.ceil_char_boundary(text.len().saturating_sub(max_bytes));
    }
    &text[start..]
}

/// Writes the whole output, or its first `max_bytes` with a note saying where it was cut.
fn write_spill(path: &Path, text: &str, max_bytes: u64) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    if text.len() <= max {
        return std::fs::write(path, text);
    }
    let cut = text.floor_char_boundary(max);
    let mut body = String::with_capacity(cut + 80);
    body.push_str(&text[..cut]);
    if !body.ends_with('\n') {
        body.push('\n');
    }
    body.push_str(&format!("[spill file cut at {cut} of {} bytes]\n", text.len()));
    std::fs::write(path, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(lines: usize, bytes: usize) -> ToolLimits {
        ToolLimits {
            max_output_lines: lines,
            max_output_bytes: bytes,
            max_spill_bytes: 1000,
            ..ToolLimits::default()
        }
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("{i}\n")).collect()
    }

    #[test]
    fn cap_output_short_text_is_unchanged() {
        let capped = cap_output("a\nb\n", &limits(10, 100), Keep::HeadAndTail, None);
        assert_eq!(
            capped,
            CappedOutput {
                text: "a\nb\n".to_string(),
                truncated: false,
                total_lines: 2,
                total_bytes: 4,
                spill_path: None
            }
        );
    }

    #[test]
    fn cap_output_head_and_tail_keeps_a_fifth_and_four_fifths_of_the_lines() {
        let text = numbered(100);
        let capped = cap_output(&text, &limits(10, 1000), Keep::HeadAndTail, None);
        assert_eq!(
            capped,
            CappedOutput {
                text: "1\n2\n[… 90 lines (263 bytes) omitted]\n93\n94\n95\n96\n97\n98\n99\n100\n"
                    .to_string(),
                truncated: true,
                total_lines: 100,
                total_bytes: 292,
                spill_path: None
            }
        );
    }

    #[test]
    fn cap_output_head_keeps_the_start_within_the_byte_cap() {
        let text = numbered(100);
        let capped = cap_output(&text, &limits(1000, 9), Keep::Head, None);
        assert_eq!(capped.text, "1\n2\n3\n4\n[… 96 lines (284 bytes) omitted]\n");
        assert!(capped.truncated);
    }

    #[test]
    fn cap_output_long_single_line_is_cut_on_char_boundaries() {
        let text = "é".repeat(50);
        let capped = cap_output(&text, &limits(10, 11), Keep::HeadAndTail, None);
        // Head budget 2 bytes (one "é"), tail budget 9 bytes (four "é").
        assert_eq!(capped.text, "é\n[… 1 line (90 bytes) omitted]\néééé");
    }

    #[test]
    fn cap_output_spills_the_whole_text_and_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill/call-1.log");
        let text = numbered(100);
        let capped = cap_output(&text, &limits(5, 1000), Keep::HeadAndTail, Some(&spill));
        assert_eq!(
            capped.text,
            format!(
                "1\n[… 95 lines (277 bytes) omitted; full output: {}]\n97\n98\n99\n100\n",
                spill.display()
            )
        );
        assert_eq!(capped.spill_path, Some(spill.clone()));
        assert_eq!(std::fs::read_to_string(&spill).unwrap(), text);
    }

    #[test]
    fn cap_output_spill_is_cut_at_the_spill_cap_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("call.log");
        let text = "x".repeat(1500);
        let capped = cap_output(&text, &limits(5, 100), Keep::Head, Some(&spill));
        assert_eq!(capped.spill_path, Some(spill.clone()));
        assert_eq!(
            std::fs::read_to_string(&spill).unwrap(),
            format!("{}\n[spill file cut at 1000 of 1500 bytes]\n", "x".repeat(1000))
        );
    }

    #[test]
    fn count_lines_counts_a_final_partial_line() {
        let cases = [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)];
        for (text, want) in cases {
            assert_eq!(count_lines(text), want, "text: {text:?}");
        }
    }
}
