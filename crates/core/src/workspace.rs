//! The workspace's files → the system prompt, rebuilt at the start of every run so an edit of
//! PERSONA.md, AGENTS.md / CLAUDE.md or MEMORY.md applies to the next run without a restart.
//!
//! Only the session's own folder is read; we never walk above it (a workspace is not a repo, and
//! the host's files must not leak in).

use std::fmt::Write as _;
use std::path::Path;

use crate::config::ContextLimits;
use crate::provider::ToolSpec;

/// The instructions every assistant starts from.
pub const BASE_INSTRUCTIONS: &str = "You are a personal assistant working for your owner. \
You run on Volcanic, with tools to work with files and run commands in your workspace folder. \
Be helpful, direct and honest. Act with the tools when that helps; say what you did. \
Keep answers short unless asked for detail.";

/// A file of the workspace that goes into the prompt.
struct Section {
    title: &'static str,
    file: &'static str,
    preface: &'static str,
}

/// Builds the system prompt for a run in `cwd`.
pub fn system_prompt(
    cwd: &Path,
    limits: &ContextLimits,
    tools: &[ToolSpec],
    fragments: &[String],
    now: chrono::DateTime<chrono::Local>,
) -> String {
    // Sized for the usual prompt, so it is built without regrowing (the files come on top).
    let mut out = String::with_capacity(
        BASE_INSTRUCTIONS.len()
            + 512
            + tools.len() * 128
            + fragments.iter().map(String::len).sum::<usize>(),
    );
    out.push_str(BASE_INSTRUCTIONS);

    if !tools.is_empty() {
        out.push_str("\n\n# Tools\n");
        for tool in tools {
            let first_line = tool.description.lines().next().unwrap_or("");
            let _ = writeln!(out, "- {}: {}", tool.name, first_line);
        }
        out.push_str(
            "Paths are relative to the workspace folder. Tool outputs are capped; when one is cut, \
the notice says how to see the rest.",
        );
    }

    // An empty AGENTS.md says nothing, so CLAUDE.md still counts: caller sandboxes leave empty
    // placeholders of these files behind (docs/security.md).
    let agents = std::fs::metadata(cwd.join("AGENTS.md"));
    let has_agents = agents.is_ok_and(|meta| meta.is_file() && meta.len() > 0);
    let project = if has_agents { "AGENTS.md" } else { "CLAUDE.md" };
    let sections = [
        Section { title: "Persona", file: "PERSONA.md", preface: "Who you are (from PERSONA.md):" },
        Section { title: "Project context", file: project, preface: "" },
        Section {
            title: "Memory",
            file: "MEMORY.md",
            preface: "Your long-term memory (MEMORY.md). Update it with the edit tool when you \
learn something worth keeping; keep it short.",
        },
    ];
    let mut budget = limits.max_total_chars;
    for section in sections {
        let path = cwd.join(section.file);
        let Some(text) = read_capped(&path, limits.max_file_chars) else { continue };
        let cap = limits.max_file_chars.min(budget);
        let (text, cut) = cut_chars(text.trim(), cap);
        if cut {
            tracing::warn!(file = %path.display(), cap, "workspace file truncated in the system prompt");
        }
        budget = budget.saturating_sub(text.chars().count());
        out.reserve(text.len() + section.preface.len() + 64);
        let _ = write!(out, "\n\n# {} ({})\n", section.title, section.file);
        if !section.preface.is_empty() {
            out.push_str(section.preface);
            out.push('\n');
        }
        out.push_str(text);
        if cut {
            let _ = write!(
                out,
                "\n[… {} truncated at {cap} characters; read the file for the rest]",
                section.file
            );
        }
    }

    for fragment in fragments {
        out.push_str("\n\n");
        out.push_str(fragment.trim());
    }

    let _ = write!(
        out,
        "\n\n# Environment\nCurrent date and time: {}\nWorkspace folder: {}",
        now.format("%A %Y-%m-%d %H:%M %Z (UTC%:z)"),
        cwd.display()
    );
    out
}

/// The first non-empty line of PERSONA.md, without Markdown heading marks: a one-sentence
/// self-description for cards and listings.
pub fn persona_summary(workspace: &Path) -> Option<String> {
    let text = read_capped(&workspace.join("PERSONA.md"), 4096)?;
    text.lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .map(str::to_string)
}

/// Reads a regular file (symlinks followed), at most enough bytes for `max_chars` characters plus
/// a marker's worth, so a FIFO, a device or a huge file cannot stall or exhaust the run (see
/// [`crate::safe_file`]).
fn read_capped(path: &Path, max_chars: usize) -> Option<String> {
    let limit = u64::try_from(max_chars.saturating_add(1).saturating_mul(4)).unwrap_or(u64::MAX);
    let bytes = crate::safe_file::read_prefix_without_links(path, limit)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn cut_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((index, _)) => (&text[..index], true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(dir: &Path, limits: &ContextLimits) -> String {
        system_prompt(dir, limits, &[], &[], chrono::Local::now())
    }

    #[test]
    fn prompt_has_persona_project_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("PERSONA.md"), "I am Ada.").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Use metric units.").unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "ignored when AGENTS.md exists").unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "Owner likes tea.").unwrap();
        let p = prompt(dir.path(), &ContextLimits::default());
        assert!(p.contains("# Persona (PERSONA.md)"), "{p}");
        assert!(p.contains("I am Ada."));
        assert!(p.contains("# Project context (AGENTS.md)\nUse metric units."));
        assert!(!p.contains("ignored when"));
        assert!(p.contains("Owner likes tea."));
    }

    #[test]
    fn claude_md_is_the_fallback() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "from claude").unwrap();
        // An empty AGENTS.md (a caller sandbox's placeholder) does not hide CLAUDE.md.
        std::fs::write(dir.path().join("AGENTS.md"), "").unwrap();
        let p = prompt(dir.path(), &ContextLimits::default());
        assert!(p.contains("# Project context (CLAUDE.md)\nfrom claude"));
        assert!(!p.contains("# Persona"));
    }

    #[test]
    fn long_files_are_cut_with_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "é".repeat(100)).unwrap();
        let limits = ContextLimits { max_file_chars: 10, max_total_chars: 1000 };
        let p = prompt(dir.path(), &limits);
        assert!(
            p.contains(&format!("{}\n[… MEMORY.md truncated at 10 characters", "é".repeat(10)))
        );
    }

    #[test]
    fn special_files_are_skipped_and_big_files_read_in_part() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("MEMORY.md")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(dir.path().join("PERSONA.md"))
            .status()
            .unwrap();
        assert!(fifo.success());
        std::fs::write(dir.path().join("AGENTS.md"), "x".repeat(5_000_000)).unwrap();
        let limits = ContextLimits { max_file_chars: 100, max_total_chars: 1000 };
        let p = prompt(dir.path(), &limits);
        assert!(!p.contains("# Persona") && !p.contains("# Memory"), "{p}");
        assert!(p.contains("[… AGENTS.md truncated at 100 characters"));
    }

    #[test]
    fn persona_summary_is_the_first_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("PERSONA.md"), "\n# Ada, Eugene's assistant\nmore").unwrap();
        assert_eq!(persona_summary(dir.path()).as_deref(), Some("Ada, Eugene's assistant"));
    }
}
