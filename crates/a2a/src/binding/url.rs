//! Percent-decoding of URL path segments and query strings, small enough not to need a crate.
//! Malformed escapes (`%zz`, a lone `%`) are kept literally rather than refused: only text that
//! is not UTF-8 once decoded is an error.

/// Decodes the `%XX` escapes of a path segment (a `+` stays a `+`).
///
/// Returns `None` when the decoded bytes are not UTF-8.
pub(crate) fn percent_decode(raw: &str) -> Option<String> {
    decode(raw, Plus::Literal)
}

/// What a `+` stands for: itself in a path, a space in a query string (form encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plus {
    Literal,
    Space,
}

fn decode(raw: &str, plus: Plus) -> Option<String> {
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
            (None, b'+') if plus == Plus::Space => {
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
            Some((decode(name, Plus::Space)?, decode(value, Plus::Space)?))
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
            ("abc", Plus::Literal, Some("abc")),
            ("a%2Fb", Plus::Literal, Some("a/b")),
            ("a%2fb", Plus::Literal, Some("a/b")),
            ("a+b", Plus::Literal, Some("a+b")),
            ("a+b", Plus::Space, Some("a b")),
            ("%E2%9C%93", Plus::Literal, Some("✓")),
            ("100%", Plus::Literal, Some("100%")),
            ("%zz", Plus::Literal, Some("%zz")),
            ("%4", Plus::Literal, Some("%4")),
            ("%FF", Plus::Literal, None),
        ];
        for (raw, plus, expected) in cases {
            assert_eq!(decode(raw, plus).as_deref(), expected, "{raw}");
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
