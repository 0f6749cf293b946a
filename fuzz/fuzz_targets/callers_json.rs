//! callers.json parsing: whatever the file holds, the directory gets only valid, unique entries.
#![no_main]

use std::collections::HashSet;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use volcanic_a2a::auth::CallerKey;
use volcanic_a2a::auth::callers::{is_valid_caller_name, parse_callers};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let entries = parse_callers(Path::new("callers.json"), &text);
    let mut names = HashSet::new();
    for entry in &entries {
        assert!(is_valid_caller_name(&entry.name), "invalid name {:?}", entry.name);
        assert!(names.insert(entry.name.as_str()), "repeated name {:?}", entry.name);
        match &entry.key {
            CallerKey::Plain(key) => {
                assert!(!key.expose().is_empty(), "empty key for {:?}", entry.name);
                assert_eq!(format!("{key:?}"), "[redacted]");
            }
            CallerKey::Hashed(hash) => assert_eq!(format!("{hash:?}"), "KeyHash([redacted])"),
        }
    }
});
