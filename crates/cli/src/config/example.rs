//! `volcanic.toml.example` at the repository's root against the loader and the docs: every
//! setting in it (each a commented-out `# key = value` line) is one the loader knows, its example
//! value is one the loader and the settings' checks accept, and it is documented under its
//! environment name; every setting the docs' tables list is in it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;

fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(repo_file(name)).unwrap()
}

/// A commented-out setting line, `# key = value`: the key (quoted for a model id in a table).
fn setting(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("# ")?;
    let (key, _) = rest.split_once(" = ")?;
    let plain = !key.is_empty()
        && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let quoted = key.len() > 2 && key.starts_with('"') && key.ends_with('"');
    (plain || quoted).then_some(key)
}

/// The example with every setting uncommented.
fn uncommented(text: &str) -> String {
    let lines = text.lines().map(|line| match setting(line) {
        Some(_) => &line[2..],
        None => line,
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// `agent.sandbox`, `bwrap` → `Agent__Sandbox__Bwrap`, as docs/configuration.md names them.
fn env_name(section: &str, key: &str) -> String {
    let pascal = |part: &str| -> String {
        if part == "a2a" {
            return "A2A".into();
        }
        part.split('_')
            .map(|word| {
                let mut chars = word.chars();
                chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
            })
            .collect::<Option<String>>()
            .unwrap_or_default()
    };
    section.split('.').chain(std::iter::once(key)).map(pascal).collect::<Vec<_>>().join("__")
}

/// Each setting of the example as (dotted key, environment name). The entries of `[a2a.prices]`
/// are model ids, data rather than settings: the table itself is the setting `a2a.prices`.
fn settings_of(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut found = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            if section == "a2a.prices" {
                found.push(("a2a.prices".into(), "A2A__Prices".into()));
            }
            continue;
        }
        if section == "a2a.prices" {
            continue;
        }
        if let Some(key) = setting(line) {
            found.push((format!("{section}.{key}"), env_name(&section, key)));
        }
    }
    found
}

/// Whether `name` occurs in `text` as a whole name (not as the start of a longer one).
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let next = text[at + name.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// What the loader says of `text` as a config file: `Err` names a key it does not know.
fn loaded(text: &str) -> Result<Settings, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("volcanic.toml");
    std::fs::write(&file, text).unwrap();
    load(Some(&file), dir.path(), &[]).map_err(|e| e.to_string())
}

#[test]
fn a_misspelt_key_is_refused_by_the_loader_the_example_is_checked_with() {
    // The check of the example must be able to fail: the loader refuses keys it does not know.
    let section = loaded("[agnet]\nmax_turns = 3\n").err().unwrap_or_default();
    assert!(section.contains("agnet"), "{section}");
    let key = loaded("[agent]\nmax_turn = 3\n").err().unwrap_or_default();
    assert!(key.contains("max_turn"), "{key}");
}

#[test]
fn every_setting_of_the_example_is_known_to_the_loader_and_its_value_accepted() {
    let text = uncommented(&read("volcanic.toml.example"));
    let settings = loaded(&text).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    // The checks the commands run on the loaded settings accept every example value too.
    settings.a2a.to_options().unwrap();
    settings.telegram.to_config(dir.path()).unwrap();
    // Uncommented, the example changed what it says: spot-check one setting of each section.
    assert_eq!(settings.provider.kind, Some(ProviderKind::Anthropic));
    assert_eq!(settings.agent.max_turns, Some(50));
    assert_eq!(settings.agent.sandbox.mode, OwnerSandboxMode::Auto);
    assert_eq!(settings.a2a.max_hops, Some(3));
    assert_eq!(settings.a2a.sandbox.tmp_bytes, Some(64 * 1024 * 1024));
    assert_eq!(settings.a2a.prices.len(), 2);
    assert_eq!(settings.telegram.call_timeout_seconds, Some(30));
}

#[test]
fn every_setting_of_the_example_is_documented_and_every_documented_one_is_in_the_example() {
    let example = settings_of(&read("volcanic.toml.example"));
    let names: BTreeSet<&str> = example.iter().map(|(_, env)| env.as_str()).collect();
    assert_eq!(names.len(), example.len(), "a setting appears twice: {example:?}");
    assert!(example.len() > 50, "the settings were not found: {example:?}");
    // docs/configuration.md lists the settings, and points to these two for the A2A server's
    // options and its callers' sandbox.
    let docs = ["docs/configuration.md", "docs/a2a.md", "docs/security.md"].map(read).join("\n");
    for (key, env) in &example {
        // The environment name is the one the loader maps back to this key.
        assert_eq!(env_key(env).as_deref(), Some(key.as_str()), "{env}");
        assert!(mentions(&docs, &format!("`{env}`")), "{key} ({env}) is not in the docs");
    }
    // Every row `| `key` (`Section__Key`…) |` of the docs' settings tables is in the example.
    let mut documented = BTreeSet::new();
    for line in docs.lines() {
        let Some((_, rest)) = line.split_once("` (`") else { continue };
        if !line.starts_with("| `") {
            continue;
        }
        let env: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if ["Provider__", "Agent__", "A2A__", "Telegram__"].iter().any(|p| env.starts_with(p)) {
            documented.insert(env);
        }
    }
    let missing: Vec<&String> =
        documented.iter().filter(|env| !names.contains(env.as_str())).collect();
    assert!(missing.is_empty(), "documented but not in volcanic.toml.example: {missing:?}");
}
