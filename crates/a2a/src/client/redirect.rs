//! Redirects an agent answers with, and where the key goes. reqwest follows none itself
//! (it would carry `X-API-Key` and a 307's body to any host it was sent to); [`next`] decides
//! each one, and the client sends it.
//!
//! The key belongs to one origin (scheme, host and port): the interface the card names, or the
//! card's own URL while the card is read. A redirect within that origin is followed with the key,
//! and so is the upgrade of an http origin to https on the same host and the default port (the
//! key went to that host in the clear already; it is only better protected there).
//! One to another origin is an error unless the caller asked for [`Redirects::AnyOrigin`], and
//! even then it is followed without the key, and never to a link-local or cloud metadata
//! address: a redirect is the agent's choice, and must not turn the user's client against the
//! machine it runs on. Such hops connect through [`outside_client`], whose resolver drops those
//! addresses at connect time, so a name cannot resolve there either (and no proxy resolves it
//! instead). Loopback and private addresses stay allowed when asked: they are where one's own
//! agents run.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderName, LOCATION};
use url::{Host, Url};

pub use super::error::Refusal;
use super::error::{ClientError, unreachable_at};
use crate::push::guard;

/// Most redirects one call follows.
pub const MAX_REDIRECTS: usize = 10;

/// Which redirects the client follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Redirects {
    /// Only within the origin the call went to; a redirect to another origin is an error.
    #[default]
    SameOrigin,
    /// To other origins too, without the key, and never to a link-local or metadata address.
    AnyOrigin,
}

/// One redirect to follow: where, and whether the key goes along.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) url: Url,
    /// The hop stays on the key's origin.
    pub(crate) home: bool,
}

/// Sends `request` and follows the redirects `redirects` allows: the key (the header
/// `credential`) goes only to hops on the origin of `request`'s URL ([`is_home`]), and a 303, or
/// a 301 or 302 of a POST, turns the call into a GET without its body, as browsers do.
///
/// # Errors
///
/// [`ClientError::Unreachable`] for a failed hop, [`ClientError::Redirected`] for a redirect that
/// is not followed.
pub(crate) async fn send_following(
    http: &reqwest::Client,
    request: reqwest::Request,
    credential: Option<&HeaderName>,
    redirects: Redirects,
    connect_timeout: Duration,
) -> Result<reqwest::Response, ClientError> {
    let home = request.url().clone();
    let template = request.try_clone();
    let mut request = request;
    let mut as_get = false;
    let mut outside: Option<reqwest::Client> = None;
    let mut hops = 0;
    loop {
        let url = request.url().clone();
        let is_home = is_home(&home, &url);
        if !is_home && outside.is_none() {
            let client =
                outside_client(connect_timeout).map_err(|e| unreachable_at(url.as_str(), &e))?;
            outside = Some(client);
        }
        let client = match &outside {
            Some(client) if !is_home => client,
            Some(_) | None => http,
        };
        let response =
            client.execute(request).await.map_err(|e| unreachable_at(url.as_str(), &e))?;
        let status = response.status().as_u16();
        let location = response.headers().get(LOCATION).and_then(|v| v.to_str().ok());
        let (true, Some(location)) = (matches!(status, 301 | 302 | 303 | 307 | 308), location)
        else {
            return Ok(response);
        };
        let refused = |why, to: String| ClientError::Redirected { url: url.to_string(), to, why };
        if hops == MAX_REDIRECTS {
            return Err(refused(Refusal::TooMany, location.to_owned()));
        }
        hops += 1;
        let hop = next(&url, location, &home, redirects).map_err(|(why, to)| refused(why, to))?;
        // Every request this client makes has a body it can repeat; a redirect of one that has
        // not is the agent's answer as it is.
        let Some(mut next) = template.as_ref().and_then(reqwest::Request::try_clone) else {
            return Ok(response);
        };
        as_get |= status == 303
            || (matches!(status, 301 | 302) && next.method() == reqwest::Method::POST);
        if as_get {
            *next.method_mut() = reqwest::Method::GET;
            *next.body_mut() = None;
            next.headers_mut().remove(CONTENT_TYPE);
            next.headers_mut().remove(CONTENT_LENGTH);
        }
        if !hop.home
            && let Some(header) = credential
        {
            next.headers_mut().remove(header);
        }
        *next.url_mut() = hop.url;
        request = next;
    }
}

/// Decides the redirect from `from` to `location` (its `Location` header, absolute or relative)
/// when the key belongs to `home`'s origin.
///
/// # Errors
/// The [`Refusal`] and the URL it refused, as far as it could be read.
pub(crate) fn next(
    from: &Url,
    location: &str,
    home: &Url,
    redirects: Redirects,
) -> Result<Hop, (Refusal, String)> {
    let url = from.join(location).map_err(|_| (Refusal::NotHttp, location.to_owned()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err((Refusal::NotHttp, url.to_string()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        let mut shown = url.clone();
        // Only for the message: the refusal names the host, not the credentials.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        return Err((Refusal::Userinfo, shown.to_string()));
    }
    if is_home(home, &url) {
        return Ok(Hop { url, home: true });
    }
    if redirects == Redirects::SameOrigin {
        return Err((Refusal::OtherOrigin, url.to_string()));
    }
    let literal = match url.host() {
        Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(Host::Domain(_)) | None => None,
    };
    if literal.is_some_and(is_link_local) {
        return Err((Refusal::LinkLocal, url.to_string()));
    }
    Ok(Hop { url, home: false })
}

/// Whether `url` is on the key's origin, `home`: the same origin, or its upgrade from http to
/// https on the same host and the default port.
pub fn is_home(home: &Url, url: &Url) -> bool {
    if url.origin() == home.origin() {
        return true;
    }
    home.scheme() == "http"
        && url.scheme() == "https"
        && home.port_or_known_default() == Some(80)
        && url.port_or_known_default() == Some(443)
        && home.host() == url.host()
}

/// Whether a connection to `ip` is refused on a redirect to another origin: link-local
/// (169.254.0.0/16, where the cloud metadata services answer, and fe80::/10), the metadata
/// addresses outside that range (AWS's fd00:ec2::254, Alibaba's 100.100.100.200), and every IPv6
/// form that embeds such an IPv4 address.
pub fn is_link_local(ip: IpAddr) -> bool {
    const METADATA_V4: [Ipv4Addr; 1] = [Ipv4Addr::new(100, 100, 100, 200)];
    const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)];
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || METADATA_V4.contains(&v4),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || METADATA_V6.contains(&v6)
                || guard::embedded_v4(v6).is_some_and(|v4| is_link_local(IpAddr::V4(v4)))
        }
    }
}

/// The HTTP client of hops to other origins: no redirects of its own, no proxy (a proxy would
/// resolve the name itself), and a resolver that drops link-local and metadata addresses.
pub(crate) fn outside_client(connect_timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(NotLinkLocal)
        .connect_timeout(connect_timeout)
        .build()
}

/// The system resolver, minus link-local and metadata addresses.
struct NotLinkLocal;

impl reqwest::dns::Resolve for NotLinkLocal {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed = allowed(found);
            if allowed.is_empty() {
                let reason = format!("{host} resolves only to link-local or metadata addresses");
                return Err(reason.into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

fn allowed(addresses: Vec<SocketAddr>) -> Vec<SocketAddr> {
    addresses.into_iter().filter(|address| !is_link_local(address.ip())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn same_origin_redirects_keep_the_key() {
        let home = url("http://127.0.0.1:8080/a2a");
        for redirects in [Redirects::SameOrigin, Redirects::AnyOrigin] {
            let hop = next(&home, "/a2a/v2", &home, redirects).unwrap();
            assert_eq!(hop, Hop { url: url("http://127.0.0.1:8080/a2a/v2"), home: true });
        }
    }

    #[test]
    fn other_origins_are_refused_unless_asked_and_never_keep_the_key() {
        let home = url("http://127.0.0.1:8080/a2a");
        // Another port, another scheme, another host: each is another origin.
        for location in
            ["http://127.0.0.1:9090/x", "https://127.0.0.1:8080/a2a", "http://localhost:8080/a2a"]
        {
            assert_eq!(
                next(&home, location, &home, Redirects::SameOrigin),
                Err((Refusal::OtherOrigin, location.to_owned()))
            );
            let hop = next(&home, location, &home, Redirects::AnyOrigin).unwrap();
            assert!(!hop.home, "{location}");
        }
        // Back home after a detour: the key goes again.
        let away = url("http://127.0.0.1:9090/x");
        let hop = next(&away, "http://127.0.0.1:8080/b", &home, Redirects::AnyOrigin).unwrap();
        assert!(hop.home);
    }

    #[test]
    fn an_upgrade_to_https_on_the_same_host_is_home() {
        let home = url("http://agent.example.com/a2a");
        for (location, is_home) in [
            ("https://agent.example.com/a2a", true),
            ("https://agent.example.com:443/a2a", true),
            ("https://agent.example.com:8443/a2a", false),
            ("https://other.example.com/a2a", false),
        ] {
            let hop = next(&home, location, &home, Redirects::SameOrigin);
            assert_eq!(hop.is_ok(), is_home, "{location}: {hop:?}");
        }
        // Only upwards, and only from the default port.
        let secure = url("https://agent.example.com/a2a");
        assert!(
            next(&secure, "http://agent.example.com/a2a", &secure, Redirects::SameOrigin).is_err()
        );
        let odd = url("http://agent.example.com:8080/a2a");
        assert!(next(&odd, "https://agent.example.com/a2a", &odd, Redirects::SameOrigin).is_err());
    }

    #[test]
    fn link_local_and_metadata_addresses_are_never_followed() {
        let home = url("http://127.0.0.1:8080/a2a");
        for location in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:a9fe:a9fe::1]/",
            "http://[fd00:ec2::254]/",
            "http://100.100.100.200/",
            "http://0xa9fea9fe/",
            "http://2852039166/",
        ] {
            let refused = next(&home, location, &home, Redirects::AnyOrigin);
            assert!(matches!(refused, Err((Refusal::LinkLocal, _))), "{location}: {refused:?}");
        }
        // Loopback and private addresses are where one's own agents run.
        for location in ["http://127.0.0.1:9/", "http://10.0.0.7/", "http://[::1]:9/"] {
            assert!(next(&home, location, &home, Redirects::AnyOrigin).is_ok(), "{location}");
        }
    }

    #[test]
    fn odd_locations_are_refused() {
        let home = url("http://127.0.0.1:8080/a2a");
        for (location, refusal) in [
            ("file:///etc/passwd", Refusal::NotHttp),
            ("ftp://127.0.0.1:8080/", Refusal::NotHttp),
            ("http://user:pw@127.0.0.1:8080/a2a", Refusal::Userinfo),
        ] {
            for redirects in [Redirects::SameOrigin, Redirects::AnyOrigin] {
                let refused = next(&home, location, &home, redirects);
                assert!(matches!(refused, Err((r, _)) if r == refusal), "{location}: {refused:?}");
            }
        }
        let (_, shown) = next(&home, "http://user:pw@h/", &home, Redirects::AnyOrigin).unwrap_err();
        assert!(!shown.contains("pw"), "{shown}");
    }

    #[test]
    fn resolved_link_local_addresses_are_dropped() {
        let found: Vec<SocketAddr> =
            ["169.254.169.254:0", "93.184.216.34:0", "[fe80::1]:0", "[::1]:0"]
                .iter()
                .map(|a| a.parse().unwrap())
                .collect();
        let kept: Vec<String> = allowed(found).iter().map(ToString::to_string).collect();
        assert_eq!(kept, vec!["93.184.216.34:0", "[::1]:0"]);
    }
}
