//! The session journal loader: whatever bytes a journal holds after a crash, loading repairs it,
//! and loading the repaired journal again finds nothing left to repair and the same conversation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volcanic_core::fuzzing::load_journal;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("session.jsonl"), data).expect("the journal is writable");
    let first = load_journal(dir.path()).expect("a journal always loads");
    let second = load_journal(dir.path()).expect("a repaired journal loads");
    assert_eq!(second.session_id, first.session_id);
    assert_eq!(second.messages, first.messages);
    assert_eq!(second.report.truncated_bytes, 0, "a repaired journal has a torn tail");
    assert_eq!(second.report.repaired_tool_calls, 0, "repairs were not persisted");
    assert!(!second.report.repaired_run, "the run close was not persisted");
    assert!(second.report.skipped_lines <= first.report.skipped_lines);
});
