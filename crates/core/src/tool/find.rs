//! The `find` tool: paths under a folder that match a glob, honouring `.gitignore`.
//!
//! Also owns how the file tools walk a tree and match globs against it, which `grep` shares: hidden
//! files are included, `.git` is skipped, ignore files apply even outside a git repository, and
//! the user's global git configuration is not consulted (the core reads no host settings).

use std::io::ErrorKind;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{Walk, WalkBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, parse_args};
use crate::config::ToolLimits;
use crate::provider::ToolSpec;

/// Finds paths by glob: `find {pattern, path?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FindTool;

#[derive(Deserialize)]
struct FindArgs {
    pattern: String,
    path: Option<String>,
}

/// A glob matched against paths relative to a search root. A pattern without `/` matches the
/// file name at any depth (`*.rs`); one with `/` matches the whole relative path, where `*` stays
/// within one folder and `**` spans any number.
pub(crate) struct PathGlob {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    pub(crate) fn new(pattern: &str) -> Result<Self, ToolError> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|err| ToolError(format!("invalid glob: {err}")))?;
        Ok(PathGlob { matcher: glob.compile_matcher(), name_only: !pattern.contains('/') })
    }

    pub(crate) fn is_match(&self, relative: &Path) -> bool {
        if self.name_only {
            relative.file_name().is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

/// Walks `root` in sorted order with the rules in the module docs.
pub(crate) fn walk(root: &Path) -> Walk {
    WalkBuilder::new(root)
        .hidden(false)
        .git_global(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

#[async_trait::async_trait]
impl Tool for FindTool {
    fn spec(&self) -> ToolSpec {
        let limits = ToolLimits::default();
        ToolSpec {
            name: "find".to_string(),
            description: format!(
                "Find files and folders by glob under a folder (default: the working folder). A \
                 pattern without / matches names at any depth (*.rs); with / it matches the path \
                 relative to the folder (src/**/*.rs). Respects .gitignore, includes dotfiles, \
                 skips .git. Folders end with /. At most {} results or {} KiB; narrow the \
                 pattern or path when the notice says the limit was hit.",
                limits.find_max_results,
                limits.max_output_bytes / 1024
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob: *.rs, src/**/mod.rs"},
                    "path": {"type": "string", "description": "Folder to search (default .)"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: FindArgs = parse_args("find", args)?;
        let glob = PathGlob::new(&args.pattern)?;
        let root = ctx.resolve(args.path.as_deref().unwrap_or("."));
        let shown = ctx.display_path(&root);
        match tokio::fs::metadata(&root).await {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(ToolError(format!("{shown} is not a folder"))),
            Err(err) if err.kind() == ErrorKind::NotFound => {
                return Err(ToolError(format!("folder not found: {shown}")));
            }
            Err(err) => return Err(ToolError(format!("could not search {shown}: {err}"))),
        }

        let found = blocking("find", move || {
            let limits = &ctx.limits;
            let mut found = Found::default();
            for entry in walk(&root).filter_map(Result::ok) {
                if ctx.cancel.is_cancelled() {
                    return Err(ToolError("find aborted".to_string()));
                }
                let Ok(relative) = entry.path().strip_prefix(&root) else { continue };
                if entry.depth() == 0 || !glob.is_match(relative) {
                    continue;
                }
                let mut line = ctx.display_path(entry.path());
                if entry.file_type().is_some_and(|t| t.is_dir()) {
                    line.push('/');
                }
                if found.paths.len() == limits.find_max_results {
                    found.limit = Some(format!(
                        "[Showing the first {} results. Narrow the pattern or path to see more.]",
                        limits.find_max_results
                    ));
                    break;
                }
                if found.bytes + line.len() + 1 > limits.max_output_bytes {
                    found.limit = Some(format!(
                        "[Stopped at {} KiB of output after {} results. Narrow the pattern or \
                         path to see more.]",
                        limits.max_output_bytes / 1024,
                        found.paths.len()
                    ));
                    break;
                }
                found.bytes += line.len() + 1;
                found.paths.push(line);
            }
            Ok(found)
        })
        .await?;

        let count = found.paths.len();
        let mut text = if count == 0 {
            format!("no paths match {}", args.pattern)
        } else {
            found.paths.join("\n")
        };
        if let Some(notice) = &found.limit {
            text.push_str("\n\n");
            text.push_str(notice);
        }
        Ok(ToolOutput::text(text)
            .with_details(json!({"results": count, "truncated": found.limit.is_some()})))
    }
}

/// Results collected so far.
#[derive(Default)]
struct Found {
    paths: Vec<String>,
    bytes: usize,
    /// The notice saying which limit stopped the search.
    limit: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tool::test_context;

    fn tree(dir: &Path) {
        for file in [
            "src/lib.rs",
            "src/tool/mod.rs",
            "src/tool/read.rs",
            "README.md",
            ".hidden.rs",
            "target/debug/build.rs",
            ".git/config.rs",
        ] {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    }

    async fn find(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        FindTool.execute(args, test_context(dir)).await
    }

    #[tokio::test]
    async fn find_name_pattern_matches_at_any_depth_and_respects_gitignore() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = find(dir.path(), json!({"pattern": "*.rs"})).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text(".hidden.rs\nsrc/lib.rs\nsrc/tool/mod.rs\nsrc/tool/read.rs")
                .with_details(json!({"results": 4, "truncated": false}))
        );
    }

    #[tokio::test]
    async fn find_path_pattern_matches_relative_to_the_search_folder() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = find(dir.path(), json!({"pattern": "tool/*.rs", "path": "src"})).await.unwrap();
        assert_eq!(out.content, "src/tool/mod.rs\nsrc/tool/read.rs");
    }

    #[tokio::test]
    async fn find_marks_folders_with_a_slash() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = find(dir.path(), json!({"pattern": "to*"})).await.unwrap();
        assert_eq!(out.content, "src/tool/");
    }

    #[tokio::test]
    async fn find_stops_at_the_result_cap_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let mut ctx = test_context(dir.path());
        ctx.limits = Arc::new(ToolLimits { find_max_results: 2, ..ToolLimits::default() });
        let out = FindTool.execute(json!({"pattern": "*.rs"}), ctx).await.unwrap();
        assert_eq!(
            out.content,
            ".hidden.rs\nsrc/lib.rs\n\n[Showing the first 2 results. Narrow the pattern or path \
             to see more.]"
        );
    }

    #[tokio::test]
    async fn find_without_matches_says_so() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = find(dir.path(), json!({"pattern": "*.py"})).await.unwrap();
        assert_eq!(out.content, "no paths match *.py");
    }

    #[tokio::test]
    async fn find_invalid_glob_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = find(dir.path(), json!({"pattern": "a[b"})).await.unwrap_err();
        assert!(err.0.starts_with("invalid glob: "), "{err}");
    }

    #[tokio::test]
    async fn find_missing_folder_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let out = find(dir.path(), json!({"pattern": "*", "path": "nope"})).await;
        assert_eq!(out, Err(ToolError("folder not found: nope".to_string())));
    }
}
