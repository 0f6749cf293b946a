//! The SSRF guard: the one outbound HTTP client of the server, so that no caller can make it reach
//! an internal address, whether through a push webhook or a file part given by URL.
//!
//! Three checks, because each closes a path the others cannot see:
//! - [`check_url`] before every request: the scheme, no userinfo, and IP-literal hosts (reqwest
//!   never calls the resolver for those). The `url` crate has already normalised every IPv4
//!   notation it accepts (`0x7f.1`, `2130706433`, `017700000001`), so one predicate covers them.
//! - The client's DNS resolver drops blocked addresses from every answer at connect time and fails
//!   when none are left. reqwest dials exactly the addresses it returns, so there is no gap between
//!   a check and the connection for DNS rebinding to slip through.
//! - No redirects (a 3xx is returned as it is) and no proxy (a proxy from `HTTPS_PROXY` would
//!   resolve the target itself, past our resolver).
//!
//! `allow_private` (the `AllowPrivatePushUrls` option) lifts the address checks and allows plain
//! http, for tests and tailnets. This module knows nothing of tasks, pushes or the wire.

use std::error::Error as StdError;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use ipnet::{Ipv4Net, Ipv6Net};
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use url::{Host, Url};

/// How long a TCP (and TLS) connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the guard refused a URL or an outbound request failed. The text is a reason fit for a
/// caller (InvalidParams) or a log line: it names the host, never the whole URL or a header value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The URL does not parse.
    #[error("not a valid URL: {reason}")]
    InvalidUrl { reason: String },
    /// The scheme is not https (or http when private addresses are allowed).
    #[error("URL scheme {scheme} is not allowed, use https")]
    SchemeNotAllowed { scheme: String },
    /// The URL carries a user name or password.
    #[error("URL must not carry a user name or password")]
    Userinfo,
    /// The URL has no host.
    #[error("URL has no host")]
    NoHost,
    /// The host is an IP literal in a blocked range.
    #[error("{host} is a loopback, private or reserved address")]
    BlockedAddress { host: String },
    /// The host is `localhost` or a name under it.
    #[error("{host} is a local name")]
    BlockedName { host: String },
    /// Every address the host resolved to, at connect time, is in a blocked range.
    #[error("{host} resolves only to loopback, private or reserved addresses")]
    ResolvesToBlocked { host: String },
    /// A header name or value is not valid HTTP.
    #[error("header {name} is not valid")]
    InvalidHeader { name: String },
    /// Resolving, connecting, sending or reading failed.
    #[error("request failed: {reason}")]
    Request { reason: String },
    /// No complete answer within the timeout.
    #[error("no complete answer within {} ms", .timeout.as_millis())]
    Timeout { timeout: Duration },
    /// The server answered with a status that is not 2xx.
    #[error("server answered HTTP {status}")]
    Status { status: u16 },
    /// The body is, or announced to be, larger than the cap.
    #[error("file is over the cap of {cap} bytes")]
    TooLarge { cap: u64 },
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {reason}")]
    Build { reason: String },
}

impl GuardError {
    /// Whether the guard itself refused the target (as opposed to the target failing): a refused
    /// target will be refused again, so retrying is pointless.
    pub fn is_refusal(&self) -> bool {
        match self {
            GuardError::InvalidUrl { .. }
            | GuardError::SchemeNotAllowed { .. }
            | GuardError::Userinfo
            | GuardError::NoHost
            | GuardError::BlockedAddress { .. }
            | GuardError::BlockedName { .. }
            | GuardError::ResolvesToBlocked { .. } => true,
            GuardError::InvalidHeader { .. }
            | GuardError::Request { .. }
            | GuardError::Timeout { .. }
            | GuardError::Status { .. }
            | GuardError::TooLarge { .. }
            | GuardError::Build { .. } => false,
        }
    }
}

/// IPv4 ranges that are not globally reachable (IANA special-purpose registry).
const BLOCKED_V4: [Ipv4Net; 15] = [
    Ipv4Net::new_assert(Ipv4Addr::new(0, 0, 0, 0), 8), // "this network", unspecified
    Ipv4Net::new_assert(Ipv4Addr::new(10, 0, 0, 0), 8), // private
    Ipv4Net::new_assert(Ipv4Addr::new(100, 64, 0, 0), 10), // CGNAT shared space
    Ipv4Net::new_assert(Ipv4Addr::new(127, 0, 0, 0), 8), // loopback
    Ipv4Net::new_assert(Ipv4Addr::new(169, 254, 0, 0), 16), // link-local, cloud metadata
    Ipv4Net::new_assert(Ipv4Addr::new(172, 16, 0, 0), 12), // private
    Ipv4Net::new_assert(Ipv4Addr::new(192, 0, 0, 0), 24), // IETF protocol assignments
    Ipv4Net::new_assert(Ipv4Addr::new(192, 0, 2, 0), 24), // documentation
    Ipv4Net::new_assert(Ipv4Addr::new(192, 88, 99, 0), 24), // 6to4 relay anycast
    Ipv4Net::new_assert(Ipv4Addr::new(192, 168, 0, 0), 16), // private
    Ipv4Net::new_assert(Ipv4Addr::new(198, 18, 0, 0), 15), // benchmarking
    Ipv4Net::new_assert(Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 0), 24), // documentation
    Ipv4Net::new_assert(Ipv4Addr::new(224, 0, 0, 0), 4), // multicast
    Ipv4Net::new_assert(Ipv4Addr::new(240, 0, 0, 0), 4), // reserved, broadcast
];

/// IPv6 ranges that are not globally reachable. Ranges that embed an IPv4 address (mapped,
/// compatible, NAT64, 6to4) are re-checked as IPv4 in [`embedded_v4`] instead.
const BLOCKED_V6: [Ipv6Net; 13] = [
    Ipv6Net::new_assert(Ipv6Addr::UNSPECIFIED, 128),
    Ipv6Net::new_assert(Ipv6Addr::LOCALHOST, 128),
    Ipv6Net::new_assert(Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // local-use NAT64
    Ipv6Net::new_assert(Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64),     // discard
    Ipv6Net::new_assert(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32),    // Teredo
    Ipv6Net::new_assert(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48),    // benchmarking
    Ipv6Net::new_assert(Ipv6Addr::new(0x2001, 0x10, 0, 0, 0, 0, 0, 0), 28), // ORCHID
    Ipv6Net::new_assert(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    Ipv6Net::new_assert(Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),    // documentation
    Ipv6Net::new_assert(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),     // unique-local
    Ipv6Net::new_assert(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),    // link-local
    Ipv6Net::new_assert(Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10),    // site-local
    Ipv6Net::new_assert(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),     // multicast
];

/// Whether an outbound connection to `ip` is refused: loopback, private, link-local, unique-local,
/// CGNAT, benchmarking, documentation, multicast, broadcast, reserved and unspecified addresses,
/// and IPv6 forms that embed a blocked IPv4 address (mapped, compatible, NAT64, 6to4).
pub fn is_blocked(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => BLOCKED_V4.iter().any(|net| net.contains(&v4)),
        IpAddr::V6(v6) => {
            BLOCKED_V6.iter().any(|net| net.contains(&v6))
                || embedded_v4(v6).is_some_and(|v4| is_blocked(IpAddr::V4(v4)))
        }
    }
}

/// The IPv4 address an IPv6 address stands for, where the packet would really go there:
/// `::ffff:a.b.c.d` (mapped), `::ffff:0:a.b.c.d` (SIIT), `::a.b.c.d` (compatible),
/// `64:ff9b::a.b.c.d` (NAT64) and `2002:aabb:ccdd::/48` (6to4).
pub(crate) fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0, 0, 0, 0, 0, 0, _, _]
        | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, hi, lo, ..] => {
            Some(Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8))
        }
        _ => None,
    }
}

/// Parses and checks an outbound URL: https (or http when `allow_private`), no user name or
/// password, and unless `allow_private`, a host that is neither a blocked IP literal (in any
/// notation the parser accepts) nor `localhost`/`*.localhost`.
///
/// Hosts given as names are checked again at connect time by [`GuardedClient`]'s resolver.
///
/// # Errors
/// The [`GuardError`] refusal naming the problem.
pub fn check_url(url: &str, allow_private: bool) -> Result<Url, GuardError> {
    let parsed =
        Url::parse(url).map_err(|err| GuardError::InvalidUrl { reason: err.to_string() })?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_private => {}
        other => return Err(GuardError::SchemeNotAllowed { scheme: other.to_owned() }),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(GuardError::Userinfo);
    }
    let host = parsed.host().ok_or(GuardError::NoHost)?;
    if allow_private {
        return Ok(parsed);
    }
    let refusal = match host {
        Host::Ipv4(ip) => {
            is_blocked(IpAddr::V4(ip)).then(|| GuardError::BlockedAddress { host: ip.to_string() })
        }
        Host::Ipv6(ip) => is_blocked(IpAddr::V6(ip))
            .then(|| GuardError::BlockedAddress { host: format!("[{ip}]") }),
        Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let local = name.is_empty() || name == "localhost" || name.ends_with(".localhost");
            match numeric_ipv4(&name) {
                Some(ip) if is_blocked(IpAddr::V4(ip)) => {
                    Some(GuardError::BlockedAddress { host: ip.to_string() })
                }
                Some(_) | None => local.then_some(GuardError::BlockedName { host: name }),
            }
        }
    };
    match refusal {
        Some(err) => Err(err),
        None => Ok(parsed),
    }
}

/// The IPv4 address a resolver reads a name as when the name is 1 to 4 numbers (decimal, `0x`
/// hex or `0` octal; the last fills the remaining bytes, so `10.1` is 10.0.0.1), as `inet_aton`
/// and so `getaddrinfo` do. The URL parser turns such hosts into addresses itself, except when
/// more than one trailing dot hides them (`10.1..`, found by the `url_guard` fuzz target).
fn numeric_ipv4(name: &str) -> Option<Ipv4Addr> {
    fn number(part: &str) -> Option<u32> {
        let (digits, radix) = match part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            Some(hex) => (hex, 16),
            None if part.len() > 1 && part.starts_with('0') => (&part[1..], 8),
            None => (part, 10),
        };
        if digits.is_empty() {
            return (radix == 16 || part == "0").then_some(0);
        }
        if !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        u32::from_str_radix(digits, radix).ok()
    }
    let parts: Vec<u32> = name.split('.').map(number).collect::<Option<_>>()?;
    let (last, head) = parts.split_last()?;
    if head.len() > 3 || head.iter().any(|part| *part > 255) {
        return None;
    }
    let rest_bits = 8 * (4 - head.len() as u32);
    if rest_bits < 32 && *last >= 1 << rest_bits {
        return None;
    }
    let high = head.iter().enumerate().fold(0u32, |ip, (i, part)| ip | part << (24 - 8 * i));
    Some(Ipv4Addr::from(high | last))
}

/// Name resolution for [`GuardedClient`], injectable so tests can answer what they like (DNS
/// rebinding). The guard filters whatever it answers.
pub trait Resolve: Send + Sync {
    /// All addresses of `host` (a name, never an IP literal).
    fn resolve(&self, host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>>;
}

/// The system resolver (`getaddrinfo` through tokio).
struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    }
}

/// The resolver reqwest calls at connect time: the inner answer minus blocked addresses.
struct Filtering {
    inner: Arc<dyn Resolve>,
    allow_private: bool,
}

impl reqwest::dns::Resolve for Filtering {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let answer = self.inner.resolve(host.clone());
        let allow_private = self.allow_private;
        Box::pin(async move {
            let ips = answer.await?;
            if ips.is_empty() {
                let err = io::Error::new(io::ErrorKind::NotFound, "no addresses");
                return Err(Box::new(err) as Box<dyn StdError + Send + Sync>);
            }
            let allowed: Vec<SocketAddr> = ips
                .into_iter()
                .filter(|ip| allow_private || !is_blocked(*ip))
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            if allowed.is_empty() {
                tracing::warn!(host = %host, "outbound request refused: host resolves to blocked addresses");
                return Err(Box::new(GuardError::ResolvesToBlocked { host }) as Box<_>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A file fetched by [`GuardedClient::download`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    pub bytes: Vec<u8>,
    /// The `Content-Type` header, when it was sent and is text.
    pub content_type: Option<String>,
}

/// The one outbound HTTP client: every request is checked by [`check_url`], every connect-time
/// address by the resolver, and redirects and proxies are off. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    allow_private: bool,
}

impl GuardedClient {
    /// A client over the system resolver.
    ///
    /// # Errors
    /// [`GuardError::Build`] when the TLS backend cannot be set up.
    pub fn new(allow_private: bool) -> Result<Self, GuardError> {
        Self::with_resolver(allow_private, Arc::new(SystemResolver))
    }

    /// A client over `resolver`; its answers are filtered like the system's.
    ///
    /// # Errors
    /// [`GuardError::Build`] when the TLS backend cannot be set up.
    pub fn with_resolver(
        allow_private: bool,
        resolver: Arc<dyn Resolve>,
    ) -> Result<Self, GuardError> {
        Self::build(allow_private, resolver, Vec::new())
    }

    /// A client over the system resolver that also trusts the certificate authorities in
    /// `pem_bundle` (PEM, one or more certificates), on top of the system's.
    ///
    /// # Errors
    /// [`GuardError::Build`] when the bundle holds no valid certificate or the TLS backend
    /// cannot be set up.
    pub fn with_extra_roots(allow_private: bool, pem_bundle: &[u8]) -> Result<Self, GuardError> {
        let roots = reqwest::Certificate::from_pem_bundle(pem_bundle)
            .map_err(|err| GuardError::Build { reason: error_chain(&err) })?;
        if roots.is_empty() {
            return Err(GuardError::Build { reason: "no PEM certificate in the bundle".into() });
        }
        Self::build(allow_private, Arc::new(SystemResolver), roots)
    }

    fn build(
        allow_private: bool,
        resolver: Arc<dyn Resolve>,
        roots: Vec<reqwest::Certificate>,
    ) -> Result<Self, GuardError> {
        let client = reqwest::Client::builder()
            .tls_certs_merge(roots)
            .dns_resolver(Filtering { inner: resolver, allow_private })
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|err| GuardError::Build { reason: error_chain(&err) })?;
        Ok(GuardedClient { client, allow_private })
    }

    /// The underlying client. Requests made on it directly skip [`check_url`]: run it first.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Whether private addresses and plain http are allowed.
    pub fn allow_private(&self) -> bool {
        self.allow_private
    }

    /// POSTs `body` as JSON with `headers` (values marked sensitive) and returns the status code.
    /// A redirect is returned as its 3xx status, never followed.
    ///
    /// # Errors
    /// A refusal of the URL or of every resolved address, an invalid header, a failed request, or
    /// [`GuardError::Timeout`] after `timeout`.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request.
    pub async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
        headers: &[(String, String)],
        timeout: Duration,
    ) -> Result<u16, GuardError> {
        let url = check_url(url, self.allow_private)?;
        let mut request = self.client.post(url).json(body);
        for (name, value) in headers {
            let invalid = || GuardError::InvalidHeader { name: name.clone() };
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
            let mut header_value = HeaderValue::from_str(value).map_err(|_| invalid())?;
            header_value.set_sensitive(true);
            request = request.header(header_name, header_value);
        }
        let response = tokio::time::timeout(timeout, request.send())
            .await
            .map_err(|_| GuardError::Timeout { timeout })?
            .map_err(request_error)?;
        Ok(response.status().as_u16())
    }

    /// GETs `url` and returns its body, never holding more than `cap` bytes: a `Content-Length`
    /// over the cap is refused before reading, and the stream is abandoned (closing the
    /// connection) as soon as the running count passes the cap.
    ///
    /// # Errors
    /// A refusal of the URL or of every resolved address, a failed request, a non-2xx
    /// [`GuardError::Status`], [`GuardError::TooLarge`], or [`GuardError::Timeout`] when the
    /// whole body has not arrived within `timeout`.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the download.
    pub async fn download(
        &self,
        url: &str,
        cap: u64,
        timeout: Duration,
    ) -> Result<Downloaded, GuardError> {
        let url = check_url(url, self.allow_private)?;
        let fetch = async {
            let response = self.client.get(url).send().await.map_err(request_error)?;
            let status = response.status();
            if !status.is_success() {
                return Err(GuardError::Status { status: status.as_u16() });
            }
            if response.content_length().is_some_and(|len| len > cap) {
                return Err(GuardError::TooLarge { cap });
            }
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let mut bytes = Vec::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(request_error)?;
                if (bytes.len() as u64).saturating_add(chunk.len() as u64) > cap {
                    return Err(GuardError::TooLarge { cap });
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(Downloaded { bytes, content_type })
        };
        tokio::time::timeout(timeout, fetch).await.map_err(|_| GuardError::Timeout { timeout })?
    }
}

/// The guard's own refusal when the resolver raised it, else the failure's cause chain without
/// the URL (which may carry a token).
fn request_error(err: reqwest::Error) -> GuardError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(&err);
    while let Some(cause) = source {
        if let Some(guard) = cause.downcast_ref::<GuardError>() {
            return guard.clone();
        }
        source = cause.source();
    }
    GuardError::Request { reason: error_chain(&err.without_url()) }
}

/// `outer: cause: root cause`.
fn error_chain(err: &dyn StdError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod fuzz_regressions;
#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    /// (address, blocked)
    const ADDRESSES: &[(&str, bool)] = &[
        // Allowed: public unicast.
        ("93.184.216.34", false),
        ("8.8.8.8", false),
        ("1.1.1.1", false),
        ("100.63.255.255", false),
        ("100.128.0.0", false),
        ("172.15.255.255", false),
        ("172.32.0.0", false),
        ("198.20.0.1", false),
        ("223.255.255.255", false),
        ("2606:4700::1111", false),
        ("2001:4860:4860::8888", false),
        ("2a00:1450:4001::200e", false),
        ("::ffff:93.184.216.34", false),
        ("64:ff9b::808:808", false),
        ("2002:5db8:d822::1", false),
        // Refused: IPv4.
        ("0.0.0.0", true),
        ("0.1.2.3", true),
        ("10.0.0.1", true),
        ("10.255.255.255", true),
        ("100.64.0.1", true),
        ("100.127.255.254", true),
        ("127.0.0.1", true),
        ("127.255.255.254", true),
        ("169.254.169.254", true),
        ("172.16.0.1", true),
        ("172.31.255.255", true),
        ("192.0.0.8", true),
        ("192.0.2.1", true),
        ("192.88.99.1", true),
        ("192.168.1.1", true),
        ("198.18.0.1", true),
        ("198.19.255.255", true),
        ("198.51.100.7", true),
        ("203.0.113.9", true),
        ("224.0.0.1", true),
        ("239.255.255.250", true),
        ("240.0.0.1", true),
        ("255.255.255.255", true),
        // Refused: IPv6.
        ("::", true),
        ("::1", true),
        ("fe80::1", true),
        ("febf::1", true),
        ("fc00::1", true),
        ("fd12:3456::1", true),
        ("fec0::1", true),
        ("ff02::1", true),
        ("100::1", true),
        ("2001:db8::1", true),
        ("3fff::1", true),
        ("2001:0:4136:e378::1", true),
        ("64:ff9b:1::1", true),
        // Refused: IPv6 forms of blocked IPv4.
        ("::ffff:127.0.0.1", true),
        ("::ffff:7f00:1", true),
        ("::ffff:10.0.0.1", true),
        ("::ffff:169.254.169.254", true),
        ("::ffff:0:192.168.0.1", true),
        ("::127.0.0.1", true),
        ("::10.1.2.3", true),
        ("64:ff9b::127.0.0.1", true),
        ("64:ff9b::a9fe:a9fe", true),
        ("2002:7f00:1::1", true),
        ("2002:c0a8:101::1", true),
    ];

    #[test]
    fn is_blocked_address_table_matches() {
        let wrong: Vec<&str> = ADDRESSES
            .iter()
            .filter(|(text, blocked)| {
                let ip: IpAddr = text.parse().unwrap();
                is_blocked(ip) != *blocked
            })
            .map(|(text, _)| *text)
            .collect();
        assert_eq!(wrong, Vec::<&str>::new());
    }

    /// (url, accepted without allow_private, accepted with allow_private)
    const URLS: &[(&str, bool, bool)] = &[
        ("https://example.com/hook", true, true),
        ("https://93.184.216.34/hook", true, true),
        ("https://[2606:4700::1111]/hook", true, true),
        ("https://example.com:8443/a?b=c", true, true),
        ("http://example.com/hook", false, true),
        ("ftp://example.com/file", false, false),
        ("file:///etc/passwd", false, false),
        ("gopher://127.0.0.1:6379/", false, false),
        ("not a url", false, false),
        ("https://user:pass@example.com/", false, false),
        ("https://user@example.com/", false, false),
        ("https://127.0.0.1/", false, true),
        ("http://127.0.0.1:8080/", false, true),
        ("https://0x7f.1/", false, true),
        ("https://0x7f000001/", false, true),
        ("https://2130706433/", false, true),
        ("https://017700000001/", false, true),
        ("https://0177.0.0.1/", false, true),
        ("https://127.1/", false, true),
        ("https://127.0.0.1./", false, true),
        ("https://127.0.0.%31/", false, true),
        ("https://0/", false, true),
        ("https://[::1]/", false, true),
        ("https://[::ffff:127.0.0.1]/", false, true),
        ("https://[::ffff:7f00:1]/", false, true),
        ("https://[::127.0.0.1]/", false, true),
        ("https://[64:ff9b::7f00:1]/", false, true),
        ("https://[2002:a00:1::]/", false, true),
        ("https://[fe80::1]/", false, true),
        ("https://[fd00::1]/", false, true),
        ("https://169.254.169.254/latest/meta-data/", false, true),
        ("https://0xa9.0xfe.0xa9.0xfe/", false, true),
        ("https://10.0.0.1/", false, true),
        ("https://100.100.100.100/", false, true),
        ("https://192.168.0.1/", false, true),
        ("https://localhost/", false, true),
        ("https://LOCALHOST./", false, true),
        ("https://api.localhost/", false, true),
    ];

    #[test]
    fn check_url_table_matches() {
        let wrong: Vec<String> = URLS
            .iter()
            .flat_map(|(url, strict, relaxed)| {
                [(false, *strict), (true, *relaxed)].into_iter().filter_map(
                    move |(allow, expected)| {
                        let accepted = check_url(url, allow).is_ok();
                        (accepted != expected).then(|| format!("{url} allow_private={allow}"))
                    },
                )
            })
            .collect();
        assert_eq!(wrong, Vec::<String>::new());
    }

    #[test]
    fn check_url_refusals_name_the_reason() {
        assert_eq!(
            check_url("http://example.com/", false),
            Err(GuardError::SchemeNotAllowed { scheme: "http".into() })
        );
        assert_eq!(check_url("https://u:p@example.com/", false), Err(GuardError::Userinfo));
        assert_eq!(
            check_url("https://0x7f.1/", false),
            Err(GuardError::BlockedAddress { host: "127.0.0.1".into() })
        );
        assert_eq!(
            check_url("https://[::ffff:127.0.0.1]/", false),
            Err(GuardError::BlockedAddress { host: "[::ffff:127.0.0.1]".into() })
        );
        assert_eq!(
            check_url("https://Api.LocalHost/", false),
            Err(GuardError::BlockedName { host: "api.localhost".into() })
        );
        assert!(check_url("https://10.0.0.1/", false).unwrap_err().to_string().contains("private"));
    }

    #[test]
    fn guard_error_refusals_are_not_retryable() {
        assert!(GuardError::ResolvesToBlocked { host: "x".into() }.is_refusal());
        assert!(!GuardError::Status { status: 503 }.is_refusal());
    }
}
