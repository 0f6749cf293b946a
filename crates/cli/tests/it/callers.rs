//! `volcanic callers add` and `list` as a real child process: the minted key is printed once,
//! only its hash is stored, and it authenticates against `volcanic serve`.

use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};
use volcanic_a2a::auth::KeyHash;

use crate::serve::{SEND, post, serve, stop};

fn callers(args: &[&str], cwd: &std::path::Path) -> Output {
    Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(cwd)
        .arg("callers")
        .args(args)
        .output()
        .unwrap()
}

fn callers_file(workspace: &std::path::Path) -> Value {
    let path = workspace.join(".volcanic/a2a/callers.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn callers_add_prints_the_key_once_stores_its_hash_and_the_key_authenticates() {
    let ws = tempfile::tempdir().unwrap();
    // Run from elsewhere: `--workspace` picks the folder.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = callers(
        &[
            "add",
            "travel-bot",
            "--tier",
            "read",
            "--note",
            "Alice's agent",
            "--workspace",
            ws.path().to_str().unwrap(),
        ],
        elsewhere.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let key = lines[0];
    assert!(key.len() >= 32, "{key}");
    assert!(lines[1].contains("will not be shown again"), "{stdout}");
    let file = std::fs::read_to_string(ws.path().join(".volcanic/a2a/callers.json")).unwrap();
    assert!(!file.contains(key), "the key is stored in plain text");
    assert_eq!(
        callers_file(ws.path()),
        json!([{"name": "travel-bot", "keyHash": KeyHash::of(key).to_text(), "tier": "read",
                "note": "Alice's agent"}])
    );

    // The second caller goes into the same file; the first key still works and differs.
    let out = callers(&["add", "calendar"], ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let second = String::from_utf8(out.stdout).unwrap().lines().next().unwrap().to_string();
    assert_ne!(second, key);

    let state = tempfile::tempdir().unwrap();
    let served = serve(ws.path(), state.path(), &[]);
    let (status, response) = post(&served.base, key, SEND);
    assert_eq!(status, 200, "{response}");
    let (status, _) = post(&served.base, &second, SEND);
    assert_eq!(status, 200);
    let (status, _) = post(&served.base, &format!("{key}x"), SEND);
    assert_eq!(status, 401);
    let (code, stderr) = stop(served);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains(key), "a caller key reached the log");
}

#[test]
fn callers_add_refuses_a_duplicate_or_invalid_name_or_tier_with_exit_2() {
    let ws = tempfile::tempdir().unwrap();
    assert_eq!(callers(&["add", "bot"], ws.path()).status.code(), Some(0));
    let before = callers_file(ws.path());
    for args in [&["add", "bot"][..], &["add", "Bad_Name"], &["add", "other", "--tier", "admin"]] {
        let out = callers(args, ws.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: no key may be printed");
    }
    assert_eq!(callers_file(ws.path()), before);
}

#[test]
fn callers_list_shows_names_tiers_modes_and_masked_keys() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".volcanic/a2a")).unwrap();
    let hash = KeyHash::of("whatever-key-0123456789abcdef0123").to_text();
    std::fs::write(
        ws.path().join(".volcanic/a2a/callers.json"),
        json!([
            {"name": "long", "key": "k_0123456789abcdef", "tier": "chat"},
            {"name": "short", "key": "q7z"},
            {"name": "hashed", "keyHash": hash, "tier": "read", "note": "Bob"}
        ])
        .to_string(),
    )
    .unwrap();
    let out = callers(&["list"], ws.path());
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        format!(
            "NAME    TIER       MODE      KEY\n\
             long    chat       isolated  …cdef\n\
             short   workspace  isolated  …\n\
             hashed  read       isolated  {}…  Bob\n",
            &hash[..15]
        )
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("shorter than 16 characters"), "{stderr}");
    assert!(stderr.contains("short"), "the entry is named: {stderr}");
    assert!(!stderr.contains("q7z"), "the key is not: {stderr}");
    // A log that is not a terminal gets no colour codes.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

/// Issue 36: a callers.json the server cannot use was listed as "No callers" (exit 0), and
/// entries the server skips were left out without a word.
#[test]
fn callers_list_says_what_is_wrong_with_the_file_and_each_skipped_entry() {
    let ws = tempfile::tempdir().unwrap();
    let dir = ws.path().join(".volcanic/a2a");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("callers.json");
    for (text, problem) in [
        (r#"[{"name": "bob", "key": "k_0123456789abcdef""#, "malformed JSON at line 1 column"),
        (r#"{"name": "bob", "key": "k_0123456789abcdef"}"#, "not a JSON array"),
    ] {
        std::fs::write(&path, text).unwrap();
        let out = callers(&["list"], ws.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(problem), "{stderr}");
        assert!(stderr.contains("the server serves no caller from it"), "{stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(!stderr.contains("0123456789abcdef"), "the key is not echoed: {stderr}");
        assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    }
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/dev/null", &path).unwrap();
    let out = callers(&["list"], ws.path());
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a symbolic link"));
    std::fs::remove_file(&path).unwrap();

    std::fs::write(
        &path,
        json!([
            {"name": "good", "key": "k_0123456789abcdef", "tier": "chat"},
            {"name": "admin-bot", "key": "k_secret_0123456789", "tier": "admin"},
            {"name": "good", "key": "k_another_0123456789"},
            {"name": "Not Valid", "key": "k_third_0123456789"},
        ])
        .to_string(),
    )
    .unwrap();
    let out = callers(&["list"], ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        format!(
            "NAME  TIER       MODE      KEY\n\
             good  chat       isolated  …cdef\n\
             \n\
             Skipped: the server ignores 3 entries of {}:\n  \
             entry 2 (admin-bot): has an unknown tier \"admin\" (chat, read or workspace)\n  \
             entry 3 (good): repeats the name of an earlier entry\n  \
             entry 4: has no valid name ([a-z0-9-]{{1,40}})\n",
            path.display()
        )
    );

    std::fs::write(&path, r#"[{"name": "only", "key": "k_0123456789abcdef", "tier": 7}]"#).unwrap();
    let out = callers(&["list"], ws.path());
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with(&format!("No callers in {}.\n", path.display())), "{stdout}");
    assert!(stdout.contains("entry 1 (only): has an unknown tier (chat"), "{stdout}");
    assert!(stdout.ends_with("Add one with: volcanic callers add NAME\n"), "{stdout}");
}

/// Issue 36: `callers add` without `--tier` gave the caller bash and writes (`workspace`); it now
/// gives the least that is still useful, `read`, and its help says so.
#[test]
fn callers_add_defaults_to_tier_read_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let out = callers(&["add", "helper"], ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("(tier read)"), "{stdout}");
    assert_eq!(callers_file(ws.path())[0]["tier"], "read");
    let help = callers(&["add", "--help"], ws.path());
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("Default read"), "{help}");
    assert!(help.contains("[default: read]"), "{help}");
}

#[test]
fn callers_add_into_a_reader_that_stopped_saves_the_entry_and_exits_0() {
    // `volcanic callers add x | head -1` when head is gone before the second line: stdout is a
    // pipe no one reads any more.
    let ws = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::cargo_bin("volcanic")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(ws.path())
        .args(["callers", "add", "helper"])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(callers_file(ws.path())[0]["name"], "helper");
}
