//! The SSRF guard's URL check: a URL it lets through is https, has no user info, and never names
//! a blocked address, whether as an IP literal in any notation or as a name a resolver would read
//! as one (`127.1`, `0x7f.0.0.1`, `2130706433`, `0177.0.0.1`, with trailing dots).
#![no_main]

use std::net::{IpAddr, Ipv4Addr};

use libfuzzer_sys::fuzz_target;
use url::Host;
use volcanic_a2a::push::guard::{check_url, is_blocked};

/// One part of a BSD `inet_aton` address: decimal, `0x` hex or `0` octal.
fn number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or(part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        return (radix == 16).then_some(0);
    }
    // Digits only: `from_str_radix` would also take a sign, `inet_aton` does not.
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok().filter(|n| *n <= u64::from(u32::MAX))
}

/// How `inet_aton` (and so `getaddrinfo`) reads a name: 1 to 4 numeric parts, the last one
/// filling the remaining bytes.
fn inet_aton(name: &str) -> Option<Ipv4Addr> {
    let parts: Vec<u64> = name.split('.').map(number).collect::<Option<_>>()?;
    let (last, head) = parts.split_last()?;
    if head.len() > 3 || head.iter().any(|p| *p > 255) {
        return None;
    }
    let rest_bits = 8 * (4 - head.len() as u32);
    if rest_bits < 64 && *last >= 1u64 << rest_bits {
        return None;
    }
    let mut value: u32 = 0;
    for (i, p) in head.iter().enumerate() {
        value |= (*p as u32) << (24 - 8 * i);
    }
    Some(Ipv4Addr::from(value | *last as u32))
}

fuzz_target!(|data: &[u8]| {
    let raw = String::from_utf8_lossy(data);
    // The relaxed mode only has to stay panic-free.
    let _ = check_url(&raw, true);
    let Ok(url) = check_url(&raw, false) else { return };
    assert_eq!(url.scheme(), "https");
    assert!(url.username().is_empty() && url.password().is_none(), "user info passed");
    match url.host().expect("a passing URL has a host") {
        Host::Ipv4(ip) => assert!(!is_blocked(IpAddr::V4(ip)), "blocked {ip} passed"),
        Host::Ipv6(ip) => assert!(!is_blocked(IpAddr::V6(ip)), "blocked [{ip}] passed"),
        Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            assert!(name != "localhost" && !name.ends_with(".localhost"), "{name} passed");
            if let Some(ip) = inet_aton(&name) {
                assert!(!is_blocked(IpAddr::V4(ip)), "{name:?} reads as blocked {ip} and passed");
            }
            if let Ok(ip) = name.parse::<IpAddr>() {
                assert!(!is_blocked(ip), "{name:?} is blocked {ip} and passed");
            }
        }
    }
});
