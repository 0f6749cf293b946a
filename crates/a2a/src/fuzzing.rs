//! Entry points for the fuzz targets in `fuzz/` and their regression tests: thin wrappers over
//! crate-internal code (prompt building from parts), so the targets reach it without it becoming
//! API. The parsers that are public already (the bindings, callers.json, cards, task files, the
//! SSRF guard) are called directly.
//!
//! Not part of the public surface: hidden from the docs, and nothing outside `fuzz/` and tests
//! may call it.

use a2a::Part;

use crate::auth::Caller;
use crate::run::files;

pub use crate::run::files::PromptError;

/// Builds the prompt of a message exactly like SendMessage does, except that file parts given by
/// URL are not downloaded (they become a note). Byte parts are saved into the caller's
/// `inbox/`.
///
/// # Errors
/// [`PromptError::A2a`] Internal when a file cannot be written.
pub async fn build_prompt(
    caller: &Caller,
    parts: &[Part],
    has_notifier: bool,
) -> Result<String, PromptError> {
    let defaults = crate::A2aOptions::default();
    let caps = files::Caps {
        max_file_bytes: defaults.max_file_bytes,
        max_inbox_bytes: defaults.max_inbox_bytes,
        max_inbox_bytes_per_caller: defaults.max_inbox_bytes_per_caller,
    };
    files::assemble(caller, parts, has_notifier, None, caps).await
}

/// The file name a part is saved under in `inbox/a2a/<caller>/` (before the `<time>-` prefix):
/// its own name, else the URL's last segment, else `file` plus an extension for the media type.
pub fn inbox_file_name(part: &Part, url: Option<&str>, content_type: Option<&str>) -> String {
    files::file_name(part, url, content_type)
}
