//! Properties of the URL check over generated addresses: an IPv4 address is refused in every
//! notation the URL parser accepts exactly when it is blocked, and so is every IPv6 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

/// Every way of writing `ip` as a URL host that the parser (and a resolver) reads as `ip`.
fn notations(ip: Ipv4Addr) -> Vec<String> {
    let [a, b, c, d] = ip.octets();
    let n = u32::from(ip);
    let v6 = |high: &str| {
        let low = format!("{:x}:{:x}", u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
        format!("[{high}{low}]")
    };
    vec![
        format!("{a}.{b}.{c}.{d}"),
        format!("{a}.{b}.{c}.{d}."),
        format!("{a}.{b}.{c}.{d}.."),
        format!("{n}..."),
        format!("{n}"),
        format!("0x{n:x}"),
        format!("0{n:o}"),
        format!("0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}"),
        format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
        format!("{a}.{}", n & 0x00ff_ffff),
        format!("{a}.{b}.{}", n & 0xffff),
        format!("[::ffff:{a}.{b}.{c}.{d}]"),
        v6("::ffff:"),
        v6("::ffff:0:"),
        v6("64:ff9b::"),
        format!("[2002:{:x}:{:x}::1]", u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d])),
    ]
}

proptest! {
    #[test]
    fn check_url_ipv4_any_notation_refused_iff_blocked(octets in any::<[u8; 4]>()) {
        let ip = Ipv4Addr::from(octets);
        let blocked = is_blocked(IpAddr::V4(ip));
        for host in notations(ip) {
            let result = check_url(&format!("https://{host}/hook"), false);
            prop_assert_eq!(
                matches!(result, Err(GuardError::BlockedAddress { .. })),
                blocked,
                "{} ({}) gave {:?}", host, ip, result
            );
            prop_assert!(result.is_ok() || blocked, "{} ({}) gave {:?}", host, ip, result);
            prop_assert!(check_url(&format!("http://{host}/hook"), true).is_ok(), "{}", host);
        }
    }

    #[test]
    fn check_url_ipv6_refused_iff_blocked(segments in any::<[u16; 8]>()) {
        let ip = Ipv6Addr::from(segments);
        let result = check_url(&format!("https://[{ip}]/hook"), false);
        prop_assert_eq!(result.is_err(), is_blocked(IpAddr::V6(ip)), "[{}] gave {:?}", ip, result);
    }

    #[test]
    fn is_blocked_mapped_ipv6_matches_its_ipv4(octets in any::<[u8; 4]>()) {
        let ip = Ipv4Addr::from(octets);
        prop_assert_eq!(
            is_blocked(IpAddr::V6(ip.to_ipv6_mapped())),
            is_blocked(IpAddr::V4(ip))
        );
    }
}
