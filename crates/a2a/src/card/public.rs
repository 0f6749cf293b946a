//! Serving the public card at `/.well-known/agent-card.json`: which shape a request gets, and
//! HTTP caching (A2A 1.0.1 §8.6).
//!
//! - A request that names A2A 1.x in `A2A-Version` gets the strict 1.0 card: only 1.0 fields,
//!   security schemes in the 1.0 shape, so a strict 1.0 parser accepts it. Any other request
//!   (no version, 0.3, a version we do not know) gets the blended card that 1.0 and 0.3 clients
//!   both read (docs/a2a.md, "The public card"): card discovery has no error answer, and 0.3 clients send no
//!   version. Answers say `Vary: A2A-Version`.
//! - Without `A2A__PublicUrl` the card's URLs (and its signatures' `jku`) come from the request's
//!   `Host` and `X-Forwarded-Proto`, so the answer is `Cache-Control: private` and also varies
//!   by those: a shared cache must not hand one host's card to another's clients. With it the
//!   card is the same for everyone and `public`.
//! - Every answer carries a strong `ETag` (a digest of the body), `Last-Modified` (when this
//!   server started: the public card depends only on the options and the base URL, fixed for
//!   the process's life) and `Cache-Control`. A matching `If-None-Match`, or without one an
//!   `If-Modified-Since` at or after `Last-Modified`, gets `304 Not Modified` without a body
//!   (RFC 9110 §13.1.2–§13.1.3, §15.4.5).
//!
//! The bodies are built once per (base URL, shape) and kept: clients fetch the card often. With
//! card signing on, the strict card is signed when it is built (so once per base URL, not per
//! request), the blended card never (`signing`), and `/.well-known/jwks.json` serves the key.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use sha2::Digest;

use crate::binding;
use crate::card;
use crate::card::signing::CardSigner;
use crate::config::A2aOptions;
use crate::request::Version;

/// How long clients and caches may reuse the card without asking again.
const CACHE_CONTROL: &str = "public, max-age=300";

/// The same for a card whose URLs come from the request's `Host` and `X-Forwarded-Proto`: only
/// the client's own cache may keep it, so that a shared cache in front of several names (or one
/// that does not key on those headers) never serves one request's card to another.
const CACHE_CONTROL_DERIVED: &str = "private, max-age=300";

/// What the public card varies by: its shape, and without `A2A__PublicUrl` the request's host
/// and scheme.
const VARY: &str = "A2A-Version";
const VARY_DERIVED: &str = "A2A-Version, Host, X-Forwarded-Proto";

/// The two shapes of the public card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// 1.0 fields only (a request that asked for 1.x).
    Strict,
    /// 1.0 and 0.3 fields together (everyone else).
    Blended,
}

impl Shape {
    fn of(headers: &HeaderMap) -> Shape {
        let version = headers.get("a2a-version").and_then(|value| value.to_str().ok());
        match binding::requested_version(version, None) {
            Ok(Some(Version::V1_0)) => Shape::Strict,
            _ => Shape::Blended,
        }
    }
}

/// One built card body with its validator.
#[derive(Clone)]
struct Built {
    base: String,
    body: Bytes,
    etag: HeaderValue,
}

/// The public card's bodies, one per shape, for the last base URL each was built for.
pub(crate) struct PublicCards {
    last_modified: HeaderValue,
    /// When the bodies count as changed, at HTTP-date (whole second) precision.
    since: SystemTime,
    built: Mutex<[Option<Built>; 2]>,
    /// Signs the 1.0 cards; none when card signing is off.
    signer: Option<Arc<CardSigner>>,
    /// The JWK Set's body, built once.
    jwks: Option<Bytes>,
}

impl PublicCards {
    /// Cards signed by `signer` (none: unsigned), changed when this server started.
    pub(crate) fn signed_by(signer: Option<Arc<CardSigner>>) -> Self {
        let mut cards = Self::new(SystemTime::now());
        cards.jwks = signer.as_ref().map(|signer| Bytes::from(signer.jwks().to_string()));
        cards.signer = signer;
        cards
    }

    /// The signer of the 1.0 cards, when card signing is on.
    pub(crate) fn signer(&self) -> Option<&CardSigner> {
        self.signer.as_deref()
    }

    /// The answer to `GET /.well-known/jwks.json`: the signing key's JWK Set, or 404 when card
    /// signing is off. The key set changes only with a restart, so it may be cached like the card.
    pub(crate) fn jwks_answer(&self) -> Response {
        let Some(jwks) = self.jwks.clone() else {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_FOUND;
            return response;
        };
        let mut response = Response::new(Body::from(jwks));
        let out = response.headers_mut();
        out.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jwk-set+json"));
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
        response
    }

    /// Cards that count as changed at `since`.
    pub(crate) fn new(since: SystemTime) -> Self {
        let text = httpdate::fmt_http_date(since);
        // Round-tripping through the text drops the sub-second part, so that a client sending
        // back our own Last-Modified compares equal.
        let since = httpdate::parse_http_date(&text).unwrap_or(since);
        let last_modified = HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static(""));
        PublicCards {
            last_modified,
            since,
            built: Mutex::new([None, None]),
            signer: None,
            jwks: None,
        }
    }

    /// The answer to `GET /.well-known/agent-card.json` with `headers`, for `base` (the base URL
    /// of the card's interfaces).
    pub(crate) fn answer(
        &self,
        options: &A2aOptions,
        base: String,
        headers: &HeaderMap,
    ) -> Response {
        let shape = Shape::of(headers);
        let built = self.built(options, base, shape);
        let fresh = match headers.get(header::IF_NONE_MATCH) {
            Some(tags) => none_match(tags, &built.etag),
            None => headers
                .get(header::IF_MODIFIED_SINCE)
                .and_then(|value| value.to_str().ok())
                .and_then(|text| httpdate::parse_http_date(text).ok())
                .is_some_and(|since| since >= self.since),
        };
        let (status, body) = if fresh {
            (StatusCode::NOT_MODIFIED, Body::empty())
        } else {
            (StatusCode::OK, Body::from(built.body))
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let out = response.headers_mut();
        if status == StatusCode::OK {
            out.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let (cache_control, vary) = match card::fixed_base_url(options) {
            Some(_) => (CACHE_CONTROL, VARY),
            None => (CACHE_CONTROL_DERIVED, VARY_DERIVED),
        };
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
        out.insert(header::ETAG, built.etag);
        out.insert(header::LAST_MODIFIED, self.last_modified.clone());
        out.insert(header::VARY, HeaderValue::from_static(vary));
        response
    }

    fn built(&self, options: &A2aOptions, base: String, shape: Shape) -> Built {
        let slot = shape as usize;
        {
            let built = self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(hit) = built[slot].as_ref().filter(|built| built.base == base) {
                return hit.clone();
            }
        }
        let card = card::public_card(options, &base);
        let json = match (shape, self.signer.as_deref()) {
            (Shape::Strict, Some(signer)) => binding::strict_card(&signer.sign(card, &base)),
            (Shape::Strict, None) => binding::strict_card(&card),
            // Never signed: a 1.0 verifier drops the 0.3 fields before canonicalizing.
            (Shape::Blended, _) => binding::blended_card(&card),
        };
        let body = Bytes::from(json.to_string());
        let digest = sha2::Sha256::digest(&body);
        let hex: String = digest[..16].iter().map(|byte| format!("{byte:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{hex}\""))
            .unwrap_or(HeaderValue::from_static("\"\""));
        let fresh = Built { base, body, etag };
        self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[slot] =
            Some(fresh.clone());
        fresh
    }
}

/// Whether an `If-None-Match` value matches `etag` (weak comparison, RFC 9110 §13.1.2: `*`,
/// or any listed tag with the same opaque part, `W/` or not).
fn none_match(tags: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(tags) = tags.to_str() else { return false };
    let ours = etag.to_str().unwrap_or_default();
    tags.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_compares_weakly_and_accepts_lists_and_star() {
        let ours = HeaderValue::from_static("\"abc\"");
        let matches = |value: &'static str| none_match(&HeaderValue::from_static(value), &ours);
        assert!(matches("\"abc\""));
        assert!(matches("W/\"abc\""));
        assert!(matches("\"x\", \"abc\""));
        assert!(matches("*"));
        assert!(!matches("\"abcd\""));
        assert!(!matches("abc"));
        assert!(!matches(""));
    }

    #[test]
    fn last_modified_has_whole_seconds_so_our_own_value_matches() {
        let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_790_000_000_750);
        let cards = PublicCards::new(start);
        let text = cards.last_modified.to_str().unwrap();
        assert_eq!(httpdate::parse_http_date(text).unwrap(), cards.since);
        assert!(cards.since <= start);
    }
}
