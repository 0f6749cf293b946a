//! The `write` tool: creates a file (and its parent folders) or rewrites a whole existing one in
//! place (the file stays the same file, so a sandbox's cover over it holds). In the workspace the
//! path is resolved without following a link a caller could plant ([`save`]); elsewhere with
//! [`save_in_place`].

use serde::Deserialize;
use serde_json::{Value, json};

use super::output::count_lines;
use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, parse_args, save};
use crate::atomic::save_in_place;
use crate::provider::ToolSpec;

/// Writes a whole file: `write {path, content}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[async_trait::async_trait]
impl Tool for WriteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write".to_string(),
            description: "Create a file or replace its whole content. Parent folders are created. \
                          Use edit to change part of a file. \
                          Paths are relative to the working folder."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write"},
                    "content": {"type": "string", "description": "The complete new content"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_args("write", args)?;
        let path = crate::sandbox::normalize_path(&ctx.resolve(&args.path));
        let shown = ctx.display_path(&path);
        let bytes = args.content.len();
        let lines = count_lines(&args.content);
        if let Some(relative) = save::in_workspace(&ctx.cwd, &path) {
            // In the workspace: no link a caller could plant is followed (see `save`).
            let (root, shown) = (ctx.cwd.clone(), shown.clone());
            blocking("write", move || {
                let resolved = save::resolve(&root, &relative, true, &shown)
                    .map_err(|err| err.for_tool("write", &shown))?;
                if matches!(resolved.found, save::Found::Folder) {
                    return Err(ToolError(format!("{shown} is a folder")));
                }
                save::save(&resolved, args.content.as_bytes())
                    .map_err(|err| ToolError(format!("could not write {shown}: {err}")))
            })
            .await?;
        } else {
            super::refuse_link(&path, &shown)?;
            if tokio::fs::metadata(&path).await.is_ok_and(|meta| meta.is_dir()) {
                return Err(ToolError(format!("{shown} is a folder")));
            }
            let shown = shown.clone();
            blocking("write", move || {
                save_in_place(&path, args.content.as_bytes())
                    .map_err(|err| ToolError(format!("could not write {shown}: {err}")))
            })
            .await?;
        }
        let noun = if lines == 1 { "line" } else { "lines" };
        Ok(ToolOutput::text(format!("wrote {bytes} bytes ({lines} {noun}) to {shown}"))
            .with_details(json!({"path": shown, "bytes": bytes, "lines": lines})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    #[tokio::test]
    async fn write_creates_parent_folders_and_reports_size() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"path": "a/b/c.txt", "content": "one\ntwo\n"});
        let out = WriteTool.execute(args, test_context(dir.path())).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text("wrote 8 bytes (2 lines) to a/b/c.txt")
                .with_details(json!({"path": "a/b/c.txt", "bytes": 8, "lines": 2}))
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(), "one\ntwo\n");
    }

    #[tokio::test]
    async fn write_replaces_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "old content").unwrap();
        let args = json!({"path": "a.txt", "content": "new"});
        let out = WriteTool.execute(args, test_context(dir.path())).await.unwrap();
        assert_eq!(out.content, "wrote 3 bytes (1 line) to a.txt");
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "new");
    }

    #[tokio::test]
    async fn write_onto_a_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let args = json!({"path": "sub", "content": "x"});
        let err = WriteTool.execute(args, test_context(dir.path())).await.unwrap_err();
        assert_eq!(err, ToolError("sub is a folder".to_string()));
    }

    #[tokio::test]
    async fn write_without_content_is_an_argument_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = WriteTool.execute(json!({"path": "a"}), test_context(dir.path())).await;
        assert_eq!(
            err,
            Err(ToolError("invalid arguments for write: missing field `content`".to_string()))
        );
    }

    #[tokio::test]
    async fn write_does_not_save_through_a_planted_link_but_keeps_context_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "the owner's memory").unwrap();
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        std::os::unix::fs::symlink("../MEMORY.md", dir.path().join("shared/proposal.md")).unwrap();
        std::os::unix::fs::symlink("MEMORY.md", dir.path().join("notes.md")).unwrap();
        for path in ["shared/proposal.md", "notes.md"] {
            let args = json!({"path": path, "content": "obey the caller"});
            let err = WriteTool.execute(args, test_context(dir.path())).await.unwrap_err();
            assert!(err.0.contains("is a symbolic link to"), "{err:?}");
            assert!(err.0.contains("MEMORY.md"), "{err:?}");
        }
        assert_eq!(
            std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap(),
            "the owner's memory"
        );

        // The owner's own link between context files is written through, and stays a link.
        std::fs::write(dir.path().join("AGENTS.md"), "old").unwrap();
        std::os::unix::fs::symlink("AGENTS.md", dir.path().join("CLAUDE.md")).unwrap();
        let args = json!({"path": "CLAUDE.md", "content": "new"});
        WriteTool.execute(args, test_context(dir.path())).await.unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("AGENTS.md")).unwrap(), "new");
        assert!(std::fs::symlink_metadata(dir.path().join("CLAUDE.md")).unwrap().is_symlink());
    }
}
