//! The `read` tool: a page of a text file, with a notice telling the model how to read on.
//!
//! The file is scanned in bounded chunks, so a huge file or a giant single line never lands in
//! memory whole: only the requested page is kept, and the rest is just counted.

use std::io::{BufRead, BufReader, ErrorKind, Read, Seek};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, parse_args};
use crate::config::ToolLimits;
use crate::provider::ToolSpec;

/// How much of a file's start is checked for NUL bytes to tell binary from text.
pub(crate) const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// Whether these first bytes of a file mark it as binary (a NUL byte in the sniffed prefix).
pub(crate) fn looks_binary(start: &[u8]) -> bool {
    start.iter().take(BINARY_SNIFF_BYTES).any(|&b| b == 0)
}

/// Reads a text file page by page: `read {path, offset?, limit?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// The lines of one page and how the scan went.
#[derive(Debug, PartialEq)]
enum Scan {
    Binary { bytes: u64 },
    Text { lines: Vec<String>, total_lines: usize },
}

#[async_trait::async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> ToolSpec {
        let limits = ToolLimits::default();
        ToolSpec {
            name: "read".to_string(),
            description: format!(
                "Read a text file. Shows at most {} lines or {} KiB per call (lines longer than {} \
                 characters are cut); when there is more, a notice gives the offset to continue \
                 with. Binary files are reported by size only. Paths are relative to the working \
                 folder.",
                limits.max_output_lines,
                limits.max_output_bytes / 1024,
                limits.read_max_line_chars
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read"},
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "First line to show, 1-based (default 1)"
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Most lines to show (the output caps still apply)"
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = parse_args("read", args)?;
        if args.limit == Some(0) {
            return Err(ToolError("limit must be at least 1".to_string()));
        }
        let path = ctx.resolve(&args.path);
        let shown = ctx.display_path(&path);
        // Models often count from 0; line 0 can only mean the first line.
        let offset = args.offset.unwrap_or(1).max(1);
        let want = args.limit.unwrap_or(usize::MAX).min(ctx.limits.max_output_lines);
        let limits = ctx.limits.clone();
        let cancel = ctx.cancel.clone();
        let scan = {
            let path = path.clone();
            let shown = shown.clone();
            blocking("read", move || scan_file(&path, &shown, offset, want, &limits, &cancel))
                .await?
        };
        match scan {
            Scan::Binary { bytes } => Ok(ToolOutput::text(format!("binary file, {bytes} bytes"))
                .with_details(json!({"path": shown, "binary": true, "bytes": bytes}))),
            Scan::Text { total_lines: 0, .. } => Ok(ToolOutput::text("(empty file)")
                .with_details(json!({"path": shown, "total_lines": 0, "truncated": false}))),
            Scan::Text { total_lines, .. } if offset > total_lines => Err(ToolError(format!(
                "offset {offset} is past the end of {shown} ({total_lines} lines)"
            ))),
            Scan::Text { lines, total_lines } => {
                let last = offset + lines.len() - 1;
                let mut text = lines.join("\n");
                let truncated = last < total_lines;
                if truncated {
                    text.push_str(&format!(
                        "\n\n[Showing lines {offset}-{last} of {total_lines}. Use offset={} to \
                         continue.]",
                        last + 1
                    ));
                }
                Ok(ToolOutput::text(text).with_details(json!({
                    "path": shown,
                    "start_line": offset,
                    "end_line": last,
                    "total_lines": total_lines,
                    "truncated": truncated
                })))
            }
        }
    }
}

/// Collects lines `offset..` of the file (at most `want`, within the byte cap) and counts all.
fn scan_file(
    path: &Path,
    shown: &str,
    offset: usize,
    want: usize,
    limits: &ToolLimits,
    cancel: &CancellationToken,
) -> Result<Scan, ToolError> {
    let mut file = super::open_file(path).map_err(|err| match err.kind() {
        ErrorKind::NotFound => ToolError(format!("file not found: {shown}")),
        _ => ToolError(format!("could not read {shown}: {err}")),
    })?;
    let meta =
        file.metadata().map_err(|err| ToolError(format!("could not read {shown}: {err}")))?;
    if meta.is_dir() {
        return Err(ToolError(format!("{shown} is a folder; use ls to list it")));
    }
    let io_err = |err: std::io::Error| ToolError(format!("could not read {shown}: {err}"));

    let mut start = Vec::with_capacity(BINARY_SNIFF_BYTES);
    (&mut file).take(BINARY_SNIFF_BYTES as u64).read_to_end(&mut start).map_err(io_err)?;
    if looks_binary(&start) {
        return Ok(Scan::Binary { bytes: meta.len() });
    }
    file.rewind().map_err(io_err)?;

    let mut page = Page::new(offset, want, limits);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    loop {
        if cancel.is_cancelled() {
            return Err(ToolError("read aborted".to_string()));
        }
        let chunk = reader.fill_buf().map_err(io_err)?;
        if chunk.is_empty() {
            break;
        }
        let used = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => {
                page.extend(&chunk[..at]);
                page.end_line();
                at + 1
            }
            None => {
                page.extend(chunk);
                chunk.len()
            }
        };
        reader.consume(used);
    }
    if page.line_bytes > 0 {
        page.end_line();
    }
    Ok(Scan::Text { lines: page.lines, total_lines: page.line_no })
}

/// The page being collected while the file is scanned.
struct Page {
    offset: usize,
    want: usize,
    max_line_chars: usize,
    max_bytes: usize,
    /// Lines finished so far.
    line_no: usize,
    /// The start of the current line, kept only while it belongs to the page.
    current: Vec<u8>,
    /// Bytes of the current line, kept or not.
    line_bytes: u64,
    lines: Vec<String>,
    bytes: usize,
    full: bool,
}

impl Page {
    fn new(offset: usize, want: usize, limits: &ToolLimits) -> Self {
        Page {
            offset,
            want,
            max_line_chars: limits.read_max_line_chars,
            max_bytes: limits.max_output_bytes,
            line_no: 0,
            current: Vec::new(),
            line_bytes: 0,
            lines: Vec::new(),
            bytes: 0,
            full: false,
        }
    }

    fn is_collecting(&self) -> bool {
        !self.full && self.line_no + 1 >= self.offset
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.line_bytes += bytes.len() as u64;
        if self.is_collecting() {
            // Enough bytes for `max_line_chars` characters of up to 4 bytes each, plus one so a
            // cut line is recognised as such.
            let keep = self.max_line_chars.saturating_mul(4).saturating_add(4);
            let room = keep.saturating_sub(self.current.len());
            self.current.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    fn end_line(&mut self) {
        if self.is_collecting() {
            let raw = std::mem::take(&mut self.current);
            let text = String::from_utf8_lossy(&raw);
            let text = text.strip_suffix('\r').unwrap_or(&text);
            let mut line = match text.char_indices().nth(self.max_line_chars) {
                Some((cut, _)) => format!(
                    "{} [… line cut at {} characters; it has {} bytes]",
                    &text[..cut],
                    self.max_line_chars,
                    self.line_bytes
                ),
                None => text.to_string(),
            };
            let needed = line.len() + usize::from(!self.lines.is_empty());
            if self.bytes + needed > self.max_bytes {
                if self.lines.is_empty() {
                    line.truncate(line.floor_char_boundary(self.max_bytes));
                    self.lines.push(line);
                }
                self.full = true;
            } else {
                self.bytes += needed;
                self.lines.push(line);
                self.full = self.lines.len() >= self.want;
            }
        }
        self.current.clear();
        self.line_bytes = 0;
        self.line_no += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tool::test_context;

    async fn read(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        ReadTool.execute(args, test_context(dir)).await
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn read_small_file_returns_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\r\ntwo\nthree").unwrap();
        let out = read(dir.path(), json!({"path": "@a.txt"})).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text("one\ntwo\nthree").with_details(json!({
                "path": "a.txt", "start_line": 1, "end_line": 3, "total_lines": 3,
                "truncated": false
            }))
        );
    }

    #[tokio::test]
    async fn read_offset_and_limit_page_with_a_continuation_notice() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), numbered(10)).unwrap();
        let out =
            read(dir.path(), json!({"path": "a.txt", "offset": 3, "limit": 2})).await.unwrap();
        assert_eq!(
            out.content,
            "line 3\nline 4\n\n[Showing lines 3-4 of 10. Use offset=5 to continue.]"
        );
    }

    #[tokio::test]
    async fn read_long_file_stops_at_the_line_cap() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), numbered(3000)).unwrap();
        let out = read(dir.path(), json!({"path": "a.txt"})).await.unwrap();
        let want: Vec<String> = (1..=2000).map(|i| format!("line {i}")).collect();
        assert_eq!(
            out.content,
            format!(
                "{}\n\n[Showing lines 1-2000 of 3000. Use offset=2001 to continue.]",
                want.join("\n")
            )
        );
    }

    #[tokio::test]
    async fn read_stops_at_the_byte_cap() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), numbered(10)).unwrap();
        let mut ctx = test_context(dir.path());
        ctx.limits = Arc::new(ToolLimits { max_output_bytes: 14, ..ToolLimits::default() });
        let out = ReadTool.execute(json!({"path": "a.txt"}), ctx).await.unwrap();
        assert_eq!(
            out.content,
            "line 1\nline 2\n\n[Showing lines 1-2 of 10. Use offset=3 to continue.]"
        );
    }

    #[tokio::test]
    async fn read_long_line_is_cut_with_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let long = "é".repeat(2500);
        std::fs::write(dir.path().join("a.txt"), format!("{long}\nshort\n")).unwrap();
        let out = read(dir.path(), json!({"path": "a.txt"})).await.unwrap();
        assert_eq!(
            out.content,
            format!(
                "{} [… line cut at 2000 characters; it has 5000 bytes]\nshort",
                "é".repeat(2000)
            )
        );
    }

    #[tokio::test]
    async fn read_offset_past_the_end_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), numbered(3)).unwrap();
        let err = read(dir.path(), json!({"path": "a.txt", "offset": 4})).await.unwrap_err();
        assert_eq!(err, ToolError("offset 4 is past the end of a.txt (3 lines)".to_string()));
    }

    #[tokio::test]
    async fn read_binary_file_reports_its_size() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.bin"), [1u8, 0, 2, 3]).unwrap();
        let out = read(dir.path(), json!({"path": "a.bin"})).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text("binary file, 4 bytes")
                .with_details(json!({"path": "a.bin", "binary": true, "bytes": 4}))
        );
    }

    #[tokio::test]
    async fn read_missing_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path(), json!({"path": "nope.txt"})).await.unwrap_err();
        assert_eq!(err, ToolError("file not found: nope.txt".to_string()));
    }

    #[tokio::test]
    async fn read_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let err = read(dir.path(), json!({"path": "sub"})).await.unwrap_err();
        assert_eq!(err, ToolError("sub is a folder; use ls to list it".to_string()));
    }

    #[tokio::test]
    async fn read_empty_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "").unwrap();
        let out = read(dir.path(), json!({"path": "a.txt"})).await.unwrap();
        assert_eq!(out.content, "(empty file)");
    }

    #[tokio::test]
    async fn read_refuses_a_fifo_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.path().join("pipe"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let err = read(dir.path(), json!({"path": "pipe"})).await.unwrap_err();
        assert!(err.0.contains("not a regular file"), "{err:?}");
    }
}
