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
