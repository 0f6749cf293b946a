//! Agent card signatures (A2A 1.0.1 §8.4; docs/a2a.md, "Signed card"): one Ed25519 key per server, JWS (RFC 7515)
//! over the RFC 8785 (JCS) canonical card without its `signatures`, and the public key served as
//! a JWK Set at [`JWKS_PATH`], which each signature's protected header names (`jku`, `kid`).
//!
//! The key is a PKCS#8 PEM file (what `openssl genpkey -algorithm ed25519` writes). In the state
//! folder it is created on first start, atomically and with mode 0600, and read on every later
//! start, so the key id and the signatures stay the same across restarts. The key never leaves
//! this module: [`CardSigner`]'s `Debug` hides it, and no error or log line carries it.
//!
//! Which bytes are signed. A2A 1.0.1 §8.4.1 canonicalizes the card after removing fields with default
//! values; verifiers differ in how much they remove, and a signature only verifies against the
//! exact bytes it covers. So a card carries one signature per distinct reading, all with the
//! same key and header (A2A 1.0.1 §8.4.3 lets a card carry several; a verifier accepts the card when one
//! verifies):
//! - the card exactly as served (what RFC 8785 over the received document gives);
//! - the card without empty arrays and strings (A2A 1.0.1 §8.4.1's default values; empty objects stay, as
//!   map entries such as a scope-less security requirement `{"apiKey": {}}` are not defaults);
//! - the card without empty strings, arrays and objects, recursively: what the official Python
//!   SDK's verifier (`a2a.utils.signing`, a2a-sdk 1.3.0) canonicalizes.
//!
//! When two readings give the same bytes the card carries that signature once.
//!
//! Only 1.0 cards are signed: the blended public card's 0.3 fields are unknown to a 1.0 parser,
//! which drops them before canonicalizing, so no signature over the served bytes could verify.

use std::io;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::Signer;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use serde_json::{Map, Value, json};
use sha2::Digest;

use crate::request::{Reply, Version};

/// Where the server serves its JWK Set (the `jku` of every signature).
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// The key file in the state folder, used unless `A2A__CardSigning__KeyFile` names another.
pub const STATE_KEY_FILE: &str = "a2a/card-signing-key.pem";

/// The JWS algorithm of Ed25519 signatures (RFC 8037 §3.1).
const ALG: &str = "EdDSA";

/// Why the card-signing key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file cannot be read, or created.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The key file holds something else than an Ed25519 private key.
    #[error(
        "{}: not an Ed25519 private key in PKCS#8 PEM (-----BEGIN PRIVATE KEY-----; `openssl genpkey -algorithm ed25519` writes one)",
        path.display()
    )]
    Invalid { path: PathBuf },
    /// The operating system gave no random bytes for a new key.
    #[error("{}: no random bytes for a new key: {reason}", path.display())]
    Random { path: PathBuf, reason: String },
}

/// Signs agent cards with one Ed25519 key.
pub struct CardSigner {
    key: SigningKey,
    kid: String,
}

/// The key id only: the key is a secret.
impl std::fmt::Debug for CardSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardSigner").field("kid", &self.kid).field("key", &"[redacted]").finish()
    }
}

impl CardSigner {
    /// The key in `path`, which must exist (a key the owner gave by path: a typo must not
    /// silently become a new identity). Blocking.
    ///
    /// # Errors
    /// [`KeyError::Io`] when it cannot be read; [`KeyError::Invalid`] when it is no Ed25519 key.
    pub fn load(path: &Path) -> Result<CardSigner, KeyError> {
        let pem = std::fs::read_to_string(path)
            .map_err(|source| KeyError::Io { path: path.to_path_buf(), source })?;
        let key = SigningKey::from_pkcs8_pem(&pem)
            .map_err(|_| KeyError::Invalid { path: path.to_path_buf() })?;
        Ok(CardSigner::new(key))
    }

    /// The key in `path`, created there first when there is none: a new random key, written
    /// whole or not at all, with mode 0600, in a folder created with mode 0700, then made
    /// durable. Of two servers starting at once on one state folder, the second reads the
    /// first one's key. Blocking.
    ///
    /// # Errors
    /// As [`CardSigner::load`], and [`KeyError::Io`] or [`KeyError::Random`] when a new key
    /// cannot be made or written.
    pub fn load_or_create(path: &Path) -> Result<CardSigner, KeyError> {
        let io_error = |source| KeyError::Io { path: path.to_path_buf(), source };
        match std::fs::symlink_metadata(path) {
            Ok(_) => return CardSigner::load(path),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(io_error(err)),
        }
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|err| KeyError::Random {
            path: path.to_path_buf(),
            reason: err.to_string(),
        })?;
        let key = SigningKey::from_bytes(&seed);
        seed.fill(0);
        let pem = key
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|_| KeyError::Invalid { path: path.to_path_buf() })?;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io_error)?;
        }
        match volcanic_core::atomic::create_new_interim(path, pem.as_bytes()) {
            Ok(()) => {}
            // Another server made it first: use that one.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                return CardSigner::load(path);
            }
            Err(err) => return Err(io_error(err)),
        }
        // A key lost to a power cut would change the server's identity: make it durable.
        std::fs::File::open(path).and_then(|file| file.sync_all()).map_err(io_error)?;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::File::open(dir).and_then(|dir| dir.sync_all()).map_err(io_error)?;
        }
        Ok(CardSigner::new(key))
    }

    fn new(key: SigningKey) -> CardSigner {
        let kid = thumbprint(&x(&key));
        CardSigner { key, kid }
    }

    /// The key id: the key's JWK thumbprint (RFC 7638, SHA-256, base64url), so the same key
    /// always has the same id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The JWK Set served at [`JWKS_PATH`]: the public key only.
    pub fn jwks(&self) -> Value {
        json!({"keys": [{
            "kty": "OKP",
            "crv": "Ed25519",
            "x": x(&self.key),
            "kid": self.kid,
            "alg": ALG,
            "use": "sig",
        }]})
    }

    /// The signatures of `card`, a 1.0 card as it is served (its `signatures`, if any, are not
    /// signed), for a server whose base URL is `base`.
    pub fn signatures(&self, card: &Value, base: &str) -> Vec<a2a::AgentCardSignature> {
        let mut card = card.clone();
        if let Value::Object(map) = &mut card {
            map.remove("signatures");
        }
        let header = json!({"alg": ALG, "typ": "JOSE", "kid": self.kid, "jku": format!("{base}{JWKS_PATH}")});
        let protected = URL_SAFE_NO_PAD.encode(header.to_string());
        let readings =
            [Some(card.clone()), prune(&card, Empty::ArraysAndStrings), prune(&card, Empty::All)];
        let mut payloads: Vec<Vec<u8>> = Vec::with_capacity(readings.len());
        for reading in readings {
            let payload = match reading.as_ref().map(serde_jcs::to_vec) {
                Some(Ok(payload)) => payload,
                // An empty card, or one JCS cannot represent (a number beyond 2^53): no reading.
                None | Some(Err(_)) => continue,
            };
            if !payloads.contains(&payload) {
                payloads.push(payload);
            }
        }
        payloads
            .iter()
            .map(|payload| {
                let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(payload));
                a2a::AgentCardSignature {
                    protected: protected.clone(),
                    signature: URL_SAFE_NO_PAD.encode(self.key.sign(input.as_bytes()).to_bytes()),
                    header: None,
                }
            })
            .collect()
    }

    /// `card` with its signatures: those of its 1.0 JSON for a server at `base`.
    pub fn sign(&self, mut card: a2a::AgentCard, base: &str) -> a2a::AgentCard {
        card.signatures = None;
        let served = crate::binding::strict_card(&card);
        let signatures = self.signatures(&served, base);
        card.signatures = (!signatures.is_empty()).then_some(signatures);
        card
    }
}

/// `reply`, with its card signed when it is an extended card going out in the 1.0 shape to a
/// server at `base` (0.3 cards are not signed: 0.3 verifiers canonicalize another shape).
pub(crate) fn sign_reply(
    signer: Option<&CardSigner>,
    reply: Box<Reply>,
    version: Version,
    base: impl FnOnce() -> String,
) -> Box<Reply> {
    match (*reply, signer, version) {
        (Reply::Card(card), Some(signer), Version::V1_0) => {
            Box::new(Reply::Card(Box::new(signer.sign(*card, &base()))))
        }
        (reply, _, _) => Box::new(reply),
    }
}

/// The public key, base64url (the JWK `x`).
fn x(key: &SigningKey) -> String {
    URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes())
}

/// RFC 7638 thumbprint of an Ed25519 public key: its required members in lexicographic order.
fn thumbprint(x: &str) -> String {
    let members = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(members.as_bytes()))
}

/// Which empty values [`prune`] removes.
#[derive(Clone, Copy)]
enum Empty {
    ArraysAndStrings,
    All,
}

/// `value` without its empty values, recursively (a container emptied by that is empty too);
/// `None` when nothing is left.
fn prune(value: &Value, empty: Empty) -> Option<Value> {
    match value {
        Value::String(text) if text.is_empty() => None,
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(|item| prune(item, empty)).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter_map(|(key, item)| prune(item, empty).map(|item| (key.clone(), item)))
                .collect();
            match empty {
                Empty::All if kept.is_empty() => None,
                Empty::All | Empty::ArraysAndStrings => Some(Value::Object(kept)),
            }
        }
        other => Some(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_removes_what_each_reading_calls_empty() {
        let card = json!({"a": "", "b": [], "c": {"d": {"list": []}}, "e": [{}, "x"], "f": false});
        assert_eq!(
            prune(&card, Empty::ArraysAndStrings),
            Some(json!({"c": {"d": {}}, "e": [{}, "x"], "f": false}))
        );
        assert_eq!(prune(&card, Empty::All), Some(json!({"e": ["x"], "f": false})));
    }

    #[test]
    fn thumbprint_matches_rfc_8037_appendix_a3() {
        // RFC 8037 A.3: the thumbprint of the example Ed25519 key.
        assert_eq!(
            thumbprint("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn debug_hides_the_key() {
        let signer = CardSigner::new(SigningKey::from_bytes(&[7u8; 32]));
        let shown = format!("{signer:?}");
        assert!(shown.contains("[redacted]") && shown.contains(signer.kid()), "{shown}");
        let secret = URL_SAFE_NO_PAD.encode([7u8; 32]);
        assert!(!shown.contains(&secret));
    }
}
