//! Inputs the `url_guard` fuzz target found (fuzz/, docs/reliability.md "Fuzzing"), kept as
//! regression tests of the URL check.

use super::*;

/// A name of numbers with two or more trailing dots is not turned into an address by the URL
/// parser, but a resolver reads it as one: `10.1..` is 10.0.0.1.
#[test]
fn check_url_numeric_name_with_trailing_dots_is_refused_as_its_address() {
    let cases = [
        ("https://10.1../", "10.0.0.1"),
        ("https://127.0.0.1../hook", "127.0.0.1"),
        ("https://0x7f.1.../", "127.0.0.1"),
        ("https://2130706433../", "127.0.0.1"),
        ("https://0251.0376.0251.0376../", "169.254.169.254"),
    ];
    for (url, host) in cases {
        assert_eq!(
            check_url(url, false),
            Err(GuardError::BlockedAddress { host: host.into() }),
            "{url}"
        );
    }
    assert!(check_url("https://8.8.8.8../", false).is_ok());
    assert!(check_url("https://10.1../", true).is_ok());
}

#[test]
fn numeric_ipv4_reads_names_like_inet_aton() {
    let cases = [
        ("10.1", Some([10, 0, 0, 1])),
        ("127.0.0.1", Some([127, 0, 0, 1])),
        ("0x7f.1", Some([127, 0, 0, 1])),
        ("0177.0.0.1", Some([127, 0, 0, 1])),
        ("2130706433", Some([127, 0, 0, 1])),
        ("0x", Some([0, 0, 0, 0])),
        ("0", Some([0, 0, 0, 0])),
        ("1.2.3.4.5", None),
        ("256.1", None),
        ("1.2.65536", None),
        ("+2", None),
        ("08", None),
        ("1..2", None),
        ("example.com", None),
        ("", None),
    ];
    for (name, expected) in cases {
        assert_eq!(numeric_ipv4(name), expected.map(Ipv4Addr::from), "{name}");
    }
}
