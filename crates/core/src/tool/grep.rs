//! The `grep` tool: a regex searched line by line through a tree, in process (no ripgrep needed).
//!
//! Walks like `find` (gitignore respected, dotfiles included, `.git` skipped), skips binary files,
//! and stops at whichever limit comes first, saying which one it was.
//!
//! Lines are read in bounded chunks: only the first [`MAX_LINE_BYTES`] of a line are kept and
//! searched, and the rest is skipped, so a huge single-line file (minified code, a data dump)
//! cannot exhaust memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, ErrorKind};
use std::path::Path;

use regex::bytes::Regex;
use serde::Deserialize;
use serde_json::{Value, json};

use super::find::{PathGlob, walk};
use super::read::looks_binary;
use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, parse_args};
use crate::config::ToolLimits;
use crate::provider::ToolSpec;

/// Longest part of a matching line that is shown, in characters.
const MAX_LINE_CHARS: usize = 500;
/// Longest part of a line that is kept and searched, in bytes; the rest of the line is skipped.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Searches file contents: `grep {pattern, path?, glob?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Deserialize)]
struct GrepArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

#[async_trait::async_trait]
impl Tool for GrepTool {
    fn spec(&self) -> ToolSpec {
        let limits = ToolLimits::default();
        ToolSpec {
            name: "grep".to_string(),
            description: format!(
                "Search file contents with a regular expression (Rust regex syntax; (?i) for \
                 case-insensitive) under a folder or in one file (default: the working folder). \
                 Respects .gitignore, includes dotfiles, skips .git and binary files. Only the \
                 first {} KiB of each line are searched. Output lines are path:LINE: text, cut \
                 at {MAX_LINE_CHARS} characters. At most {} matches or {} KiB; narrow the \
                 pattern, path or glob when the notice says a limit was hit.",
                MAX_LINE_BYTES / 1024,
                limits.grep_max_matches,
                limits.max_output_bytes / 1024
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression"},
                    "path": {"type": "string", "description": "Folder or file (default .)"},
                    "glob": {
                        "type": "string",
                        "description": "Only files whose path relative to the search folder \
                                        matches, e.g. *.rs or src/**/*.ts"
                    }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GrepArgs = parse_args("grep", args)?;
        let regex =
            Regex::new(&args.pattern).map_err(|err| ToolError(format!("invalid regex: {err}")))?;
        let glob = args.glob.as_deref().map(PathGlob::new).transpose()?;
        let root = ctx.resolve(args.path.as_deref().unwrap_or("."));
        if let Err(err) = tokio::fs::metadata(&root).await {
            let shown = ctx.display_path(&root);
            return Err(ToolError(match err.kind() {
                ErrorKind::NotFound => format!("path not found: {shown}"),
                _ => format!("could not search {shown}: {err}"),
            }));
        }

        let search = blocking("grep", move || {
            let mut search = Search::new(&ctx.limits);
            for entry in walk(&root).filter_map(Result::ok) {
                if ctx.cancel.is_cancelled() {
                    return Err(ToolError("grep aborted".to_string()));
                }
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    continue;
                }
                let path = entry.path();
                let relative = match path.strip_prefix(&root) {
                    Ok(rel) if !rel.as_os_str().is_empty() => rel,
                    // The search root is this file: match the glob against its name.
                    _ => path.file_name().map_or(path, Path::new),
                };
                if glob.as_ref().is_some_and(|glob| !glob.is_match(relative)) {
                    continue;
                }
                let searched = File::open(path)
                    .and_then(|file| search.file(file, &ctx.display_path(path), &regex));
                if let Err(err) = searched {
                    // Unreadable files (permissions, vanished) are skipped like binary ones.
                    tracing::debug!(file = ?path, error = %err, "grep skipped a file");
                }
                if search.is_done() {
                    break;
                }
            }
            Ok(search)
        })
        .await?;

        let count = search.lines.len();
        let mut text = if count == 0 { "no matches".to_string() } else { search.lines.join("\n") };
        if let Some(notice) = &search.limit {
            text.push_str("\n\n");
            text.push_str(notice);
        }
        Ok(ToolOutput::text(text)
            .with_details(json!({"matches": count, "truncated": search.limit.is_some()})))
    }
}

/// Matches collected so far, and the limits that end the search.
struct Search {
    lines: Vec<String>,
    bytes: usize,
    max_matches: usize,
    max_bytes: usize,
    /// The notice saying which limit stopped the search.
    limit: Option<String>,
}

impl Search {
    fn new(limits: &ToolLimits) -> Self {
        Search {
            lines: Vec::new(),
            bytes: 0,
            max_matches: limits.grep_max_matches,
            max_bytes: limits.max_output_bytes,
            limit: None,
        }
    }

    fn is_done(&self) -> bool {
        self.limit.is_some()
    }

    /// Searches one file, unless it looks binary.
    fn file(&mut self, file: File, shown: &str, regex: &Regex) -> std::io::Result<()> {
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        if looks_binary(reader.fill_buf()?) {
            return Ok(());
        }
        let mut line = Vec::new();
        let mut line_no = 0;
        while !self.is_done() {
            if !read_line_capped(&mut reader, &mut line, MAX_LINE_BYTES)? {
                break;
            }
            line_no += 1;
            let content = line.strip_suffix(b"\r").unwrap_or(&line);
            if regex.is_match(content) {
                self.add(format!("{shown}:{line_no}: {}", cut(&String::from_utf8_lossy(content))));
            }
        }
        Ok(())
    }

    fn add(&mut self, line: String) {
        if self.lines.len() == self.max_matches {
            self.limit = Some(format!(
                "[Stopped at {} matches. Narrow the pattern, path or glob to see more.]",
                self.max_matches
            ));
        } else if self.bytes + line.len() + 1 > self.max_bytes {
            self.limit = Some(format!(
                "[Stopped at {} KiB of output after {} matches. Narrow the pattern, path or glob \
                 to see more.]",
                self.max_bytes / 1024,
                self.lines.len()
            ));
        } else {
            self.bytes += line.len() + 1;
            self.lines.push(line);
        }
    }
}

/// Reads the next line into `line` without its `\n`, keeping at most `max` bytes and consuming
/// the rest of a longer line unkept. Returns `false` at the end of the input.
fn read_line_capped(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    line.clear();
    let mut read_any = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            return Ok(read_any);
        }
        read_any = true;
        let newline = buf.iter().position(|&b| b == b'\n');
        let content = newline.map_or(buf, |at| &buf[..at]);
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&content[..content.len().min(room)]);
        let used = newline.map_or(buf.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(true);
        }
    }
}

/// The line, cut at [`MAX_LINE_CHARS`] characters with a marker.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{} [… line cut]", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tool::test_context;

    fn tree(dir: &Path) {
        let files: [(&str, &[u8]); 6] = [
            ("src/lib.rs", b"fn main() {\n    let needle = 1;\n}\n"),
            ("src/notes.md", b"a needle in a note\r\n"),
            (".env", b"NEEDLE_TOO=needle\n"),
            ("build/out.rs", b"needle ignored\n"),
            ("image.bin", b"needle\0binary"),
            (".gitignore", b"build/\n"),
        ];
        for (file, content) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    async fn grep(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        GrepTool.execute(args, test_context(dir)).await
    }

    #[tokio::test]
    async fn grep_finds_lines_respecting_gitignore_and_skipping_binaries() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = grep(dir.path(), json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text(
                ".env:1: NEEDLE_TOO=needle\nsrc/lib.rs:2:     let needle = 1;\nsrc/notes.md:1: a \
                 needle in a note"
            )
            .with_details(json!({"matches": 3, "truncated": false}))
        );
    }

    #[tokio::test]
    async fn grep_glob_filters_by_relative_path() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = grep(dir.path(), json!({"pattern": "needle", "glob": "*.rs"})).await.unwrap();
        assert_eq!(out.content, "src/lib.rs:2:     let needle = 1;");
    }

    #[tokio::test]
    async fn grep_searches_a_single_file() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = grep(dir.path(), json!({"pattern": "(?i)NEEDLE", "path": "src/notes.md"}))
            .await
            .unwrap();
        assert_eq!(out.content, "src/notes.md:1: a needle in a note");
    }

    #[tokio::test]
    async fn grep_stops_at_the_match_cap_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x\nx\nx\n").unwrap();
        let mut ctx = test_context(dir.path());
        ctx.limits = Arc::new(ToolLimits { grep_max_matches: 2, ..ToolLimits::default() });
        let out = GrepTool.execute(json!({"pattern": "x"}), ctx).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text(
                "a.txt:1: x\na.txt:2: x\n\n[Stopped at 2 matches. Narrow the pattern, path or \
                 glob to see more.]"
            )
            .with_details(json!({"matches": 2, "truncated": true}))
        );
    }

    #[tokio::test]
    async fn grep_stops_at_the_byte_cap_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(600);
        std::fs::write(dir.path().join("a.txt"), format!("{long}\n{long}\n{long}\n")).unwrap();
        let mut ctx = test_context(dir.path());
        // Each shown line takes 525 bytes: two fit, the third does not.
        ctx.limits = Arc::new(ToolLimits { max_output_bytes: 1100, ..ToolLimits::default() });
        let out = GrepTool.execute(json!({"pattern": "x"}), ctx).await.unwrap();
        let shown = |n: usize| format!("a.txt:{n}: {} [… line cut]", "x".repeat(500));
        assert_eq!(
            out,
            ToolOutput::text(format!(
                "{}\n{}\n\n[Stopped at 1 KiB of output after 2 matches. Narrow the pattern, \
                 path or glob to see more.]",
                shown(1),
                shown(2)
            ))
            .with_details(json!({"matches": 2, "truncated": true}))
        );
    }

    #[tokio::test]
    async fn grep_huge_single_line_is_matched_on_its_kept_prefix_only() {
        let dir = tempfile::tempdir().unwrap();
        let huge = format!("start needle {} tailmark\n", "y".repeat(1024 * 1024));
        std::fs::write(dir.path().join("a.txt"), format!("{huge}needle again, tailmark\n"))
            .unwrap();
        let out = grep(dir.path(), json!({"pattern": "needle"})).await.unwrap();
        let shown = format!("start needle {}", "y".repeat(487));
        assert_eq!(
            out,
            ToolOutput::text(format!(
                "a.txt:1: {shown} [… line cut]\na.txt:2: needle again, tailmark"
            ))
            .with_details(json!({"matches": 2, "truncated": false}))
        );
        // Past the first 64 KiB, the rest of the line is skipped unsearched.
        let out = grep(dir.path(), json!({"pattern": "tailmark"})).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text("a.txt:2: needle again, tailmark")
                .with_details(json!({"matches": 1, "truncated": false}))
        );
    }

    #[test]
    fn read_line_capped_keeps_the_start_of_long_lines_and_goes_on() {
        let mut reader = BufReader::with_capacity(4, &b"abcdefghij\nxy\r\n\nlast"[..]);
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while read_line_capped(&mut reader, &mut line, 6).unwrap() {
            lines.push(String::from_utf8(line.clone()).unwrap());
        }
        assert_eq!(lines, vec!["abcdef", "xy\r", "", "last"]);
    }

    #[tokio::test]
    async fn grep_without_matches_says_so() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = grep(dir.path(), json!({"pattern": "haystack"})).await.unwrap();
        assert_eq!(out.content, "no matches");
    }

    #[tokio::test]
    async fn grep_invalid_regex_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = grep(dir.path(), json!({"pattern": "a("})).await.unwrap_err();
        assert!(err.0.starts_with("invalid regex: "), "{err}");
    }

    #[tokio::test]
    async fn grep_missing_path_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = grep(dir.path(), json!({"pattern": "x", "path": "nope"})).await;
        assert_eq!(out, Err(ToolError("path not found: nope".to_string())));
    }
}
