//! What a running task does to the parts of its artifacts and messages: streamed text appended
//! in place, every kind of part redacted, a part's text read. Pure; `live.rs` calls it under its
//! task's lock.

use a2a::{Artifact, Part};
use volcanic_core::redact::Redactor;

/// Appends streamed text to the last text part, so the in-memory artifact stays one part.
pub fn append_text(artifact: &mut Artifact, text: &str) {
    if let Some(a2a::PartContent::Text(existing)) =
        artifact.parts.last_mut().map(|p| &mut p.content)
    {
        existing.push_str(text);
    } else {
        artifact.parts.push(Part::text(text));
    }
}

/// Redacts a part's text, or its bytes when they are UTF-8 text, in place.
pub fn redact_part(redactor: &Redactor, part: &mut Part) {
    match &mut part.content {
        a2a::PartContent::Text(text) => {
            if let std::borrow::Cow::Owned(redacted) = redactor.redact(text) {
                *text = redacted;
            }
        }
        a2a::PartContent::Raw(bytes) => {
            if let Ok(text) = std::str::from_utf8(bytes)
                && let std::borrow::Cow::Owned(redacted) = redactor.redact(text)
            {
                *bytes = redacted.into_bytes();
            }
        }
        a2a::PartContent::Data(value) => redactor.redact_json_values(value),
        a2a::PartContent::Url(url) => {
            if let std::borrow::Cow::Owned(redacted) = redactor.redact(url) {
                *url = redacted;
            }
        }
    }
}

/// A part's text ("" for other parts).
pub fn text_of(part: &Part) -> &str {
    match &part.content {
        a2a::PartContent::Text(text) => text,
        _ => "",
    }
}
