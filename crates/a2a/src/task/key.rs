//! [`TaskKey`]: a task id stored inline, as the key of the in-memory maps that GetTask looks up
//! on every request (the index's owner check, the settled-task cache).
//!
//! A `String` key sits behind a pointer, so a lookup that lands on its bucket reads the id's
//! bytes from another cache line, which at 10,000 tasks is usually a miss to memory; an inline
//! key is compared where the bucket is. Valid task ids are at most 100 ASCII bytes
//! ([`super::id::is_valid_id`]), so the key is a fixed array.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// The longest task id.
const MAX_LEN: usize = super::id::MAX_ID_LEN;

/// A task id of at most 100 bytes, held in place. Hashes and compares as its `str`, so maps keyed
/// by it are looked up with a `&str`.
#[derive(Clone, Copy)]
pub(crate) struct TaskKey {
    len: u8,
    bytes: [u8; MAX_LEN],
}

impl TaskKey {
    /// The key of `id`; `None` when it is over 100 bytes (no valid task id is).
    pub fn new(id: &str) -> Option<TaskKey> {
        let len = u8::try_from(id.len()).ok().filter(|&len| usize::from(len) <= MAX_LEN)?;
        let mut bytes = [0; MAX_LEN];
        bytes[..id.len()].copy_from_slice(id.as_bytes());
        Some(TaskKey { len, bytes })
    }

    pub fn as_str(&self) -> &str {
        // The bytes are a whole `str` (`new` copies all of one), so this never fails.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl Borrow<str> for TaskKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Hash for TaskKey {
    /// As the `str` hashes: `Borrow<str>` requires it.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq for TaskKey {
    fn eq(&self, other: &TaskKey) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for TaskKey {}

impl std::fmt::Debug for TaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn task_key_holds_ids_up_to_100_bytes_and_looks_up_as_str() {
        let longest = "a".repeat(100);
        let mut map = HashMap::new();
        for id in ["t1", "0014fbfa-b7af-4251-b3d7-aa11670aa376", longest.as_str()] {
            let key = TaskKey::new(id).unwrap();
            assert_eq!(key.as_str(), id);
            map.insert(key, id.len());
        }
        assert_eq!(map.get("t1"), Some(&2));
        assert_eq!(map.get(longest.as_str()), Some(&100));
        assert_eq!(map.get("t"), None);
        assert_eq!(map.get("t10"), None);
        assert!(TaskKey::new(&"a".repeat(101)).is_none());
        assert!(TaskKey::new(&"a".repeat(300)).is_none());
    }
}
