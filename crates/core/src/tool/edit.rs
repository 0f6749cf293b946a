//! The `edit` tool: exact text replacement inside a file, keeping its line endings and BOM.
//!
//! The model writes `\n`; in a file whose lines end with `\r\n` both texts are converted before
//! matching, so the file keeps its endings and nothing outside the replaced span changes. The
//! result is a short summary for the model plus a unified-style diff in the details.

use std::borrow::Cow;
use std::io::ErrorKind;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, parse_args, save};
use crate::atomic::save_in_place;
use crate::provider::ToolSpec;

/// The UTF-8 byte order mark, kept in front of the file when it has one.
const BOM: &str = "\u{feff}";

/// Replaces exact text in a file: `edit {path, old_text, new_text, replace_all?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

/// Why a replacement could not be planned.
#[derive(Debug, PartialEq)]
enum Mismatch {
    NotFound,
    NotUnique { count: usize },
}

/// A planned replacement.
#[derive(Debug, PartialEq)]
struct Edit {
    body: String,
    replacements: usize,
    first_changed_line: usize,
    diff: String,
}

#[async_trait::async_trait]
impl Tool for EditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit".to_string(),
            description: "Replace exact text in a file. old_text must match the file exactly \
                          (whitespace and indentation included) and only once, unless replace_all \
                          is set; add surrounding lines to make it unique. Line endings and a BOM \
                          are kept. Paths are relative to the working folder."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit"},
                    "old_text": {"type": "string", "description": "Exact text to find"},
                    "new_text": {"type": "string", "description": "Text to put in its place"},
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence, not exactly one (default false)"
                    }
                },
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: EditArgs = parse_args("edit", args)?;
        if args.old_text.is_empty() {
            return Err(ToolError("old_text is empty; give the exact text to replace".to_string()));
        }
        if args.old_text == args.new_text {
            return Err(ToolError(
                "old_text and new_text are the same; there is nothing to change".to_string(),
            ));
        }
        let path = crate::sandbox::normalize_path(&ctx.resolve(&args.path));
        let shown = ctx.display_path(&path);
        // In the workspace, the file is resolved once without following a link a caller could
        // plant, and the save goes to the very file that was read (see `save`).
        let beneath = save::in_workspace(&ctx.cwd, &path);
        if beneath.is_none() {
            super::refuse_link(&path, &shown)?;
        }
        let (resolved, bytes) = {
            let (root, path, shown) = (ctx.cwd.clone(), path.clone(), shown.clone());
            blocking("edit", move || match beneath {
                Some(relative) => {
                    let resolved = save::resolve(&root, &relative, false, &shown)
                        .map_err(|err| err.for_tool("read", &shown))?;
                    let bytes = save::read(&resolved, save::EDIT_MAX_BYTES, &shown)?;
                    Ok((Some(resolved), bytes))
                }
                None => {
                    let file = super::open_file(&path).map_err(|err| match err.kind() {
                        ErrorKind::NotFound => ToolError(format!("file not found: {shown}")),
                        ErrorKind::IsADirectory => ToolError(format!("{shown} is a folder")),
                        _ => ToolError(format!("could not read {shown}: {err}")),
                    })?;
                    if file.metadata().is_ok_and(|meta| meta.is_dir()) {
                        return Err(ToolError(format!("{shown} is a folder")));
                    }
                    Ok((None, save::read_capped(file, save::EDIT_MAX_BYTES, &shown)?))
                }
            })
            .await?
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            ToolError(format!("{shown} is not UTF-8 text; edit cannot change it safely"))
        })?;
        let (bom, body) = match text.strip_prefix(BOM) {
            Some(rest) => (BOM, rest),
            None => ("", text.as_str()),
        };
        let edit = plan_edit(body, &args.old_text, &args.new_text, args.replace_all).map_err(
            |mismatch| match mismatch {
                Mismatch::NotFound => ToolError(format!(
                    "could not find old_text in {shown}; it must match exactly, including \
                     whitespace and indentation (read the file to check)"
                )),
                Mismatch::NotUnique { count } => ToolError(format!(
                    "found {count} occurrences of old_text in {shown}; add surrounding lines to \
                     make it unique, or set replace_all to replace them all"
                )),
            },
        )?;

        let content = format!("{bom}{}", edit.body);
        {
            let shown = shown.clone();
            blocking("edit", move || {
                let saved = match &resolved {
                    Some(resolved) => save::save(resolved, content.as_bytes()),
                    None => save_in_place(&path, content.as_bytes()),
                };
                saved.map_err(|err| ToolError(format!("could not write {shown}: {err}")))
            })
            .await?;
        }
        let noun = if edit.replacements == 1 { "replacement" } else { "replacements" };
        Ok(ToolOutput::text(format!(
            "edited {shown}: {} {noun}, first changed line {}",
            edit.replacements, edit.first_changed_line
        ))
        .with_details(json!({
            "path": shown,
            "replacements": edit.replacements,
            "first_changed_line": edit.first_changed_line,
            "diff": format!("--- {shown}\n+++ {shown}\n{}", edit.diff),
        })))
    }
}

/// Plans the replacement of `old_text` by `new_text` in `body` (a file without its BOM).
fn plan_edit(
    body: &str,
    old_text: &str,
    new_text: &str,
    replace_all: bool,
) -> Result<Edit, Mismatch> {
    let (mut old, mut new) = (Cow::Borrowed(old_text), Cow::Borrowed(new_text));
    if uses_crlf(body) {
        old = Cow::Owned(to_crlf(old_text));
        new = Cow::Owned(to_crlf(new_text));
        // A file with mixed endings may hold the text exactly as the model wrote it.
        if !body.contains(old.as_ref()) {
            (old, new) = (Cow::Borrowed(old_text), Cow::Borrowed(new_text));
        }
    }
    let positions: Vec<usize> = body.match_indices(old.as_ref()).map(|(at, _)| at).collect();
    match positions.len() {
        0 => return Err(Mismatch::NotFound),
        1 => {}
        count if !replace_all => return Err(Mismatch::NotUnique { count }),
        _ => {}
    }
    let (first_changed_line, diff) = diff_hunks(body, &positions, old.len(), &new);
    Ok(Edit {
        body: body.replace(old.as_ref(), &new),
        replacements: positions.len(),
        first_changed_line,
        diff,
    })
}

/// Whether the file's first line ends with `\r\n`.
fn uses_crlf(body: &str) -> bool {
    body.find('\n').is_some_and(|at| body[..at].ends_with('\r'))
}

fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Unified-style hunks (changed lines only, no context) for replacing each match at `positions`
/// (of `old_len` bytes) with `new`, and the first changed line in the new file.
fn diff_hunks(body: &str, positions: &[usize], old_len: usize, new: &str) -> (usize, String) {
    let mut out = String::new();
    let mut first_changed = None;
    // New line numbers run ahead of old ones by this much after the hunks so far.
    let mut delta: isize = 0;
    let (mut counted_to, mut line_at) = (0, 1);
    let mut i = 0;
    while let Some(&start) = positions.get(i) {
        let line_start = body[..start].rfind('\n').map_or(0, |at| at + 1);
        let mut line_end = end_of_line(body, start + old_len);
        let mut next = i + 1;
        // Matches that begin on lines this hunk already covers join it.
        while let Some(&more) = positions.get(next).filter(|&&more| more <= line_end) {
            line_end = end_of_line(body, more + old_len);
            next += 1;
        }
        let mut replaced = String::new();
        let mut cursor = line_start;
        for &at in &positions[i..next] {
            replaced.push_str(&body[cursor..at]);
            replaced.push_str(new);
            cursor = at + old_len;
        }
        replaced.push_str(&body[cursor..line_end]);

        line_at += body[counted_to..line_start].matches('\n').count();
        counted_to = line_start;
        let old_lines: Vec<&str> = body[line_start..line_end].split('\n').map(trim_cr).collect();
        let new_lines: Vec<&str> = replaced.split('\n').map(trim_cr).collect();
        let same_start = old_lines.iter().zip(&new_lines).take_while(|(a, b)| a == b).count();
        let same_end = old_lines[same_start..]
            .iter()
            .rev()
            .zip(new_lines[same_start..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let removed = &old_lines[same_start..old_lines.len() - same_end];
        let added = &new_lines[same_start..new_lines.len() - same_end];
        let old_start = line_at + same_start;
        let new_start = old_start.saturating_add_signed(delta);
        first_changed.get_or_insert(new_start);
        if !removed.is_empty() || !added.is_empty() {
            out.push_str(&format!(
                "@@ -{old_start},{} +{new_start},{} @@\n",
                removed.len(),
                added.len()
            ));
            removed.iter().for_each(|line| out.push_str(&format!("-{line}\n")));
            added.iter().for_each(|line| out.push_str(&format!("+{line}\n")));
        }
        delta += added.len() as isize - removed.len() as isize;
        i = next;
    }
    (first_changed.unwrap_or(1), out)
}

/// The index of the `\n` ending the line that holds `at`, or the end of the text.
fn end_of_line(body: &str, at: usize) -> usize {
    body[at..].find('\n').map_or(body.len(), |offset| at + offset)
}

fn trim_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::tool::test_context;

    async fn edit_file(
        dir: &Path,
        content: &str,
        args: Value,
    ) -> (Result<ToolOutput, ToolError>, String) {
        let path = dir.join("f.txt");
        std::fs::write(&path, content).unwrap();
        let mut args = args;
        args["path"] = json!("f.txt");
        let out = EditTool.execute(args, test_context(dir)).await;
        (out, std::fs::read_to_string(&path).unwrap())
    }

    #[tokio::test]
    async fn edit_unique_match_is_replaced_with_summary_and_diff() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"old_text": "b", "new_text": "B"});
        let (out, after) = edit_file(dir.path(), "a\nb\nc\n", args).await;
        assert_eq!(
            out.unwrap(),
            ToolOutput::text("edited f.txt: 1 replacement, first changed line 2").with_details(
                json!({
                    "path": "f.txt",
                    "replacements": 1,
                    "first_changed_line": 2,
                    "diff": "--- f.txt\n+++ f.txt\n@@ -2,1 +2,1 @@\n-b\n+B\n"
                })
            )
        );
        assert_eq!(after, "a\nB\nc\n");
    }

    #[tokio::test]
    async fn edit_ambiguous_match_without_replace_all_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"old_text": "x", "new_text": "y"});
        let (out, after) = edit_file(dir.path(), "x\nx\nx\n", args).await;
        assert_eq!(
            out,
            Err(ToolError(
                "found 3 occurrences of old_text in f.txt; add surrounding lines to make it \
                 unique, or set replace_all to replace them all"
                    .to_string()
            ))
        );
        assert_eq!(after, "x\nx\nx\n");
    }

    #[tokio::test]
    async fn edit_replace_all_replaces_every_occurrence_and_tracks_line_shifts() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"old_text": "x", "new_text": "y\nz", "replace_all": true});
        let (out, after) = edit_file(dir.path(), "x x\na\nx\n", args).await;
        let out = out.unwrap();
        assert_eq!(out.content, "edited f.txt: 3 replacements, first changed line 1");
        assert_eq!(
            out.details["diff"],
            "--- f.txt\n+++ f.txt\n@@ -1,1 +1,3 @@\n-x x\n+y\n+z y\n+z\n@@ -3,1 +5,2 @@\n-x\n+y\n+z\n"
        );
        assert_eq!(after, "y\nz y\nz\na\ny\nz\n");
    }

    #[tokio::test]
    async fn edit_missing_text_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"old_text": "nope", "new_text": "y"});
        let (out, _) = edit_file(dir.path(), "a\n", args).await;
        assert_eq!(
            out,
            Err(ToolError(
                "could not find old_text in f.txt; it must match exactly, including whitespace \
                 and indentation (read the file to check)"
                    .to_string()
            ))
        );
    }

    #[tokio::test]
    async fn edit_empty_or_unchanged_text_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, _) =
            edit_file(dir.path(), "a\n", json!({"old_text": "", "new_text": "y"})).await;
        assert_eq!(
            empty,
            Err(ToolError("old_text is empty; give the exact text to replace".to_string()))
        );
        let (same, _) =
            edit_file(dir.path(), "a\n", json!({"old_text": "a", "new_text": "a"})).await;
        assert_eq!(
            same,
            Err(ToolError(
                "old_text and new_text are the same; there is nothing to change".to_string()
            ))
        );
    }

    #[tokio::test]
    async fn edit_crlf_file_matches_lf_text_and_keeps_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"old_text": "a\nb", "new_text": "x\ny\nz"});
        let (out, after) = edit_file(dir.path(), "a\r\nb\r\nc\r\n", args).await;
        assert_eq!(
            out.unwrap().details["diff"],
            "--- f.txt\n+++ f.txt\n@@ -1,2 +1,3 @@\n-a\n-b\n+x\n+y\n+z\n"
        );
        assert_eq!(after, "x\r\ny\r\nz\r\nc\r\n");
    }

    #[tokio::test]
    async fn edit_keeps_a_bom() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"old_text": "a", "new_text": "b"});
        let (out, after) = edit_file(dir.path(), "\u{feff}a\n", args).await;
        assert_eq!(out.unwrap().content, "edited f.txt: 1 replacement, first changed line 1");
        assert_eq!(after, "\u{feff}b\n");
    }

    #[tokio::test]
    async fn edit_missing_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"path": "nope.txt", "old_text": "a", "new_text": "b"});
        let out = EditTool.execute(args, test_context(dir.path())).await;
        assert_eq!(out, Err(ToolError("file not found: nope.txt".to_string())));
    }

    #[test]
    fn plan_edit_deletion_reports_removed_lines_only() {
        let edit = plan_edit("a\nb\nc\n", "b\n", "", false).unwrap();
        assert_eq!(
            edit,
            Edit {
                body: "a\nc\n".to_string(),
                replacements: 1,
                first_changed_line: 2,
                diff: "@@ -2,1 +2,0 @@\n-b\n".to_string()
            }
        );
    }

    #[tokio::test]
    async fn edit_refuses_a_fifo_and_a_planted_link_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.path().join("pipe"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let args = json!({"path": "pipe", "old_text": "a", "new_text": "b"});
        let err = EditTool.execute(args, test_context(dir.path())).await.unwrap_err();
        assert!(err.0.contains("not a regular file"), "{err:?}");

        std::fs::write(dir.path().join("MEMORY.md"), "likes tea").unwrap();
        std::os::unix::fs::symlink("MEMORY.md", dir.path().join("notes.md")).unwrap();
        let args =
            json!({"path": "notes.md", "old_text": "tea", "new_text": "whatever mallory says"});
        let err = EditTool.execute(args, test_context(dir.path())).await.unwrap_err();
        assert!(err.0.contains("is a symbolic link to MEMORY.md"), "{err:?}");
        assert_eq!(std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap(), "likes tea");
    }
}
