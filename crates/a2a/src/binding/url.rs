//! Percent-decoding of URL path segments and query strings, small enough not to need a crate.
//! Malformed escapes (`%zz`, a lone `%`) are kept literally rather than refused: only text that
//! is not UTF-8 once decoded is an error.

/// Decodes `%XX` escapes, and `+` as a space when `plus_is_space` (query strings only).
///
/// Returns `None` when the decoded bytes are not UTF-8.
pub(crate) fn percent_decode(raw: &str, plus_is_space: bool) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        let escaped = match (byte, bytes.get(index + 1), bytes.get(index + 2)) {
            (b'%', Some(&high), Some(&low)) => hex_value(high).zip(hex_value(low)),
            _ => None,
        };
        match (escaped, byte) {
            (Some((high, low)), _) => {
                decoded.push(high << 4 | low);
                index += 3;
            }
            (None, b'+') if plus_is_space => {
                decoded.push(b' ');
                index += 1;
            }
            (None, _) => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(decoded).ok()
}

/// Splits a raw query string (without `?`) into decoded `(name, value)` pairs, in order.
/// Pairs that do not decode to UTF-8 are dropped; a name without `=` has an empty value.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(name, true)?, percent_decode(value, true)?))
        })
        .collect()
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decode_table_decodes_escapes_and_keeps_malformed_ones() {
        let cases = [
            ("abc", false, Some("abc")),
            ("a%2Fb", false, Some("a/b")),
            ("a%2fb", false, Some("a/b")),
            ("a+b", false, Some("a+b")),
            ("a+b", true, Some("a b")),
            ("%E2%9C%93", false, Some("✓")),
            ("100%", false, Some("100%")),
            ("%zz", false, Some("%zz")),
            ("%4", false, Some("%4")),
            ("%FF", false, None),
        ];
        for (raw, plus, expected) in cases {
            assert_eq!(percent_decode(raw, plus).as_deref(), expected, "{raw}");
        }
    }

    #[test]
    fn query_pairs_splits_and_decodes() {
        assert_eq!(
            query_pairs("a=1&b=x%20y&flag&&c=%FF&d=p+q"),
            vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x y".to_owned()),
                ("flag".to_owned(), String::new()),
                ("d".to_owned(), "p q".to_owned()),
            ]
        );
    }
}
