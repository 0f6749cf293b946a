//! Entry points for the fuzz targets in `fuzz/` and their regression tests: thin wrappers over
//! crate-internal parsers, so the targets reach them without those becoming API.
//!
//! Not part of the public surface: hidden from the docs, and nothing outside `fuzz/` and tests
//! may call it.

use std::path::Path;

use crate::Result;
use crate::message::Message;
use crate::redact::Redactor;
use crate::session::LoadReport;
use crate::session::journal::Journal;

/// What loading a session journal gave.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalLoad {
    pub session_id: String,
    pub messages: Vec<Message>,
    pub report: LoadReport,
}

/// Opens (loads and repairs) the journal in `dir` exactly like a session does, then closes it
/// again, releasing its lock.
///
/// # Errors
/// What opening a session's journal fails with (I/O, a scope held by another process).
pub fn load_journal(dir: &Path) -> Result<JournalLoad> {
    let loaded = Journal::open(dir, "fuzz", dir, &Redactor::default())?;
    Ok(JournalLoad {
        session_id: loaded.session_id,
        messages: loaded.messages,
        report: loaded.report,
    })
}
