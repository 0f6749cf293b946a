//! The id rule of tasks and contexts: 1 to 100 of `[A-Za-z0-9_-]`. A task id names its file
//! (`<taskId>.json`), so the rule is what keeps a caller's id from reaching outside the task
//! folder; context ids follow the same rule so they can name sessions. One rule, one place,
//! at the bottom of the crate: the store, the index, the push secrets and the operations import
//! it from here.

/// The longest task or context id, in bytes (all of them ASCII).
pub(crate) const MAX_ID_LEN: usize = 100;

/// Whether `id` is a valid task or context id: 1 to [`MAX_ID_LEN`] ASCII letters, digits, `-`
/// and `_`.
pub fn is_valid_id(id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn ids_are_1_to_100_ascii_letters_digits_dashes_and_underscores() {
        let longest = "a".repeat(100);
        let too_long = "a".repeat(101);
        let cases: [(&str, bool); 19] = [
            ("a", true),
            ("Z", true),
            ("0", true),
            ("-", true),
            ("_", true),
            ("task-1_A", true),
            ("0190f1c2-7d3e-7a4b-9c5d-6e7f8a9b0c1d", true),
            (&longest, true),
            ("", false),
            (&too_long, false),
            (".", false),
            ("..", false),
            ("a/b", false),
            ("a\\b", false),
            ("a b", false),
            ("a\n", false),
            ("a\0", false),
            ("é", false),
            ("ａ", false),
        ];
        for (id, valid) in cases {
            assert_eq!(is_valid_id(id), valid, "{id:?}");
        }
    }

    proptest! {
        /// The rule is the pattern the contextId check used before it moved here: same set.
        /// Half the cases are drawn from the valid characters only, so both answers are common.
        #[test]
        fn is_valid_id_accepts_what_the_pattern_accepts(
            id in prop_oneof!["[A-Za-z0-9_-]{0,102}", "[A-Za-z0-9_\\-./ é\n]{0,102}"]
        ) {
            let pattern = regex::Regex::new("^[A-Za-z0-9_-]{1,100}$").unwrap();
            prop_assert_eq!(is_valid_id(&id), pattern.is_match(&id));
        }
    }
}
