//! The `ls` tool: the entries of one folder, sorted, folders marked with a trailing `/`.

use std::io::ErrorKind;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use crate::config::ToolLimits;
use crate::provider::ToolSpec;

/// Lists a folder: `ls {path?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LsTool;

#[derive(Deserialize)]
struct LsArgs {
    path: Option<String>,
}

#[async_trait::async_trait]
impl Tool for LsTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ls".to_string(),
            description: format!(
                "List a folder (default: the working folder). Entries are sorted \
                 case-insensitively, folders end with /, dotfiles are included. At most {} \
                 entries are shown; use find or bash for bigger folders.",
                ToolLimits::default().ls_max_entries
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Folder to list (default .)"}
                },
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: LsArgs = parse_args("ls", args)?;
        let path = ctx.resolve(args.path.as_deref().unwrap_or("."));
        let shown = ctx.display_path(&path);
        let mut dir = tokio::fs::read_dir(&path).await.map_err(|err| match err.kind() {
            ErrorKind::NotFound => ToolError(format!("folder not found: {shown}")),
            ErrorKind::NotADirectory => ToolError(format!("{shown} is a file; use read to see it")),
            _ => ToolError(format!("could not list {shown}: {err}")),
        })?;
        let mut names = Vec::new();
        while let Some(entry) = dir.next_entry().await? {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            // Follows symlinks, so a link to a folder is shown as one.
            if tokio::fs::metadata(entry.path()).await.is_ok_and(|meta| meta.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort_by_cached_key(|name| (name.to_lowercase(), name.clone()));

        let total = names.len();
        let max = ctx.limits.ls_max_entries;
        let mut text = if total == 0 {
            "(empty folder)".to_string()
        } else {
            names[..total.min(max)].join("\n")
        };
        if total > max {
            text.push_str(&format!(
                "\n\n[Showing {max} of {total} entries. Use find with a pattern or bash to see \
                 the rest.]"
            ));
        }
        Ok(ToolOutput::text(text).with_details(json!({
            "path": shown,
            "entries": total,
            "truncated": total > max
        })))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tool::test_context;

    #[tokio::test]
    async fn ls_sorts_case_insensitively_marks_folders_and_shows_dotfiles() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["b.txt", "A.txt", ".env", "c.md"] {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("Docs")).unwrap();
        let out = LsTool.execute(json!({}), test_context(dir.path())).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text(".env\nA.txt\nb.txt\nc.md\nDocs/").with_details(json!({
                "path": ".",
                "entries": 5,
                "truncated": false
            }))
        );
    }

    #[tokio::test]
    async fn ls_stops_at_the_entry_cap_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        let mut ctx = test_context(dir.path());
        ctx.limits = Arc::new(ToolLimits { ls_max_entries: 2, ..ToolLimits::default() });
        let out = LsTool.execute(json!({"path": "."}), ctx).await.unwrap();
        assert_eq!(
            out.content,
            "f0\nf1\n\n[Showing 2 of 5 entries. Use find with a pattern or bash to see the rest.]"
        );
    }

    #[tokio::test]
    async fn ls_empty_folder_says_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let out = LsTool.execute(json!({"path": "sub"}), test_context(dir.path())).await.unwrap();
        assert_eq!(out.content, "(empty folder)");
    }

    #[tokio::test]
    async fn ls_missing_folder_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let out = LsTool.execute(json!({"path": "nope"}), test_context(dir.path())).await;
        assert_eq!(out, Err(ToolError("folder not found: nope".to_string())));
    }

    #[tokio::test]
    async fn ls_on_a_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "").unwrap();
        let out = LsTool.execute(json!({"path": "a.txt"}), test_context(dir.path())).await;
        assert_eq!(out, Err(ToolError("a.txt is a file; use read to see it".to_string())));
    }
}
