//! Journal loading regressions.

use super::*;

/// A line with the largest `seq` (a damaged file, or one written by hand) used to overflow the
/// next sequence number and panic on open; the `journal_load` fuzz target checks this shape.
#[test]
fn journal_open_line_with_max_seq_loads_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let lines = format!(
        "{}\n{}\n",
        r#"{"seq":0,"type":"session","v":1,"id":"s-1","scope":"x","created_at":"t","cwd":"/"}"#,
        format_args!(r#"{{"seq":{},"type":"run_start","run_id":"r1","ts":"t"}}"#, u64::MAX),
    );
    std::fs::write(dir.path().join("session.jsonl"), lines).unwrap();
    let redactor = Redactor::default();
    let loaded = Journal::open(dir.path(), "x", Path::new("/"), &redactor).unwrap();
    assert_eq!(loaded.session_id, "s-1");
    assert!(loaded.report.repaired_run);
    assert_eq!(loaded.messages, vec![Message::Note { text: INTERRUPTED_NOTE.to_string() }]);
    drop(loaded);
    let again = Journal::open(dir.path(), "x", Path::new("/"), &redactor).unwrap();
    assert_eq!(again.report, LoadReport::default());
}

fn message(text: &str) -> Entry {
    Entry::Message { run_id: "r1".into(), ts: now(), message: Message::Note { text: text.into() } }
}

/// A barrier run by the host over the journal's file counts as a sync once it is marked
/// covered, so closing the session after it costs no second flush; bytes appended later, or a
/// barrier that was never marked, still need one.
#[test]
fn journal_covered_by_a_host_barrier_needs_no_sync_until_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let redactor = Redactor::default();
    let mut journal = Journal::open(dir.path(), "x", Path::new("/"), &redactor).unwrap().journal;
    assert!(!journal.is_durable(), "a new journal's header is not flushed at open");

    journal.append(&message("one"), &redactor).unwrap();
    let unmarked = journal.handle().unwrap();
    crate::durable::sync_files(&[unmarked.file()]).unwrap();
    drop(unmarked);
    assert!(!journal.is_durable(), "a barrier nobody marked proves nothing");

    let (file, mark) = journal.handle().unwrap().split();
    journal.append(&message("two"), &redactor).unwrap();
    crate::durable::sync_files(&[&file]).unwrap();
    mark.covered();
    assert!(!journal.is_durable(), "the mark covers the length at the handle, not what came after");

    let (file, mark) = journal.handle().unwrap().split();
    crate::durable::sync_files(&[&file]).unwrap();
    mark.covered();
    assert!(journal.is_durable());

    journal.append(&message("three"), &redactor).unwrap();
    assert!(!journal.is_durable());
    journal.sync().unwrap();
    assert!(journal.is_durable(), "a sync of its own covers everything appended");
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A new scope's folder holds the journal and nothing else (the lock is on the folder), yet a
/// second open of the scope is refused until the first is gone, and then resumes it.
#[test]
fn journal_new_scope_folder_holds_only_the_journal_and_is_exclusive() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("sessions").join("new");
    let redactor = Redactor::default();
    let first = Journal::open(&dir, "new", Path::new("/"), &redactor).unwrap();
    assert_eq!(names(&dir), vec!["session.jsonl"]);
    assert_eq!(first.journal.len, std::fs::metadata(dir.join("session.jsonl")).unwrap().len());

    let refused = Journal::open(&dir, "new", Path::new("/"), &redactor);
    assert!(matches!(refused, Err(Error::ScopeInUse { .. })), "{:?}", refused.err());

    let id = first.session_id.clone();
    drop(first);
    let again = Journal::open(&dir, "new", Path::new("/"), &redactor).unwrap();
    assert_eq!(again.session_id, id);
    assert_eq!(again.report, LoadReport::default());
    assert_eq!(names(&dir), vec!["session.jsonl"]);
}

/// A folder made by an older version has a `session.lock` file, which that version locks: while
/// it holds it, opening the scope is refused; the file is kept, not replaced.
#[test]
fn journal_folder_with_a_legacy_lock_file_is_locked_through_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = File::create(dir.path().join("session.lock")).unwrap();
    rustix::fs::flock(&legacy, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let redactor = Redactor::default();

    let refused = Journal::open(dir.path(), "old", Path::new("/"), &redactor);
    assert!(matches!(refused, Err(Error::ScopeInUse { .. })), "{:?}", refused.err());
    let refused = archive(dir.path(), "old");
    assert!(matches!(refused, Ok(None)), "no journal yet: {refused:?}");

    drop(legacy);
    let opened = Journal::open(dir.path(), "old", Path::new("/"), &redactor).unwrap();
    // Now this process holds the legacy file's lock too, as an older process would find it.
    let other = File::open(dir.path().join("session.lock")).unwrap();
    assert!(
        rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err()
    );
    drop(opened);
    assert!(
        rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
    );
    assert_eq!(names(dir.path()), vec!["session.jsonl", "session.lock"]);
}

/// Entries are printed straight to JSON and only go through the string-by-string redaction when
/// the printed line may hold a known secret; both paths must leave no secret in the file: one
/// printed verbatim, one that JSON escapes (a quote and a newline in it), one in an object key,
/// and lines without a secret must read back unchanged.
#[test]
fn journal_lines_hold_no_known_secret_whichever_way_they_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let redactor = Redactor::new(vec![
        crate::redact::Secret { name: "PLAIN".into(), value: "plain-secret-0123".into() },
        crate::redact::Secret { name: "QUOTED".into(), value: "quo\"ted\nsecret".into() },
    ]);
    let mut loaded = Journal::open(dir.path(), "x", Path::new("/"), &redactor).unwrap();
    let journal = &mut loaded.journal;
    journal.append(&message("nothing to hide here"), &redactor).unwrap();
    journal.append(&message("token plain-secret-0123 in text"), &redactor).unwrap();
    journal.append(&message("and quo\"ted\nsecret too"), &redactor).unwrap();
    let in_key = Message::ToolResult(ToolResult {
        call_id: "c1".into(),
        tool: "bash".into(),
        content: "ok".into(),
        is_error: false,
        details: serde_json::json!({"plain-secret-0123": ["x"], "n": 12}),
    });
    let in_key = Entry::Message { run_id: "r1".into(), ts: now(), message: in_key };
    journal.append(&in_key, &redactor).unwrap();
    drop(loaded);

    let text = std::fs::read_to_string(dir.path().join("session.jsonl")).unwrap();
    assert!(!text.contains("plain-secret-0123"), "{text}");
    assert!(!text.contains(r#"quo\"ted\nsecret"#), "{text}");
    let again = Journal::open(dir.path(), "x", Path::new("/"), &redactor).unwrap();
    let texts: Vec<String> = again
        .messages
        .iter()
        .map(|m| match m {
            Message::Note { text } => text.clone(),
            Message::ToolResult(r) => r.details.to_string(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        texts,
        vec![
            "nothing to hide here".to_string(),
            "token [REDACTED:PLAIN] in text".to_string(),
            "and [REDACTED:QUOTED] too".to_string(),
            r#"{"[REDACTED:PLAIN]":["x"],"n":12}"#.to_string(),
        ]
    );
}

/// A line as a version before `cause` wrote it (the whole line, as a file holds it).
fn old_failed_end(error: &str) -> String {
    format!(
        r#"{{"seq":3,"type":"run_end","run_id":"r1","ts":"2026-01-02T03:04:05.678Z","outcome":{{"kind":"failed","error":{}}}}}"#,
        serde_json::Value::from(error)
    )
}

fn failed_end(failure: RunFailure) -> Line {
    Line {
        seq: 3,
        entry: Entry::RunEnd {
            run_id: "r1".into(),
            ts: "2026-01-02T03:04:05.678Z".into(),
            outcome: RunEnd::Failed(failure),
        },
    }
}

/// Journals written before the failure had a type hold only its text: the unexpected
/// failure's fixed text reads back as that kind, anything else as the provider's message.
#[test]
fn journal_old_failed_run_end_reads_back_by_its_text() {
    let unexpected: Line =
        serde_json::from_str(&old_failed_end("the run failed unexpectedly")).unwrap();
    assert_eq!(unexpected, failed_end(RunFailure::Unexpected));
    let provider: Line = serde_json::from_str(&old_failed_end("429 rate limited")).unwrap();
    assert_eq!(provider, failed_end(RunFailure::Provider { message: "429 rate limited".into() }));
}

/// A whole journal of an older version, with a failed run, loads with nothing skipped or
/// repaired (a line that did not parse would be skipped and its run closed as interrupted).
#[test]
fn journal_of_an_older_version_with_a_failed_run_loads_clean() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"seq":0,"type":"session","v":1,"id":"s-1","scope":"x","created_at":"t","cwd":"/"}"#
            .to_string(),
        r#"{"seq":1,"type":"run_start","run_id":"r1","ts":"t"}"#.to_string(),
        r#"{"seq":2,"type":"message","run_id":"r1","ts":"t","message":{"role":"user","text":"hi"}}"#
            .to_string(),
        old_failed_end("the run failed unexpectedly"),
    ];
    std::fs::write(dir.path().join("session.jsonl"), lines.join("\n") + "\n").unwrap();
    let loaded = Journal::open(dir.path(), "x", Path::new("/"), &Redactor::default()).unwrap();
    assert_eq!(loaded.report, LoadReport::default());
    assert_eq!(loaded.messages, vec![Message::user("hi")]);
}

/// The written line keeps the text older versions wrote and read, and adds the cause, so a
/// provider message that happens to read like the unexpected failure keeps its kind.
#[test]
fn journal_failed_run_end_is_written_with_its_text_and_cause() {
    let unexpected = serde_json::to_value(failed_end(RunFailure::Unexpected)).unwrap();
    assert_eq!(
        unexpected["outcome"],
        serde_json::json!({"kind": "failed", "error": "the run failed unexpectedly", "cause": "unexpected"})
    );
    assert_eq!(unexpected["outcome"]["error"], failure_line::LEGACY_UNEXPECTED);
    let lookalike = RunFailure::Provider { message: failure_line::LEGACY_UNEXPECTED.into() };
    let written = serde_json::to_string(&failed_end(lookalike.clone())).unwrap();
    let value: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(
        value["outcome"],
        serde_json::json!({"kind": "failed", "error": "the run failed unexpectedly", "cause": "provider"})
    );
    let read: Line = serde_json::from_str(&written).unwrap();
    assert_eq!(read, failed_end(lookalike));
}
