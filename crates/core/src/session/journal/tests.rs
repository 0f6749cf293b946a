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
